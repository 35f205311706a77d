#pragma once
// The planner search's shard-level cost model (planner/search.h, "Time estimate of a shard"):
// the pre-ranking figures of one shard (prerank.h Perf), its device bytes and its host-link time,
// which the search's proposers and LPT partitioner (search.cpp) sum per rank.

#include <cstdint>
#include <utility>
#include <vector>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"
#include "planner/prerank.h"

namespace embedscope::engine::planner_detail {

/// Shard-level cost model (search.h, "Time estimate of a shard"): each table's rows at their
/// stored size (row_bytes of its data_type, quant/row_codec.h) and its optimizer state (in its
/// optimizer_state_type), over a world of `world` ranks of `hw` with spec.batch_size samples each.
/// spec and hw outlive it.
class ShardCost {
 public:
  ShardCost(const WorkloadSpec& spec, const HardwareProfile& hw, int world)
      : spec_(spec), hw_(hw), W_(world), B_(static_cast<double>(spec.batch_size)) {}

  /// A shard of `cols` columns of table t that serves `lookups` ids per step and sends
  /// `out_floats` pooled floats per step in its output dist (the same back in its gradient dist)
  /// in call `out` (kCalls: none, a data_parallel replica), receiving `in_ids` ids of `features`
  /// features in the input dist (search.h, "Pre-ranking estimate"); twrw's cross-node call
  /// carries `cross_floats`. Compute without kernel launches (the score counts them per op,
  /// prerank.h): ns (compute: bytes over HBM x the TBE efficiencies; comms: bytes x (W-1)/W over
  /// the intra-node bus bandwidth), bytes per call.
  Perf perf(const TableSpec& t, double lookups, int64_t cols, double out_floats, double in_ids, Call out = Call::kCalls,
            double features = 0, double cross_floats = 0) const;
  /// Device bytes of a shard of rows x cols of table t: its stored rows and its optimizer state;
  /// a table in host memory: its device cache only (host_cached, model/host_cache.h), or none.
  double shard_bytes(const TableSpec& t, int64_t rows, int64_t cols) const;
  /// The host link of shard s of table t (placement host / host_cached) that serves
  /// `ids_per_feature` (spec feature, ids a step), ns: the cache model's expected misses
  /// (cost/cache_model.h estimate_cache, host_traffic) timed by host_link_ns (cost/cost_model.h),
  /// the formula the simulated executor times the program's host_fetch and host_update with, one
  /// copy each (the lookup's fetch is left out for a prefetch_pipeline table: it runs under the
  /// dense part of the step before). 0 for a device table.
  double host(const TableSpec& t, const Shard& s, const std::vector<std::pair<int, double>>& ids_per_feature) const;
  /// Samples per rank per step (spec.batch_size).
  double batch() const { return B_; }

 private:
  const WorkloadSpec& spec_;
  const HardwareProfile& hw_;
  int W_;
  double B_;
};

}  // namespace embedscope::engine::planner_detail
