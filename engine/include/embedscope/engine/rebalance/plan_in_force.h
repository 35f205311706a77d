#pragma once
// The engine's sharding plan in force at a measured step of a session whose run rebalanced
// live (issue 17): the plan the run started with (metadata sharding_plan_json, table `shards`)
// with the session's `plan_changes` rows applied up to that step (sessions::shards_at), so that
// `embedscope rebalance` charges each step's load counters to the ranks that served it.

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/model/events.h"

namespace embedscope::engine::rebalance {

/// The plan serving measured step `step`: `start` (the run's first plan, as its session's
/// sharding_plan_json reads) with every table that a change of step <= `step` names rebuilt
/// from sessions::shards_at(initial, changes, step) (its sharding type, shards in shard order
/// with their rank, rows and columns; node: for table_row_wise / table_column_wise the first
/// shard's rank / local_world_size, else -1); the other tables as in `start`. `initial` is the
/// session's table `shards` (the same plan as `start`). Without changes up to `step`: `start`.
/// The result is validated (validate_plan); throws SpecError "<origin>: plan in force from step
/// N: ..." when the changes do not give a plan the workload can run (a damaged file), or when a
/// change names a table the workload lacks.
/// Example: t0 table_wise on rank 3, a change {step 3, t0, shard 0, 3 -> 0}: plan_at_step(.., 2)
/// has t0 on rank 3, plan_at_step(.., 3) and later on rank 0.
ShardingPlan plan_at_step(const WorkloadSpec& spec, const ShardingPlan& start,
                          const std::vector<sessions::ShardRecord>& initial,
                          const std::vector<sessions::PlanChangeRecord>& changes, int64_t step, const std::string& origin);

/// The first measured step of the plan serving `step`: the largest change step <= `step`, or 0
/// when no change precedes it (the run's first plan). Example: changes at steps 3 and 6:
/// 2 -> 0, 3 -> 3, 9 -> 6.
int64_t plan_first_step(const std::vector<sessions::PlanChangeRecord>& changes, int64_t step);

}  // namespace embedscope::engine::rebalance
