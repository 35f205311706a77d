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
/// one row, which an even num_rows / num_embeddings share misses); otherwise shard_id_share.
/// Clamped to [0, 1]; 0 for an empty range. Cost O(log 4,096) after the first call for a
/// feature's permutation on a thread (O(4,096 log 4,096), cached per thread).
/// Example: criteo_kaggle's 3-row table t_cat_8 (alpha 1.15, seed 1) split 1/1/1 over rows:
/// 0.577, 0.163, 0.260 (even: 1/3 each).
double realized_id_share(const WorkloadSpec& spec, const TableSpec& t, int feature, int64_t row_offset,
                         int64_t num_rows);

}  // namespace embedscope::engine
