// The communication a rebalance proposal adds, by the planner's cost model (rebalance/comm_cost.h).
#include "embedscope/engine/rebalance/comm_cost.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/program/step_program.h"

namespace embedscope::engine::rebalance {

PlanComm plan_comm(const WorkloadSpec& spec, const ShardingPlan& plan) {
  PlanComm c;
  const PlanStats st = plan_stats(spec, plan, planning_profile(spec));
  int64_t fwd = 0, bwd = 0;
  for (const RankStats& r : st.ranks) {
    fwd = std::max(fwd, r.fwd_comms_ns);
    bwd = std::max(bwd, r.bwd_comms_ns);
    c.compute_ns += r.fwd_compute_ns + r.bwd_compute_ns;
    c.lookups += r.lookups;
  }
  c.fwd_comms_ns = fwd;
  c.bwd_comms_ns = bwd;
  c.comm_ns = fwd + bwd;
  const int64_t iteration = steady_iteration(spec);
  for (int r = 0; r < plan.world_size; ++r) {
    const StepProgram prog = build_step_program(spec, plan, r, iteration);
    for (const ProgramOp& op : prog.ops)
      for (const CollectiveCall& call : op.collectives) c.bytes_sent += call.bytes_sent();
  }
  return c;
}

CommChange comm_change(const WorkloadSpec& spec, const ShardingPlan& current, const ShardingPlan& proposed) {
  CommChange c;
  c.before = plan_comm(spec, current);
  c.after = plan_comm(spec, proposed);
  c.profile = spec.devices.hardware.empty() ? kDefaultPlanningProfile : spec.devices.hardware;
  c.network_emulated = spec.network.limited();
  return c;
}

bool apply_comm_rule(Proposal& p, const WorkloadSpec& spec, const ShardingPlan& current, int64_t window_steps,
                     bool by_time) {
  if (!comm_time_applies(spec) || !p.worth_it() || window_steps < 1 || p.load_before.empty()) return false;
  const CommChange c = comm_change(spec, current, p.plan);
  if (c.added_ns() <= 0) return false;
  const int64_t max_before = *std::max_element(p.load_before.begin(), p.load_before.end());
  const int64_t max_after = *std::max_element(p.load_after.begin(), p.load_after.end());
  const double fall = static_cast<double>(max_before - max_after) / static_cast<double>(window_steps);
  const double ns_per_row = c.before.lookups > 0 ? static_cast<double>(c.before.compute_ns) / c.before.lookups : 0.0;
  const double saved = by_time ? fall : fall * ns_per_row;
  const double change = predicted_step_change_ns(c, saved);
  if (change < 0) return false;
  RefusedMove r;
  r.table = !p.changes.empty() ? p.changes.front().table : p.moves.front().table;
  r.from = !p.changes.empty() ? p.changes.front().from : p.moves.front().from;
  r.to = !p.changes.empty() ? (p.changes.front().to_type == ShardingType::column_wise ? -2 : -1) : p.moves.front().to;
  r.bytes = p.bytes_moved;
  r.cause = "slower";
  const std::string& name = spec.tables[static_cast<size_t>(r.table)].name;
  const size_t n = p.moves.size() + p.changes.size();
  const std::string what =
      !p.changes.empty()
          ? (p.changes.front().to_type == ShardingType::table_wise
                 ? fmt::format("table \"{}\" ({}) {} back to table_wise on rank {}", name, format_bytes(p.changes.front().bytes),
                               to_string(p.changes.front().from_type), p.changes.front().to)
                 : fmt::format("table \"{}\" ({}) from rank {} to {} over {} ranks", name,
                               format_bytes(p.changes.front().bytes), p.changes.front().from,
                               to_string(p.changes.front().to_type),
                               p.plan.tables[static_cast<size_t>(r.table)].shards.size()))
          : fmt::format("table \"{}\" ({}) from rank {} to rank {}", name, format_bytes(p.moves.front().bytes),
                        p.moves.front().from, p.moves.front().to);
  r.reason = fmt::format("{}{}: the moves (max/mean {:.2f} -> {:.2f}) add {:.2f} ms of communication a step ({}{} sent, "
                         "planner cost model, profile {}{}) against {:.2f} ms of embedding work saved: predicted "
                         "{:.2f} ms a step slower; not made",
                         what, n > 1 ? fmt::format(" and {} other move(s)", n - 1) : std::string(),
                         p.imbalance_before, p.imbalance_after, 1e-6 * static_cast<double>(c.added_ns()),
                         c.added_bytes() < 0 ? "-" : "+", format_bytes(std::abs(c.added_bytes())), c.profile, c.network_emulated ? ", the session's emulated network" : "",
                         1e-6 * saved, 1e-6 * change);
  p.plan = current;
  p.moves.clear();
  p.changes.clear();
  p.load_after = p.load_before;
  p.imbalance_after = p.imbalance_before;
  p.bytes_moved = 0;
  p.refused.push_back(std::move(r));
  return true;
}

}  // namespace embedscope::engine::rebalance
