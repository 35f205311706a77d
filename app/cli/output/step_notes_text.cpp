// `stats` notes on the steps: a slow step's cold start or stall, and a no-step trace's whole-trace
// heading and top ops (step_notes_text.h).

#include "step_notes_text.h"

#include <map>
#include <string>

#include <fmt/format.h>

#include "embedscope/sessions/model/metadata_keys.h"
#include "output.h"

namespace embedscope::cli {

namespace ss = embedscope::sessions;

// A measured step far slower than the others (tester38 #12: a one-process cuda run of tiny,
// warm-up 0, had a 104 ms first step - cuBLAS's first use - against a 4 ms median, and its p99
// said so without a word): the slowest step when it took over 5x the median. A cold start when
// every measured step before it was slow too (over 2x the median; the first measured step is one),
// with the warm-up that keeps first-use costs out; else a stall mid-run (a time.sleep, a data
// loader, another process), with the untraced share of its critical path where that is most of it.
std::string cold_step_text(const ss::SessionReader& session, const ss::RunStats& st) {
  if (st.steps < 3 || st.step_time_ns.p50 <= 0 || st.step_time_ns.max <= 5 * st.step_time_ns.p50) return "";
  std::map<int64_t, int64_t> longest;  // step -> its slowest rank's time
  for (const auto& s : session.steps())
    if (s.step >= 0) longest[s.step] = std::max(longest[s.step], s.end_ns - s.start_ns);
  int64_t step = -1, t = 0, before = 0, fast_before = 0;  // the slowest step; steps before it, of them near the median
  for (const auto& [k, v] : longest)
    if (v > t) step = k, t = v;
  for (const auto& [k, v] : longest) {
    if (k >= step) break;
    ++before;
    if (v <= 2 * st.step_time_ns.p50) ++fast_before;
  }
  const double factor = static_cast<double>(t) / static_cast<double>(st.step_time_ns.p50);
  if (fast_before == 0) {  // the first measured step(s): a cold start
    const std::string recorded = session.meta(ss::meta::kWarmupSteps);
    const std::string warmup =
        !recorded.empty() ? "warmup_steps is " + recorded
        : session.meta("imported") == "1"
            ? std::string("the warm-up before the trace is unknown (a trace does not record the profiler schedule's "
                          "warmup)")
            : std::string("warmup_steps unknown (not recorded in this session)");
    return fmt::format("             step {} took {}, {:.1f}x the median ({}: a cold start); {}: steps before the "
                       "measured ones keep first-use costs (CUDA modules, cuBLAS handles, allocator growth) out\n",
                       step, ms(t), factor, before == 0 ? "the first measured step" : "after only slow steps", warmup);
  }
  int64_t gap = 0;  // untraced time on the step's critical path
  for (const auto& p : st.critical_paths)
    if (p.step == step)
      for (const auto& g : p.segments)
        if (g.kind == ss::PathSegment::Kind::gap) gap += g.end_ns - g.start_ns;
  return fmt::format("             step {} took {}, {:.1f}x the median, after {} step{} near the median: a stall "
                     "mid-run, not a cold start{}\n",
                     step, ms(t), factor, fast_before, fast_before == 1 ? "" : "s",
                     2 * gap > t ? fmt::format(" ({} of it untraced: no op ran on its critical path - a sleep, a data "
                                               "loader, another process?)",
                                               ms(gap))
                                 : std::string());
}

// A no-step trace's heading (RunStats::whole_trace): what the figures below cover, each rank's span.
std::string whole_trace_text(const ss::RunStats& st) {
  std::string spans;
  for (const auto& r : st.ranks) spans += fmt::format("{}rank {} {}", spans.empty() ? "" : ", ", r.rank, ms(r.window_ns));
  // a cut trace whose ProfilerStep#N spans the cut all left incomplete (tester62b: it read "no
  // profiler steps" as if the trace had none): its `trace cut` lines below name the steps
  return fmt::format("{}: figures over the whole trace ({}: no step time, throughput or per-step figure)\ntrace "
                     "span   {} (each rank's first op to its last)\n",
                     st.whole_trace_cut ? "no complete profiler step" : "no profiler steps",
                     st.whole_trace_cut ? "every ProfilerStep#N lost events to the cut, see `trace cut`"
                                        : "no ProfilerStep#N spans",
                     spans);
}

std::string top_ops_text(const ss::SessionReader& session, const ss::RunStats& st) {
  std::string out;
  out += "\ntop ops (self time: an op's time outside the ops it encloses on its thread; summed over ranks)\n";
  out += fmt::format("  {:<40} {:<10} {:>11} {:>7} {:>8}\n", "op", "category", "self time", "share", "count");
  int64_t all = 0;
  for (const auto& o : st.top_ops) all += o.self_ns;
  for (size_t i = 0; i < st.top_ops.size() && i < 15; ++i) {
    const auto& o = st.top_ops[i];
    std::string name = session.name(o.name_id);
    if (name.size() > 40) name = name.substr(0, 18) + "..." + name.substr(name.size() - 19);
    out += fmt::format("  {:<40} {:<10} {:>11} {:>6.1f}% {:>8}\n", name, ss::to_string(o.category), ms(o.self_ns),
                             all > 0 ? 100.0 * static_cast<double>(o.self_ns) / static_cast<double>(all) : 0.0, o.count);
  }
  if (st.top_ops.size() > 15) out += fmt::format("  ... and {} more (--json: all)\n", st.top_ops.size() - 15);
  return out;
}

}  // namespace embedscope::cli
