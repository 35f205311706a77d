// The lm_embedding model on one rank (model/lm_embedding.h): tokens, initial weights, the body
// and the step; the parts that differ by sharding type are in model/lm_sharding.cpp.

#include "embedscope/engine/model/lm_embedding.h"

#include <cmath>
#include <map>
#include <random>
#include <stdexcept>
#include <string>

#include <Eigen/Core>
#include <fmt/format.h>

#include "embedscope/engine/comm/gloo_process_group.h"
#include "embedscope/engine/input/input.h"
#include "embedscope/engine/program/lm_program.h"
#include "embedscope/engine/quant/quant.h"
#include "embedscope/sessions/model/id_buckets.h"
#include "model/lm_batch.h"

namespace embedscope::engine {

namespace {
using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapM = Eigen::Map<Mat>;
using CMapM = Eigen::Map<const Mat>;
using Vec = Eigen::Matrix<float, 1, Eigen::Dynamic>;

double unit_uniform(uint64_t seed, int which, int64_t index) {
  const uint64_t h = mix64(seed * 0x9E3779B97F4A7C15ull ^ mix64(static_cast<uint64_t>(which) * 0xD1B54A32D192ED03ull ^
                                                                 static_cast<uint64_t>(index)));
  return static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
}
}  // namespace

std::vector<int64_t> lm_sequence_tokens(const LmWorkloadSpec& spec, int64_t step, int64_t sequence) {
  std::mt19937_64 rng(mix64(spec.seed ^ mix64(static_cast<uint64_t>(step) * 0x100000001B3ull ^
                                              mix64(static_cast<uint64_t>(sequence) + 0x51ED27ull))));
  std::vector<int64_t> out(static_cast<size_t>(spec.sequence_length + 1));
  if (spec.token_file_ids) {  // in order, sequence by sequence, wrapping around (lm_spec.h)
    const std::vector<int64_t>& ids = *spec.token_file_ids;
    const auto len = static_cast<int64_t>(ids.size());
    const int64_t n = step * spec.global_sequences_per_step() + sequence;
    const int64_t start = (n % len) * (spec.sequence_length % len) % len;  // n S mod len (len < 2^40: no overflow)
    for (size_t i = 0; i < out.size(); ++i) out[i] = ids[static_cast<size_t>((start + static_cast<int64_t>(i)) % len)];
    return out;
  }
  const ZipfSampler zipf(spec.vocab_size, spec.token_zipf_alpha);
  for (int64_t& t : out) t = zipf(rng);
  return out;
}

float lm_initial_weight(uint64_t seed, int which, int64_t index, int64_t hidden_size) {
  const double u = unit_uniform(seed, which, index) * 2.0 - 1.0;  // [-1, 1)
  if (which <= 1) return static_cast<float>(0.1 * u);
  return static_cast<float>(0.5 * u / std::sqrt(static_cast<double>(hidden_size)));
}

float lm_read_weight(float v, LmDataType t) {
  switch (t) {
    case LmDataType::fp32: return v;
    case LmDataType::bf16: return round_to_precision(v, CommPrecision::bf16);
    case LmDataType::fp16: return round_to_precision(v, CommPrecision::fp16);
  }
  return v;
}

uint16_t lm_read_code(float v, LmDataType t) {
  switch (t) {
    case LmDataType::bf16: return Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(v));
    case LmDataType::fp16: return Eigen::numext::bit_cast<uint16_t>(Eigen::half(v));
    case LmDataType::fp32: break;
  }
  throw std::invalid_argument("lm_read_code: fp32 has no 2-byte code");
}

float lm_code_value(uint16_t code, LmDataType t) {
  switch (t) {
    case LmDataType::bf16: return static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(code));
    case LmDataType::fp16: return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(code));
    case LmDataType::fp32: break;
  }
  throw std::invalid_argument("lm_code_value: fp32 has no 2-byte code");
}

