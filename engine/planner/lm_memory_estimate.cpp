// estimate_lm_memory (planner/lm_memory_estimate.h).

#include "embedscope/engine/planner/lm_memory_estimate.h"

#include <algorithm>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/model/lm_embedding.h"
#include "embedscope/engine/program/lm_program.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/sessions/model/units.h"
#include "planner/memory_replay.h"

namespace embedscope::engine {

namespace {

// One rank's buffers through the allocator replay, op by op as LmRank::run runs them
// (model/lm_embedding.cpp, lm_sharding.cpp; the Step's members in model/lm_batch.h).
class LmReplay {
 public:
  /// `received`: row_wise, per replayed step, the ids of the step's global batch this rank owns
  /// (lm_rw_ids_received); empty for the other types.
  LmReplay(const LmWorkloadSpec& s, int rank, std::vector<int64_t> received)
      : s_(s), me_(rank), mem_(AllocatorKind::caching, 0), received_(std::move(received)) {
    const int p = s.world_size;
    V_ = s.padded_vocab_size();
    H_ = s.hidden_size;
    T_ = s.tokens_per_micro_batch();
    Tl_ = s.sequence_parallel ? T_ / p : T_;
    rw_ = s.sharding == LmSharding::row_wise;
    rows_ = s.sharding == LmSharding::data_parallel ? V_ : vocab_range(V_, p, rank).size();
  }

  LmReplayedMemory run() {
    parameters();
    const StepProgram prog = build_lm_step_program(s_, me_, 0);  // the same ops every step (lm_executor.cpp)
    for (int64_t st = 0; st < std::min<int64_t>(s_.steps, 8); ++st) {
      const int64_t nrecv = rw_ ? received_.at(static_cast<size_t>(st)) : 0;
      for (const ProgramOp& op : prog.ops) step_op(op.name, nrecv);
      // end_step: the Step's buffers, the last declared first (lm_batch.h), the batch's ids last
      for (Allocation* a : {&grad_rows_, &de_, &dz_, &se_, &pred_, &m_, &yg_, &o_read_, &dzg_, &logits_, &zg_, &acts_,
                            &emb_, &rw_ids_, &rw_sent_ids_, &rw_order_, &part_, &y_, &x_})
        give(*a);
    }
    const MemoryStats st = mem_.stats();
    return {st.peak_allocated, st.peak_reserved, peak_requested_};
  }

 private:
  static constexpr int64_t f32 = 4;
  static constexpr int64_t i64 = 8;  // a token id or position

  Allocation take(int64_t bytes) {
    Allocation a = mem_.take(bytes);
    requested_ += a.requested;
    peak_requested_ = std::max(peak_requested_, requested_);
    return a;
  }
  void give(Allocation& a) {
    requested_ -= a.requested;
    mem_.give(a);
  }
  // a buffer assigned to a member (DeviceBuffer's move assignment: the new block first, then
  // the old one given back)
  void assign(Allocation& member, int64_t bytes) {
    Allocation a = take(bytes);
    give(member);
    member = a;
  }

  // LmRank's constructor, in its order
  void parameters() {
    const int64_t n = rows_ * H_ * f32, hh = H_ * H_ * f32, h = H_ * f32;
    const bool untied = !s_.tie_word_embeddings;
    keep(n);  // E
    keep(n);  // dE
    if (untied) {
      keep(n);  // O
      keep(n);  // dO
    }
    for (int l = 0; l < s_.body_layers; ++l)
      for (const int64_t b : {hh, h, hh, h}) keep(b);  // W, b, dW, db
    if (s_.optimizer != LmOptimizer::adam) return;
    keep(n);  // m, v of E
    keep(n);
    if (untied) {
      keep(n);
      keep(n);
    }
    for (int l = 0; l < s_.body_layers; ++l)
      for (const int64_t b : {hh, hh, h, h}) keep(b);  // m, v of W; m, v of b
  }
  void keep(int64_t bytes) { params_.push_back(take(bytes)); }
  // a buffer moved into another member (DeviceBuffer's move: the block changes hands, nothing
  // is taken or given; `to` is empty there)
  static void move(Allocation& to, Allocation& from) {
    to = from;
    from = {};
  }
  // bf16 / fp16: the fp32 tile the projection's GEMMs convert the read copy into, min(rows, 256)
  // x H floats, taken and given back within the op (model/lm_sharding.cpp kReadTileRows)
  void read_tile() {
    if (s_.data_type == LmDataType::fp32 || rows_ == 0) return;
    Allocation tile = take(std::min<int64_t>(rows_, 256) * H_ * f32);
    give(tile);
  }

