#include "importers/common/lane_checks.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

namespace embedscope::sessions::importers {

void sort_and_check_overlaps(std::vector<OpEvent>& ops, ImportProblems& problems, const std::string& source) {
  std::sort(ops.begin(), ops.end(), [](const OpEvent& a, const OpEvent& b) {
    return std::tie(a.lane, a.start_ns, b.end_ns) < std::tie(b.lane, b.start_ns, a.end_ns);
  });
  std::vector<int64_t> open;
  Lane cur{};
  int64_t partial = 0;
  const OpEvent* first = nullptr;
  for (const OpEvent& o : ops) {
    if (o.lane != cur) open.clear(), cur = o.lane;
    while (!open.empty() && open.back() <= o.start_ns) open.pop_back();
    if (!open.empty() && o.end_ns > open.back()) {
      if (!partial) first = &o;
      ++partial;
    }
    open.push_back(o.end_ns);
  }
  if (partial)
    problems.add("overlapping_spans", Severity::error, {source, -1},
                 fmt::format("spans on one lane that overlap without nesting, kept (busy time counts their union); "
                             "first: rank {} lane {} '{}' at {} ns",
                             first->rank, static_cast<int>(first->lane), first->name, first->start_ns),
                 partial);
}

void count_kernel_before_launch(ImportProblems& problems, const std::string& source, int32_t rank,
                                const std::string& name, int64_t kernel_start, int64_t launch_start) {
  if (kernel_start >= launch_start) return;
  problems.add_with("kernel_before_launch", Severity::error, {source, -1}, [&] {
    return fmt::format("rank {}: GPU op '{}' starts {} ns before the host call that launched it (the trace's GPU and "
                       "host clocks disagree); kept as recorded", rank, name, launch_start - kernel_start);
  });
}

}  // namespace embedscope::sessions::importers
