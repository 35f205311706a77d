// The plan in force at a measured step of a live-rebalanced session
// (embedscope/engine/rebalance/plan_in_force.h).
#include "embedscope/engine/rebalance/plan_in_force.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "embedscope/engine/sharding/plan_json.h"
#include "embedscope/sessions/analysis/plan_at_step.h"

namespace embedscope::engine::rebalance {

ShardingPlan plan_at_step(const WorkloadSpec& spec, const ShardingPlan& start,
                          const std::vector<sessions::ShardRecord>& initial,
                          const std::vector<sessions::PlanChangeRecord>& changes, int64_t step, const std::string& origin) {
  std::set<int32_t> changed;
  for (const auto& c : changes)
    if (c.step <= step) {
      if (c.table < 0 || static_cast<size_t>(c.table) >= start.tables.size())
        throw SpecError(fmt::format("{}: plan_changes: step {}: table {} is not in the session's workload", origin, c.step,
                                    c.table));
      changed.insert(c.table);
    }
  if (changed.empty()) return start;
  ShardingPlan plan = start;
  for (int32_t t : changed) plan.tables[static_cast<size_t>(t)].shards.clear();
  const std::string where = fmt::format("{}: plan in force from step {}", origin, plan_first_step(changes, step));
  for (const sessions::ShardRecord& s : sessions::shards_at(initial, changes, step)) {
    if (!changed.count(s.table)) continue;
    TablePlan& tp = plan.tables[static_cast<size_t>(s.table)];
    tp.type = sharding_type_from_string(s.sharding_type, where);
    tp.node = (tp.type == ShardingType::table_row_wise || tp.type == ShardingType::table_column_wise) && start.local_world_size > 0
                  ? s.rank / start.local_world_size
                  : -1;
    tp.shards.push_back({s.rank, s.row_offset, s.num_rows, s.col_offset, s.num_cols});
  }
  validate_plan(spec, plan, where);
  return plan;
}

int64_t plan_first_step(const std::vector<sessions::PlanChangeRecord>& changes, int64_t step) {
  int64_t first = 0;
  for (const auto& c : changes)
    if (c.step <= step) first = std::max(first, c.step);
  return first;
}

}  // namespace embedscope::engine::rebalance