  void step_op(const std::string& name, int64_t nrecv) {
    const int p = s_.world_size;
    const int64_t Tc = rw_ ? T_ * p : T_;
    if (name == "input") {  // the batch's inputs and targets [T]
      assign(x_, T_ * i64);
      assign(y_, T_ * i64);
    } else if (name == "bucketize") {  // row_wise: each id's batch position and the ids, in send order
      assign(rw_order_, T_ * i64);
      assign(rw_sent_ids_, T_ * i64);
    } else if (name == "input_dist") {  // the ids received; the ids sent given back once sent
      assign(rw_ids_, nrecv * i64);
      give(rw_sent_ids_);
    } else if (name == "lookup") {
      assign(part_, (rw_ ? nrecv : T_) * H_ * f32);
      if (s_.sharding == LmSharding::data_parallel) move(emb_, part_);  // no collective: the output
    } else if (name == "output_dist") {
      Allocation got = take(T_ * H_ * f32);
      assign(emb_, T_ * H_ * f32);  // the rows in batch order
      give(got);
      give(part_);
    } else if (name == "embedding/all_reduce") {
      move(emb_, part_);  // reduced in place
    } else if (name == "embedding/reduce_scatter") {
      assign(emb_, Tl_ * H_ * f32);
      give(part_);
    } else if (name == "body_forward") {
      assign(acts_, (2 * s_.body_layers + 1) * Tl_ * H_ * f32);
      give(emb_);  // copied into hs[0]
    } else if (name == "output_projection/all_gather" || name == "sequence_parallel/all_gather") {
      assign(zg_, (rw_ ? T_ : Tl_) * p * H_ * f32);
      if (rw_) assign(yg_, T_ * p * i64);  // every rank's targets
    } else if (name == "output_projection/logits") {
      if (s_.data_type != LmDataType::fp32) assign(o_read_, rows_ * H_ * 2);  // bf16 / fp16 codes
      assign(logits_, Tc * rows_ * f32);
      read_tile();
      for (Allocation* a : {&m_, &pred_, &se_}) assign(*a, Tc * f32);  // row max, target logit, sum of exps
    } else if (name == "output_projection/backward") {
      assign(dzg_, Tc * H_ * f32);
      read_tile();
    } else if (name == "loss/all_reduce" || name == "output_projection/grad_reduce_scatter" ||
               name == "output_projection/grad_all_reduce") {
      if (rw_ || s_.sequence_parallel)
        assign(dz_, (rw_ ? T_ : Tl_) * H_ * f32);  // the reduce-scatter's output
      else
        move(dz_, dzg_);  // the gradient itself (all-reduced in place, or data_parallel's own)
      for (Allocation* a : {&dzg_, &logits_, &o_read_, &zg_, &yg_, &m_, &pred_, &se_}) give(*a);
    } else if (name == "body_backward") {
      assign(de_, Tl_ * H_ * f32);
      if (s_.body_layers > 0) {  // the pre-activations' gradient, for the op
        Allocation da = take(Tl_ * H_ * f32);
        give(da);
      }
      give(dz_);
    } else if (name == "grad_dist") {
      Allocation send = take(T_ * H_ * f32);
      assign(grad_rows_, nrecv * H_ * f32);
      give(send);
    } else if (name == "embedding/grad_all_gather") {
      assign(grad_rows_, T_ * H_ * f32);
    } else if (name == "embedding_backward") {
      give(grad_rows_);
      give(de_);
    } else if (name == "grad_all_reduce") {
      const bool body_differs = s_.sharding != LmSharding::vocab_parallel || s_.sequence_parallel;
      if (body_differs && s_.body_layers > 0) {  // the flattened body gradients
        Allocation flat = take(s_.body_layers * (H_ * H_ + H_) * f32);
        give(flat);
      }
    }
  }

