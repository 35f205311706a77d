// The sharding plan over time from the first plan and the live rebalances' changes
// (analysis/plan_over_time.h).
#include "embedscope/sessions/analysis/plan_over_time.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

std::vector<PlanSpan> plan_over_time(const std::vector<ShardRecord>& initial, const std::vector<PlanChangeRecord>& changes,
                                     int64_t last_step) {
  std::vector<PlanSpan> done;
  std::map<int32_t, std::vector<PlanSpan>> open;  // per table: the spans still running, by shard
  for (const ShardRecord& s : initial)
    open[s.table].push_back({s.table, s.table_name, s.sharding_type, s.shard_index, s.rank, s.row_offset, s.num_rows, 0, 0,
                             s.col_offset, s.num_cols});
  for (auto& [t, spans] : open)
    std::sort(spans.begin(), spans.end(), [](const PlanSpan& a, const PlanSpan& b) { return a.shard_index < b.shard_index; });
  std::vector<PlanChangeRecord> sorted = changes;
  std::stable_sort(sorted.begin(), sorted.end(), [](const PlanChangeRecord& a, const PlanChangeRecord& b) {
    return std::tie(a.step, a.table, a.shard_index) < std::tie(b.step, b.table, b.shard_index);
  });
  auto close = [&](PlanSpan s, int64_t step) {
    s.last_step = step - 1;
    if (s.last_step >= s.first_step) done.push_back(std::move(s));
  };
  for (size_t i = 0; i < sorted.size();) {
    const PlanChangeRecord& c = sorted[i];
    size_t j = i;
    while (j < sorted.size() && sorted[j].step == c.step && sorted[j].table == c.table) ++j;
    std::vector<PlanSpan>& spans = open[c.table];
    int64_t rows = 0;
    for (const PlanSpan& s : spans) rows = std::max(rows, s.row_offset + s.num_rows);
    if (c.from_type != c.to_type) {  // every span of the table ends; one per change row starts
      for (PlanSpan& s : spans) close(std::move(s), c.step);
      spans.clear();
      for (size_t k = i; k < j; ++k) {
        const PlanChangeRecord& x = sorted[k];
        spans.push_back({x.table, x.table_name, x.to_type, x.shard_index, x.to_rank, x.row_offset,
                         x.num_rows < 0 ? rows : x.num_rows, x.step, 0, x.col_offset, x.num_cols});
      }
    } else {
      for (size_t k = i; k < j; ++k) {
        const PlanChangeRecord& x = sorted[k];
        for (PlanSpan& s : spans) {
          if (s.shard_index != x.shard_index) continue;
          close(s, x.step);
          s.rank = x.to_rank;
          s.first_step = x.step;
        }
      }
    }
    i = j;
  }
  for (auto& [t, spans] : open)
    for (PlanSpan& s : spans) close(std::move(s), last_step + 1);
  std::stable_sort(done.begin(), done.end(), [](const PlanSpan& a, const PlanSpan& b) {
    return std::tie(a.table, a.first_step, a.shard_index) < std::tie(b.table, b.first_step, b.shard_index);
  });
  return done;
}

std::vector<PlanSpan> plan_over_time(const SessionReader& session) {
  int64_t last = 0;
  for (const StepMetric& s : session.steps()) last = std::max(last, s.step);
  return plan_over_time(session.shards(), session.plan_changes(), last);
}

}  // namespace embedscope::sessions
