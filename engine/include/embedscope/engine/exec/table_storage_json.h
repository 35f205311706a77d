#pragma once
// RunResult::table_storage as JSON: one description for `embedscope run --json`'s "tables" and
// the session metadata table_storage_json (sessions/schema/FORMAT.md).

#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/run.h"

namespace embedscope::engine {

/// An array with one object per table: {"table", "data_type", "stochastic_rounding" (bool),
/// "optimizer_state_type",
/// "weight_bytes": [per rank, bytes],
/// "optimizer_state_bytes": [per rank, bytes], "master_copy_bytes", "max_abs_error",
/// "relative_error", "hash_size", "low_rank_dim", "hash_collisions",
/// "hash_collisions_per_rank": [per rank: the collisions of that rank's own batches], "placement", "cache_policy" (lru |
/// lfu; null unless placement host_cached),
/// "cache_load_factor", "host_bytes": [per rank, bytes], "cache_bytes": [per rank, bytes],
/// "cache_hits", "cache_misses", "rows_fetched", "bytes_h2d", "bytes_d2h" (measured steps, all
/// ranks), "prefetch_pipeline" (bool), "prefetched_rows", "prefetch_bytes_h2d" (of rows_fetched and
/// bytes_h2d, what the prefetches moved), "hot_rows", "hot_ids", "hot_all_reduce_bytes"} (fields
/// of RunResult::TableStorage). `measured` false (a simulated run: nothing stored, no batch
/// hashed): "max_abs_error", "relative_error", "hash_collisions", "hash_collisions_per_rank" and "hot_ids" are null, the
/// bytes and the cache figures are the plan's and the cache model's expectation.
nlohmann::json table_storage_json(const std::vector<RunResult::TableStorage>& tables, bool measured = true);

/// RunResult::held_out as JSON, for `embedscope run --json`'s "held_out" and the session metadata
/// held_out_json (FORMAT.md): {"batches", "samples", "positives", "first_iteration", "loss",
/// "auc" (null when one class is absent)} when evaluated, {"skipped": held_out_skipped} when not,
/// null when no evaluation was asked for (held_out_skipped empty too).
nlohmann::json held_out_json(const RunResult& result);

}  // namespace embedscope::engine
