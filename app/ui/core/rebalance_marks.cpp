// The live rebalances as the workbench shows them (core/rebalance_marks.h).
#include "core/rebalance_marks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/rebalance_effect.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/units.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::ui {

std::string rebalance_text(const sessions::RebalanceRecord& r, const std::vector<sessions::PlanChangeRecord>& changes,
                           bool lookup_time) {
  std::string out = fmt::format("rebalance after step {}: {}\n", r.step, r.reason);
  out += fmt::format("{} max/mean {:.2f} before, {:.2f} predicted, {} observed after\n", lookup_time ? "lookup ns" : "ids",
                     r.imbalance_before, r.imbalance_predicted, r.imbalance_after < 0 ? std::string("not") : fmt::format("{:.2f}", r.imbalance_after));
  out += fmt::format("{} table(s) changed, {} moved in {}", r.moves, sessions::format_bytes(r.bytes_moved),
                     sessions::format_duration(r.duration_ns));
  for (size_t i = 0; i < changes.size(); ++i) {
    const auto& c = changes[i];
    if (c.step != r.step + 1) continue;
    if (c.from_type == c.to_type) {
      out += fmt::format("\n{}: rank {} -> rank {}", c.table_name, c.from_rank, c.to_rank);
      continue;
    }
    if (i > 0 && changes[i - 1].step == c.step && changes[i - 1].table == c.table) continue;  // one line a table
    if (c.to_type == "table_wise") {  // back from row_wise / column_wise
      out += fmt::format("\n{}: {} -> table_wise on rank {}", c.table_name, c.from_type, c.to_rank);
      continue;
    }
    std::vector<int32_t> ranks;
    std::vector<std::string> cols;  // column_wise: each shard's columns
    for (size_t k = i; k < changes.size() && changes[k].step == c.step && changes[k].table == c.table; ++k) {
      ranks.push_back(changes[k].to_rank);
      if (changes[k].num_cols > 0)
        cols.push_back(fmt::format("{}-{}", changes[k].col_offset, changes[k].col_offset + changes[k].num_cols - 1));
    }
    out += fmt::format("\n{}: {} -> {} over ranks {}", c.table_name, c.from_type, c.to_type, fmt::join(ranks, ","));
    if (c.to_type == "column_wise" && !cols.empty()) out += fmt::format(" (columns {})", fmt::join(cols, ", "));
  }
  for (const auto& m : sessions::refused_moves(r.refused)) out += "\nrefused: " + m.reason;  // one line a move
  if (r.outcome != "complete") out += "\n" + r.outcome;
  return out;
}

namespace {
// Whether the session's workload balanced measured lookup ns (`rebalance.balance` "lookup_time")
// rather than ids.
bool balances_lookup_time(const sessions::SessionReader& session) {
  const auto workload = nlohmann::json::parse(session.meta(sessions::meta::kWorkloadJson, ""), nullptr, false);
  const nlohmann::json* policy = workload.is_object() && workload.contains("rebalance") ? &workload["rebalance"] : nullptr;
  return policy && policy->is_object() && policy->value("balance", std::string("ids")) == "lookup_time";
}
}  // namespace

std::string rebalances_brief(const std::vector<sessions::RebalanceRecord>& rebalances, bool lookup_time) {
  std::vector<std::string> moved;
  size_t idle = 0;
  for (const auto& r : rebalances) {
    if (r.moves <= 0 || r.outcome != "complete") {
      ++idle;
      continue;
    }
    moved.push_back(fmt::format("after step {}: {} table(s) moved, {} max/mean {:.2f} -> {}", r.step, r.moves,
                                lookup_time ? "lookup ns" : "ids", r.imbalance_before,
                                r.imbalance_after >= 0 ? fmt::format("{:.2f} observed after", r.imbalance_after)
                                                       : fmt::format("{:.2f} predicted", r.imbalance_predicted)));
  }
  if (rebalances.empty()) return "";
  if (moved.empty()) return fmt::format("live rebalancing: {} firing(s), none moved a table", idle);
  std::string out = fmt::format("live rebalance{} {}", moved.size() == 1 ? "" : "s", fmt::join(moved, "; "));
  if (idle > 0) out += fmt::format(" (and {} firing(s) that moved nothing)", idle);
  return out;
}

std::string rebalance_step_times(const std::vector<sessions::RebalanceEffect>& effects) {
  std::vector<std::string> steps;
  for (const auto& e : effects)
    if (e.rebalance.moves > 0 && e.step_p50_before_ns >= 0 && e.step_p50_after_ns >= 0)
      steps.push_back(fmt::format("after step {} {} -> {}", e.rebalance.step, sessions::format_duration(e.step_p50_before_ns),
                                  sessions::format_duration(e.step_p50_after_ns)));
  return steps.empty() ? std::string() : fmt::format("; median step {}", fmt::join(steps, ", "));
}

std::string rebalances_brief(const sessions::SessionReader& session) {
  std::string brief = rebalances_brief(session.rebalances(), balances_lookup_time(session));
  if (!brief.empty()) brief += rebalance_step_times(sessions::rebalance_effects(session));
  return brief;
}

std::vector<RebalanceMark> rebalance_marks(const sessions::SessionReader& session) {
  std::vector<RebalanceMark> out;
  const auto changes = session.plan_changes();
  const bool lookup_time = balances_lookup_time(session);
  for (const auto& r : session.rebalances())
    out.push_back({r.start_ns, r.step, rebalance_text(r, changes, lookup_time)});
  return out;
}

std::vector<PlanRow> plan_rows(const std::vector<sessions::PlanSpan>& spans) {
  std::vector<PlanRow> out;
  for (const auto& s : spans)
    out.push_back({s.table_name, s.sharding_type, std::to_string(s.shard_index), fmt::format("rank {}", s.rank),
                   fmt::format("rows {}-{}", s.row_offset, s.row_offset + s.num_rows - 1) +
                       (s.sharding_type == "column_wise" && s.num_cols > 0
                            ? fmt::format(", columns {}-{}", s.col_offset, s.col_offset + s.num_cols - 1)
                            : std::string()),
                   fmt::format("steps {}-{}", s.first_step, s.last_step)});
  return out;
}

}  // namespace embedscope::ui
