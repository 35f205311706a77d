// The sharding-type-specific ops of the lm_embedding step (model/lm_embedding.h): the token
// embedding's forward and backward, the output projection with its cross-entropy, and the
// gradient all-reduces of replicated parameters, for vocab_parallel (Megatron), data_parallel
// and row_wise (TorchRec). Every collective is named as in lm_embedding.h and
// program/lm_program.cpp, which lists them op by op. With data_type bf16 / fp16 the activations'
// collectives and their gradients' send that type's 2-byte elements (program/lm_program.h
// lm_wire_precision; ProcessGroup's *_q collectives round every value sent); the cross-entropy's
// and the parameters' gradients' stay fp32.

#include <algorithm>
#include <cmath>
#include <limits>

#include <Eigen/Core>

#include "embedscope/engine/comm/gloo_process_group.h"
#include "embedscope/engine/model/lm_embedding.h"
#include "embedscope/engine/program/lm_program.h"
#include "model/lm_batch.h"

namespace embedscope::engine {

namespace {
using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapM = Eigen::Map<Mat>;
using CMapM = Eigen::Map<const Mat>;

// The read copy's rows [r0, r0 + n) as fp32 values into tile[0, n H): the conversion a bf16 /
// fp16 GEMM makes as it loads a tile of its 2-byte operand. The projection's GEMMs go over the
// copy kReadTileRows rows at a time, so the fp32 form of the copy never exists whole: the tile,
// min(rows, kReadTileRows) x H x 4 B (on a GPU, registers / shared memory), is a block of the
// rank's arena under the tag "weights" while the GEMM runs (read_tile), so that the memory view
// and the peaks count what the rank holds; lm_memory_replay takes it at the same place.
constexpr int64_t kReadTileRows = 256;
void decode_rows(const uint16_t* codes, int64_t r0, int64_t n, int64_t H, LmDataType t, float* tile) {
  const uint16_t* c = codes + r0 * H;
  for (int64_t i = 0; i < n * H; ++i) tile[i] = lm_code_value(c[i], t);
}

std::vector<int64_t> times(std::vector<int64_t> v, int64_t k) {
  for (auto& c : v) c *= k;
  return v;
}
}  // namespace

void LmRank::count_ids(const int64_t* ids, size_t n) {
  // ids this rank reads from its shard, and their distinct rows (host bookkeeping of the counters)
  std::vector<int64_t> mine;
  for (size_t i = 0; i < n; ++i)
    if (ids[i] >= rows_.begin && ids[i] < rows_.end) mine.push_back(ids[i]);
  st_->result.ids_looked_up = static_cast<int64_t>(mine.size());
  std::sort(mine.begin(), mine.end());
  st_->result.unique_rows = std::unique(mine.begin(), mine.end()) - mine.begin();
}

// ---- the embedding's forward -------------------------------------------------------------------

void LmRank::op_bucketize() {
  // TorchRec RW sequence embedding: ids to their owners, rows back (all-to-alls).
  Step& st = *st_;
  const int64_t T = st.b.tokens;
  st.rw_send.assign(static_cast<size_t>(world_), 0);
  std::vector<std::vector<int64_t>> pos(static_cast<size_t>(world_));
  for (int64_t t = 0; t < T; ++t) {
    const int o = vocab_owner(st.b.x[static_cast<size_t>(t)], vocab_, world_);
    pos[static_cast<size_t>(o)].push_back(t);
  }
  st.rw_order = lm_id_buffer(arena_, static_cast<size_t>(T));
  st.rw_sent_ids = lm_id_buffer(arena_, static_cast<size_t>(T));
  size_t k = 0;
  for (int j = 0; j < world_; ++j) {
    st.rw_send[static_cast<size_t>(j)] = static_cast<int64_t>(pos[static_cast<size_t>(j)].size());
    for (int64_t t : pos[static_cast<size_t>(j)]) {
      st.rw_order[k] = t;
      st.rw_sent_ids[k++] = st.b.x[static_cast<size_t>(t)];
    }
  }
}

void LmRank::op_input_dist() {
  Step& st = *st_;
  const std::vector<int64_t> ones(static_cast<size_t>(world_), 1);
  st.rw_recv.assign(static_cast<size_t>(world_), 0);
  pg_.all_to_all_v("input_dist/splits", st.rw_send.data(), ones, st.rw_recv.data(), ones, sizeof(int64_t));
  int64_t nrecv = 0;
  for (int64_t c : st.rw_recv) nrecv += c;
  st.rw_ids = lm_id_buffer(arena_, static_cast<size_t>(nrecv));
  pg_.all_to_all_v("input_dist/ids", st.rw_sent_ids.data(), st.rw_send, st.rw_ids.data(), st.rw_recv, sizeof(int64_t));
  st.rw_sent_ids = {};  // sent
}

void LmRank::op_lookup() {
  Step& st = *st_;
  const int64_t H = hidden_;
  const LmDataType dt = spec_.data_type;
  if (spec_.sharding == LmSharding::row_wise) {  // the rows of the ids received
    count_ids(st.rw_ids.data(), st.rw_ids.size());
    const auto nrecv = static_cast<int64_t>(st.rw_ids.size());
    st.part = buffer("activations", static_cast<size_t>(nrecv * H));
    for (int64_t i = 0; i < nrecv; ++i) {
      const int64_t local = st.rw_ids[static_cast<size_t>(i)] - rows_.begin;
      for (int64_t c = 0; c < H; ++c)
        st.part[static_cast<size_t>(i * H + c)] = lm_read_weight(table_[static_cast<size_t>(local * H + c)], dt);
    }
    return;
  }
  // vocab_parallel and data_parallel: a lookup of the rows this rank holds, ids outside them
  // masked to local row 0 and zeroed (Megatron).
  count_ids(st.b.x.data(), st.b.x.size());
  const int64_t T = st.b.tokens;
  st.part = buffer("activations", static_cast<size_t>(T * H));
  for (int64_t t = 0; t < T; ++t) {
    bool masked = false;
    const int64_t local = vocab_local_row(st.b.x[static_cast<size_t>(t)], rows_, masked);
    for (int64_t c = 0; c < H; ++c)
      st.part[static_cast<size_t>(t * H + c)] =
          masked ? 0.f : lm_read_weight(table_[static_cast<size_t>(local * H + c)], dt);
  }
  if (spec_.sharding == LmSharding::data_parallel) st.emb = std::move(st.part);  // no collective: the rows are the output
}

void LmRank::op_output_dist() {
  Step& st = *st_;
  const int64_t H = hidden_, T = st.b.tokens;
  {
    DeviceBuffer<float> got = buffer("activations", static_cast<size_t>(T * H));
    // the rows in data_type's elements (lm_wire_precision): exact, the rows are read rounded to it
    pg_.all_to_all_q("output_dist/rows", st.part.data(), times(st.rw_recv, H), got.data(), times(st.rw_send, H),
                     lm_wire_precision(spec_), nullptr);
    st.emb = buffer("activations", static_cast<size_t>(T * H));
    for (size_t k = 0; k < st.rw_order.size(); ++k)
      std::copy_n(got.data() + k * static_cast<size_t>(H), H, st.emb.data() + st.rw_order[k] * H);
  }  // the rows received, then the rows sent, are freed
  st.part = {};
}

void LmRank::op_embedding_combine() {
  Step& st = *st_;
  const int64_t H = hidden_, T = st.b.tokens;
  if (!spec_.sequence_parallel) {
    // data_type's elements on the wire (lm_wire_precision); exact: one rank's term is the row
    // (read rounded to data_type), the others' 0; reduced in place, the sum is the output
    pg_.all_reduce_q("embedding/all_reduce", st.part.data(), T * H, lm_wire_precision(spec_), nullptr);
    st.emb = std::move(st.part);
  } else {
    const std::vector<int64_t> counts(static_cast<size_t>(world_), st.b.local_count * H);
    st.emb = buffer("activations", static_cast<size_t>(st.b.local_count * H));
    pg_.reduce_scatter_q("embedding/reduce_scatter", st.part.data(), counts, st.emb.data(), lm_wire_precision(spec_),
                         nullptr);
  }
  st.part = {};
}

// ---- the output projection with the vocab-parallel cross-entropy ------------------------------

void LmRank::op_gather_hidden() {
  // The hidden states and targets the projection runs on: vocab_parallel all T tokens (gathered
  // from the slices with sequence_parallel); row_wise every rank's T tokens.
  Step& st = *st_;
  const bool rw = spec_.sharding == LmSharding::row_wise;
  const int64_t H = hidden_, per = rw ? st.b.tokens : st.b.local_count;
  st.zg = buffer("activations", static_cast<size_t>(per * world_ * H));
  const std::vector<int64_t> counts(static_cast<size_t>(world_), per * H);
  // the hidden states in data_type's elements (lm_wire_precision): every token's rounded, this rank's too
  pg_.all_gather_q(rw ? "output_projection/all_gather" : "sequence_parallel/all_gather", st.z, st.zg.data(),
                   counts, lm_wire_precision(spec_), nullptr);
  if (rw) {
    st.yg = lm_id_buffer(arena_, static_cast<size_t>(per * world_));
    const std::vector<int64_t> yc(static_cast<size_t>(world_), per);
    pg_.all_gather_v("output_projection/targets_all_gather", st.b.y.data(), st.yg.data(), yc, sizeof(int64_t));
  }
}

void LmRank::op_logits() {
  Step& st = *st_;
  const int64_t H = hidden_;
  const auto Tc = static_cast<int64_t>(st.targets().size());
  const int64_t Vr = rows_.size();
  const DeviceBuffer<float>& o_master = spec_.tie_word_embeddings ? table_ : out_;
  // the weights as the forward pass reads them: a copy rounded to data_type, 2 B an element (as
  // Megatron's bf16 parameters beside the fp32 main copy), converted tile by tile as read; taken
  // before the logits (the order lm_memory_replay replays)
  if (spec_.data_type != LmDataType::fp32) {
    st.o_read = DeviceBuffer<uint16_t>(arena_, "weights");
    st.o_read.assign(o_master.size(), 0);
    for (size_t i = 0; i < o_master.size(); ++i) st.o_read[i] = lm_read_code(o_master[i], spec_.data_type);
  }
  st.logits = buffer("logits", static_cast<size_t>(Tc * Vr));
  MapM logits(st.logits.data(), Tc, Vr);  // [Tc x Vr]: this rank's slice of the vocabulary
  const CMapM Z(st.hidden(), Tc, H);
  if (spec_.data_type == LmDataType::fp32) {
    logits.noalias() = Z * CMapM(o_master.data(), Vr, H).transpose();
  } else {
    DeviceBuffer<float> tile = buffer("weights", static_cast<size_t>(std::min(Vr, kReadTileRows) * H));
    for (int64_t r0 = 0; r0 < Vr; r0 += kReadTileRows) {
      const int64_t n = std::min(kReadTileRows, Vr - r0);
      decode_rows(st.o_read.data(), r0, n, H, spec_.data_type, tile.data());
      logits.middleCols(r0, n).noalias() = Z * CMapM(tile.data(), n, H).transpose();
    }
  }
  st.m = buffer("activations", static_cast<size_t>(Tc));
  st.pred = buffer("activations", static_cast<size_t>(Tc));
  st.se = buffer("activations", static_cast<size_t>(Tc));
  for (int64_t t = 0; t < Tc; ++t) st.m[static_cast<size_t>(t)] = logits.row(t).maxCoeff();
}

void LmRank::op_cross_entropy_max() {
  pg_.all_reduce_max("cross_entropy/max", st_->m.data(), static_cast<int64_t>(st_->m.size()));
}

void LmRank::op_cross_entropy_exp() {
  Step& st = *st_;
  const DeviceBuffer<int64_t>& y = st.targets();
  const auto Tc = static_cast<int64_t>(y.size());
  MapM logits(st.logits.data(), Tc, rows_.size());
  for (int64_t t = 0; t < Tc; ++t) {
    const auto ti = static_cast<size_t>(t);
    if (y[ti] >= rows_.begin && y[ti] < rows_.end) st.pred[ti] = logits(t, y[ti] - rows_.begin);
    logits.row(t).array() = (logits.row(t).array() - st.m[ti]).exp();
    st.se[ti] = logits.row(t).sum();
  }
}

void LmRank::op_cross_entropy_all_reduce() {
  Step& st = *st_;
  const auto Tc = static_cast<int64_t>(st.pred.size());
  pg_.all_reduce_sum("cross_entropy/predicted_logit", st.pred.data(), Tc);
  pg_.all_reduce_sum("cross_entropy/sum_exp", st.se.data(), Tc);
}

void LmRank::op_projection_backward() {
  Step& st = *st_;
  const int64_t H = hidden_, Vr = rows_.size();
  const DeviceBuffer<int64_t>& y = st.targets();
  const auto Tc = static_cast<int64_t>(y.size());
  MapM logits(st.logits.data(), Tc, Vr);
  const double n = static_cast<double>(st.b.n_targets);
  st.loss_sum = 0;
  for (int64_t t = 0; t < Tc; ++t) {
    const auto ti = static_cast<size_t>(t);
    if (y[ti] == spec_.padding_id || n == 0) {
      logits.row(t).setZero();
      continue;
    }
    st.loss_sum += std::log(static_cast<double>(st.se[ti])) + st.m[ti] - st.pred[ti];
    logits.row(t) *= static_cast<float>(1.0 / (static_cast<double>(st.se[ti]) * n));  // softmax / N
    if (y[ti] >= rows_.begin && y[ti] < rows_.end) logits(t, y[ti] - rows_.begin) -= static_cast<float>(1.0 / n);
  }
  // logits now hold dloss/dlogits. Gradients: dO = dlogits^T Z, dZ = dlogits O.
  const CMapM Z(st.hidden(), Tc, H);
  const DeviceBuffer<float>& o_master = spec_.tie_word_embeddings ? table_ : out_;
  DeviceBuffer<float>& g_o = spec_.tie_word_embeddings ? g_table_ : g_out_;
  MapM(g_o.data(), Vr, H).noalias() += logits.transpose() * Z;
  st.dzg = buffer("activations", static_cast<size_t>(Tc * H));
  MapM dZ(st.dzg.data(), Tc, H);
  if (spec_.data_type == LmDataType::fp32) {
    dZ.noalias() = logits * CMapM(o_master.data(), Vr, H);
  } else {  // the read copy, tile by tile as the logits read it
    DeviceBuffer<float> tile = buffer("weights", static_cast<size_t>(std::min(Vr, kReadTileRows) * H));
    for (int64_t r0 = 0; r0 < Vr; r0 += kReadTileRows) {
      const int64_t nr = std::min(kReadTileRows, Vr - r0);
      decode_rows(st.o_read.data(), r0, nr, H, spec_.data_type, tile.data());
      dZ.noalias() += logits.middleCols(r0, nr) * CMapM(tile.data(), nr, H);
    }
  }
}

void LmRank::op_projection_grad_dist() {
  Step& st = *st_;
  const int64_t H = hidden_;
  const bool dp = spec_.sharding == LmSharding::data_parallel, rw = spec_.sharding == LmSharding::row_wise;
  if (dp) {
    float lf = static_cast<float>(st.loss_sum);  // the loss sum over every rank's tokens
    pg_.all_reduce_sum("loss/all_reduce", &lf, 1);
    st.loss_sum = lf;
    st.dz = std::move(st.dzg);  // every rank's own tokens: its gradient as it is
  } else if (rw || spec_.sequence_parallel) {
    const int64_t per = rw ? st.b.tokens : st.b.local_count;
    st.dz = buffer("activations", static_cast<size_t>(per * H));
    const std::vector<int64_t> counts(static_cast<size_t>(world_), per * H);
    // the ranks' terms rounded to data_type (lm_wire_precision), summed in fp32 on arrival
    pg_.reduce_scatter_q("output_projection/grad_reduce_scatter", st.dzg.data(), counts, st.dz.data(),
                         lm_wire_precision(spec_), nullptr);
  } else {
    // round(sum of the ranks' rounded terms) for bf16 / fp16 (ProcessGroup::all_reduce_q)
    pg_.all_reduce_q("output_projection/grad_all_reduce", st.dzg.data(), static_cast<int64_t>(st.dzg.size()),
                     lm_wire_precision(spec_), nullptr);
    st.dz = std::move(st.dzg);  // reduced in place
  }
  st.result.loss = st.loss_sum / static_cast<double>(st.b.n_targets);
  // the projection's buffers are read no more
  st.dzg = {};
  st.logits = {};
  st.o_read = {};
  st.zg = {};
  st.yg = {};
  st.m = {};
  st.pred = {};
  st.se = {};
}

// ---- the embedding's backward and the replicated parameters' gradients -------------------------

void LmRank::op_embedding_grad_dist() {
  Step& st = *st_;
  const int64_t H = hidden_, T = st.b.tokens;
  if (spec_.sharding == LmSharding::row_wise) {  // the gradients of the rows to their owners
    DeviceBuffer<float> send = buffer("activations", st.rw_order.size() * static_cast<size_t>(H));
    for (size_t k = 0; k < st.rw_order.size(); ++k)
      std::copy_n(st.de.data() + st.rw_order[k] * H, H, send.data() + k * static_cast<size_t>(H));
    st.grad_rows = buffer("activations", st.rw_ids.size() * static_cast<size_t>(H));
    pg_.all_to_all_q("grad_dist/rows", send.data(), times(st.rw_send, H), st.grad_rows.data(), times(st.rw_recv, H),
                     lm_wire_precision(spec_), nullptr);
    return;
  }
  // sequence_parallel, the backward of the reduce-scatter: gather every rank's slice
  st.grad_rows = buffer("activations", static_cast<size_t>(T * H));
  const std::vector<int64_t> counts(static_cast<size_t>(world_), st.b.local_count * H);
  pg_.all_gather_q("embedding/grad_all_gather", st.de.data(), st.grad_rows.data(), counts, lm_wire_precision(spec_),
                   nullptr);
}

void LmRank::op_embedding_backward() {
  Step& st = *st_;
  const int64_t H = hidden_, T = st.b.tokens;
  if (spec_.sharding == LmSharding::row_wise) {
    for (size_t i = 0; i < st.rw_ids.size(); ++i) {
      if (st.rw_ids[i] == spec_.padding_id) continue;
      float* g = g_table_.data() + (st.rw_ids[i] - rows_.begin) * H;
      for (int64_t c = 0; c < H; ++c) g[c] += st.grad_rows[i * static_cast<size_t>(H) + static_cast<size_t>(c)];
    }
    st.grad_rows = {};
    st.de = {};
    return;
  }
  const float* d = spec_.sequence_parallel ? st.grad_rows.data() : st.de.data();
  for (int64_t t = 0; t < T; ++t) {
    const int64_t id = st.b.x[static_cast<size_t>(t)];
    if (id == spec_.padding_id || id < rows_.begin || id >= rows_.end) continue;
    float* g = g_table_.data() + (id - rows_.begin) * H;
    const float* s = d + t * H;
    for (int64_t c = 0; c < H; ++c) g[c] += s[c];
  }
  st.grad_rows = {};
  st.de = {};
}

void LmRank::op_grad_all_reduce() {
  const bool dp = spec_.sharding == LmSharding::data_parallel;
  if (dp) {
    pg_.all_reduce_sum("embedding/grad_all_reduce", g_table_.data(), static_cast<int64_t>(g_table_.size()));
    if (g_out_.size() != 0)
      pg_.all_reduce_sum("output_projection/grad_all_reduce", g_out_.data(), static_cast<int64_t>(g_out_.size()));
  }
  // The body is replicated; its gradients differ by rank unless every rank ran the same tokens
  // (vocab_parallel without sequence_parallel, where they are equal and nothing is reduced).
  const bool body_differs = dp || spec_.sharding == LmSharding::row_wise || spec_.sequence_parallel;
  if (!body_differs || w_.empty()) return;
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

}  // namespace embedscope::engine
