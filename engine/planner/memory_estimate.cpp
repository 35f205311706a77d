// The planner's memory estimate of every device (sharding.h: estimate_memory): the buffers the
// threaded executor allocates in a rank's device arena, one by one, with the batches the
// pipeline keeps alive.
#include <algorithm>

#include "embedscope/engine/memory/allocator.h"
#include "embedscope/engine/model/dense.h"
#include "embedscope/engine/model/low_rank.h"
#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/quant/row_codec.h"
#include "embedscope/engine/sharding/sharding.h"
#include "sharding/layout.h"

namespace embedscope::engine {

int64_t device_batches_ahead(PipelineKind p) {
  switch (p) {
    case PipelineKind::base: return 0;
    // the next batch's input dist runs under the dense part, received into host memory (the
    // comm worker's vectors): on the device from its kjt_permute, after this batch is done
    case PipelineKind::sparse_dist: return 0;
    // the next batch's lookup and output dist run under the dense part: its KJT, looked-up
    // rows, pooled outputs and output-dist buffers are on the device during this batch's train
    // (the batch after it, in its input dist, is in host memory)
    case PipelineKind::semi_sync: return 1;
  }
  return 0;
}

namespace {

// The bytes a block of `bytes` takes in the caching allocator: rounded up to 512 B
// (kMinBlockSize; PyTorch's round_size). A request of 0 bytes allocates nothing.
int64_t block(int64_t bytes) { return bytes <= 0 ? 0 : (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize; }

}  // namespace

std::vector<DeviceMemoryEstimate> estimate_memory(const WorkloadSpec& spec, const ShardingPlan& plan) {
  // Each buffer the executor allocates (exec/threaded/, sharding/*.cpp), at its largest (every
  // bag at its maximum length), rounded as the allocator rounds it; the buffers of one batch
  // counted as if all were alive at once, and the forward buffers of each batch the pipeline
  // keeps on the device ahead (device_batches_ahead) on top. So "plan fits" implies that the
  // bytes allocated fit (the caching allocator's reserved segments can still exceed them:
  // fragmentation, which the plan cannot see).
  const detail::Layout L(spec, plan);
  const int W = L.world;
  const int64_t B = L.B;
  constexpr int64_t f32 = 4, i64 = 8;
  std::vector<int64_t> max_len(spec.features.size());
  for (size_t f = 0; f < spec.features.size(); ++f) max_len[f] = spec.features[f].pooling_factor.max;
  const DenseSizes dense = dense_sizes(spec, L.dim);
  auto a2a_cols = [&](int r) {
    int64_t c = 0;
    for (int k : L.a2a_slots_to[static_cast<size_t>(r)]) c += L.slots[static_cast<size_t>(k)].s.num_cols;
    return c;
  };
  int64_t all_a2a_cols = 0, all_twrw_dims = 0;
  for (int r = 0; r < W; ++r) all_a2a_cols += a2a_cols(r);
  for (const auto& feats : L.twrw_features) all_twrw_dims += L.sum_dims(feats);
  const int64_t rw_width = L.sum_dims(L.rw_features);
  const int64_t ahead = device_batches_ahead(spec.pipeline);
  // the rows of every data-parallel table's all-gathered sparse gradients, at most
  std::vector<int64_t> dp_rows;
  for (int t : L.dp_tables) {
    const TableSpec& ts = spec.tables[static_cast<size_t>(t)];
    int64_t rows = 0;
    for (const int f : L.table_features[static_cast<size_t>(t)]) rows += B * max_len[static_cast<size_t>(f)];
    dp_rows.push_back(W * std::min(rows, ts.rows()));
  }
  // per-rank shard bytes in one pass over the plan
  std::vector<int64_t> weights(static_cast<size_t>(W), 0), state(static_cast<size_t>(W), 0);
  for (const TablePlan& tp : plan.tables)
    for (const Shard& sh : tp.shards) {
      const TableSpec& ts = spec.tables[static_cast<size_t>(tp.table)];
      // the stored rows (a low-rank table: A and B, two buffers), and momentum1 and momentum2
      // (of A and of B), each its own buffer, 4 or 2 bytes a value (optimizer_state_type)
      const ShardBuffers b = shard_buffers(spec.optimizer.type, ts, sh.num_rows, sh.num_cols);
      weights[static_cast<size_t>(sh.rank)] += block(b.weights[0]) + block(b.weights[1]);
      for (int64_t s : b.state) state[static_cast<size_t>(sh.rank)] += block(s);
    }

  std::vector<DeviceMemoryEstimate> est(static_cast<size_t>(W));
  for (int r = 0; r < W; ++r) {
    auto& e = est[static_cast<size_t>(r)];
    e.rank = r;
    e.weights = weights[static_cast<size_t>(r)];
    e.optimizer_state = state[static_cast<size_t>(r)];
    // dense_params_ (parameters + gradients, one buffer) and the activations of train()
    e.dense = block(2 * dense.num_params * f32) + block(B * dense.activation_floats_per_sample * f32);
    const auto& mine = L.slots_to[static_cast<size_t>(r)];
    const int64_t my_cols = a2a_cols(r);
    const int64_t node_width = L.hierarchical ? L.sum_dims(L.twrw_features[static_cast<size_t>(r / L.local)]) : 0;
    // ---- forward: what one batch holds from its kjt_permute through its output dist
    int64_t kjt_ids = 0;
    for (int k : mine) kjt_ids += W * B * max_len[static_cast<size_t>(L.slots[static_cast<size_t>(k)].feature)];
    int64_t fwd = block(static_cast<int64_t>(mine.size()) * W * B * i64) + block(kjt_ids * i64);  // recv lengths, ids
    for (int k : mine) fwd += block(W * B * L.slots[static_cast<size_t>(k)].s.num_cols * f32);     // slot_out
    for (int64_t d : L.dim) fwd += block(B * d * f32);                                             // pooled
    fwd += block(W * B * my_cols * f32) + block(B * all_a2a_cols * f32);  // table/column-wise all-to-all
    if (!L.rw_features.empty()) fwd += block(W * B * rw_width * f32) + block(B * rw_width * f32);  // reduce-scatter
    if (L.hierarchical)  // node reduce-scatter and cross-node all-to-all
      fwd += block(L.local * L.nodes * B * node_width * f32) + 2 * block(L.nodes * B * node_width * f32) +
             block(B * all_twrw_dims * f32);
    // ---- backward: the pooled gradients, the gradient dist, the data-parallel gradients
    int64_t bwd = 0;
    for (int64_t d : L.dim) bwd += block(B * d * f32);                                         // dpooled
    for (int k : mine) bwd += block(W * B * L.slots[static_cast<size_t>(k)].s.num_cols * f32);  // slot_grad
    bwd += block(B * all_a2a_cols * f32) + block(W * B * my_cols * f32);
    if (!L.rw_features.empty()) bwd += block(B * rw_width * f32) + block(W * B * rw_width * f32);
    if (L.hierarchical)
      bwd += block(B * all_twrw_dims * f32) + block(L.nodes * B * node_width * f32) +
             block(L.local * L.nodes * B * node_width * f32);
    for (size_t i = 0; i < dp_rows.size(); ++i) {
      const int64_t dim = spec.tables[static_cast<size_t>(L.dp_tables[i])].embedding_dim;
      bwd += block(dp_rows[i] * i64) + block(dp_rows[i] * dim * f32);
    }
    e.pipeline_buffers = ahead * fwd;
    e.buffers = fwd + bwd + e.pipeline_buffers;
  }
  return est;
}

std::vector<TableStorageEstimate> estimate_table_storage(const WorkloadSpec& spec, const ShardingPlan& plan) {
  std::vector<TableStorageEstimate> out;
  for (const TablePlan& tp : plan.tables) {
    const TableSpec& t = spec.tables[static_cast<size_t>(tp.table)];
    TableStorageEstimate e;
    e.table = tp.table;
    e.data_type = t.data_type;
    e.optimizer_state_type = t.optimizer_state_type;
    e.rows = t.rows();
    e.low_rank_dim = t.low_rank_dim;
    e.row_bytes = t.low_rank_dim > 0 ? 4 * t.low_rank_dim : row_bytes(t.data_type, t.embedding_dim);
    for (const Shard& sh : tp.shards) {
      e.weight_bytes += shard_weight_bytes(t, sh.num_rows, sh.num_cols);
      e.optimizer_state_bytes += shard_optimizer_state_bytes(spec.optimizer.type, t, sh.num_rows, sh.num_cols);
    }
    out.push_back(e);
  }
  return out;
}

}  // namespace embedscope::engine