LmRank::LmRank(const LmWorkloadSpec& spec, ProcessGroup& world, DeviceArena* arena)
    : spec_(spec), pg_(world), rank_(world.rank()), world_(world.size()), vocab_(spec.padded_vocab_size()),
      hidden_(spec.hidden_size), arena_(arena) {
  rows_ = spec.sharding == LmSharding::data_parallel ? VocabRange{0, vocab_} : vocab_range(vocab_, world_, rank_);
  const auto n = static_cast<size_t>(rows_.size() * hidden_);
  table_ = buffer("weights", n);
  g_table_ = buffer("gradients", n);
  const bool untied = !spec.tie_word_embeddings;
  if (untied) {
    out_ = buffer("weights", n);
    g_out_ = buffer("gradients", n);
  }
  for (int64_t r = rows_.begin; r < rows_.end; ++r) {
    for (int64_t c = 0; c < hidden_; ++c) {
      const auto i = static_cast<size_t>((r - rows_.begin) * hidden_ + c);
      table_[i] = r == spec.padding_id ? 0.f : lm_initial_weight(spec.seed, 0, r * hidden_ + c, hidden_);
      if (untied) out_[i] = lm_initial_weight(spec.seed, 1, r * hidden_ + c, hidden_);
    }
  }
  const auto hh = static_cast<size_t>(hidden_ * hidden_);
  for (int l = 0; l < spec.body_layers; ++l) {
    DeviceBuffer<float> w = buffer("dense", hh);
    for (size_t i = 0; i < hh; ++i) w[i] = lm_initial_weight(spec.seed, 2 + l, static_cast<int64_t>(i), hidden_);
    w_.push_back(std::move(w));
    b_.push_back(buffer("dense", static_cast<size_t>(hidden_)));
    g_w_.push_back(buffer("dense", hh));
    g_b_.push_back(buffer("dense", static_cast<size_t>(hidden_)));
  }
  if (spec.optimizer == LmOptimizer::adam) {
    m_table_ = buffer("optimizer_state", n);
    v_table_ = buffer("optimizer_state", n);
    if (untied) {
      m_out_ = buffer("optimizer_state", n);
      v_out_ = buffer("optimizer_state", n);
    }
    for (int l = 0; l < spec.body_layers; ++l) {
      m_w_.push_back(buffer("optimizer_state", hh));
      v_w_.push_back(buffer("optimizer_state", hh));
      m_b_.push_back(buffer("optimizer_state", static_cast<size_t>(hidden_)));
      v_b_.push_back(buffer("optimizer_state", static_cast<size_t>(hidden_)));
    }
  }
}

DeviceBuffer<float> LmRank::buffer(const char* tag, size_t n) {
  DeviceBuffer<float> b(arena_, tag);
  b.assign(n, 0.f);
  return b;
}

std::vector<std::vector<float>> LmRank::body_weights() const {
  std::vector<std::vector<float>> out;
  for (const auto& w : w_) out.push_back(copy(w));
  return out;
}

int64_t LmRank::local_tokens() const {
  const int64_t t = spec_.tokens_per_micro_batch();
  return spec_.sequence_parallel ? t / world_ : t;
}

std::pair<int64_t, int64_t> LmRank::token_of(int64_t i) const {
  const int64_t B = spec_.micro_batch_size;
  const int64_t first = spec_.sequence_parallel ? rank_ * local_tokens() : 0;
  const int64_t t = first + i;  // position-major within the rank's batch
  const int64_t seq0 = spec_.sharding == LmSharding::vocab_parallel ? 0 : rank_ * B;
  return {seq0 + t % B, t / B};
}

LmRank::~LmRank() = default;

void LmRank::begin_step(int64_t step) {
  st_ = std::make_unique<Step>();
  st_->step = step;
}

