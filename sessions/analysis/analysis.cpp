#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/load_imbalance.h"  // recorded_max_over_mean
#include "embedscope/sessions/analysis/recorded_run.h"
#include "embedscope/sessions/model/did_not_end.h"
#include "embedscope/sessions/model/held_out_key.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/wait_span.h"
#include "embedscope/sessions/analysis/split_checks.h"
#include "embedscope/sessions/store/op_stream.h"

#include <nlohmann/json.hpp>
#include <fmt/format.h>
#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <numeric>

namespace embedscope::sessions {

namespace {
// Extends a step's critical path over the step's window (`ranks`: rank -> its window [start, end))
// with untraced gaps: from the start of its first op's rank's window to that op, and from its last
// op to the end of its last op's rank's window; a step without an op is one gap over the longest
// window. Without them a step whose end (or start) no op covered - a time.sleep after the step's
// last op - was shorter on the path than its window (the ranks' windows need not line up: a rank
// that started the step earlier is not on the path for that).
void cover_window(StepCriticalPath& path, const std::map<int32_t, std::pair<int64_t, int64_t>>& ranks) {
  const auto gap = [](int32_t rank, int64_t a, int64_t b) {
    return PathSegment{PathSegment::Kind::gap, rank, 0, 0, OpCategory::other, a, b};
  };
  if (path.segments.empty()) {
    auto longest = ranks.end();
    for (auto it = ranks.begin(); it != ranks.end(); ++it)
      if (longest == ranks.end() || it->second.second - it->second.first > longest->second.second - longest->second.first)
        longest = it;
    if (longest == ranks.end() || longest->second.first >= longest->second.second) return;
    path.segments.push_back(gap(longest->first, longest->second.first, longest->second.second));
    path.start_ns = longest->second.first;
    path.end_ns = longest->second.second;
    return;
  }
  if (const auto f = ranks.find(path.segments.front().rank); f != ranks.end() && f->second.first < path.start_ns) {
    path.segments.insert(path.segments.begin(), gap(f->first, f->second.first, path.start_ns));
    path.start_ns = f->second.first;
  }
  if (const auto l = ranks.find(path.segments.back().rank); l != ranks.end() && path.end_ns < l->second.second) {
    path.segments.push_back(gap(l->first, path.end_ns, l->second.second));
    path.end_ns = l->second.second;
  }
}

// The critical path of every measured step and the per-collective times (critical_path.h).
// `grouped` (ops by (rank, step)) is moved into per-step lists as it is read: no second copy.
// `timed` says which ops the per-collective times see (every op when it is empty): the comm ops
// that are collectives, and the compute that hides them (a stream rank's streams only, as the
// per-rank figures); the critical path walks every op.
// `hides` says which ops' compute hides the collectives (every op when it is empty: the ops the
// step figures see, a stream rank's streams, an engine GPU run's host threads), with `roles`
// (analysis.h compute_intervals: a lane's comm ops and waits are no compute of that lane).
// `roles.annotation_ids`: spans the critical path does not walk either (an imported trace's
// record_function ranges, which enclose the ops that bounded the step: tester37 #16).
// `partial_collectives`: a step without a window has its collectives in the per-collective times
// (an engine run's step that did not end: where it hung); false for an imported trace, whose only
// such step is the one a cut lost (its collectives are not in the measured steps' counts).
// `windows` (step -> rank -> [start, end)): the step windows, as the step statistics read them.
// The path of a step is walked through the step's ops of the ranks with a window in it, each
// clipped to its rank's window, as the per-step figures (rank_step_times) clip them: so a step's
// path lies within its window and the steps' paths never overlap (crit42 / tester42 F1: in an
// async GPU trace the kernels of step N run past its ProfilerStep span, and unclipped paths
// summed to 946.88 ms over 6 steps of 744.6 ms). GPU work of step N that runs past N's window is
// on no step's path, as it is in no step's figures; untraced time at the start or the end of a
// step's window is a gap on its path (cover_window), so a step's path is as long as its window.
// A step with no window (the partial step
// of a run that crashed or was killed in it) is walked unclipped into `critical_paths` (where
// the run stopped: run_end.h), but its time is in the totals only when the session has no
// measured step at all (then the table is "the ops recorded before the end"), as the step
// statistics leave it out.
void critical_path_summary(const std::vector<CollectiveRecord>& collectives, std::map<std::pair<int32_t, int64_t>, std::vector<OpRecord>>&& grouped,
                           const std::function<bool(const OpRecord&)>& timed,
                           const std::function<bool(const OpRecord&)>& hides, const OpRoles& roles,
                           const std::map<int64_t, std::map<int32_t, std::pair<int64_t, int64_t>>>& windows,
                           int64_t first_drain, bool partial_collectives,
                           const std::function<const std::string&(int32_t)>& name_of, RunStats& st) {
  std::map<int64_t, std::vector<OpRecord>> ops_of_step;
  for (auto it = grouped.begin(); it != grouped.end(); it = grouped.erase(it)) {
    auto& v = ops_of_step[it->first.second];
    if (v.empty()) v = std::move(it->second);
    else v.insert(v.end(), it->second.begin(), it->second.end());
  }
  std::map<int64_t, std::vector<CollectiveRecord>> colls_of_step;
  for (const auto& c : collectives)
    if (c.step >= 0) colls_of_step[c.step].push_back(c);
  std::map<int32_t, CriticalPathEntry> entries;           // by name_id (-1: gaps)
  std::map<int32_t, std::map<int32_t, int64_t>> by_rank;  // name_id -> rank -> ns
  std::map<int32_t, CollectiveTimes> colls;
  std::map<int32_t, RankPeerWait> waits;                  // by rank
  for (const auto& [step, per_rank] : windows) ops_of_step[step];  // a window without an op: one gap
  for (const auto& [step, ops] : ops_of_step) {
    const auto& step_colls = colls_of_step[step];
    const auto step_windows = windows.find(step);
    const bool partial = step_windows == windows.end();  // no rank's window: the step never completed
    std::vector<OpRecord> walked;
    walked.reserve(ops.size());
    for (const auto& o : ops) {
      if (is_plain_annotation(o, roles.annotation_ids)) continue;  // (a CPU trace's gloo:* spans are its collectives)
      OpRecord w = o;
      if (!partial) {
        const auto rw = step_windows->second.find(o.rank);
        if (rw == step_windows->second.end()) continue;  // a rank without this step's window: not in its figures
        if (o.end_ns > o.start_ns) {
          w.start_ns = std::max(o.start_ns, rw->second.first);
          w.end_ns = std::min(o.end_ns, rw->second.second);
          if (w.end_ns <= w.start_ns) continue;  // wholly outside the window
        }
      }
      walked.push_back(w);
    }
    StepCriticalPath path = critical_path(walked, step_colls, step);
    walked = {};
    if (!partial) cover_window(path, step_windows->second);
    // a partial step's path says where the run stopped; it is not in the measured steps' totals;
    // nor is a pipeline's drain step's (its path is kept, as its row: tester46 F21)
    const bool drain = !partial && step >= first_drain;
    const bool in_totals = (!partial || windows.empty()) && !drain;
    std::map<int32_t, int64_t> on_path;
    for (const auto& seg : path.segments) {
      if (!in_totals) break;
      const int32_t id = seg.kind == PathSegment::Kind::gap ? -1 : seg.name_id;
      CriticalPathEntry& e = entries[id];
      e.name_id = id;
      e.category = seg.category;
      e.ns += seg.end_ns - seg.start_ns;
      on_path[id] += seg.end_ns - seg.start_ns;
      by_rank[id][seg.rank] += seg.end_ns - seg.start_ns;
      st.critical_path_ns += seg.end_ns - seg.start_ns;
    }
    if (!on_path.empty())
      ++entries[std::max_element(on_path.begin(), on_path.end(), [](auto& a, auto& b) { return a.second < b.second; })->first]
            .steps_bounded;
    if (drain || (partial && !in_totals && !partial_collectives)) {
      // a drain step's collectives are not in the per-collective times either; nor those of an
      // imported trace's step whose span the cut lost (import problem last_step_cut): they are
      // listed per measured step
    } else {
      std::map<int32_t, std::vector<Interval>> compute;  // what hides the collectives, per rank
      if (hides) {
        std::vector<OpRecord> hiding;
        for (const auto& o : ops)
          if (hides(o)) hiding.push_back(o);
        compute = compute_intervals(hiding, roles);
      } else {
        compute = compute_intervals(ops, roles);
      }
      if (timed) {
        std::vector<OpRecord> kept;  // the step's ops the collective times see
        kept.reserve(ops.size());
        for (const auto& o : ops)
          if (timed(o)) kept.push_back(o);
        const auto instances = collective_instances(kept, step_colls);
        add_collective_times(kept, instances, colls, step_colls, &compute);
        add_peer_waits(kept, instances, waits);
        move_split_checks(kept, step_colls, name_of, colls);  // tester51 F4: the checks on their own
      } else {
        const auto instances = collective_instances(ops, step_colls);
        add_collective_times(ops, instances, colls, step_colls, &compute);
        add_peer_waits(ops, instances, waits);
        move_split_checks(ops, step_colls, name_of, colls);
      }
    }
    st.critical_paths.push_back(std::move(path));
  }
  for (auto& [id, e] : entries) {
    e.share = st.critical_path_ns > 0 ? static_cast<double>(e.ns) / static_cast<double>(st.critical_path_ns) : 0;
    const auto& ranks = by_rank[id];
    e.top_rank = std::max_element(ranks.begin(), ranks.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
    st.critical_path.push_back(e);
  }
  std::stable_sort(st.critical_path.begin(), st.critical_path.end(), [](auto& a, auto& b) { return a.ns > b.ns; });
  for (const auto& [id, c] : colls) st.collectives.push_back(c);
  for (const auto& [rank, w] : waits) st.peer_waits.push_back(w);
  std::stable_sort(st.collectives.begin(), st.collectives.end(), [](auto& a, auto& b) { return a.exposed_ns > b.exposed_ns; });
}
}  // namespace

bool collective_bytes_unknown(const SessionReader& session) {
  if (session.meta(meta::kImported, "0") != "1") return false;
  for (const auto& p : session.import_stats())
    if (p.name == "collective_args_not_captured") return true;
  for (const auto& c : session.collectives())
    if (c.bytes_sent > 0 || c.bytes_received > 0) return false;
  return true;
}

double max_over_mean(const std::vector<double>& v) {
  if (v.empty()) return 1.0;
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return mean > 0 ? *std::max_element(v.begin(), v.end()) / mean : 1.0;
}

std::string overlap_definition(const RunStats& st) {
  // a trace without profiler steps has one window per rank, the whole trace (RunStats::whole_trace)
  const std::string where =
      st.whole_trace ? "over the whole trace (" + st.no_step_reason() + ")" : "clipped to step windows";
  if (st.simulated) return "simulated streams: the cost model's compute vs comm ops per rank, " + where;
  if (st.stream_ranks)
    return "stream level: GPU kernels and copies of compute vs comm per rank with GPU streams (its host spans left out), " +
           where;
  return "thread level: host spans of compute vs comm ops per rank, " + where;
}

namespace {
// The ops of `grouped` ((rank, step) -> ops, measured steps) that run into a window
// (windows: step -> rank -> [start, end)) of their rank other than their own step's, keyed by
// that window's (rank, step). O(n log w).
std::map<std::pair<int32_t, int64_t>, std::vector<OpRecord>> ops_in_other_windows(
    const std::map<std::pair<int32_t, int64_t>, std::vector<OpRecord>>& grouped,
    const std::map<int64_t, std::map<int32_t, std::pair<int64_t, int64_t>>>& windows) {
  struct Window {
    int64_t start, end, step;
  };
  std::map<int32_t, std::vector<Window>> of_rank;  // by start
  for (const auto& [step, per_rank] : windows)
    for (const auto& [r, w] : per_rank) of_rank[r].push_back({w.first, w.second, step});
  for (auto& [r, v] : of_rank) std::sort(v.begin(), v.end(), [](const Window& a, const Window& b) { return a.start < b.start; });
  std::map<std::pair<int32_t, int64_t>, std::vector<OpRecord>> out;
  for (const auto& [key, ops] : grouped) {
    const auto rw = of_rank.find(key.first);
    if (rw == of_rank.end()) continue;
    const std::vector<Window>& ws = rw->second;
    const std::pair<int64_t, int64_t>* own_w = nullptr;  // the op's own step's window
    if (const auto own = windows.find(key.second); own != windows.end())
      if (const auto it = own->second.find(key.first); it != own->second.end()) own_w = &it->second;
    for (const auto& o : ops) {
      if (o.end_ns <= o.start_ns || (own_w && o.start_ns >= own_w->first && o.end_ns <= own_w->second)) continue;
      // the windows that start before the op ends, from the last one starting at or before its start
      auto it = std::upper_bound(ws.begin(), ws.end(), o.start_ns, [](int64_t t, const Window& w) { return t < w.start; });
      if (it != ws.begin()) --it;
      for (; it != ws.end() && it->start < o.end_ns; ++it)
        if (it->step != o.step && it->end > o.start_ns) out[{key.first, it->step}].push_back(o);
    }
  }
  return out;
}

// What analyze reads of the step rows: RunStats' step-time figures (see analyze_step_times) and
// the step windows (step -> rank -> [start, end)) the per-step figures are clipped to.
struct AnalysisStepPart {
  RunStats st;
  std::map<int64_t, std::map<int32_t, std::pair<int64_t, int64_t>>> windows;
  std::vector<StepMetric> step_rows;
  int64_t first_drain = 0;  // the first drain step; past the last step when none is left out
  int world = 0;
};

AnalysisStepPart analysis_step_part(const SessionReader& session) {
  AnalysisStepPart part;
  RunStats& st = part.st;
  st.ended = session.status();
  {  // the held-out evaluation (issue 16), when the run made one
    const auto h = nlohmann::json::parse(session.meta(meta::kHeldOutJson), nullptr, false);
    if (h.is_object() && h.contains("auc") && h["auc"].is_number()) st.held_out_auc = h["auc"].get<double>();
  }
  st.simulated = session.meta(meta::kSimulated, "0") == "1";
  st.samples_per_step = std::strtoll(session.meta(meta::kSamplesPerStep, "0").c_str(), nullptr, 10);
  part.world = static_cast<int>(std::strtol(session.meta(meta::kWorldSize, "0").c_str(), nullptr, 10));

  // step windows
  auto& windows = part.windows;
  std::map<int64_t, double> loss;
  part.step_rows = session.steps();
  const std::vector<StepMetric>& step_rows = part.step_rows;
  for (const auto& s : step_rows) {
    if (s.step < 0) continue;
    windows[s.step][s.rank] = {s.start_ns, s.end_ns};
    loss[s.step] = s.loss;
  }
  std::vector<int64_t> step_times;
  const bool no_loss = session.meta(meta::kImported, "0") == "1";
  for (const auto& [step, per_rank] : windows) {
    int64_t longest = 0;
    for (const auto& [r, w] : per_rank) longest = std::max(longest, w.second - w.first);
    step_times.push_back(longest);
    // a simulation trains nothing, and an imported trace recorded no loss (its importer writes
    // steps.loss 0.0; sessions imported before this rule hold 0.0 too, hence the meta, not the
    // value: tester45 F9 "0.00000, -100 %"): no loss, not zeros
    if (!st.simulated && !no_loss) st.loss.push_back(loss[step]);
  }
  st.steps = static_cast<int64_t>(windows.size());
  // the pipeline's drain steps: recorded, not counted (tester46 F21); only those the run reached
  // (retest49 R2: a killed run's last steps drained nothing). The run is the exported one for an
  // import of an Embedscope export (recorded_run.h; tester53 F3), whose own end is "complete".
  const RecordedRun run = recorded_run(session);
  st.pipeline = run.pipeline;
  if (run.exported) {
    st.exported_run_ended = run.ended;
    st.exported_run_end_message = run.end_message;
    st.exported_run_planned_steps = run.planned_steps;
  }
  const int64_t drain_run =
      drain_steps_run(st.pipeline, run.ended, run.planned_steps, windows.empty() ? -1 : std::prev(windows.end())->first);
  SteadySteps steady = steady_state_steps(std::move(step_times), drain_run);
  {  // the counted steps are the first steady.counted.size() windows, in step order
    auto w = windows.begin();
    int64_t longest = -1;
    for (size_t k = 0; k < steady.counted.size() && w != windows.end(); ++k, ++w)
      if (steady.counted[k] > longest) {
        longest = steady.counted[k];
        st.slowest_step = w->first;
      }
  }
  st.drain_steps = steady.drain_left_out;
  st.all_drain = steady.all_drain;
  // the first drain step; past the last step when none is left out
  part.first_drain = windows.empty() ? std::numeric_limits<int64_t>::max()
                                   : std::prev(windows.end())->first - st.drain_steps + 1;
  st.step_series_ns = steady.counted;
  st.step_time_ns = summarize(std::move(steady.counted));
  st.samples_per_s = st.step_time_ns.mean > 0 ? static_cast<double>(st.samples_per_step) / (st.step_time_ns.mean * 1e-9) : 0;

  return part;
}
}  // namespace

RunStats analyze_step_times(const SessionReader& session) { return analysis_step_part(session).st; }

RunStats analyze(const SessionReader& session) {
  AnalysisStepPart part = analysis_step_part(session);
  RunStats st = std::move(part.st);
  const int world = part.world;
  std::map<int32_t, RankStats> ranks;
  for (int r = 0; r < world; ++r) ranks[r].rank = r;
  auto& windows = part.windows;
  const std::vector<StepMetric>& step_rows = part.step_rows;
  const int64_t first_drain = part.first_drain;

  // ops per (rank, step), measured steps only
  // (one lane at a time, from the packed copy where the file has one: op_stream.h)
  std::map<std::pair<int32_t, int64_t>, std::vector<OpRecord>> grouped;
  // An imported rank whose GPU streams hold communication kernels: its host comm spans
  // (record_param_comms, nccl:* / c10d::* calls, NVTX ranges) describe and launch those
  // collectives and are not collectives themselves. They stay comm for the thread-level figures
  // and the critical path, but the per-collective times list each collective once, as its kernel.
  const bool imported = session.meta(meta::kImported, "0") == "1";
  // A rank with GPU streams (imported traces, cuda runs) has its thread-level figures from its
  // streams' ops: its host spans (framework ops, annotations, launches, synchronization waits)
  // say what the host did, not what the device computed, and would make every collective look
  // hidden (tester34 D2: nccl_data 100% against HTA's 14.31%). GPU annotation lanes ("## forward
  // ##" spans that enclose whole phases) stay off the critical path as well. A simulated
  // session's lanes are all streams; a cpu run has none: both as before. A cuda run's
  // synchronization waits (lane kind `sync`: the host waited for the device) are neither compute
  // nor comm and no step of the critical path: left out like the annotation lanes (a wait
  // counted as compute made every collective it waited for look hidden).
  std::set<std::pair<int32_t, int32_t>> stream_lanes, annotation_lanes;
  std::set<int32_t> stream_ranks;
  for (const auto& l : session.lanes()) {
    if (l.kind == "stream") stream_lanes.insert({l.rank, l.lane}), stream_ranks.insert(l.rank);
    // `annotation`: an Nsight export's NVTX ranges (a row under their thread, tester42 F24)
    if (l.kind == "gpu_annotation" || l.kind == "annotation" || l.kind == "sync") annotation_lanes.insert({l.rank, l.lane});
  }
  st.stream_ranks = !stream_ranks.empty() && !st.simulated;
  std::set<int32_t> gpu_comm_ranks;
  // An imported trace without profiler steps: the whole trace is one window per rank, its
  // first op's start to its last op's end, held as step 0 (RunStats::whole_trace)
  st.whole_trace = imported && windows.empty();
  // ... because the cut left none of its steps complete (the steps' spans were there)
  if (st.whole_trace)
    for (const auto& p : session.import_stats())
      st.whole_trace_cut = st.whole_trace_cut || p.name == "last_step_cut" || p.name == "cut_lost_gpu_events";
  std::map<int32_t, std::pair<int64_t, int64_t>> spans;  // whole_trace: each rank's first and last op
  for_each_lane_ops(session, [&](std::vector<OpRecord>& lane) {
    if (annotation_lanes.count({lane.front().rank, lane.front().lane})) return;
    const bool stream = stream_lanes.count({lane.front().rank, lane.front().lane}) > 0;
    for (auto& o : lane) {
      if (st.whole_trace) {
        o.step = 0;
        if (o.end_ns > o.start_ns) {
          auto [it, fresh] = spans.try_emplace(o.rank, o.start_ns, o.end_ns);
          it->second = {std::min(it->second.first, o.start_ns), std::max(it->second.second, o.end_ns)};
        }
      }
      if (o.step >= 0) grouped[{o.rank, o.step}].push_back(o);
      if (stream && o.category == OpCategory::comm && o.end_ns > o.start_ns) gpu_comm_ranks.insert(o.rank);
    }
  });
  for (const auto& [r, span] : spans) windows[0][r] = span;
  // An imported rank without communication kernels (a CPU trace: Gloo) has its collectives in
  // its record_param_comms spans (the importer's records); the gloo:* / c10d::* calls inside
  // them are the same collective, not another (tester34 D3, D20).
  const auto& names = session.strings();
  const auto param_name = std::find(names.begin(), names.end(), "record_param_comms");
  const int32_t param_id = param_name == names.end() ? -1 : static_cast<int32_t>(param_name - names.begin());
  std::set<int32_t> param_ranks;  // ranks with record_param_comms spans
  if (imported && param_id >= 0)
    for (const auto& [key, ops] : grouped)
      for (const auto& o : ops)
        if (o.name_id == param_id) {
          param_ranks.insert(o.rank);
          break;
        }
  // A rank without record_param_comms whose collectives the importer recorded from its calls
  // (a legacy torch Gloo trace: one record per gloo:* call, the call carrying the record's
  // sequence) has as collectives those calls only: the c10d::* calls that issued them on the
  // calling thread (correlation 0) are the same collective, not another row (filled below, from
  // the collective records, before is_collective is called).
  std::set<int32_t> record_ranks;
  std::function<bool(const OpRecord&)> is_collective;
  if (imported)
    is_collective = [&](const OpRecord& o) {
      if (o.start_ns == o.end_ns && did_not_end(o.start_ns, o.end_ns, session.name(o.name_id))) return false;  // no time
      if (gpu_comm_ranks.count(o.rank)) return stream_lanes.count({o.rank, o.lane}) > 0;
      if (param_ranks.count(o.rank)) return o.name_id == param_id;
      return !record_ranks.count(o.rank) || o.correlation != 0;
    };
  // An imported trace's Work::wait spans (model/wait_span.h): idle time, not communication; out
  // of the step figures and the per-collective times (HTA counts only the collectives' kernels),
  // whatever lane they are on. The critical path still walks them.
  const auto wait_name = imported ? std::find(names.begin(), names.end(), kImportedWaitSpanName) : names.end();
  const int32_t wait_id = wait_name == names.end() ? -1 : static_cast<int32_t>(wait_name - names.begin());
  // The step figures' roles of an imported trace's ops (analysis.h OpRoles): its waits, and its
  // record_function ranges (neither compute nor comm: a thread waiting out a collective inside
  // one is not computing; they stay off the critical path too)
  OpRoles roles;
  roles.wait_id = wait_id;
  if (imported) {
    const auto j = nlohmann::json::parse(session.meta(meta::kImportAnnotationNames, "[]"), nullptr, false);
    if (j.is_array()) {
      std::set<std::string> wanted;
      for (const auto& n : j)
        if (n.is_string()) wanted.insert(n.get<std::string>());
      for (size_t i = 0; i < names.size(); ++i)
        if (wanted.count(names[i])) roles.annotation_ids.insert(static_cast<int32_t>(i));
    }
  }
  std::vector<OpRecord> on_streams;  // a stream rank's ops of one step on its streams
  auto times_ops = [&](int32_t r, const std::vector<OpRecord>& ops) -> const std::vector<OpRecord>& {
    if (!stream_ranks.count(r)) return ops;
    on_streams.clear();
    for (const auto& o : ops)
      if (stream_lanes.count({o.rank, o.lane})) on_streams.push_back(o);
    return on_streams;
  };
  // an engine run's GPU rank (a cuda run): its host threads' figures too (an import's host spans
  // launch and describe its kernels: left out, as above)
  std::vector<OpRecord> on_host;
  auto host_ops = [&](const std::vector<OpRecord>& ops) -> const std::vector<OpRecord>& {
    on_host.clear();
    for (const auto& o : ops)
      if (!stream_lanes.count({o.rank, o.lane})) on_host.push_back(o);
    return on_host;
  };
  // An op of a measured step that runs on into another measured step's window of its rank (a
  // Gloo worker thread's all-reduce of step 1 still running when step 2 began) counts in each
  // window for the time it ran there: clipped to its own step's window only, its part in the next
  // one read as idle there. (A pipeline's warm-up ops, step -1, stay out of the measured steps.)
  const std::map<std::pair<int32_t, int64_t>, std::vector<OpRecord>> spilled = ops_in_other_windows(grouped, windows);
  std::vector<OpRecord> with_spilled;
  auto window_ops = [&](int32_t r, int64_t step) -> const std::vector<OpRecord>& {
    const std::vector<OpRecord>& own = grouped[{r, step}];
    const auto it = spilled.find({r, step});
    if (it == spilled.end()) return own;
    with_spilled = own;
    with_spilled.insert(with_spilled.end(), it->second.begin(), it->second.end());
    return with_spilled;
  };
  int64_t overlap_total = 0, comm_total = 0;
  for (const auto& [step, per_rank] : windows)
    for (const auto& [r, w] : per_rank) {
      RankStepTimes t = rank_step_times(times_ops(r, window_ops(r, step)), w.first, w.second, roles);
      t.step = step;
      t.rank = r;
      t.drain = st.drain_steps > 0 && step >= first_drain;
      if (t.drain) {  // listed, but not in the rank's figures nor the overlap (tester46 F21)
        st.per_step.push_back(t);
        continue;
      }
      RankStats& rs = ranks[r];
      rs.rank = r;
      rs.window_ns += w.second - w.first;
      if (stream_ranks.count(r) && !imported && !st.simulated) {
        const RankStepTimes h = rank_step_times(host_ops(grouped[{r, step}]), w.first, w.second);
        rs.host_comm_ns += h.comm_ns;
        rs.host_exposed_comm_ns += h.exposed_comm_ns;
      }
      rs.compute_ns += t.compute_ns;
      rs.comm_ns += t.comm_ns;
      rs.overlap_ns += t.overlap_ns;
      rs.exposed_comm_ns += t.exposed_comm_ns;
      rs.idle_ns += t.idle_ns;
      for (int c = 0; c < kNumCategories; ++c) rs.by_category_ns[static_cast<size_t>(c)] += t.by_category_ns[static_cast<size_t>(c)];
      overlap_total += t.overlap_ns;
      comm_total += t.comm_ns;
      st.per_step.push_back(t);
    }
  // A live session's counters and collectives of the step in progress (some ranks' committed,
  // the step's windows not yet) are left out: every figure over the measured steps counts the
  // same steps (tester43 F15: ids 17 steps on the rank table, 18 on the plan table for 2 ranks).
  const int64_t last_step = windows.empty() ? std::numeric_limits<int64_t>::max() : windows.rbegin()->first;
  // The pipeline's drain steps are left out of the counts too (tester48 F4): a pipeline moves
  // the next batches' lookups and dists into the warm-up and leaves them out of the drain steps,
  // so counting the drain steps made a semi_sync session's ids and bytes look 3.7-17 % lower.
  // Ranks holding different steps (a killed rank of a merged launch: tester49 F14): the
  // imbalance over the steps every rank holds, each rank's own figures over its own steps.
  if (session.meta(meta::kImported, "0") != "1") {  // counted_steps.h: rebalance's window follows the same rule
    HeldSteps held = held_steps(step_rows);
    st.rank_step_counts = std::move(held.ranks);
    st.common_last_step = held.common_last_step;
  }
  std::map<int32_t, std::pair<double, double>> common_load;  // by rank: ids, lookup ns through common_last_step
  std::map<int64_t, std::map<int32_t, double>> step_ids;     // by counted step, by rank: ids (the per-step imbalance)
  for (const auto& c : session.load()) {
    st.has_load = true;
    if (c.step < 0 || c.step > last_step || c.step >= first_drain) continue;
    if (st.rank_step_counts.empty() || c.step <= st.common_last_step)
      step_ids[c.step][c.rank] += static_cast<double>(c.ids);
    ranks[c.rank].ids_looked_up += c.ids;
    ranks[c.rank].lookup_ns += c.lookup_ns;
    if (!st.rank_step_counts.empty() && c.step <= st.common_last_step) {
      common_load[c.rank].first += static_cast<double>(c.ids);
      common_load[c.rank].second += static_cast<double>(c.lookup_ns);
    }
  }
  std::vector<CollectiveRecord> collectives = session.collectives();
  if (st.whole_trace)
    for (auto& c : collectives) c.step = 0;
  for (const auto& c : collectives) {
    record_ranks.insert(c.rank);
    if (c.step < 0 || c.step > last_step || c.step >= first_drain) continue;
    ranks[c.rank].bytes_sent += c.bytes_sent;
    ranks[c.rank].bytes_received += c.bytes_received;
  }
  for (const auto& m : session.memory_counters()) {  // every step: peaks include warmup
    st.has_memory = true;
    RankStats& rs = ranks[m.rank];
    rs.peak_allocated_bytes = std::max(rs.peak_allocated_bytes, m.peak_allocated);
    rs.peak_reserved_bytes = std::max(rs.peak_reserved_bytes, m.peak_reserved);
    rs.fragmentation = std::max(rs.fragmentation, m.external_fragmentation);
    if (m.reserved > m.allocated)
      rs.memviz_fragmentation = std::min(rs.memviz_fragmentation.value_or(m.memviz_fragmentation), m.memviz_fragmentation);
    st.peak_allocated_bytes = std::max(st.peak_allocated_bytes, m.peak_allocated);
    st.peak_reserved_bytes = std::max(st.peak_reserved_bytes, m.peak_reserved);
  }
  // the per-collective times: collectives as above; what hides them, as the per-rank figures (a
  // stream rank's streams' compute: tester35 D5, every imported collective was "0 exposed")
  std::function<bool(const OpRecord&)> timed;
  if (!imported && !st.simulated && !stream_ranks.empty())
    // an engine run on GPUs: each collective is its host span (one per collective record, as a
    // cpu run's), timed against the host threads' compute; the GPU copies and kernels that
    // carried it (NCCL's kernel, the intra-device copies and reductions) are in the GPU kernel
    // figures. Counting both made a 1-rank run's collectives 2 a step with peers to wait for
    // (tester40 #3) and listed memcpy_dtod as a collective (#5).
    timed = [&](const OpRecord& o) { return stream_lanes.count({o.rank, o.lane}) == 0; };
  else if (is_collective || !stream_ranks.empty())
    timed = [&](const OpRecord& o) {
      if (o.name_id >= 0 && o.name_id == wait_id) return false;  // a wait: no collective, no compute
      if (o.category == OpCategory::comm) return !is_collective || is_collective(o);
      return !stream_ranks.count(o.rank) || stream_lanes.count({o.rank, o.lane}) > 0;
    };
  // what hides the collectives: the compute the per-rank figures count (a stream rank's streams),
  // an engine GPU run's host threads (its collectives are its host spans)
  std::function<bool(const OpRecord&)> hides;
  if (!imported && !st.simulated && !stream_ranks.empty())
    hides = [&](const OpRecord& o) { return stream_lanes.count({o.rank, o.lane}) == 0; };
  else if (!stream_ranks.empty())
    hides = [&](const OpRecord& o) { return !stream_ranks.count(o.rank) || stream_lanes.count({o.rank, o.lane}) > 0; };
  if (st.whole_trace) {  // what took the time, by op name (no step to divide it by)
    std::vector<OpRecord> all;
    for (const auto& [key, ops] : grouped) all.insert(all.end(), ops.begin(), ops.end());
    st.top_ops = op_self_times(all, roles);
  }
  critical_path_summary(collectives, std::move(grouped), timed, hides, roles, windows, first_drain, !imported,
                        [&](int32_t id) -> const std::string& { return session.name(id); }, st);
  // An imported trace's world size is what the trace says; a rank with no trace in the
  // session (no lane) has no figures, and is listed as untraced rather than shown as zeros.
  st.world_size = world;
  // Likewise a rank-per-process session (metadata process_rank): it holds its own rank, its
  // peers are in their own sessions (tester36 D3: they read as idle ranks, imbalance = world).
  // And any other session whose metadata world_size names ranks it holds nothing of (a hand
  // edit, a damaged file): not invented as ranks of zeros (tester54 F3: a rank 2 of zeros
  // lowered the means), but listed as untraced.
  {
    std::set<int32_t> traced;
    for (const auto& lane : session.lanes()) traced.insert(lane.rank);
    if (!traced.empty()) {
      for (auto it = ranks.begin(); it != ranks.end();) {
        if (traced.count(it->first) == 0) {
          st.untraced_ranks.push_back(it->first);
          it = ranks.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
  std::vector<double> lookups, lookup_time;
  int64_t exposed_sum = 0;
  for (auto& [r, rs] : ranks) {
    rs.overlap_pct = rs.comm_ns > 0 ? 100.0 * static_cast<double>(rs.overlap_ns) / static_cast<double>(rs.comm_ns) : 0.0;
    if (stream_ranks.count(r) && !st.simulated && rs.window_ns > 0)
      rs.gpu_busy_pct = 100.0 * static_cast<double>(rs.window_ns - rs.idle_ns) / static_cast<double>(rs.window_ns);
    lookups.push_back(static_cast<double>(rs.ids_looked_up));
    lookup_time.push_back(static_cast<double>(rs.lookup_ns));
    exposed_sum += rs.exposed_comm_ns;
    st.ranks.push_back(rs);
  }
  st.overlap_pct = comm_total > 0 ? 100.0 * static_cast<double>(overlap_total) / static_cast<double>(comm_total) : 0.0;
  st.exposed_comm_ns = st.ranks.empty() ? 0 : exposed_sum / static_cast<int64_t>(st.ranks.size());
  if (!st.rank_step_counts.empty()) {  // the same steps for every rank (tester49 F14)
    lookups.clear();
    lookup_time.clear();
    for (const auto& rs : st.ranks) {
      lookups.push_back(common_load[rs.rank].first);
      lookup_time.push_back(common_load[rs.rank].second);
    }
  }
  st.lookups_max_over_mean = max_over_mean(lookups);
  // each step's max/mean over the ranks (a rank without lookups in a step counts 0), averaged over
  // the steps that looked something up: what a straggler costs every step, where the totals of a
  // run whose heaviest rank changed (a live rebalance) cancel (tester63b F3: 1.05 of the totals,
  // no step below 1.13)
  {
    double sum = 0;
    int64_t n = 0;
    for (const auto& [step, by_rank] : step_ids) {
      std::vector<double> v;
      for (const auto& rs : st.ranks) {
        const auto it = by_rank.find(rs.rank);
        v.push_back(it == by_rank.end() ? 0.0 : it->second);
      }
      if (std::all_of(v.begin(), v.end(), [](double x) { return x == 0; })) continue;
      sum += max_over_mean(v);
      ++n;
    }
    st.lookups_max_over_mean_per_step = n > 0 ? sum / static_cast<double>(n) : st.lookups_max_over_mean;
  }
  st.lookup_time_max_over_mean = recorded_max_over_mean(lookup_time);  // "not recorded" when every rank's is 0
  return st;
}

std::string unequal_rank_steps_text(const RunStats& st) {
  const std::string note = unequal_rank_steps_note(st);
  return note.empty() ? note : "steps        " + note + "\n";
}

std::string unequal_rank_steps_note(const RunStats& st) {
  if (st.rank_step_counts.empty()) return "";
  // ranks grouped by the steps they hold, fewest first
  std::map<std::pair<int64_t, int64_t>, std::vector<int32_t>> groups;
  for (const auto& h : st.rank_step_counts) groups[{h.last_step, h.steps}].push_back(h.rank);
  std::string each;
  for (const auto& [key, rs] : groups)
    each += fmt::format("{}rank{} {} {} step{} (through step {})", each.empty() ? "" : "; ", rs.size() == 1 ? "" : "s",
                        rank_list(rs), key.second, key.second == 1 ? "" : "s", key.first);
  return fmt::format(
      "the ranks hold different steps (a rank stopped early; a killed process loses the steps it had not "
      "committed): {}. The imbalance is over the steps through step {}, which every rank holds; each rank's row sums "
      "its own steps, and the per-step figures divide by the {} counted steps",
      each, st.common_last_step, st.counted_steps());
}

std::string rank_list(const std::vector<int32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    if (j - i >= 2) {
      out += fmt::format("{}-{}", ranks[i], ranks[j]);
    } else {
      out += std::to_string(ranks[i]);
      if (j > i) out += ", " + std::to_string(ranks[j]);
    }
    i = j + 1;
  }
  return out;
}

}  // namespace embedscope::sessions
