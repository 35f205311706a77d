#pragma once
// The expected share of a table's ids that falls in a range of its rows, from the workload's
// id distributions (input/source.h generates them): what a row-wise shard serves. Used by the
// StepProgram's expected figures (program_sink.h), the planner's lookups and time estimates
// (planner/stats.h, planner/search.h) and the simulated executor's load counters.

#include <cstdint>

#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// sum_{k=1..n} k^-alpha (the generalized harmonic number H(n, alpha)), n >= 0, alpha > 0:
/// exact for the first 4,096 terms, then the midpoint integral of x^-alpha from 4096.5 to n + 0.5
/// (relative error < 1e-9 there). zipf_mass(3, 1) = 1 + 1/2 + 1/3.
double zipf_mass(int64_t n, double alpha);

/// The expected share in [0, 1] of a table's ids that falls in rows [row_offset, row_offset +
/// num_rows) for the distribution of feature `f`: uniform ids, and Zipf ids with permute = true
/// (hot rows spread over the rows by a seeded permutation), num_rows / num_embeddings; Zipf with
/// permute = false (the hottest id is row 0) the Zipf mass of the range,
/// sum_{k=lo+1..hi} k^-alpha / sum_{k=1..N} k^-alpha (zipf_mass). 0 for an empty range.
double row_range_share(const FeatureSpec& f, int64_t num_embeddings, int64_t row_offset, int64_t num_rows);

/// The expected share in [0, 1] of table t's ids (feature f's) that falls in stored rows
/// [row_offset, row_offset + num_rows): row_range_share over num_embeddings for a table without
/// hashing; for a hashed table (hash_size > 0) the rows are xxHash64 buckets, which spread any
/// id distribution evenly on average over hash functions, so num_rows / hash_size (the run's
/// share under the project's fixed hash, where each hot id sits in one bucket, is
/// realized_id_share in input/realized_share.h).
/// Example: hash_size 1,000, rows [0, 250): 0.25 whatever f's ids are.
double shard_id_share(const TableSpec& t, const FeatureSpec& f, int64_t row_offset, int64_t num_rows);

}  // namespace embedscope::engine