void LmRank::run(const ProgramOp& op) {
  using Fn = void (LmRank::*)();
  // the program's op names (program/lm_program.cpp) and what runs them
  static const std::map<std::string, Fn, std::less<>> ops{
      {"input", &LmRank::op_input},
      {"bucketize", &LmRank::op_bucketize},
      {"input_dist", &LmRank::op_input_dist},
      {"lookup", &LmRank::op_lookup},
      {"output_dist", &LmRank::op_output_dist},
      {"embedding/all_reduce", &LmRank::op_embedding_combine},
      {"embedding/reduce_scatter", &LmRank::op_embedding_combine},
      {"body_forward", &LmRank::op_body_forward},
      {"output_projection/all_gather", &LmRank::op_gather_hidden},
      {"sequence_parallel/all_gather", &LmRank::op_gather_hidden},
      {"output_projection/logits", &LmRank::op_logits},
      {"cross_entropy/max", &LmRank::op_cross_entropy_max},
      {"cross_entropy/exp", &LmRank::op_cross_entropy_exp},
      {"cross_entropy/all_reduce", &LmRank::op_cross_entropy_all_reduce},
      {"output_projection/backward", &LmRank::op_projection_backward},
      {"loss/all_reduce", &LmRank::op_projection_grad_dist},
      {"output_projection/grad_reduce_scatter", &LmRank::op_projection_grad_dist},
      {"output_projection/grad_all_reduce", &LmRank::op_projection_grad_dist},
      {"body_backward", &LmRank::op_body_backward},
      {"grad_dist", &LmRank::op_embedding_grad_dist},
      {"embedding/grad_all_gather", &LmRank::op_embedding_grad_dist},
      {"embedding_backward", &LmRank::op_embedding_backward},
      {"grad_all_reduce", &LmRank::op_grad_all_reduce},
      {"optimizer", &LmRank::op_optimizer},
  };
  if (!st_) throw std::logic_error(fmt::format("lm_embedding op \"{}\" run outside a step (begin_step first)", op.name));
  const auto found = ops.find(op.name);
  if (found == ops.end()) throw std::logic_error(fmt::format("lm_embedding: no op named \"{}\"", op.name));
  (this->*found->second)();
}

LmRank::StepResult LmRank::end_step() {
  if (!st_) throw std::logic_error("lm_embedding: end_step without begin_step");
  Step& st = *st_;
  StepResult r = std::move(st.result);
  // the embedding output, read back from the body's first input (hs[0], the step's host copy)
  if (st.acts.size() != 0) {
    const auto n = static_cast<size_t>(st.b.local_count * hidden_);
    r.embedding_out.assign(st.acts.data(), st.acts.data() + n);
  }
  st_.reset();
  return r;
}

LmRank::StepResult LmRank::step(int64_t step) {
  const StepProgram p = build_lm_step_program(spec_, rank_, step);
  begin_step(step);
  for (const ProgramOp& op : p.ops) run(op);
  return end_step();
}

void LmRank::op_input() {
  Step& st = *st_;
  const int64_t B = spec_.micro_batch_size, S = spec_.sequence_length;
  // The batch: the rank's own sequences (data_parallel, row_wise) or the group's (vocab_parallel).
  Batch& b = st.b;
  const bool shared = spec_.sharding == LmSharding::vocab_parallel;
  const int64_t seq0 = shared ? 0 : rank_ * B;
  b.tokens = B * S;
  b.x = lm_id_buffer(arena_, static_cast<size_t>(b.tokens));
  b.y = lm_id_buffer(arena_, static_cast<size_t>(b.tokens));
  const int64_t global_seqs = shared ? B : B * world_;
  b.n_targets = 0;
  for (int64_t g = 0; g < global_seqs; ++g) {
    const std::vector<int64_t> tok = lm_sequence_tokens(spec_, st.step, g);
    for (int64_t s = 0; s < S; ++s) {
      if (tok[static_cast<size_t>(s + 1)] != spec_.padding_id) ++b.n_targets;
      if (g < seq0 || g >= seq0 + B) continue;
      const auto t = static_cast<size_t>(s * B + (g - seq0));
      b.x[t] = tok[static_cast<size_t>(s)];
      b.y[t] = tok[static_cast<size_t>(s + 1)];
    }
  }
  b.local_count = local_tokens();
  b.local_begin = spec_.sequence_parallel ? rank_ * b.local_count : 0;
  if (histogram_.empty()) histogram_.assign(static_cast<size_t>(sessions::id_buckets_of(vocab_)), 0);
  for (size_t t = 0; t < b.x.size(); ++t) ++histogram_[static_cast<size_t>(sessions::id_bucket_of_row(vocab_, b.x[t]))];
}

