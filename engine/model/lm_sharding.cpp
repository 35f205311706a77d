// The sharding-type-specific parts of the lm_embedding step (model/lm_embedding.h): the token
// embedding's forward and backward, the output projection with its cross-entropy, and the
// gradient all-reduces of replicated parameters, for vocab_parallel (Megatron), data_parallel
// and row_wise (TorchRec). Every collective is named as in lm_embedding.h.

#include <algorithm>
#include <cmath>
#include <limits>

#include <Eigen/Core>

#include "embedscope/engine/comm/gloo_process_group.h"
#include "embedscope/engine/model/lm_embedding.h"
#include "embedscope/sessions/model/id_buckets.h"
#include "model/lm_batch.h"

namespace embedscope::engine {

namespace {
using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapM = Eigen::Map<Mat>;
using CMapM = Eigen::Map<const Mat>;

}  // namespace

void LmRank::embed_forward(const Batch& b, std::vector<float>& e) {
  const int64_t H = hidden_, T = b.tokens;
  const LmDataType dt = spec_.data_type;
  int64_t t0 = now();
  if (histogram_.empty()) histogram_.assign(static_cast<size_t>(sessions::id_buckets_of(vocab_)), 0);
  for (int64_t id : b.x) ++histogram_[static_cast<size_t>(sessions::id_bucket_of_row(vocab_, id))];
  // ids this rank reads from its shard, and their distinct rows
  auto count_ids = [this](const std::vector<int64_t>& ids) {
    std::vector<int64_t> mine;
    for (int64_t id : ids)
      if (id >= rows_.begin && id < rows_.end) mine.push_back(id);
    ids_ = static_cast<int64_t>(mine.size());
    std::sort(mine.begin(), mine.end());
    unique_ = std::unique(mine.begin(), mine.end()) - mine.begin();
  };
  if (spec_.sharding == LmSharding::row_wise) {
    // TorchRec RW sequence embedding: ids to their owners, rows back (all-to-alls).
    rw_send_.assign(static_cast<size_t>(world_), 0);
    std::vector<std::vector<int64_t>> pos(static_cast<size_t>(world_));
    for (int64_t t = 0; t < T; ++t) {
      const int o = vocab_owner(b.x[static_cast<size_t>(t)], vocab_, world_);
      pos[static_cast<size_t>(o)].push_back(t);
    }
    rw_order_.clear();
    std::vector<int64_t> ids;
    for (int j = 0; j < world_; ++j) {
      rw_send_[static_cast<size_t>(j)] = static_cast<int64_t>(pos[static_cast<size_t>(j)].size());
      for (int64_t t : pos[static_cast<size_t>(j)]) {
        rw_order_.push_back(t);
        ids.push_back(b.x[static_cast<size_t>(t)]);
      }
    }
    span("bucketize", false, t0);
    t0 = now();
    const std::vector<int64_t> ones(static_cast<size_t>(world_), 1);
    rw_recv_.assign(static_cast<size_t>(world_), 0);
    pg_.all_to_all_v("input_dist/splits", rw_send_.data(), ones, rw_recv_.data(), ones, sizeof(int64_t));
    int64_t nrecv = 0;
    for (int64_t c : rw_recv_) nrecv += c;
    rw_ids_.assign(static_cast<size_t>(nrecv), 0);
    pg_.all_to_all_v("input_dist/ids", ids.data(), rw_send_, rw_ids_.data(), rw_recv_, sizeof(int64_t));
    span("input_dist", true, t0);
    count_ids(rw_ids_);
    t0 = now();
    DeviceBuffer<float> rows = buffer("activations", static_cast<size_t>(nrecv * H));
    for (int64_t i = 0; i < nrecv; ++i) {
      const int64_t local = rw_ids_[static_cast<size_t>(i)] - rows_.begin;
      for (int64_t c = 0; c < H; ++c)
        rows[static_cast<size_t>(i * H + c)] = lm_read_weight(table_[static_cast<size_t>(local * H + c)], dt);
    }
    span("lookup", false, t0);
    t0 = now();
    std::vector<int64_t> send_el(rw_recv_), recv_el(rw_send_);
    for (auto& c : send_el) c *= H;
    for (auto& c : recv_el) c *= H;
    DeviceBuffer<float> got = buffer("activations", static_cast<size_t>(T * H));
    pg_.all_to_all_v("output_dist/rows", rows.data(), send_el, got.data(), recv_el, sizeof(float));
    span("output_dist", true, t0);
    e.assign(static_cast<size_t>(T * H), 0.f);
    for (size_t k = 0; k < rw_order_.size(); ++k)
      std::copy_n(got.data() + k * static_cast<size_t>(H), H, e.data() + rw_order_[k] * H);
    return;
  }
  // vocab_parallel and data_parallel: a lookup of the rows this rank holds, ids outside them
  // masked to local row 0 and zeroed (Megatron).
  count_ids(b.x);
  DeviceBuffer<float> part = buffer("activations", static_cast<size_t>(T * H));
  for (int64_t t = 0; t < T; ++t) {
    bool masked = false;
    const int64_t local = vocab_local_row(b.x[static_cast<size_t>(t)], rows_, masked);
    for (int64_t c = 0; c < H; ++c)
      part[static_cast<size_t>(t * H + c)] = masked ? 0.f : lm_read_weight(table_[static_cast<size_t>(local * H + c)], dt);
  }
  span("lookup", false, t0);
  if (spec_.sharding == LmSharding::data_parallel) {
    e = copy(part);
    return;
  }
  t0 = now();
  if (!spec_.sequence_parallel) {
    pg_.all_reduce_sum("embedding/all_reduce", part.data(), T * H);
    e = copy(part);
    span("embedding/all_reduce", true, t0);
  } else {
    const std::vector<int64_t> counts(static_cast<size_t>(world_), b.local_count * H);
    e.assign(static_cast<size_t>(b.local_count * H), 0.f);
    pg_.reduce_scatter("embedding/reduce_scatter", part.data(), counts, e.data());
    span("embedding/reduce_scatter", true, t0);
  }
}

void LmRank::embed_backward(const Batch& b, std::vector<float>& de) {
  const int64_t H = hidden_, T = b.tokens;
  int64_t t0 = now();
  if (spec_.sharding == LmSharding::row_wise) {
    DeviceBuffer<float> send = buffer("activations", rw_order_.size() * static_cast<size_t>(H));
    for (size_t k = 0; k < rw_order_.size(); ++k)
      std::copy_n(de.data() + rw_order_[k] * H, H, send.data() + k * static_cast<size_t>(H));
    std::vector<int64_t> send_el(rw_send_), recv_el(rw_recv_);
    for (auto& c : send_el) c *= H;
    for (auto& c : recv_el) c *= H;
    DeviceBuffer<float> got = buffer("activations", rw_ids_.size() * static_cast<size_t>(H));
    pg_.all_to_all_v("grad_dist/rows", send.data(), send_el, got.data(), recv_el, sizeof(float));
    span("grad_dist", true, t0);
    t0 = now();
    for (size_t i = 0; i < rw_ids_.size(); ++i) {
      if (rw_ids_[i] == spec_.padding_id) continue;
      float* g = g_table_.data() + (rw_ids_[i] - rows_.begin) * H;
      for (int64_t c = 0; c < H; ++c) g[c] += got[i * static_cast<size_t>(H) + static_cast<size_t>(c)];
    }
    span("embedding_backward", false, t0);
    return;
  }
  DeviceBuffer<float> full;
  const float* d = de.data();
  if (spec_.sequence_parallel) {  // backward of the reduce-scatter: gather every rank's slice
    full = buffer("activations", static_cast<size_t>(T * H));
    const std::vector<int64_t> counts(static_cast<size_t>(world_), b.local_count * H);
    pg_.all_gather_v("embedding/grad_all_gather", de.data(), full.data(), counts, sizeof(float));
    span("embedding/grad_all_gather", true, t0);
    d = full.data();
    t0 = now();
  }
  for (int64_t t = 0; t < T; ++t) {
    const int64_t id = b.x[static_cast<size_t>(t)];
    if (id == spec_.padding_id || id < rows_.begin || id >= rows_.end) continue;
    float* g = g_table_.data() + (id - rows_.begin) * H;
    const float* s = d + t * H;
    for (int64_t c = 0; c < H; ++c) g[c] += s[c];
  }
  span("embedding_backward", false, t0);
}

double LmRank::project_loss(const Batch& b, const std::vector<float>& z, std::vector<float>& dz) {
  const int64_t H = hidden_;
  const bool dp = spec_.sharding == LmSharding::data_parallel;
  const bool rw = spec_.sharding == LmSharding::row_wise;
  // The hidden states and targets the projection runs on: vocab_parallel all T tokens (gathered
  // from the slices with sequence_parallel); row_wise every rank's T tokens; data_parallel its own.
  DeviceBuffer<float> zg;
  std::vector<int64_t> yg;
  const float* zp = z.data();
  const std::vector<int64_t>* yp = &b.y;
  int64_t t0 = now();
  if (rw || spec_.sequence_parallel) {
    const int64_t per = rw ? b.tokens : b.local_count;
    zg = buffer("activations", static_cast<size_t>(per * world_ * H));
    const std::vector<int64_t> counts(static_cast<size_t>(world_), per * H);
    pg_.all_gather_v(rw ? "output_projection/all_gather" : "sequence_parallel/all_gather", z.data(), zg.data(),
                     counts, sizeof(float));
    zp = zg.data();
    if (rw) {
      yg.assign(static_cast<size_t>(per * world_), 0);
      const std::vector<int64_t> yc(static_cast<size_t>(world_), per);
      pg_.all_gather_v("output_projection/targets_all_gather", b.y.data(), yg.data(), yc, sizeof(int64_t));
      yp = &yg;
    }
    span(rw ? "output_projection/all_gather" : "sequence_parallel/all_gather", true, t0);
  }
  const auto Tc = static_cast<int64_t>(yp->size());
  const int64_t Vr = rows_.size();
  t0 = now();
  const DeviceBuffer<float>& o_master = spec_.tie_word_embeddings ? table_ : out_;
  // the weights as the forward pass reads them: a rounded copy for bf16 / fp16
  DeviceBuffer<float> o_read;
  if (spec_.data_type != LmDataType::fp32) {
    o_read = buffer("weights", o_master.size());
    for (size_t i = 0; i < o_master.size(); ++i) o_read[i] = lm_read_weight(o_master[i], spec_.data_type);
  }
  const float* o = spec_.data_type == LmDataType::fp32 ? o_master.data() : o_read.data();
  const CMapM Z(zp, Tc, H);
  const CMapM O(o, Vr, H);
  DeviceBuffer<float> logit_buf = buffer("logits", static_cast<size_t>(Tc * Vr));
  MapM logits(logit_buf.data(), Tc, Vr);  // [Tc x Vr]: this rank's slice of the vocabulary
  logits.noalias() = Z * O.transpose();
  std::vector<float> m(static_cast<size_t>(Tc)), pred(static_cast<size_t>(Tc), 0.f), se(static_cast<size_t>(Tc));
  for (int64_t t = 0; t < Tc; ++t) m[static_cast<size_t>(t)] = logits.row(t).maxCoeff();
  span("output_projection/logits", false, t0);
  if (!dp) {
    t0 = now();
    pg_.all_reduce_max("cross_entropy/max", m.data(), Tc);
    span("cross_entropy/max", true, t0);
  }
  t0 = now();
  for (int64_t t = 0; t < Tc; ++t) {
    const int64_t y = (*yp)[static_cast<size_t>(t)];
    if (y >= rows_.begin && y < rows_.end) pred[static_cast<size_t>(t)] = logits(t, y - rows_.begin);
    logits.row(t).array() = (logits.row(t).array() - m[static_cast<size_t>(t)]).exp();
    se[static_cast<size_t>(t)] = logits.row(t).sum();
  }
  span("cross_entropy/exp", false, t0);
  if (!dp) {
    t0 = now();
    pg_.all_reduce_sum("cross_entropy/predicted_logit", pred.data(), Tc);
    pg_.all_reduce_sum("cross_entropy/sum_exp", se.data(), Tc);
    span("cross_entropy/all_reduce", true, t0);
  }
  t0 = now();
  const double n = static_cast<double>(b.n_targets);
  double loss_sum = 0;
  for (int64_t t = 0; t < Tc; ++t) {
    const auto ti = static_cast<size_t>(t);
    const int64_t y = (*yp)[ti];
    if (y == spec_.padding_id || n == 0) {
      logits.row(t).setZero();
      continue;
    }
    loss_sum += std::log(static_cast<double>(se[ti])) + m[ti] - pred[ti];
    logits.row(t) *= static_cast<float>(1.0 / (static_cast<double>(se[ti]) * n));  // softmax / N
    if (y >= rows_.begin && y < rows_.end) logits(t, y - rows_.begin) -= static_cast<float>(1.0 / n);
  }
  // logits now hold dloss/dlogits. Gradients: dO = dlogits^T Z, dZ = dlogits O.
  DeviceBuffer<float>& g_o = spec_.tie_word_embeddings ? g_table_ : g_out_;
  MapM(g_o.data(), Vr, H).noalias() += logits.transpose() * Z;
  DeviceBuffer<float> dzg = buffer("activations", static_cast<size_t>(Tc * H));
  MapM(dzg.data(), Tc, H).noalias() = logits * O;
  span("output_projection/backward", false, t0);
  t0 = now();
  if (dp) {
    float lf = static_cast<float>(loss_sum);  // the loss sum over every rank's tokens
    pg_.all_reduce_sum("loss/all_reduce", &lf, 1);
    loss_sum = lf;
    span("loss/all_reduce", true, t0);
    dz = copy(dzg);
  } else if (rw || spec_.sequence_parallel) {
    const int64_t per = rw ? b.tokens : b.local_count;
    dz.assign(static_cast<size_t>(per * H), 0.f);
    const std::vector<int64_t> counts(static_cast<size_t>(world_), per * H);
    pg_.reduce_scatter("output_projection/grad_reduce_scatter", dzg.data(), counts, dz.data());
    span("output_projection/grad_reduce_scatter", true, t0);
  } else {
    pg_.all_reduce_sum("output_projection/grad_all_reduce", dzg.data(), Tc * H);
    dz = copy(dzg);
    span("output_projection/grad_all_reduce", true, t0);
  }
  return loss_sum / n;
}

void LmRank::all_reduce_grads() {
  if (world_ == 1) return;
  const int64_t t0 = now();
  const bool dp = spec_.sharding == LmSharding::data_parallel;
  if (dp) {
    pg_.all_reduce_sum("embedding/grad_all_reduce", g_table_.data(), static_cast<int64_t>(g_table_.size()));
    if (g_out_.size() != 0)
      pg_.all_reduce_sum("output_projection/grad_all_reduce", g_out_.data(), static_cast<int64_t>(g_out_.size()));
  }
  // The body is replicated; its gradients differ by rank unless every rank ran the same tokens
  // (vocab_parallel without sequence_parallel, where they are equal and nothing is reduced).
  const bool body_differs = dp || spec_.sharding == LmSharding::row_wise || spec_.sequence_parallel;
  if (body_differs && !w_.empty()) {
    size_t total = 0;
    for (size_t l = 0; l < w_.size(); ++l) total += g_w_[l].size() + g_b_[l].size();
    DeviceBuffer<float> flat = buffer("comm_buffer", total);
    size_t at = 0;
    for (size_t l = 0; l < w_.size(); ++l) {
      std::copy_n(g_w_[l].data(), g_w_[l].size(), flat.data() + at);
      at += g_w_[l].size();
      std::copy_n(g_b_[l].data(), g_b_[l].size(), flat.data() + at);
      at += g_b_[l].size();
    }
    pg_.all_reduce_sum("body/grad_all_reduce", flat.data(), static_cast<int64_t>(flat.size()));
    size_t k = 0;
    for (size_t l = 0; l < w_.size(); ++l) {
      std::copy_n(flat.data() + k, g_w_[l].size(), g_w_[l].data());
      k += g_w_[l].size();
      std::copy_n(flat.data() + k, g_b_[l].size(), g_b_[l].data());
      k += g_b_[l].size();
    }
  }
  if (dp || body_differs) span("grad_all_reduce", true, t0);
}

}  // namespace embedscope::engine
