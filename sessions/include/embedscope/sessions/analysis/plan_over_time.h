#pragma once
// The sharding plan over time (issue 17): which rank held each shard of each table at which
// measured steps, from the plan a run started with (table `shards`) and the changes of its live
// rebalances (table `plan_changes`). For the load view's "plan over time" and `stats`.

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/sessions/model/events.h"

namespace embedscope::sessions {

class SessionReader;

/// One shard on one rank over consecutive measured steps first_step..last_step (inclusive).
struct PlanSpan {
  int32_t table = 0;
  std::string table_name;
  std::string sharding_type;  ///< "table_wise", "row_wise", ... (TorchRec spelling)
  int32_t shard_index = 0;
  int32_t rank = 0;
  int64_t row_offset = 0, num_rows = 0;
  int64_t first_step = 0, last_step = 0;
  /// the shard's columns; num_cols -1: all the table's (a change row of a file before schema 9)
  int64_t col_offset = 0, num_cols = -1;
};

/// The spans of `initial` (the run's first plan) changed by `changes` (any order; applied by
/// step, then table, then shard), ending at measured step `last_step`. A table_wise move ends
/// the shard's span at step - 1 and starts one on to_rank; a change of type (from_type !=
/// to_type) ends every span of the table and starts one per change row (its shard, rank and
/// rows; num_rows -1, as in version 6 files, is the table's rows). Spans come in table order,
/// then first_step, then shard_index. Example: t0 on rank 0 and a move to rank 1 at step 2 of
/// steps 0..5: {t0 rank 0 steps 0..1}, {t0 rank 1 steps 2..5}. Without changes: one span per
/// shard over 0..last_step.
std::vector<PlanSpan> plan_over_time(const std::vector<ShardRecord>& initial, const std::vector<PlanChangeRecord>& changes,
                                     int64_t last_step);
/// The same from a session: its shards, plan_changes and last measured step (the largest
/// `steps.step`; 0 when none ran).
std::vector<PlanSpan> plan_over_time(const SessionReader& session);

}  // namespace embedscope::sessions
