#include "embedscope/sessions/analysis/step_windows.h"

#include <algorithm>
#include <map>
#include <utility>

namespace embedscope::sessions {

std::optional<int64_t> step_start(const std::vector<StepMetric>& steps, int64_t step) {
  std::optional<int64_t> start;
  for (const auto& s : steps)
    if (s.step == step && (!start || s.start_ns < *start)) start = s.start_ns;
  return start;
}

std::vector<int64_t> align_offsets(const std::vector<std::vector<StepMetric>>& per_session, int64_t step) {
  std::vector<int64_t> out;
  for (const auto& steps : per_session) {
    std::optional<int64_t> start = step_start(steps, step);
    if (!start && !steps.empty())
      start = step_start(steps, std::min_element(steps.begin(), steps.end(), [](const auto& a, const auto& b) {
                                  return a.step < b.step;
                                })->step);
    out.push_back(start.value_or(0));
  }
  return out;
}

std::vector<StepMetric> step_windows(const SessionReader& session) {
  std::vector<StepMetric> steps = session.steps();
  if (session.status() == "complete") return steps;
  // a run that ended inside a step (out of memory, crashed, cancelled) recorded no window for it
  std::map<std::pair<int64_t, int32_t>, std::pair<int64_t, int64_t>> spans;  // (step, rank) -> [start, end)
  for (const auto& o : session.all_ops()) {
    auto [it, fresh] = spans.try_emplace({o.step, o.rank}, o.start_ns, o.end_ns);
    if (!fresh) it->second = {std::min(it->second.first, o.start_ns), std::max(it->second.second, o.end_ns)};
  }
  for (const auto& s : steps) spans.erase({s.step, s.rank});
  for (const auto& [key, span] : spans) {
    StepMetric m;
    m.step = key.first;
    m.rank = key.second;
    m.start_ns = span.first;
    m.end_ns = span.second;
    steps.push_back(m);
  }
  return steps;
}

}  // namespace embedscope::sessions
