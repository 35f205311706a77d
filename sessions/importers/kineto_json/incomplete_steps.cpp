// incomplete_steps.h: the cut steps and the aborted last step of a rank's trace.

#include "importers/kineto_json/incomplete_steps.h"

#include <algorithm>
#include <iterator>
#include <unordered_set>

#include <fmt/format.h>

namespace embedscope::sessions::importers::kineto {

namespace {
/// The cut of one file: the index into `events` of its last event before the cut, where the next
/// window's events begin, and the file.
struct CutAt {
  int64_t last_before_cut;
  int64_t next_window_ts;
  std::string file;
};

bool is_backward(const std::string& n) {
  return n.rfind("autograd::engine::evaluate_function", 0) == 0 || n.find("Backward") != std::string::npos;
}
bool is_optimizer_step(const std::string& n) { return n.rfind("Optimizer.step#", 0) == 0; }

/// The aborted last step of `tr`, if any (incomplete_steps' rule).
void find_aborted(const RankTrace& tr, const std::vector<Step>& steps, const Interner& names,
                  std::vector<IncompleteStep>& out) {
  if (tr.cut || steps.size() < 2) return;
  const Step& last = steps.back();
  for (const IncompleteStep& s : out)
    if (s.number == last.number) return;
  // per step (index into `steps`): holds the backward pass, the optimizer step
  std::vector<std::pair<bool, bool>> phases(steps.size(), {false, false});
  for (const Event& e : tr.events) {
    if (e.unfinished || (e.kind != EventKind::cpu && e.kind != EventKind::runtime)) continue;
    if (e.ts >= last.end) return;  // the trace goes on after its last step: the step ended normally
    if (e.kind != EventKind::cpu) continue;
    auto it = std::upper_bound(steps.begin(), steps.end(), e.ts, [](int64_t t, const Step& s) { return t < s.ts; });
    if (it == steps.begin() || e.ts >= std::prev(it)->end) continue;
    auto& p = phases[static_cast<size_t>(std::prev(it) - steps.begin())];
    const std::string& n = names.text(e.name);
    p.first = p.first || is_backward(n);
    p.second = p.second || is_optimizer_step(n);
  }
  bool every_backward = true, every_optimizer = true;
  int64_t earlier = 0;
  for (size_t i = 0; i + 1 < steps.size(); ++i) {
    if (std::any_of(out.begin(), out.end(), [&](const IncompleteStep& s) { return s.number == steps[i].number; }))
      continue;  // a cut step is no evidence of a whole one
    every_backward = every_backward && phases[i].first;
    every_optimizer = every_optimizer && phases[i].second;
    ++earlier;
  }
  if (earlier == 0) return;
  const bool no_backward = every_backward && !phases.back().first;
  const bool no_optimizer = every_optimizer && !phases.back().second;
  if (!no_backward && !no_optimizer) return;
  IncompleteStep a;
  a.why = IncompleteStep::Why::aborted;
  a.number = last.number;
  a.file = tr.sources.size() > 1 ? tr.sources.back().file : tr.file;
  const std::string backward = "the backward pass (autograd::engine::evaluate_function / *Backward ops)";
  const std::string optimizer = "the optimizer step (Optimizer.step#*)";
  a.lacks = no_backward && no_optimizer ? backward + " and " + optimizer : no_backward ? backward : optimizer;
  a.earlier_steps = earlier;
  out.push_back(std::move(a));
}

/// The steps of a cut `tr` whose GPU events the cut lost (incomplete_steps' rule), after `out`.
void find_gpu_lost(const RankTrace& tr, const std::vector<Step>& steps, const Interner& names,
                   std::vector<IncompleteStep>& out) {
  if ((!tr.cut && tr.earlier_window_cuts.empty()) || steps.empty()) return;
  std::unordered_set<uint64_t> on_gpu;
  for (const Event& e : tr.events)
    if (on_stream(e.kind) && e.correlation) on_gpu.insert(e.correlation);
  if (on_gpu.empty()) return;  // no GPU event survived: host-thread figures, whole per step
  std::vector<bool> launch_name(names.size(), false);
  for (uint32_t id = 0; id < names.size(); ++id) {
    const std::string& n = names.text(id);
    launch_name[id] = n.find("Launch") != std::string::npos || n.find("Memcpy") != std::string::npos;
  }
  // The frontier: the file's last event before its own cut, when a runtime call or a GPU event
  // (Kineto writes those after every host op, roughly in time order): the events of the steps
  // that end after it were written after the cut.
  int64_t frontier = std::numeric_limits<int64_t>::max();
  if (tr.cut && tr.last_before_cut >= 0 && static_cast<size_t>(tr.last_before_cut) < tr.events.size())
    if (const Event& at = tr.events[static_cast<size_t>(tr.last_before_cut)]; at.kind != EventKind::cpu) frontier = at.ts;
  std::vector<int64_t> launches(steps.size(), 0), lost(steps.size(), 0);
  for (const Event& e : tr.events) {
    if (e.kind != EventKind::runtime || !e.correlation || e.name >= launch_name.size() || !launch_name[e.name]) continue;
    auto it = std::upper_bound(steps.begin(), steps.end(), e.ts, [](int64_t t, const Step& s) { return t < s.ts; });
    if (it == steps.begin() || e.ts >= std::prev(it)->end) continue;
    const auto i = static_cast<size_t>(std::prev(it) - steps.begin());
    ++launches[i];
    lost[i] += on_gpu.count(e.correlation) ? 0 : 1;
  }
  const std::string file = tr.sources.size() > 1 ? tr.sources.back().file : tr.file;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (lost[i] == 0 && steps[i].end <= frontier) continue;
    if (std::any_of(out.begin(), out.end(), [&](const IncompleteStep& s) { return s.number == steps[i].number; }))
      continue;
    IncompleteStep g;
    g.why = IncompleteStep::Why::gpu_lost;
    g.number = steps[i].number;
    g.file = file;
    g.launches = launches[i];
    g.launches_lost = lost[i];
    g.past_frontier = steps[i].end > frontier;
    g.frontier = frontier;
    out.push_back(std::move(g));
  }
}
}  // namespace

