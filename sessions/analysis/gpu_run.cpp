#include "embedscope/sessions/analysis/gpu_run.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "embedscope/sessions/analysis/gpu_sharing.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/unit_ladder.h"  // format_ms

namespace embedscope::sessions {

std::optional<GpuBusyFigures> gpu_busy_figures(const RunStats& st) {
  if (!st.stream_ranks) return std::nullopt;
  GpuBusyFigures g;
  double sum = 0;
  int64_t host_exposed = 0;
  for (const auto& r : st.ranks) {
    if (r.window_ns <= 0) continue;
    if (g.ranks == 0 || r.gpu_busy_pct < g.least_pct) g.least_rank = r.rank, g.least_pct = r.gpu_busy_pct;
    if (g.ranks == 0 || r.gpu_busy_pct > g.most_pct) g.most_rank = r.rank, g.most_pct = r.gpu_busy_pct;
    sum += r.gpu_busy_pct;
    host_exposed += r.host_exposed_comm_ns;
    ++g.ranks;
  }
  if (g.ranks == 0) return std::nullopt;
  g.mean_pct = sum / g.ranks;
  g.host_exposed_comm_ns = host_exposed / g.ranks;
  return g;
}

std::string gpu_bound_verdict(double busy_pct) {
  if (busy_pct < 50) return "host-bound: the host's work between GPU ops bounds the step, not the GPU";
  if (busy_pct < 90) return "partly host-bound: the GPU waits for the host part of each step";
  return "GPU-bound: the GPU ran kernels or copies nearly all the step";
}

std::string gpu_busy_text(const RunStats& st, bool imported, bool trace_cut) {
  const auto g = gpu_busy_figures(st);
  if (!g) return "";
  std::string out = fmt::format(
      "GPU busy     {:.1f}% of {}, mean over ranks (a kernel or copy running on the rank's streams{}): {}\n",
      g->mean_pct, st.whole_trace ? "the whole trace (" + st.no_step_reason() + ")" : std::string("the measured steps"),
      g->ranks > 1 ? fmt::format("; least rank {} {:.1f}%, most rank {} {:.1f}%", g->least_rank, g->least_pct, g->most_rank,
                                 g->most_pct)
                   : std::string(),
      trace_cut ? std::string("no verdict on what bounds the step: the trace was cut short (trace cut, below)")
                : gpu_bound_verdict(g->mean_pct));
  if (!imported && st.steps > 0)
    out += fmt::format(
        "host         the ranks' threads waited in collectives {} per rank ({} per step): exposed communication "
        "of the host spans (thread level); the rank figures below are the GPU streams'\n",
        format_ms(static_cast<double>(g->host_exposed_comm_ns)),
        format_ms(static_cast<double>(g->host_exposed_comm_ns / st.counted_steps())));
  return out;
}

std::vector<DeviceGpuBusy> device_gpu_busy(const SessionReader& session, const RunStats& st) {
  std::vector<DeviceGpuBusy> out;
  if (st.simulated) return out;
  const std::vector<RankGpu> gpus = rank_gpus(session.ranks());
  if (gpus.empty()) return out;
  // per measured step and rank its window
  std::map<int64_t, std::pair<int64_t, int64_t>> empty;
  std::map<int32_t, std::map<int64_t, std::pair<int64_t, int64_t>>> windows;  // rank -> step -> [start, end)
  for (const auto& s : session.steps())
    if (s.step >= 0) windows[s.rank][s.step] = {s.start_ns, s.end_ns};
  const auto lanes = session.lanes();
  for (const auto& g : gpus) {
    DeviceGpuBusy d{g.device, g.ranks, 0, 0, 0};
    std::vector<Interval> busy;
    std::map<int64_t, std::pair<int64_t, int64_t>> device_window;  // step -> [earliest start, latest end)
    for (const int32_t r : g.ranks) {
      for (const auto& l : lanes)
        if (l.rank == r && l.kind == "stream")
          for (const auto& o : session.lane_ops(l.rank, l.lane))
            if (o.end_ns > o.start_ns) busy.push_back({o.start_ns, o.end_ns});
      const auto it = windows.find(r);
      for (const auto& [step, w] : it == windows.end() ? empty : it->second) {
        auto [dw, fresh] = device_window.try_emplace(step, w);
        if (!fresh) dw->second = {std::min(dw->second.first, w.first), std::max(dw->second.second, w.second)};
      }
    }
    busy = merge_intervals(std::move(busy));
    for (const auto& [step, w] : device_window) {
      d.window_ns += w.second - w.first;
      d.busy_ns += covered_ns(intersect(busy, {Interval{w.first, w.second}}));
    }
    d.busy_pct = d.window_ns > 0 ? 100.0 * static_cast<double>(d.busy_ns) / static_cast<double>(d.window_ns) : 0.0;
    out.push_back(std::move(d));
  }
  return out;
}

std::string device_gpu_busy_text(const std::vector<DeviceGpuBusy>& devices) {
  std::string out;
  for (const auto& d : devices)
    if (d.ranks.size() > 1 && d.window_ns > 0)
      out += fmt::format("GPU busy     per GPU: {} {:.1f}% (ranks {} together: the union of their streams' kernels and "
                         "copies over the measured steps; the figure above is each rank's own streams)\n",
                         d.device, d.busy_pct, rank_list(d.ranks));
  return out;
}

std::string gpu_trace_loss_text(const SessionReader& session) {
  const long long records = std::atoll(session.meta(meta::kCuptiDroppedRecords, "0").c_str());
  const long long launches = std::atoll(session.meta(meta::kCuptiLaunchesDropped, "0").c_str());
  const long long guessed = std::atoll(session.meta(meta::kCuptiDeviceRankFallbacks, "0").c_str());
  std::string out;
  if (records > 0)
    out += fmt::format("GPU trace    CUPTI dropped {} activity record{} (its buffers were full): the GPU lanes miss them\n",
                       records, records == 1 ? "" : "s");
  if (launches > 0)
    out += fmt::format("GPU trace    {} kernel launch{} forgotten before the kernel came (the launch table was full): "
                       "those kernels have no launch time or API\n",
                       launches, launches == 1 ? " was" : "es were");
  // only a guess where ranks share a GPU: with one rank per GPU the device's rank is the rank
  bool shared = false;
  for (const auto& g : rank_gpus(session.ranks())) shared = shared || g.ranks.size() > 1;
  if (guessed > 0 && shared)
    out += fmt::format("GPU trace    {} GPU op{} or allocation{} came from no rank's stream or thread: charged to the "
                       "last rank on {} GPU (a guess: ranks share it)\n",
                       guessed, guessed == 1 ? "" : "s", guessed == 1 ? "" : "s", guessed == 1 ? "its" : "their");
  return out;
}

std::string trace_cut_text(const SessionReader& session, bool gpu_events_survived) {
  if (session.meta(meta::kImported) != "1") return "";
  const auto problems = session.import_stats();
  // the step whose span the cut lost, kept incomplete (kineto trace_builder.cpp: last_step_cut)
  std::string lost_step;
  for (const auto& p : problems)
    if (p.name == "last_step_cut" && lost_step.empty())
      lost_step = fmt::format("trace cut    {}{}\n", p.example,
                              p.count > 1 ? fmt::format(" (and {} more rank{})", p.count - 1, p.count == 2 ? "" : "s")
                                          : std::string());
  // the steps whose GPU events the cut lost (kineto incomplete_steps.h: cut_lost_gpu_events)
  for (const auto& p : problems)
    if (p.name == "cut_lost_gpu_events")
      lost_step += fmt::format("trace cut    {}{}\n", p.example,
                               p.count > 1 ? fmt::format(" (and {} more rank{})", p.count - 1, p.count == 2 ? "" : "s")
                                           : std::string());
  // a trace that never had GPU events (no rank names a device: a CPU trace, testerB F3) lost none
  const auto ranks = session.ranks();
  const bool gpu_trace = std::any_of(ranks.begin(), ranks.end(), [](const RankInfo& r) { return !r.device.empty(); });
  for (const auto& p : problems)
    if ((p.name == "truncated" || p.name == "gzip_cut_short" || p.name == "broken_structure") &&
        p.severity == "data_loss") {
      const std::string what = p.source.empty() ? std::string("the trace") : p.source;
      if (!gpu_events_survived && !gpu_trace)
        return fmt::format("trace cut    {} was cut short (import problem {}, data_loss): its events after the cut are "
                           "missing, not idle; the figures count only the host-thread events written before the cut "
                           "(a CPU trace: it had no GPU events)\n",
                           what, p.name) +
               lost_step;
      if (!gpu_events_survived)  // tester49 F1: no stream left, the figures fell back to the host threads
        return fmt::format(
                   "trace cut    {} was cut short (import problem {}, data_loss) and no GPU event survived the cut: "
                   "overlap and exposed communication fell back to host-thread level (the record_param_comms spans "
                   "against the host ops around them), not the GPU streams' figures of a whole trace\n",
                   what, p.name) +
               lost_step;
      return fmt::format(
          "trace cut    {} was cut short (import problem {}, data_loss): its events after the cut are missing, not "
          "idle; GPU busy, overlap and exposed communication count only the GPU work written before the cut\n",
          what, p.name) + lost_step;
    }
  return "";
}

std::string gpu_run_text(const SessionReader& session, const RunStats& st) {
  const bool gpu_events = gpu_busy_figures(st).has_value();
  const std::string cut = trace_cut_text(session, gpu_events);
  const std::string busy = gpu_busy_text(st, session.meta(meta::kImported) == "1", !cut.empty());
  // the cut line whenever the trace was cut (tester49 F1: it went with the GPU busy line before)
  return busy + cut + device_gpu_busy_text(device_gpu_busy(session, st)) + gpu_trace_loss_text(session);
}

}  // namespace embedscope::sessions