  const LmWorkloadSpec& s_;
  int me_;
  detail::AllocatorReplay mem_;
  int64_t V_ = 0, H_ = 0, T_ = 0, Tl_ = 0, rows_ = 0;
  bool rw_ = false;
  std::vector<Allocation> params_;
  std::vector<int64_t> received_;
  Allocation x_, y_, part_, rw_order_, rw_sent_ids_, rw_ids_, emb_, acts_, zg_, o_read_, logits_, dzg_, yg_, m_, pred_,
      se_, dz_, de_, grad_rows_;
  int64_t requested_ = 0, peak_requested_ = 0;
};

// the steps a replay goes over (later steps repeat the same buffers)
int64_t replayed_steps(const LmWorkloadSpec& s) { return std::min<int64_t>(s.steps, 8); }

}  // namespace

std::vector<std::vector<int64_t>> lm_rw_ids_received(const LmWorkloadSpec& s) {
  std::vector<std::vector<int64_t>> out;
  if (s.sharding != LmSharding::row_wise) return out;
  const int64_t V = s.padded_vocab_size();
  for (int64_t st = 0; st < replayed_steps(s); ++st) {
    std::vector<int64_t>& n = out.emplace_back(static_cast<size_t>(s.world_size), 0);
    for (int64_t g = 0; g < s.global_sequences_per_step(); ++g) {
      const std::vector<int64_t> tok = lm_sequence_tokens(s, st, g);
      for (int64_t k = 0; k < s.sequence_length; ++k) ++n[static_cast<size_t>(vocab_owner(tok[static_cast<size_t>(k)], V, s.world_size))];
    }
  }
  return out;
}

namespace {
std::vector<int64_t> rank_column(const std::vector<std::vector<int64_t>>& by_step, int rank) {
  std::vector<int64_t> col;
  for (const auto& step : by_step) col.push_back(step[static_cast<size_t>(rank)]);
  return col;
}
}  // namespace

LmReplayedMemory lm_memory_replay(const LmWorkloadSpec& spec, int rank) {
  if (rank < 0 || rank >= spec.world_size)
    throw std::out_of_range(fmt::format("lm_memory_replay: rank {} outside the {} ranks", rank, spec.world_size));
  return LmReplay(spec, rank, rank_column(lm_rw_ids_received(spec), rank)).run();
}

std::vector<LmMemoryEstimate> estimate_lm_memory(const LmWorkloadSpec& s) {
  constexpr int64_t f32 = 4;
  const int p = s.world_size;
  const int64_t V = s.padded_vocab_size(), H = s.hidden_size, T = s.tokens_per_micro_batch(), L = s.body_layers;
  const bool rw = s.sharding == LmSharding::row_wise;
  const bool dp = s.sharding == LmSharding::data_parallel;
  const int64_t Tl = s.sequence_parallel ? T / p : T;
  const int64_t Tc = rw ? T * p : T;
  std::vector<LmMemoryEstimate> out;
  // row_wise: each step's tokens drawn once for every rank (p draws of the global batch made a
  // 1,024-GPU point of the scaled Llama preset take minutes)
  const std::vector<std::vector<int64_t>> received = lm_rw_ids_received(s);
  for (int r = 0; r < p; ++r) {
    LmMemoryEstimate e;
    e.rank = r;
    e.rows = dp ? VocabRange{0, V} : vocab_range(V, p, r);
    const int64_t rowb = e.rows.size() * H * f32;
    e.table_bytes = rowb;
    e.output_projection_bytes = s.tie_word_embeddings ? 0 : rowb;
    e.read_copy_bytes = s.data_type == LmDataType::fp32 ? 0 : e.rows.size() * H * 2;  // 2-byte codes
    e.gradient_bytes = e.table_bytes + e.output_projection_bytes;
    e.body_bytes = L * (H * H + H) * f32 * 2;
    // adam: two fp32 moments of every parameter (E, O, the body); sgd none
    e.optimizer_state_bytes =
        s.optimizer == LmOptimizer::adam ? 2 * (e.table_bytes + e.output_projection_bytes + e.body_bytes / 2) : 0;
    e.logits_bytes = Tc * e.rows.size() * f32;
    const int64_t lookup = rw ? 2 * T * H * f32 : T * H * f32;  // rows received + sent, or the partial sum
    const int64_t gathered = (rw || s.sequence_parallel) ? Tc * H * f32 : 0;
    // the embedding output and the body output's gradient where they are buffers of their own
    // (row_wise, sequence_parallel; elsewhere the lookup's partial sum and the projection input's
    // gradient themselves), the cross-entropy's three [Tc] vectors, the embedding output's
    // gradient and the body's pre-activation gradient (L > 0)
    const int64_t own = rw ? 2 * T * H * f32 : s.sequence_parallel ? 2 * Tl * H * f32 : 0;
    // the token ids (int64): the batch's inputs and targets [T]; row_wise also each id's batch
    // position and the ids sent [T], the ids received (the most of the replayed steps) and every
    // rank's targets [p T]
    const std::vector<int64_t> mine = rank_column(received, r);
    const int64_t most_received = mine.empty() ? 0 : *std::max_element(mine.begin(), mine.end());
    const int64_t ids = 2 * T + (rw ? 2 * T + most_received + T * p : 0);
    e.activation_bytes = (2 * L + 1) * Tl * H * f32 + lookup + gathered + Tc * H * f32 + own + 3 * Tc * f32 +
                         Tl * H * f32 + (L > 0 ? Tl * H * f32 : 0) + ids * 8;
    const LmReplayedMemory m = LmReplay(s, r, mine).run();
    e.peak_allocated_bytes = m.peak_allocated;
    e.peak_reserved_bytes = m.peak_reserved;
    e.peak_requested_bytes = m.peak_requested;
    out.push_back(e);
  }
  return out;
}

nlohmann::json to_json(const std::vector<LmMemoryEstimate>& est) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const LmMemoryEstimate& e : est)
    ranks.push_back({{"rank", e.rank},
                     {"row_begin", e.rows.begin},
                     {"row_end", e.rows.end},
                     {"table_bytes", e.table_bytes},
                     {"output_projection_bytes", e.output_projection_bytes},
                     {"read_copy_bytes", e.read_copy_bytes},
                     {"gradient_bytes", e.gradient_bytes},
                     {"optimizer_state_bytes", e.optimizer_state_bytes},
                     {"body_bytes", e.body_bytes},
                     {"logits_bytes", e.logits_bytes},
                     {"activation_bytes", e.activation_bytes},
                     {"total_bytes", e.total()},
                     {"peak_allocated_bytes", e.peak_allocated_bytes},
                     {"peak_reserved_bytes", e.peak_reserved_bytes},
                     {"peak_requested_bytes", e.peak_requested_bytes}});
  return {{"ranks", ranks}};
}

