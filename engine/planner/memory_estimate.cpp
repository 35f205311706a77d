// The planner's memory estimate of every device (sharding.h: estimate_memory): the replay of the
// buffers the threaded executor allocates in a rank's device arena (memory_replay.h).
#include <algorithm>
#include <set>
#include <vector>

#include "embedscope/engine/model/host_cache.h"
#include "embedscope/engine/model/low_rank.h"
#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/quant/row_codec.h"
#include "embedscope/engine/sharding/sharding.h"
#include "planner/memory_replay.h"
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
/// Rank r's estimate from its replay: the shards, the dense part and what the batches' buffers
/// add at the peak.
DeviceMemoryEstimate estimate_of(const detail::ReplayedMemory& m, int r) {
  DeviceMemoryEstimate e;
  e.rank = r;
  e.weights = m.weights;
  e.optimizer_state = m.optimizer_state;
  e.dense = m.dense;
  e.cache = m.cache;
  e.host = m.host;
  e.largest_block = m.largest_block;
  e.min_reserved_caching = m.min_reserved_caching;
  e.min_reserved_expandable = m.min_reserved_expandable;
  e.peak_reserved = m.peak_reserved;
  e.shortfall_request = m.shortfall.request;
  e.shortfall_what = m.shortfall.what;
  e.shortfall_iteration = m.shortfall.iteration;
  e.shortfall_fragmentation = m.shortfall.fragmentation;
  e.expandable_serves = m.shortfall.expandable_serves;
  e.direct_serves = m.shortfall.direct_serves;
  e.buffers = std::max<int64_t>(0, m.peak - m.weights - m.optimizer_state - m.cache - m.dense);
  e.pipeline_buffers = std::min(e.buffers, m.ahead_at_peak);
  return e;
}
}  // namespace

std::vector<DeviceMemoryEstimate> estimate_memory(const WorkloadSpec& spec, const ShardingPlan& plan) {
  // The rank's buffers replayed through its allocator in the executor's order
  // (planner/memory_replay.h): the estimate is the replay's peak allocated bytes, split into
  // the shards, the dense part (parameters, gradients, activations) and what the batches'
  // buffers add at the peak.
  const detail::Layout L(spec, plan);
  return detail::estimate_memory(spec, plan, detail::SlotShares(spec, L));
}

namespace detail {
std::vector<DeviceMemoryEstimate> estimate_memory(const WorkloadSpec& spec, const ShardingPlan& plan,
                                                  const SlotShares& shares) {
  const Layout L(spec, plan);
  const std::vector<ReplayedMemory> replayed = replay_memory(spec, plan, L, shares);
  std::vector<DeviceMemoryEstimate> est;
  for (int r = 0; r < L.world; ++r) est.push_back(estimate_of(replayed[static_cast<size_t>(r)], r));
  return est;
}

DeviceMemoryEstimate estimate_from_replay(const ReplayedMemory& m, int rank) { return estimate_of(m, rank); }

DeviceMemoryEstimate estimate_rank_memory(const WorkloadSpec& spec, const ShardingPlan& plan, int rank,
                                          const SlotShares& shares) {
  const Layout L(spec, plan);
  return estimate_of(replay_rank_memory(spec, plan, L, rank, shares), rank);
}
}  // namespace detail

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
    // one copy of a row over its column shards (tester55 F5: an int8 column_wise table over 2
    // ranks printed 24 beside weights of 32 B a row): each distinct column range once, so a
    // row_wise table's row shards and a data_parallel table's replicas count a row once
    if (t.low_rank_dim > 0) {
      e.row_bytes = 4 * t.low_rank_dim;
    } else {
      std::set<std::pair<int64_t, int64_t>> column_ranges;
      for (const Shard& sh : tp.shards) column_ranges.emplace(sh.col_offset, sh.num_cols);
      for (const auto& [offset, cols] : column_ranges) e.row_bytes += row_bytes(t.data_type, cols);
      if (column_ranges.empty()) e.row_bytes = row_bytes(t.data_type, t.embedding_dim);
    }
    e.placement = t.placement;
    for (const Shard& sh : tp.shards) {
      e.weight_bytes += shard_weight_bytes(t, sh.num_rows, sh.num_cols);
      e.optimizer_state_bytes += shard_optimizer_state_bytes(spec.optimizer.type, t, sh.num_rows, sh.num_cols);
      if (t.placement == TablePlacement::host_cached)
        e.cache_bytes += cache_device_bytes(t.cache_load_factor, sh.num_rows, sh.num_cols);
    }
    out.push_back(e);
  }
  return out;
}

}  // namespace embedscope::engine
