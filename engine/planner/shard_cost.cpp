// The planner search's shard-level cost model (planner/shard_cost.h).
#include "planner/shard_cost.h"

#include <cmath>

#include "embedscope/engine/cost/cache_model.h"
#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/model/host_cache.h"
#include "embedscope/engine/model/low_rank.h"
#include "embedscope/engine/quant/row_codec.h"

namespace embedscope::engine::planner_detail {

Perf ShardCost::perf(const TableSpec& t, double lookups, int64_t cols, double out_floats, double in_ids, Call out,
                     double features, double cross_floats) const {
  const GpuProfile& g = hw_.gpu;
  // a low-rank table reads r fp32 values of A an id (and B once: small, left out here)
  const int64_t stored_cols = t.low_rank_dim > 0 ? t.low_rank_dim : cols;
  const double rows_read = lookups * static_cast<double>(t.low_rank_dim > 0 ? 4 * t.low_rank_dim : row_bytes(t.data_type, cols));
  const double state_bytes = lookups * static_cast<double>(optimizer_state_bytes(spec_.optimizer.type, 1, stored_cols,
                                                                                  t.optimizer_state_type));
  Perf p;
  p.fwd_compute = 1e9 * rows_read / (g.hbm_bandwidth_bytes_per_s * g.tbe_forward_efficiency);
  p.bwd_compute = 1e9 * 2.0 * (rows_read + state_bytes) / (g.hbm_bandwidth_bytes_per_s * g.tbe_backward_efficiency);
  const double frac = W_ > 1 ? static_cast<double>(W_ - 1) / W_ : 0.0;
  const double bw = hw_.intra_node.bus_bandwidth_bytes_per_s;
  p.fwd_comms = 1e9 * frac * (out_floats * 4.0 + in_ids * 8.0) / bw;
  p.bwd_comms = 1e9 * frac * out_floats * 4.0 / bw;
  if (out != Call::kCalls) {
    // the input dist: a split count and B lengths of each feature from every rank, the ids
    p.bytes[Call::kSplits] = 8.0 * features * W_;
    p.bytes[Call::kLengths] = 8.0 * features * B_ * W_;
    p.bytes[Call::kIds] = 8.0 * in_ids;
    p.bytes[out] = 4.0 * out_floats;
    p.calls = 1u << Call::kSplits | 1u << Call::kLengths | 1u << Call::kIds | 1u << out;
    if (out == Call::kTwrwIntra) {
      p.bytes[Call::kTwrwCross] = 4.0 * cross_floats;
      p.calls |= 1u << Call::kTwrwCross;
    }
  }
  return p;
}

double ShardCost::shard_bytes(const TableSpec& t, int64_t rows, int64_t cols) const {
  if (t.placement == TablePlacement::host) return 0.0;
  if (t.placement == TablePlacement::host_cached)
    return rows > 0 ? static_cast<double>(cache_slots(t.cache_load_factor, rows) * cols * 4) : 0.0;
  return static_cast<double>(shard_weight_bytes(t, rows, cols) +
                             shard_optimizer_state_bytes(spec_.optimizer.type, t, rows, cols));
}

double ShardCost::host(const TableSpec& t, const Shard& s,
                       const std::vector<std::pair<int, double>>& ids_per_feature) const {
  if (t.placement == TablePlacement::device) return 0.0;
  const CacheEstimate e = estimate_cache(spec_, t, s, ids_per_feature);
  const bool prefetched = t.prefetch_pipeline && t.placement == TablePlacement::host_cached &&
                          spec_.pipeline != PipelineKind::base;
  const HostTraffic h = host_traffic(t, spec_.optimizer.type, s.num_cols, e, prefetched);
  double ns = 0;
  if (std::llround(h.lookup_h2d) > 0) ns += static_cast<double>(host_link_ns(h.lookup_h2d, 0.0, hw_));
  if (std::llround(h.update_h2d) + std::llround(h.update_d2h) > 0)
    ns += static_cast<double>(host_link_ns(h.update_h2d, h.update_d2h, hw_));
  return ns;
}

}  // namespace embedscope::engine::planner_detail
