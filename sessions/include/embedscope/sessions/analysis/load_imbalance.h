#pragma once
// Load aggregation and imbalance: a chosen load metric (session table load_counters) per
// rank x table shard and per rank x measured step, the imbalance (max / mean over ranks) of
// each step and the total per rank. What the workbench's load view draws; Qt-free.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

/// The load counter aggregated (LoadCounter fields ids, unique_ids, bytes_in, bytes_out,
/// lookup_ns).
/// The last five are the transfers of tables placed in host memory (load_counters schema 11:
/// cache_hits, cache_misses, rows_fetched, bytes_h2d, bytes_d2h; 0 for tables on the device).
enum class LoadMetric { ids_looked_up, unique_ids, bytes_in, bytes_out, lookup_time, cache_hits, cache_misses, rows_fetched, bytes_h2d, bytes_d2h };
/// "ids looked up", "rows updated (distinct per step)", "bytes in", "bytes out", "lookup time (ns)", "cache hits",
/// "cache misses", "rows fetched (host)", "bytes host to device", "bytes device to host"; "?" otherwise.
const char* to_string(LoadMetric m);

/// The aggregated load of a session; matrices are row-major by rank.
struct LoadData {
  int ranks = 0;                    ///< max(world_size metadata, largest rank + 1)
  /// "table #shard", one per column of by_shard, by (table, shard); "table hot rows": the ranks'
  /// hot-row replica (kHotRowReplicaShard); "table #0 (table_wise to step 1)": a shard index that a
  /// live rebalance's type change gave to other rows, as it was up to that step (sessions/analysis/
  /// plan_at_step.h; a move keeps its column: tester49 F3)
  std::vector<std::string> shards;
  std::vector<std::string> shard_tables;  ///< the table name of each column of by_shard
  std::vector<double> by_shard;     ///< ranks x shards (0 where a rank holds no such shard: see held)
  /// ranks x shards: 1 where the rank has a load counter of the shard in a measured step (it held
  /// the shard then, even if no id reached it), 0 where it holds no such shard (tester41 #18: a
  /// heatmap cell "no shard here" is not "0 ids")
  std::vector<uint8_t> held;
  std::vector<int64_t> steps;       ///< counted measured steps (>= 0), ascending, one per column of by_step
  std::vector<double> by_step;      ///< ranks x steps (summed over shards)
  /// per step: max / mean over ranks (1 = balanced); NaN for a step in which no rank has any of
  /// the metric (0 of 0: no ratio, never a balanced 1 - a semi_sync run's last drain step looks
  /// nothing up), which for lookup_time is a lookup time not recorded (recorded_max_over_mean)
  std::vector<double> imbalance;
  /// The pipeline's drain steps the session holds, left out of every figure here as `stats`
  /// leaves them out (RunStats::drain_steps of analyze_step_times, the same rule): the first of
  /// them and how many (0: none). A semi_sync run of 10 measured steps: 8 and 2.
  int64_t drain_first = 0, drain_steps = 0;
  /// false when the metric is lookup_time and no counter holds a lookup time (lm_embedding sessions
  /// before tester47 F16): "not recorded", as `embedscope stats` says, never a balanced 1
  bool recorded = true;
  std::vector<double> per_rank;     ///< summed over shards and measured steps
  double at_shard(int rank, size_t shard) const { return by_shard[static_cast<size_t>(rank) * shards.size() + shard]; }
  bool holds(int rank, size_t shard) const { return held[static_cast<size_t>(rank) * shards.size() + shard] != 0; }
  double at_step(int rank, size_t step) const { return by_step[static_cast<size_t>(rank) * steps.size() + step]; }
};

/// Aggregates the session's load counters over the steps `stats` counts: the measured steps
/// without the pipeline's drain steps (LoadData::drain_steps); warm-up steps < 0 and counters of
/// a negative rank are ignored. Table names come from the session's workload (metadata
/// workload_json); a table without a name, or an unreadable workload, reads "table N".
/// Throws SessionError on an unreadable file.
LoadData load_data(const SessionReader& session, LoadMetric metric);

/// Max / mean of per-rank lookup times (ns), or nullopt when none is > 0: a lookup time that was
/// not recorded (every load counter's lookup_ns 0: lm_embedding sessions before tester47 F16,
/// sessions without load counters), never a balanced 1. The one rule of `embedscope stats`
/// (RunStats::lookup_time_max_over_mean), compare and the workbench's Load view. E.g. {0, 0} ->
/// nullopt; {3, 1} -> 1.5; {0, 2} -> 2.
std::optional<double> recorded_max_over_mean(const std::vector<double>& ns);

/// A table of the session's workload (metadata workload_json).
struct WorkloadTable {
  std::string name;
  int64_t num_embeddings = 0;  ///< rows stored: the workload's hash_size for a hashed table, else num_embeddings
};
/// The workload's tables in index order; empty when workload_json is missing or unreadable.
std::vector<WorkloadTable> workload_tables(const SessionReader& session);

}  // namespace embedscope::sessions
