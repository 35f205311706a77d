#pragma once
// The expected cache behaviour of a host_cached shard (model/host_cache.h) per batch, for the
// step program's host-link ops (program/step_program.h: host_fetch, prefetch, host_update) and
// so for the simulated executor's times (cost_model.h host_copy_ns).
//
// Model. The shard's R rows are ranked by how often a batch names them; p_k is the share of
// the shard's ids that row k takes (rank-aligned over the shard's features, weighted by their
// ids: a feature's Zipf(alpha) over the shard's ranks - over ranks row_offset + 1 .. row_offset
// + R of the table for Zipf ids with permute = false, over 1 .. R otherwise, the hot rows a
// permutation spreads being a Zipf sample of the same shape - or uniform for uniform ids and for
// hashed tables, whose rows are hash buckets). A batch of n ids names row k with probability
// q_k = 1 - (1 - p_k)^n, so its expected distinct rows are U = sum q_k.
//   lru: Che's approximation (H. Che, Y. Tung, Z. Wang, "Hierarchical Web caching systems:
//     modeling, design and experimental results", IEEE JSAC 20(7), 2002; shown accurate for
//     LRU under independent requests by C. Fricker, P. Robert, J. Roberts, "A versatile and
//     accurate approximation for LRU cache performance", ITC 2012), with batches as the unit of
//     time (the cache ticks once a lookup): the characteristic time T (in batches) solves
//     sum_k (1 - (1 - q_k)^T) = C for a cache of C rows, and a row of a batch hits when an
//     earlier batch of the last T named it: hits = sum_k q_k (1 - (1 - q_k)^T).
//   lfu: the steady state of a perfect LFU under independent requests: the C most named rows
//     stay cached, hits = sum_{k <= C} q_k.
// Both are the steady state (a run's first batches miss more: the cache starts empty), C >= R
// gives no misses, and placement host misses every distinct row (U). The rows are summed in
// groups: ranks 1..1024 one by one, then geometric groups of ratio 1.02 (each at its mean p).
// Example (uniform ids): every q_k = q, T solves R (1 - (1 - q)^T) = C, so hits = U C / R and
// misses = U (1 - C / R): R = 1,000, C = 250, n = 32 -> U = 1,000 (1 - 0.999^32) = 31.51,
// misses 23.63.

#include <cstdint>
#include <utility>
#include <vector>

#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// One batch's expected lookups of a shard.
struct CacheEstimate {
  double ids = 0;            ///< ids a batch sends the shard (n)
  double distinct_rows = 0;  ///< U: distinct rows a batch names
  double misses = 0;         ///< of those, not in the cache (host: all of them)
  /// misses / distinct_rows in [0, 1]; 0 without rows.
  double miss_rate() const { return distinct_rows > 0 ? misses / distinct_rows : 0.0; }
};

/// One batch's expected host traffic of a shard in host memory (program/step_program.h's
/// host_fetch, host_update and prefetch ops; the simulated executor's load counters), bytes:
///   lookup_h2d   the rows the lookup misses, misses x 4 cols (0 when `prefetched`: the
///                prefetch of the step before moved them, prefetch_h2d)
///   update_h2d   the optimizer state rows, U x state bytes a row; host: + U x 4 cols
///   update_d2h   the same state rows back; host: + U x 4 cols; host_cached: the dirty rows the
///                misses evicted, misses x 4 cols (every cached row was updated after its lookup)
struct HostTraffic {
  double lookup_h2d = 0, prefetch_h2d = 0, update_h2d = 0, update_d2h = 0;
};
/// host_traffic of a shard of `cols` columns of table t with estimate `e` under optimizer
/// `opt`; `prefetched`: its batch was prefetched (TableSpec::prefetch_pipeline, a batch whose
/// ids came a step ahead), so its misses are prefetch_h2d, not lookup_h2d.
HostTraffic host_traffic(const TableSpec& t, OptimizerType opt, int64_t cols, const CacheEstimate& e, bool prefetched);

/// The expected lookups of one batch on the shard rows [s.row_offset, s.row_offset +
/// s.num_rows) of table t (placement host or host_cached; device: misses 0), given each
/// feature's ids a batch sends it: `ids_per_feature` = (index into spec.features, expected ids).
/// Cost O(features x groups), about 1,300 groups for a million rows. Throws SpecError for a
/// feature index out of range.
CacheEstimate estimate_cache(const WorkloadSpec& spec, const TableSpec& t, const Shard& s,
                             const std::vector<std::pair<int, double>>& ids_per_feature);

}  // namespace embedscope::engine
