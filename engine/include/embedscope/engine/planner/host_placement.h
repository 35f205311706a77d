#pragma once
// A warning for a hot table in host memory that the greedy planner puts beside other tables: the
// planner places a host / host_cached table by its device bytes (its cache, or nothing), so a hot
// table cached to save device memory is placed last, onto whichever rank has room - with another
// table - and that rank then looks up the hot table's ids and its neighbour's (tester63b F6: a
// host_cached table of 40% of the lookups on rank 2 with t2: ids max/mean 1.60 -> 2.00). `plan`
// and `run` print it before they start; the plan is not changed.

#include <string>
#include <vector>

#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// One warning per table of `spec` placed in host memory (placement host / host_cached) that
/// `plan` (plan_sharding's greedy plan: call it for that plan only) shards table_wise on a rank
/// the workload did not give (no "ranks" override), where that rank holds another table too and
/// the table's expected lookups (expected_lookups_per_rank) exceed a rank's mean share (1 /
/// world of all lookups). Example (hot 40% of the lookups, 4 ranks):
///   "table \"hot\" (placement host_cached) is placed by its device bytes (its 31.5 KiB cache)
///   and shares rank 2 with \"t2\": it has 40.0% of the expected lookups, more than a rank's mean
///   share 25.0%, and rank 2 50.0% (ids max/mean 2.00 predicted); the planner does not count a
///   table's lookups. Shard it row_wise (a sharding override) to spread its lookups, or give the
///   other tables ranks away from rank 2".
/// No errors (a plan of another shape gives no warning).
std::vector<std::string> host_table_placement_warnings(const WorkloadSpec& spec, const ShardingPlan& plan);

}  // namespace embedscope::engine
