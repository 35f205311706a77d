#pragma once
// The numbers behind the load view, without Qt: a chosen load metric per rank x table shard
// and per rank x step (measured steps), the imbalance (max / mean over ranks) of each step and
// the total per rank.

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/sessions/session.h"

namespace embedscope::ui {

enum class LoadMetric { ids_looked_up, unique_ids, bytes_in, bytes_out, lookup_time };
const char* to_string(LoadMetric m);

struct LoadData {
  int ranks = 0;
  std::vector<std::string> shards;  ///< "table #shard", one per column of by_shard
  std::vector<double> by_shard;     ///< ranks x shards, row-major by rank (0 where a rank holds no such shard)
  std::vector<int64_t> steps;       ///< measured steps, one per column of by_step
  std::vector<double> by_step;      ///< ranks x steps (summed over shards)
  std::vector<double> imbalance;    ///< per step: max / mean over ranks (1 = balanced)
  std::vector<double> per_rank;     ///< summed over shards and measured steps
  double at_shard(int rank, size_t shard) const { return by_shard[static_cast<size_t>(rank) * shards.size() + shard]; }
  double at_step(int rank, size_t step) const { return by_step[static_cast<size_t>(rank) * steps.size() + step]; }
};

/// Aggregates the session's load counters (measured steps only). Table names come from the
/// session's workload (metadata workload_json); an unreadable workload falls back to "table N".
LoadData load_data(const sessions::SessionReader& session, LoadMetric metric);

}  // namespace embedscope::ui
