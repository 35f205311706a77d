// The live rebalances as `run` and `stats` print them (output/rebalance_text.h).
#include "output/rebalance_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/units.h"
#include "output/output.h"

namespace embedscope::cli {

namespace ss = embedscope::sessions;
using nlohmann::json;

std::string rebalance_line(const ss::RebalanceRecord& r, bool lookup_time) {
  // lookup_time: the robust measure (each shard's or rank's median step x the steps) - before,
  // predicted, observed and the trigger all on it (tester60b F6), named so
  const char* unit = lookup_time ? "lookup ns (median step)" : "ids";
  const std::string head = fmt::format("rebalance after step {}: ", r.step);
  const std::string took = fmt::format("{}; {}", ms(r.duration_ns), r.reason);
  if (r.outcome != "complete") return head + r.outcome + fmt::format(" ({})", took);
  if (r.moves > 0) {
    const std::string after =
        r.imbalance_after < 0 ? std::string() : fmt::format(", {:.2f} observed", r.imbalance_after);
    return head + fmt::format("{} table(s) moved, {}, {} max/mean {:.2f} -> {:.2f} predicted{}; {}", r.moves,
                              ss::format_bytes(r.bytes_moved), unit, r.imbalance_before, r.imbalance_predicted, after,
                              took);
  }
  const auto refused = ss::refused_moves(r.refused);
  if (refused.empty())
    return head + fmt::format("nothing worth moving ({} max/mean {:.2f}; {})", unit, r.imbalance_before, took);
  std::string more = refused.size() > 1 ? fmt::format(" (+{} more)", refused.size() - 1) : std::string();
  return head + fmt::format("refused, nothing moved ({} max/mean {:.2f}; {}): {}{}", unit, r.imbalance_before, took,
                            refused.front().reason, more);
}

std::string rebalances_block(const std::vector<ss::RebalanceRecord>& rebalances,
                             const std::vector<ss::PlanChangeRecord>& changes, bool lookup_time) {
  if (rebalances.empty()) return "";
  std::string out = fmt::format("rebalances   {} firing(s) of the live policy\n", rebalances.size());
  for (const auto& rb : rebalances) out += "  " + rebalance_line(rb, lookup_time) + "\n" + plan_change_lines(changes, rb.step);
  return out;
}

bool balances_lookup_time(const ss::SessionReader& session) {
  const json workload = json::parse(session.meta(ss::meta::kWorkloadJson, ""), nullptr, false);
  const json* policy = workload.is_object() && workload.contains("rebalance") ? &workload["rebalance"] : nullptr;
  return policy && policy->is_object() && policy->value("balance", std::string("ids")) == "lookup_time";
}

std::string plan_change_lines(const std::vector<ss::PlanChangeRecord>& changes, int64_t step) {
  std::string out;
  for (size_t i = 0; i < changes.size(); ++i) {
    const auto& c = changes[i];
    if (c.step != step + 1) continue;
    if (c.from_type == c.to_type) {
      out += fmt::format("        {}: rank {} -> rank {} ({})\n", c.table_name, c.from_rank, c.to_rank, ss::format_bytes(c.bytes));
      continue;
    }
    // a change of type: its shards are consecutive rows of the same step and table
    if (i > 0 && changes[i - 1].step == c.step && changes[i - 1].table == c.table) continue;
    if (c.to_type == "table_wise") {  // back from row_wise / column_wise: one row, the table's new rank
      out += fmt::format("        {}: {} -> table_wise on rank {} ({})\n", c.table_name, c.from_type, c.to_rank,
                         ss::format_bytes(c.bytes));
      continue;
    }
    std::vector<std::string> ranks, cols;  // cols: column_wise shards' columns
    int64_t bytes = 0;
    for (size_t k = i; k < changes.size() && changes[k].step == c.step && changes[k].table == c.table; ++k) {
      ranks.push_back(std::to_string(changes[k].to_rank));
      if (changes[k].num_cols > 0)
        cols.push_back(fmt::format("{}-{}", changes[k].col_offset, changes[k].col_offset + changes[k].num_cols - 1));
      bytes += changes[k].bytes;
    }
    const std::string columns =
        c.to_type == "column_wise" && !cols.empty() ? fmt::format(" (columns {})", fmt::join(cols, ", ")) : "";
    out += fmt::format("        {}: {} -> {}, rank {} -> shards on ranks {}{} ({})\n", c.table_name, c.from_type,
                       c.to_type, c.from_rank, fmt::join(ranks, ","), columns, ss::format_bytes(bytes));
  }
  return out;
}

json refused_json(const std::string& refused) {
  json out = json::array();
  for (const auto& m : ss::refused_moves(refused))
    out.push_back({{"table", m.table.empty() ? json() : json(m.table)}, {"reason", m.reason}});
  return out;
}

json rebalance_json(const ss::RebalanceRecord& r) {
  return {{"step", r.step},
          {"reason", r.reason},
          {"moves", r.moves},
          {"bytes_moved", r.bytes_moved},
          {"window_steps", r.window_steps},
          {"imbalance_before", r.imbalance_before},
          {"imbalance_predicted", r.imbalance_predicted},
          {"imbalance_after", r.imbalance_after < 0 ? json() : json(r.imbalance_after)},
          {"after_steps", r.after_steps},
          {"duration_ns", r.duration_ns},
          {"refused", refused_json(r.refused)},
          {"outcome", r.outcome}};
}

std::string rebalances_text(const std::vector<ss::RebalanceEffect>& effects, const std::vector<ss::PlanChangeRecord>& changes) {
  if (effects.empty()) return "";
  auto t = [](int64_t ns) { return ns < 0 ? std::string("-") : ms(ns); };
  std::string out = "live rebalances (max/mean of the balanced load - ids, or lookup ns with balance lookup_time, each "
                    "shard's or rank's median step x the steps - before, predicted, observed after; median step time "
                    "(nearest-rank p50) over every step the plan before the move ran -> every step after it, to the next "
                    "rebalance or the run's end)\n";
  out += fmt::format("  {:>5} {:>6} {:>10} {:>7} {:>9} {:>7} {:>11} {:>11} {:>11} {:>10}  {}\n", "step", "moves", "bytes",
                     "before", "predicted", "after", "step before", "step after", "time spent", "amortised", "reason");
  for (const auto& e : effects) {
    const auto& r = e.rebalance;
    out += fmt::format("  {:>5} {:>6} {:>10} {:>7.2f} {:>9.2f} {:>7} {:>11} {:>11} {:>11} {:>10}  {}\n", r.step, r.moves,
                       ss::format_bytes(r.bytes_moved), r.imbalance_before, r.imbalance_predicted,
                       r.imbalance_after < 0 ? std::string("-") : fmt::format("{:.2f}", r.imbalance_after),
                       t(e.step_p50_before_ns), t(e.step_p50_after_ns), ms(r.duration_ns),
                       e.amortised_after_steps >= 0 ? fmt::format("{:.1f} steps", e.amortised_after_steps)
                       : ss::rebalance_slowdown_text(e).empty() ? std::string("-")
                                                                : std::string("never"),
                       r.reason);
    // the steps the medians are over (tester60b F1: not the policy's window)
    auto range = [](int64_t a, int64_t b) { return b < a ? std::string("none") : fmt::format("{}..{}", a, b); };
    out += fmt::format("        step times over steps {} before, {} after\n", range(e.before_first, e.before_last),
                       range(e.after_first, e.after_last));
    // a move that made the step slower cannot be amortised: say so rather than "-" (tester42 F8)
    if (const std::string slower = ss::rebalance_slowdown_text(e); !slower.empty()) out += "        " + slower + "\n";
    for (const auto& m : ss::refused_moves(r.refused)) out += "        refused: " + m.reason + "\n";
    if (r.outcome != "complete") out += "        " + r.outcome + "\n";
    out += plan_change_lines(changes, r.step);
  }
  return out + "\n";
}

}  // namespace embedscope::cli
