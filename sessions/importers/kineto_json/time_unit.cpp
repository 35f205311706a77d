// time_unit.h: ns traces found by their durations and converted to the format's us.

#include "importers/kineto_json/time_unit.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace embedscope::sessions::importers::kineto {

namespace {
double median_us(std::vector<int64_t>& ns) {
  if (ns.empty()) return 0;
  auto mid = ns.begin() + static_cast<std::ptrdiff_t>(ns.size() / 2);
  std::nth_element(ns.begin(), mid, ns.end());
  return static_cast<double>(*mid) / 1e3;
}
}  // namespace

TimeUnitEvidence time_unit_evidence(const RankTrace& tr, bool declared_ns) {
  TimeUnitEvidence ev;
  ev.declared_ns = declared_ns;
  std::vector<int64_t> kernels, steps;
  for (const Event& e : tr.events)
    if (e.kind == EventKind::kernel && !e.unfinished) kernels.push_back(e.end - e.ts);
  for (const Step& s : tr.steps) steps.push_back(s.end - s.ts);
  ev.kernels = kernels.size();
  ev.steps = steps.size();
  ev.median_kernel_us = median_us(kernels);
  ev.median_step_us = median_us(steps);
  const bool long_kernels = ev.kernels >= 10 && ev.median_kernel_us >= 1e3;
  const bool long_steps = ev.steps > 0 && ev.median_step_us >= 60e6;
  if (ev.kernels >= 10)
    ev.ns = (long_kernels && long_steps) || (ev.steps == 0 && ev.median_kernel_us >= 5e3);
  else
    ev.ns = ev.steps > 0 && ev.median_step_us >= 1e9;
  return ev;
}

void apply_time_unit(RankTrace& tr, const std::string& path, bool declared_ns, ImportProblems& problems) {
  const TimeUnitEvidence ev = time_unit_evidence(tr, declared_ns);
  std::string seen;
  if (ev.kernels > 0) seen += fmt::format("median kernel {:.3f} us over {} kernels", ev.median_kernel_us, ev.kernels);
  if (ev.steps > 0)
    seen += fmt::format("{}median ProfilerStep {:.3f} s over {} steps", seen.empty() ? "" : ", ", ev.median_step_us / 1e6,
                        ev.steps);
  if (!ev.ns) {
    if (declared_ns)
      problems.add("display_time_unit_ns", Severity::info, {path, -1},
                   fmt::format("{}: \"displayTimeUnit\" is \"ns\" but the durations read as microseconds ({}): ts and "
                               "dur kept as microseconds (the Chrome trace format's unit; displayTimeUnit only sets "
                               "how a viewer shows them)",
                               path, seen.empty() ? "no kernel or step to tell by" : seen));
    return;
  }
  for (Event& e : tr.events) e.ts /= 1000, e.end /= 1000;
  for (Step& s : tr.steps) s.ts /= 1000, s.end /= 1000;
  problems.add("ts_in_ns", Severity::error, {path, -1},
               fmt::format("{}: ts and dur are nanoseconds, not the Chrome trace format's microseconds ({}{}: as "
                           "microseconds 1000x what a kernel or a training step lasts), so they were divided by "
                           "1000; if they really were microseconds, the trace's kernels are this long and the "
                           "figures are 1000x too short",
                           path, seen, declared_ns ? ", and \"displayTimeUnit\": \"ns\"" : ""));
}

}  // namespace embedscope::sessions::importers::kineto