void LmRank::op_body_forward() {
  // Body forward on the local rows, keeping each layer's input and tanh for the backward pass.
  Step& st = *st_;
  const int64_t T = st.b.local_count, H = hidden_;
  const int L = spec_.body_layers;
  st.acts = buffer("activations", static_cast<size_t>((2 * L + 1) * T * H));
  float* a0 = st.acts.data();
  auto hs = [&](int l) { return MapM(a0 + static_cast<size_t>(l * T * H), T, H); };
  auto th = [&](int l) { return MapM(a0 + static_cast<size_t>((L + 1 + l) * T * H), T, H); };
  hs(0) = CMapM(st.emb.data(), T, H);
  st.emb = {};  // the body's first input holds it now
  for (int l = 0; l < L; ++l) {
    const auto li = static_cast<size_t>(l);
    // the pre-activation computed in th(l)'s block, then tanh in place: no buffer outside the arena
    th(l).noalias() = hs(l) * CMapM(w_[li].data(), H, H);
    th(l).rowwise() += Eigen::Map<const Vec>(b_[li].data(), H);
    th(l) = th(l).array().tanh().matrix();
    hs(l + 1) = hs(l) + th(l);
  }
  st.z = hs(L).data();
}

void LmRank::op_body_backward() {
  Step& st = *st_;
  const int64_t T = st.b.local_count, H = hidden_;
  const int L = spec_.body_layers;
  float* a0 = st.acts.data();
  auto hs = [&](int l) { return CMapM(a0 + static_cast<size_t>(l * T * H), T, H); };
  auto th = [&](int l) { return CMapM(a0 + static_cast<size_t>((L + 1 + l) * T * H), T, H); };
  // dh accumulates in the embedding output's gradient; da, the pre-activation's, in a block
  // taken for the op (both in the arena)
  st.de = buffer("activations", static_cast<size_t>(T * H));
  MapM dh(st.de.data(), T, H);
  dh = CMapM(st.dz.data(), T, H);
  if (L > 0) {
    DeviceBuffer<float> da_buf = buffer("activations", static_cast<size_t>(T * H));
    MapM da(da_buf.data(), T, H);
    for (int l = L - 1; l >= 0; --l) {
      const auto li = static_cast<size_t>(l);
      da = (dh.array() * (1.0f - th(l).array().square())).matrix();
      MapM(g_w_[li].data(), H, H).noalias() += hs(l).transpose() * da;
      Eigen::Map<Vec>(g_b_[li].data(), H) += da.colwise().sum();
      dh.noalias() += da * CMapM(w_[li].data(), H, H).transpose();
    }
  }
  st.dz = {};  // read no more
}

void LmRank::op_optimizer() {
  if (spec_.optimizer == LmOptimizer::adam) {
    // torch.optim.Adam's update (lm_spec.h LmOptimizer), its scalars in double, the tensors in fp32
    const double t = static_cast<double>(++adam_steps_);
    const auto b1 = static_cast<float>(spec_.adam_beta1), b2 = static_cast<float>(spec_.adam_beta2);
    const auto step_size = static_cast<float>(spec_.learning_rate / (1.0 - std::pow(spec_.adam_beta1, t)));
    const auto bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(spec_.adam_beta2, t)));
    const auto eps = static_cast<float>(spec_.adam_eps);
    auto adam = [&](DeviceBuffer<float>& p, DeviceBuffer<float>& g, DeviceBuffer<float>& m, DeviceBuffer<float>& v) {
      for (size_t i = 0; i < p.size(); ++i) {
        m[i] = b1 * m[i] + (1.f - b1) * g[i];
        v[i] = b2 * v[i] + (1.f - b2) * g[i] * g[i];
        p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
        g[i] = 0.f;
      }
    };
    adam(table_, g_table_, m_table_, v_table_);
    adam(out_, g_out_, m_out_, v_out_);
    for (size_t l = 0; l < w_.size(); ++l) {
      adam(w_[l], g_w_[l], m_w_[l], v_w_[l]);
      adam(b_[l], g_b_[l], m_b_[l], v_b_[l]);
    }
    return;
  }
  const auto lr = static_cast<float>(spec_.learning_rate);
  auto sgd = [lr](DeviceBuffer<float>& p, DeviceBuffer<float>& g) {
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] -= lr * g[i];
      g[i] = 0.f;
    }
  };
  sgd(table_, g_table_);
  sgd(out_, g_out_);
  for (size_t l = 0; l < w_.size(); ++l) {
    sgd(w_[l], g_w_[l]);
    sgd(b_[l], g_b_[l]);
  }
}

}  // namespace embedscope::engine
