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
// hashed tables with uniform ids, whose rows are hash buckets; Zipf ids hashed into a table of
// Hs buckets keep their skew: a shard of R buckets gets, at its k-th hottest bucket, the mass of
// the ranks ((k - 1) s, k s] over s = Hs / R (the hot ids each in a bucket of their own, spread
// over the shards by the hash) plus an even share of the ranks beyond Hs, (Z(N) - Z(Hs)) / Hs
// (Z the Zipf mass up to a rank, N num_embeddings); before cache43 such tables were taken as
// uniform, which put the lfu hit rate of tester42 F27's t_c at 6.9 % against 19.2 % measured).
// A batch of n ids names row k with probability
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
// Both are the steady state by default; C >= R gives no misses there, and placement host misses
// every distinct row (U).
// Cold start (estimate_cache's `lookups_before` b >= 0: the lookup after b lookups of the shard
// since the run began with an empty cache). After b batches the expected distinct rows seen are
// D(b) = sum_k (1 - (1 - q_k)^b) (the occupancy / coupon-collector expectation: P. Flajolet,
// D. Gardy, L. Thimonier, "Birthday paradox, coupon collectors, caching algorithms and
// self-organizing search", Discrete Applied Mathematics 39(3), 1992, which derives LRU's misses
// from it), and Che's T is exactly the b where D(b) = C: the expected number of batches until
// the cache is full (CacheEstimate::fill_batches). Until then nothing is evicted, so a row of
// batch b hits iff an earlier batch named it:
//   hits_b = sum_k q_k (1 - (1 - q_k)^min(b, T))
// (lru: for b >= T this is the steady state above; lfu: the fill phase is the same, and from
// b >= T on the steady top-C figure is used: an approximation, LFU's counts take longer to
// settle). C >= R: T is infinite and hits_b = sum_k q_k (1 - (1 - q_k)^b) -> U. Example (uniform,
// R = 1,000, C = 250, n = 32): q = 0.0315, T = ln(0.75) / ln(1 - q) = 8.98 batches; batch 0
// misses all U = 31.51, batch 1 misses U (1 - q) = 30.52, batch 4 misses U (1 - q)^4 = 27.72,
// batch >= 9 misses 0.75 U = 23.63 (tests/engine/cost/host_link_cost_test.cpp ColdStartByHand).
// The rows are summed in groups: ranks 1..1024 one by one, then geometric groups of ratio 1.02
// (each at its mean p).
// Example (uniform ids, steady state): every q_k = q, T solves R (1 - (1 - q)^T) = C, so hits = U C / R and
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
  /// of the misses, those that evict a cached row (host_cached; dirty, so written back): the
  /// misses in the steady state; in the cold start's fill phase max(0, D(b) + misses - C) capped
  /// at the misses (none until the distinct rows seen reach the C slots).
  double evictions = 0;
  /// Che's characteristic time T: batches (lookups of the shard) until a cache that started
  /// empty is full, D(T) = C (see the cold start above); +infinity when every row fits (C >= R);
  /// 0 for placement host and device.
  double fill_batches = 0;
  /// of the misses, those the cache cannot keep (host_cached): a batch's H = distinct_rows -
  /// misses hits are locked, so at most C - H misses find a slot (min(misses, max(0, C - H))
  /// inserted); under lfu in the steady state none (every miss is rarer than the top-C rows it
  /// would evict, model/host_cache.h). They are read for the lookup only, and the update reads
  /// them again and writes them straight back (host_traffic). Example (tester42 F27's t_b: 100
  /// rows, 20 slots, about 62 distinct rows a batch of which about 12 hit): 8 inserted, 42 not.
  double not_inserted = 0;
  /// C: the cache's slots on the shard (host_cached; 0 for host and device)
  double slots = 0;
  /// S: rows that two consecutive batches both name, sum over rows of q^2 (q: the chance a
  /// batch names the row); what a prefetched batch shares with the batch in flight
  double shared_rows = 0;
  /// misses / distinct_rows in [0, 1]; 0 without rows.
  double miss_rate() const { return distinct_rows > 0 ? misses / distinct_rows : 0.0; }
};

/// One batch's expected host traffic of a shard in host memory (program/step_program.h's
/// host_fetch, host_update and prefetch ops; the simulated executor's load counters), bytes:
///   lookup_h2d   the rows the lookup misses, misses x 4 cols (when `prefetched`, those the
///                prefetch of the step before could not move, below)
///   prefetch_h2d `prefetched` (host_cached): the misses the prefetch moves, p x 4 cols, where
///                p = clamp(C - U - (H - min(S, H)), 0, misses) with H = U - misses its
///                cached rows: a prefetch takes only slots that neither the batch in flight (its
///                U rows locked) nor the prefetched batch's own cached rows outside them (pinned)
///                hold, so it needs room for about two batches (model/host_cache.h
///                HostRowStore::prefetch); the rest the lookup fetches. Example: C 25, U 18,
///                misses 15, S 2: H 3, p = clamp(25 - 18 - 1) = 6, the lookup 9 rows.
///   update_h2d   the optimizer state rows, U x state bytes a row; host: + U x 4 cols;
///                host_cached: + not_inserted x 4 cols (the rows not in the cache, read in place;
///                when `prefetched`, at most the misses the prefetch did not move)
///   update_d2h   the same state rows back; host: + U x 4 cols; host_cached: the dirty rows the
///                inserted misses evicted, evictions x 4 cols (every cached row was updated after
///                its lookup; evictions = inserted misses in the steady state, fewer while the
///                cache fills), + the not_inserted rows written back
/// The rows a step fetches (the load counters' rows_fetched, model/host_cache.h: FBGEMM's unique
/// misses) are (lookup_h2d + prefetch_h2d) / (4 cols): the update's reads are bytes only.
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
/// feature index out of range. `lookups_before` < 0 (the default): the steady state (what the
/// planner's per-step estimate uses, planner/stats.h); >= 0: the cold start, the lookup that
/// follows `lookups_before` lookups of the shard since the run started with an empty cache (the
/// simulated executor's early steps).
CacheEstimate estimate_cache(const WorkloadSpec& spec, const TableSpec& t, const Shard& s,
                             const std::vector<std::pair<int, double>>& ids_per_feature, int64_t lookups_before = -1);

/// The expected distinct rows U among one batch's ids on the shard rows [s.row_offset,
/// s.row_offset + s.num_rows) of table t, wherever the rows are placed: estimate_cache's
/// distinct_rows (sum over the shard's rows of 1 - (1 - p_k)^n, its per-row probabilities p_k
/// from each feature's id distribution), which estimate_cache leaves 0 for a device table. The
/// rows the embedding backward updates (program/step_program.h HostWork::update_row_lines).
/// Example: uniform ids, 4 rows, 8 ids: 4 x (1 - (3/4)^8) = 3.60. Same cost and errors as
/// estimate_cache.
double shard_distinct_rows(const WorkloadSpec& spec, const TableSpec& t, const Shard& s,
                           const std::vector<std::pair<int, double>>& ids_per_feature);

}  // namespace embedscope::engine
