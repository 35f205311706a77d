#pragma once
// The numbers behind the load view, without Qt: a chosen load metric per rank x table shard
// and per rank x step (measured steps), the imbalance (max / mean over ranks) of each step and
// the total per rank.

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/sessions/store/session.h"

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

/// A table of the session's workload (metadata workload_json).
struct WorkloadTable {
  std::string name;
  int64_t num_embeddings = 0;
};
/// The workload's tables in index order; empty when workload_json is missing or unreadable.
std::vector<WorkloadTable> workload_tables(const sessions::SessionReader& session);

/// How the ids of one table fell over its rows (session table id_histogram, summed over ranks
/// and measured steps), with the table's shards from the sharding plan.
struct RowHistogram {
  std::string table;
  std::string sharding_type;  ///< as in sharding_plan_json ("row_wise", ...); "" when unknown
  int64_t num_rows = 0;
  std::vector<int64_t> row_begin;  ///< per bucket (every bucket, empty ones too): its first row
  std::vector<int64_t> row_end;    ///< one past its last row
  std::vector<int64_t> ids;        ///< ids that fell into it
  struct ShardRows {
    int32_t rank = 0;
    int64_t row_offset = 0, num_rows = 0;
  };
  std::vector<ShardRows> shards;  ///< the table's shards in plan order
  /// The rows where one shard's row range ends and another's begins (row_wise and
  /// table_row_wise tables; empty for the others, whose shards all span every row).
  std::vector<int64_t> boundaries() const;
};

/// The row histogram of table `table` (an index into workload_tables). Throws
/// std::out_of_range naming the table index when the workload has no such table. A session
/// without the id_histogram table (schema < 3) gives empty buckets: check
/// SessionReader::has_id_histogram first.
RowHistogram row_histogram(const sessions::SessionReader& session, int table);

}  // namespace embedscope::ui