std::vector<IncompleteStep> incomplete_steps(const RankTrace& tr, const std::vector<Step>& steps, const Interner& names) {
  std::vector<IncompleteStep> out;
  std::vector<CutAt> cuts;
  for (const RankTrace::WindowCut& w : tr.earlier_window_cuts) cuts.push_back({w.last_before_cut, w.next_window_ts, w.file});
  if (tr.cut && tr.last_before_cut >= 0)
    cuts.push_back({tr.last_before_cut, std::numeric_limits<int64_t>::max(), tr.sources.size() > 1 ? tr.sources.back().file : tr.file});
  for (const CutAt& c : cuts) {
    if (c.last_before_cut < 0 || static_cast<size_t>(c.last_before_cut) >= tr.events.size()) continue;
    // the window's last step: the last that starts before the next window's events
    auto it = std::lower_bound(steps.begin(), steps.end(), c.next_window_ts, [](const Step& s, int64_t t) { return s.ts < t; });
    if (it == steps.begin()) continue;
    const Step& last = *std::prev(it);
    const Event& at_cut = tr.events[static_cast<size_t>(c.last_before_cut)];
    if (at_cut.kind != EventKind::cpu || (at_cut.lane != last.lane && !tr.legacy_profiler) || at_cut.ts < last.ts ||
        at_cut.ts >= last.end)
      continue;  // a cut past the step's end on its thread lost no step span: the whole-trace rule
    IncompleteStep s;
    s.why = IncompleteStep::Why::cut;
    s.number = last.number;
    s.file = c.file;
    if (std::none_of(steps.begin(), steps.end(), [&](const Step& x) { return x.number == last.number + 1; })) {
      s.lost = last.number + 1;
      s.lost_from = last.end;
      s.lost_to = c.next_window_ts;
    }
    out.push_back(std::move(s));
  }
  find_aborted(tr, steps, names, out);
  find_gpu_lost(tr, steps, names, out);
  return out;
}

