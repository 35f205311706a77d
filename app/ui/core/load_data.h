#pragma once
// The row histogram behind the load view, without Qt. The load per rank x shard and per step,
// and its imbalance, are a sessions analysis (embedscope/sessions/analysis/load_imbalance.h).

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/load_imbalance.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::ui {

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
  std::vector<ShardRows> shards;  ///< the table's shards in plan order: the plan in force at the run's end
  /// A table a live rebalance re-sharded: how it started and from which step the shards above
  /// hold, e.g. "from step 3 (a live rebalance); table_wise on rank(s) 0 before"; "" otherwise.
  std::string plan_note;
  /// The rows where one shard's row range ends and another's begins (row_wise,
  /// table_row_wise and vocab_parallel tables; empty for the others, whose shards all span
  /// every row).
  std::vector<int64_t> boundaries() const;
  /// Bucket b's ids per row: ids[b] / (row_end[b] - row_begin[b]); 0 for a bucket of no rows.
  /// What the Load page plots: 1000 rows in 256 buckets are buckets of 3 and 4 rows, so uniform
  /// ids gave the 3-row buckets 25% fewer ids - periodic dips that were not in the data (tester50
  /// F11). Example: 12 ids in rows 0..3 -> 3.0; 9 ids in rows 4..6 -> 3.0.
  double ids_per_row(size_t b) const;
  /// The bucket with the most ids per row (the first on a tie); 0 without buckets.
  size_t hottest_bucket() const;
};

/// The row histogram of table `table` (an index into sessions::workload_tables), its shards those
/// of the plan at the run's end: the last live rebalance's plan_changes rows of the table (one per
/// shard of its new plan, plan_change_records) where one changed it, else the starting plan's
/// (table `shards`), with plan_note saying how it started. Throws
/// std::out_of_range naming the table index when the workload has no such table. A session
/// without the id_histogram table (schema < 3) gives empty buckets: check
/// SessionReader::has_id_histogram first.
RowHistogram row_histogram(const sessions::SessionReader& session, int table);

}  // namespace embedscope::ui
