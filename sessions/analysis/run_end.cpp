#include "embedscope/sessions/analysis/run_end.h"

#include <algorithm>

#include <fmt/format.h>

namespace embedscope::sessions {

std::string ended_text(const RunStats& st) {
  if (st.ended == "complete" || st.ended.empty()) return st.ended;
  const int64_t last = st.critical_paths.empty() ? -1 : st.critical_paths.back().step;
  if (st.steps == 0)
    return last >= 0 ? fmt::format("{} in step {}; no step completed", st.ended, last)
                     : fmt::format("{} before its first measured step", st.ended);
  const std::string after = fmt::format("after {} measured step{}", st.steps, st.steps == 1 ? "" : "s");
  int64_t completed = -1;  // the last step with a window
  for (const auto& t : st.per_step) completed = std::max(completed, t.step);
  return last > completed ? fmt::format("{} in step {}, {}", st.ended, last, after) : fmt::format("{} {}", st.ended, after);
}

}  // namespace embedscope::sessions
