#pragma once
// The sharding plan of a session at any measured step (issue 17): the plan the run started with
// (table `shards`) with its live rebalances' changes (table `plan_changes`) applied up to that
// step - sessions/schema/FORMAT.md. Shared by the workbench's summary (app/ui/core/plan_history.h)
// and `embedscope rebalance` (engine/rebalance/plan_in_force.h), which must both charge a step's
// load counters to the placement that served it.

#include <cstdint>
#include <vector>

#include "embedscope/sessions/model/events.h"

namespace embedscope::sessions {

/// The shards serving measured step `step`: `initial` (the run's first plan) with every change
/// of step <= `step` applied, by step then table then shard (plan_changes' order; `changes` may
/// come in any order). A table_wise move (from_type == to_type) puts the shard `shard_index` of
/// its table on to_rank; a change of type (from_type != to_type) replaces all the table's shards
/// with that step's change rows of the table (their shard, rank, rows and columns; num_rows /
/// num_cols -1 (older files) or 0 are the table's own, from `initial`; sharding_type = to_type,
/// node -1). Each table's shards in shard order, tables in `initial`'s order. planned_bytes of
/// a shard a change made is -1; a change naming a table `initial` lacks is skipped. Warm-up
/// steps (< 0) and step 0 give `initial` unless a change names them. Example: t0 on rank 0, a
/// change {step 2, t0, 0 -> 1}: shards_at(.., 1) has t0 on rank 0, shards_at(.., 2) on rank 1.
std::vector<ShardRecord> shards_at(const std::vector<ShardRecord>& initial, const std::vector<PlanChangeRecord>& changes,
                                   int64_t step);

}  // namespace embedscope::sessions