void say_incomplete_steps(const std::vector<IncompleteStep>& incomplete, int32_t rank, const std::vector<OpEvent>& ops,
                          const std::vector<CollectiveRecord>& collectives, ImportProblems& problems) {
  std::string gpu_steps, gpu_file;
  int64_t gpu_launches = 0, gpu_lost = 0, gpu_count = 0, frontier = -1;
  for (const IncompleteStep& s : incomplete) {
    if (s.why == IncompleteStep::Why::gpu_lost) {
      gpu_steps += fmt::format("{}{}", gpu_steps.empty() ? "" : ", ", s.number);
      gpu_file = s.file;
      gpu_launches += s.launches;
      gpu_lost += s.launches_lost;
      if (s.past_frontier) frontier = s.frontier;
      ++gpu_count;
      continue;
    }
    int64_t in_step = 0, events_kept = 0, colls_kept = 0;
    for (const OpEvent& o : ops) {
      in_step += o.step == s.number ? 1 : 0;
      events_kept += s.lost >= 0 && o.step == s.lost ? 1 : 0;
    }
    for (const CollectiveRecord& c : collectives) colls_kept += s.lost >= 0 && c.step == s.lost ? 1 : 0;
    if (s.why == IncompleteStep::Why::aborted) {
      problems.add("aborted_last_step", Severity::info, {s.file, -1},
                   fmt::format("rank {}: ProfilerStep#{}, the trace's last step, holds no event of {}, which each of the "
                               "{} earlier step{} holds, and the trace ends with it: its iteration stopped before it "
                               "finished (an exception, then the profiler stopped), so step {} is incomplete and out "
                               "of the step figures (its {} event{} kept)",
                               rank, s.number, s.lacks, s.earlier_steps, s.earlier_steps == 1 ? "" : "s", s.number,
                               in_step, in_step == 1 ? "" : "s"));
      continue;
    }
    std::string text = fmt::format("rank {}: the cut fell inside ProfilerStep#{} on its thread: its events after the "
                                   "cut are lost, so step {} is incomplete and out of the step figures (its {} "
                                   "event{} kept)",
                                   rank, s.number, s.number, in_step, in_step == 1 ? "" : "s");
    if (events_kept > 0)
      text += fmt::format("; ProfilerStep#{}'s span was lost with it: the {} event{} after step {}'s end ({} "
                          "collective{}) are kept as step {}, incomplete and out of the step figures too",
                          s.lost, events_kept, events_kept == 1 ? "" : "s", s.number, colls_kept,
                          colls_kept == 1 ? "" : "s", s.lost);
    problems.add("last_step_cut", Severity::data_loss, {s.file, -1}, text);
  }
  if (gpu_count > 0)
    problems.add("cut_lost_gpu_events", Severity::data_loss, {gpu_file, -1},
                 fmt::format("rank {}: the cut lost GPU events of step{} {}: {}{}{} (Kineto writes the runtime and "
                             "GPU events after the host ops), so {} incomplete and out of the step figures (the host "
                             "ops kept)",
                             rank, gpu_count == 1 ? "" : "s", gpu_steps,
                             gpu_lost > 0 ? fmt::format("{} of the {} kernel and copy launches in {} that survived have "
                                                        "no GPU event in the file",
                                                        gpu_lost, gpu_launches, gpu_count == 1 ? "it" : "them")
                                          : std::string(),
                             gpu_lost > 0 && frontier >= 0 ? ", and " : "",
                             frontier >= 0 ? fmt::format("the file's runtime and GPU events stop at the cut at trace ts "
                                                         "{:.3f} us, before {} end{}",
                                                         static_cast<double>(frontier) / 1e3,
                                                         gpu_count == 1 ? "its" : "their", gpu_count == 1 ? "" : "s")
                                           : std::string(),
                             gpu_count == 1 ? "it is" : "they are"));
}

}  // namespace embedscope::sessions::importers::kineto
