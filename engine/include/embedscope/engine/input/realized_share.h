#pragma once
// The share of a table's ids that falls in a range of its rows as a run realizes it: a permuted
// Zipf feature's hottest rows sit where its seeded permutation puts them (input.h
// feature_row_permutation), not spread evenly as shard_id_share's expectation over
// permutations has it (input/id_share.h). One formula for the planner's expected lookups
// (planner/stats.h expected_lookups_per_rank) and the memory estimate's replay
// (planner/memory_replay.h SlotShares).

#include <cstdint>

#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// The expected share in [0, 1] of table t's ids from feature `feature` (an index into
/// spec.features; t is the table serving it) that falls in stored rows [row_offset, row_offset +
/// num_rows). For a table without hashing whose feature draws permuted Zipf ids: the Zipf mass
/// of the 4,096 hottest ranks that the feature's permutation puts in the range, exactly
/// ((k + 1)^-alpha / H(n, alpha) for rank k, as input.h ZipfSampler draws them), plus the rest of
/// the mass spread evenly over the table's other rows (alpha 1.15 over 4,000 rows puts 14% on
/// one row, which an even num_rows / num_embeddings share misses). For a hashed table
/// (hash_size > 0): the ids as BatchGenerator draws them (Zipf rank k is id k, or the
/// permutation's row of k; uniform ids 1/num_embeddings each), each in its bucket
/// hashed_row(id, hash_size) (input/hashing.h), the 65,536 likeliest ids exactly and the rest's
/// mass spread evenly over the buckets (its expectation over the hash; for Zipf 1.05 over 10^6
/// ids that rest is 14% of the mass, in tens of thousands of ids a range, so a range's error is
/// far below 1% of its share); a hot id lands in one bucket, so a row range's share keeps the
/// skew that num_rows / hash_size (shard_id_share) averages away. Example: Zipf 1.05 over 2,000
/// ids (permute false) hashed into 200 rows, 50-row blocks: 0.1831 / 0.3085 / 0.1475 / 0.3609
/// of the ids (even: 0.25 each). Otherwise shard_id_share.
/// Clamped to [0, 1]; 0 for an empty range. Cost O(log 4,096) after the first call for a
/// feature's permutation on a thread (O(4,096 log 4,096), cached per thread).
/// Example: criteo_kaggle's 3-row table t_cat_8 (alpha 1.15, seed 1) split 1/1/1 over rows:
/// 0.577, 0.163, 0.260 (even: 1/3 each).
double realized_id_share(const WorkloadSpec& spec, const TableSpec& t, int feature, int64_t row_offset,
                         int64_t num_rows);

}  // namespace embedscope::engine