namespace {
// 85520809984 -> "85,520,809,984"
std::string grouped(int64_t n) {
  std::string d = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return (n < 0 ? "-" : "") + out;
}
// format_bytes of a, and to the byte when it reads as format_bytes of one of `others` that is
// not equal to it (79.6 GiB allocated on a GPU of 79.6 GiB: tester62a F8)
std::string bytes_beside(int64_t a, std::initializer_list<int64_t> others) {
  const std::string t = sessions::format_bytes(a);
  for (const int64_t b : others)
    if (b != a && t == sessions::format_bytes(b)) return fmt::format("{} ({} B)", t, grouped(a));
  return t;
}
}  // namespace

LmGpuMemoryVerdict lm_gpu_memory_verdict(const std::vector<LmMemoryEstimate>& est, int64_t device_bytes,
                                         const std::string& device_name, LmSharding sharding) {
  LmGpuMemoryVerdict v;
  v.device_bytes = device_bytes;
  if (est.empty()) return v;
  const auto worst = std::max_element(est.begin(), est.end(), [](const LmMemoryEstimate& a, const LmMemoryEstimate& b) {
    return a.peak_reserved_bytes < b.peak_reserved_bytes;
  });
  v.rank = worst->rank;
  v.peak_reserved_bytes = worst->peak_reserved_bytes;
  v.peak_allocated_bytes = worst->peak_allocated_bytes;
  const std::string need = bytes_beside(v.peak_reserved_bytes, {device_bytes, v.peak_allocated_bytes});
  const std::string have = bytes_beside(device_bytes, {v.peak_reserved_bytes, v.peak_allocated_bytes});
  const std::string alloc = bytes_beside(v.peak_allocated_bytes, {v.peak_reserved_bytes, device_bytes});
  if (device_bytes <= 0) {
    v.text = fmt::format("not checked: the profile gives no GPU memory (rank {} reserves {} at its peak)", v.rank, need);
    return v;
  }
  if (v.peak_reserved_bytes <= device_bytes) {
    v.text = fmt::format("fits: rank {} reserves {} at its peak (allocated {}; the replay's caching allocator, "
                         "planner/lm_memory_estimate.h) of {}'s {}, {} left (the CUDA context and the communicator's "
                         "buffers, ~0.5-1 GiB on a real GPU, are not counted)",
                         v.rank, need, alloc, device_name, have,
                         sessions::format_bytes(device_bytes - v.peak_reserved_bytes));
    return v;
  }
  std::vector<std::pair<std::string, int64_t>> terms = {
      {"logits", worst->logits_bytes},          {"table", worst->table_bytes},
      {"output projection", worst->output_projection_bytes}, {"read copy", worst->read_copy_bytes},
      {"gradients", worst->gradient_bytes},     {"optimizer state", worst->optimizer_state_bytes},
      {"body", worst->body_bytes},              {"activations", worst->activation_bytes}};
  std::stable_sort(terms.begin(), terms.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string list;
  for (const auto& [name, bytes] : terms)
    if (bytes > 0) list += fmt::format("{}{} {}", list.empty() ? "" : ", ", name, sessions::format_bytes(bytes));
  std::string help;
  if (sharding == LmSharding::data_parallel)
    help = "data_parallel keeps the whole table and the full-vocabulary logits on every GPU, so more GPUs do not help; "
           "vocab_parallel or row_wise split them, or use a smaller micro batch";
  else if (sharding == LmSharding::row_wise)
    help = "row_wise gathers every GPU's hidden states before the projection ([p T x H]) and its logits slice "
           "(p T) x V'/p does not shrink, so its memory grows with the GPUs: use fewer GPUs, vocab_parallel (which "
           "splits the table, its gradient and the logits 1/p), or a smaller micro batch";
  else
    help = "more GPUs split the table, its gradient and the logits (1/p), or use a smaller micro batch";
  v.refusal = fmt::format("does not fit: rank {} needs {} at its peak (reserved by its caching allocator; allocated {}; "
                          "planner/lm_memory_estimate.h: {}) but {} has {}, {} short; {}",
                          v.rank, need, alloc, list, device_name, have,
                          sessions::format_bytes(v.peak_reserved_bytes - device_bytes), help);
  v.text = v.refusal;
  return v;
}

std::string lm_gpu_memory_refusal(const std::vector<LmMemoryEstimate>& est, int64_t device_bytes,
                                  const std::string& device_name, LmSharding sharding) {
  return lm_gpu_memory_verdict(est, device_bytes, device_name, sharding).refusal;
}

std::string lm_gpu_memory_refusal(const LmWorkloadSpec& spec, int64_t device_bytes, const std::string& device_name) {
  return lm_gpu_memory_refusal(estimate_lm_memory(spec), device_bytes, device_name, spec.sharding);
}

std::string lm_memory_refusal(const std::vector<LmMemoryEstimate>& est, const HostMemory& machine) {
  int64_t need = 0;
  std::string each;
  for (const auto& e : est) {
    need += e.total();
    each += fmt::format("{}rank {} {}{}", each.empty() ? "" : ", ", e.rank, each.empty() ? "needs " : "",
                        sessions::format_bytes(e.total()));
  }
  if (fits_host_memory(need, machine)) return "";
  return fmt::format("/devices: the cpu backend runs all {} ranks of this lm_embedding workload as threads of this "
                     "process: {} (planner/lm_memory_estimate.h), {} in all, but this machine has {}; use fewer "
                     "ranks, a smaller vocab_size, hidden_size or micro batch, or --simulate PROFILE",
                     est.size(), each, sessions::format_bytes(need), host_memory_text(machine));
}

}  // namespace embedscope::engine
