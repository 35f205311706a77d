#pragma once
// The live rebalances of a session as the workbench shows them (issue 17), without Qt: a marker
// on the timeline per rebalance (where and what it says) and the rows of the load view's "plan
// over time" (sessions/analysis/plan_over_time.h).

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/plan_over_time.h"
#include "embedscope/sessions/analysis/rebalance_effect.h"
#include "embedscope/sessions/model/events.h"

namespace embedscope::sessions {
class SessionReader;
}

namespace embedscope::ui {

/// One rebalance on the timeline: a line at t_ns (its start on the session clock, between
/// measured steps `step` and `step + 1`), labelled "rebalance", with `text` as its tooltip.
struct RebalanceMark {
  int64_t t_ns = 0;
  int64_t step = 0;
  std::string text;
};

/// The tooltip of a rebalance: the step and reason, the max/mean of the balanced load before,
/// predicted and observed after (ids, or "lookup ns" when the workload's `rebalance.balance` was
/// "lookup_time": `lookup_time` true), the tables moved and bytes, the time spent, each plan change of step + 1
/// ("t1: rank 0 -> rank 1", "t3: table_wise -> row_wise over ranks 0,1") and the refusals. E.g.
///   rebalance after step 1: every 2 steps
///   ids max/mean 2.00 before, 1.10 predicted, 1.25 observed after
///   2 table(s) changed, 1.6 KiB moved in 1.20 ms
///   t1: rank 0 -> rank 1
std::string rebalance_text(const sessions::RebalanceRecord& r, const std::vector<sessions::PlanChangeRecord>& changes,
                           bool lookup_time = false);

/// The marks of every rebalance of `session` (none for files before schema 6), by step; the
/// balanced load is read from the workload_json's `rebalance.balance` (ids when absent).
std::vector<RebalanceMark> rebalance_marks(const sessions::SessionReader& session);

/// A line on a session's live rebalances for the Compare view, whose figures span the whole run
/// (both plans): each firing that moved tables, "after step 2: 3 table(s) moved, ids max/mean 3.91
/// -> 1.01 observed after" ("-> 1.10 predicted" when no step followed; "lookup ns" with balance
/// lookup_time), and how many moved nothing; "" for a session without rebalances. E.g.
/// "live rebalance after step 2: 3 table(s) moved, ids max/mean 3.91 -> 1.01 observed after",
/// "... (and 1 firing(s) that moved nothing)", "live rebalancing: 2 firing(s), none moved a table".
std::string rebalances_brief(const std::vector<sessions::RebalanceRecord>& rebalances, bool lookup_time);
/// The median step time before and after each rebalance that moved tables and has measured steps
/// on both sides (sessions/analysis/rebalance_effect.h), to follow the brief: "; median step after
/// step 2 159.06 ms -> 143.26 ms, after step 6 ..." ("" when there is none).
std::string rebalance_step_times(const std::vector<sessions::RebalanceEffect>& effects);
/// rebalances_brief of a session (its rebalances; the balanced load from its workload's policy)
/// followed by rebalance_step_times of its steps: the line the summary and Compare show. "" without
/// rebalances. Throws SessionError.
std::string rebalances_brief(const sessions::SessionReader& session);

/// One row of the plan over time: "t0", "table_wise", "0", "rank 1", "rows 0-9", "steps 2-5".
struct PlanRow {
  std::string table, sharding_type, shard, rank, rows, steps;
};
/// The rows of plan_over_time(session), in its order.
std::vector<PlanRow> plan_rows(const std::vector<sessions::PlanSpan>& spans);

}  // namespace embedscope::ui
