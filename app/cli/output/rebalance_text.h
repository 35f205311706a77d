#pragma once
// The live rebalances of a run (issue 17) as `embedscope run` and `embedscope stats` print them:
// one line per rebalance (what moved, or what was refused and why), the plan changes under it,
// and the JSON objects of `run --json` / `stats --json`. Sources: sessions::RebalanceRecord
// (table `rebalances`), sessions::PlanChangeRecord (table `plan_changes`), FORMAT.md.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/rebalance_effect.h"
#include "embedscope/sessions/model/events.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::cli {

/// One line for a rebalance, without a newline: after which step, what it did, the max/mean of
/// the balanced load ("ids", or "lookup ns" when `lookup_time`) before -> predicted (and observed
/// after, when steps followed), the time it took and its trigger. A firing that moved nothing
/// says why: every move refused (the first refusal's reason, and how many more), or nothing worth
/// moving. A move the run ended in says it failed. Examples:
///   "rebalance after step 2: 3 table(s) moved, 46.9 KiB, ids max/mean 3.56 -> 1.04 predicted, 1.06 observed; 12.3 ms (every 3 steps)"
///   "rebalance after step 2: refused, nothing moved (ids max/mean 3.56; 4.1 ms; every 3 steps): table \"h0\" (15.6 KiB) from rank 3 to rank 0: exceeds max_bytes_per_move: ... (+2 more)"
std::string rebalance_line(const sessions::RebalanceRecord& r, bool lookup_time);

/// What `run` prints of a run's live rebalances under its figures, and `launch` under its ranks
/// (read back from the merged session): "rebalances   N firing(s) of the live policy\n", then
/// per rebalance "  " + rebalance_line + "\n" and its plan_change_lines. "" without rebalances.
std::string rebalances_block(const std::vector<sessions::RebalanceRecord>& rebalances,
                             const std::vector<sessions::PlanChangeRecord>& changes, bool lookup_time);

/// Whether the session's workload (metadata workload_json) balanced lookup ns:
/// `rebalance.balance` "lookup_time". False for "ids", no policy, or no readable workload.
bool balances_lookup_time(const sessions::SessionReader& session);

/// The plan changes of the rebalance after `step` (those of step + 1), one indented line each
/// ("        t1: rank 0 -> rank 1 (40 B)", "        t3: table_wise -> row_wise, rank 0 -> shards on
/// ranks 0,1,2,3 (48.0 KiB)", "        t3: row_wise -> table_wise on rank 2 (...)"), with a newline.
std::string plan_change_lines(const std::vector<sessions::PlanChangeRecord>& changes, int64_t step);

/// The refusals of a record as `[{"table": "h0", "reason": "table \"h0\" ..."}, ...]`
/// (sessions::refused_moves: the stored "; "-joined text of any schema, cut per move; table ""
/// -> null). [] when nothing was refused.
nlohmann::json refused_json(const std::string& refused);

/// A rebalance as `run --json` and `stats --json` give it: step, reason, moves, bytes_moved,
/// window_steps, imbalance_before, imbalance_predicted, imbalance_after (null when no step
/// followed), after_steps, duration_ns (ns), refused (refused_json), outcome.
nlohmann::json rebalance_json(const sessions::RebalanceRecord& r);

/// The `stats` block of the live rebalances: a header, then per rebalance its step, moves,
/// bytes, max/mean before / predicted / observed after, median step time before and after, time
/// spent, steps to amortise ("-" when nothing moved or the steps did not get faster), reason;
/// under it each refusal on its own line and its plan changes. "" without rebalances.
std::string rebalances_text(const std::vector<sessions::RebalanceEffect>& effects,
                            const std::vector<sessions::PlanChangeRecord>& changes);

}  // namespace embedscope::cli
