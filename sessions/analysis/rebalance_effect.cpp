// The step time before and after each live rebalance (analysis/rebalance_effect.h).
#include "embedscope/sessions/analysis/rebalance_effect.h"

#include <algorithm>
#include <map>
#include <iterator>

#include "embedscope/sessions/model/units.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

int64_t median_ns(std::vector<int64_t> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

std::vector<RebalanceEffect> rebalance_effects(const std::vector<RebalanceRecord>& rebalances,
                                               const std::vector<StepMetric>& steps) {
  std::map<int64_t, int64_t> step_ns;  // the slowest rank's time per measured step
  for (const StepMetric& s : steps)
    if (s.step >= 0) step_ns[s.step] = std::max(step_ns[s.step], s.end_ns - s.start_ns);
  auto between = [&](int64_t first, int64_t last) {
    std::vector<int64_t> v;
    for (auto it = step_ns.lower_bound(first); it != step_ns.end() && it->first <= last; ++it) v.push_back(it->second);
    return v;
  };
  // the steps each plan ran: from the step after one rebalance to the step of the next
  std::vector<int64_t> at;
  for (const RebalanceRecord& r : rebalances) at.push_back(r.step);
  std::sort(at.begin(), at.end());
  const int64_t last_step = step_ns.empty() ? -1 : step_ns.rbegin()->first;
  std::vector<RebalanceEffect> out;
  for (const RebalanceRecord& r : rebalances) {
    RebalanceEffect e;
    e.rebalance = r;
    const auto it = std::lower_bound(at.begin(), at.end(), r.step);  // this one (the first of equal steps)
    e.before_first = it == at.begin() ? 0 : *std::prev(it) + 1;
    e.before_last = r.step;
    const auto next = std::upper_bound(at.begin(), at.end(), r.step);
    e.after_first = r.step + 1;
    e.after_last = next == at.end() ? last_step : *next;
    e.step_p50_before_ns = median_ns(between(e.before_first, e.before_last));
    // a record with no step after it (after_steps 0: the run ended there) has no median after
    e.step_p50_after_ns = r.after_steps > 0 ? median_ns(between(e.after_first, e.after_last)) : -1;
    // only a move that happened can pay for itself: after a firing that moved nothing the same
    // plan ran before and after, and a faster median is noise
    const bool moved = r.moves > 0 && r.outcome == "complete";
    if (moved && e.step_p50_before_ns >= 0 && e.step_p50_after_ns >= 0 && e.step_p50_after_ns < e.step_p50_before_ns)
      e.amortised_after_steps =
          static_cast<double>(r.duration_ns) / static_cast<double>(e.step_p50_before_ns - e.step_p50_after_ns);
    out.push_back(std::move(e));
  }
  return out;
}

std::string rebalance_slowdown_text(const RebalanceEffect& e) {
  const RebalanceRecord& r = e.rebalance;
  if (r.moves <= 0 || r.outcome != "complete" || e.step_p50_before_ns < 0 || e.step_p50_after_ns < 0 ||
      e.step_p50_after_ns <= e.step_p50_before_ns)
    return "";
  return "the measured step got slower after the rebalance (" + format_duration(e.step_p50_before_ns) + " -> " +
         format_duration(e.step_p50_after_ns) + ")";
}

std::vector<RefusedMoveText> refused_moves(const std::string& refused) {
  std::vector<RefusedMoveText> out;
  if (refused.empty()) return out;
  static const std::string kSep = "; table \"";
  size_t at = 0;
  while (at <= refused.size()) {
    size_t next = refused.find(kSep, at);
    if (next == std::string::npos) next = refused.size();
    RefusedMoveText m;
    m.reason = refused.substr(at, next - at);
    if (m.reason.rfind("table \"", 0) == 0)
      if (const size_t close = m.reason.find('"', 7); close != std::string::npos) m.table = m.reason.substr(7, close - 7);
    out.push_back(std::move(m));
    if (next == refused.size()) break;
    at = next + 2;  // past "; ", at `table "`
  }
  // a text in another form than the policy's: one refusal, whole (no piece named a table)
  if (std::none_of(out.begin(), out.end(), [](const RefusedMoveText& m) { return !m.table.empty(); }) && out.size() > 1)
    return {{"", refused}};
  return out;
}

std::vector<RebalanceEffect> rebalance_effects(const SessionReader& session) {
  const auto rebalances = session.rebalances();
  if (rebalances.empty()) return {};
  return rebalance_effects(rebalances, session.steps());
}

}  // namespace embedscope::sessions
