#include "embedscope/sessions/analysis/run_end.h"

#include <algorithm>

#include <fmt/format.h>

namespace embedscope::sessions {

std::string ended_text(const RunStats& st) { return ended_text(st, st.ended); }

std::string ended_text(const RunStats& st, const std::string& ended) {
  if (ended == "complete" || ended.empty()) return ended;
  const int64_t last = st.critical_paths.empty() ? -1 : st.critical_paths.back().step;
  if (st.steps == 0)
    return last >= 0 ? fmt::format("{} in step {}; no step completed", ended, last)
                     : fmt::format("{} before its first measured step", ended);
  const std::string after = fmt::format("after {} measured step{}", st.steps, st.steps == 1 ? "" : "s");
  int64_t completed = -1;  // the last step with a window
  for (const auto& t : st.per_step) completed = std::max(completed, t.step);
  return last > completed ? fmt::format("{} in step {}, {}", ended, last, after) : fmt::format("{} {}", ended, after);
}

std::string exported_run_text(const RunStats& st) {
  if (st.exported_run_ended.empty()) return "";
  std::string setup = fmt::format("{} pipeline", st.pipeline.empty() ? std::string("base") : st.pipeline);
  if (st.exported_run_planned_steps > 0)
    setup += fmt::format(", {} planned step{}", st.exported_run_planned_steps, st.exported_run_planned_steps == 1 ? "" : "s");
  return fmt::format("the exported run ({}) ended {}{}; this import completed", setup, ended_text(st, st.exported_run_ended),
                     st.exported_run_end_message.empty() ? "" : ": " + st.exported_run_end_message);
}

}  // namespace embedscope::sessions
