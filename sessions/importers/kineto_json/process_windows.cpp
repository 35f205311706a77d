#include "importers/kineto_json/process_windows.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>
#include <utility>

#include <fmt/format.h>

namespace embedscope::sessions::importers::kineto {

HandlerFileName handler_file_name(const std::string& path) {
  HandlerFileName out;
  const std::filesystem::path p(path);
  std::string name = p.filename().string();
  for (const std::string suffix : {".pt.trace.json.gz", ".pt.trace.json"})
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      name.resize(name.size() - suffix.size());
      const size_t dot = name.rfind('.');
      if (dot == std::string::npos || dot == 0 || dot + 1 == name.size() || name.size() - dot - 1 > 19) return out;
      uint64_t digits = 0;  // at most 19 digits: below 10^19 < 2^64
      for (size_t i = dot + 1; i < name.size(); ++i) {
        if (name[i] < '0' || name[i] > '9') return out;
        digits = digits * 10 + static_cast<uint64_t>(name[i] - '0');
      }
      if (digits > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return out;
      const auto stamp = static_cast<int64_t>(digits);
      constexpr int64_t kMsStampBelow = 1'000'000'000'000'000;  // 10^15 ms is the year 33658
      if (stamp < kMsStampBelow && stamp > std::numeric_limits<int64_t>::max() / 1'000'000) return out;
      out.ok = true;
      out.dir = p.parent_path().string();
      out.worker = name.substr(0, dot);
      out.stamp_ns = stamp < kMsStampBelow ? stamp * 1'000'000 : stamp;
      return out;
    }
  return out;
}

namespace {
/// [first, last] of a trace's valid events and step spans on its own clock; {max, min} when empty.
std::pair<int64_t, int64_t> time_range(const RankTrace& tr) {
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (const Event& e : tr.events)
    if (!e.unfinished) lo = std::min(lo, e.ts), hi = std::max(hi, e.end);
  for (const Step& s : tr.steps) lo = std::min(lo, s.ts), hi = std::max(hi, s.end);
  return {lo, hi};
}

bool empty(const std::pair<int64_t, int64_t>& range) { return range.first > range.second; }

std::string ms_text(int64_t ns) { return fmt::format("{:.3f} ms", static_cast<double>(ns) / 1e6); }

/// Appends window `w` (times shifted by `shift`) to `into`: lanes joined by (kind, pid, tid).
void append_window(RankTrace& into, RankTrace&& w, int64_t shift) {
  std::vector<uint32_t> lane_of(w.lanes.size());
  for (uint32_t i = 0; i < w.lanes.size(); ++i) {
    const LaneDesc& d = w.lanes[i];
    const std::string key = d.kind + '\x1f' + d.pid + '\x1f' + d.tid;
    auto [it, fresh] = into.lane_index.try_emplace(key, static_cast<uint32_t>(into.lanes.size()));
    if (fresh) into.lanes.push_back(d);
    lane_of[i] = it->second;
  }
  const auto params = static_cast<int32_t>(into.comm_params.size());
  const auto first = static_cast<int64_t>(into.events.size());
  into.events.reserve(into.events.size() + w.events.size());
  for (Event e : w.events) {
    e.ts += shift;
    e.end += shift;
    e.lane = lane_of[e.lane];
    if (e.comm_param >= 0) e.comm_param += params;
    into.events.push_back(e);
  }
  for (Step s : w.steps) {
    s.ts += shift;
    s.end += shift;
    s.lane = lane_of[s.lane];
    into.steps.push_back(s);
  }
  for (auto& p : w.comm_params) into.comm_params.push_back(std::move(p));
  for (auto& [k, v] : w.thread_names) into.thread_names.try_emplace(k, v);
  for (auto& [k, v] : w.process_names) into.process_names.try_emplace(k, v);
  into.annotation_names.insert(w.annotation_names.begin(), w.annotation_names.end());
  if (into.devices.empty()) into.devices = w.devices, into.device_memory = w.device_memory;
  if (into.backend.empty()) into.backend = w.backend;
  into.world_size = std::max(into.world_size, w.world_size);
  into.sources.insert(into.sources.end(), w.sources.begin(), w.sources.end());
  // the cut of the last window is the trace's (trace_builder.cpp: the step the cut fell in); an
  // earlier window's is kept in earlier_window_cuts (join_process_windows)
  into.cut = w.cut;
  into.last_before_cut = w.cut && w.last_before_cut >= 0 ? first + w.last_before_cut : -1;
}

/// The stub window: one ProfilerStep holding no op but aten::empty (record_function's handle).
bool is_stub_window(const RankTrace& w, const Interner& names) {
  if (w.steps.size() != 1) return false;
  const Step& s = w.steps.front();
  for (const Event& e : w.events)
    if (e.ts >= s.ts && e.ts < s.end && names.text(e.name) != "aten::empty") return false;
  return true;
}

/// The tolerance of the stamps' placement: their ms rounding, once per window.
constexpr int64_t kStampToleranceNs = 2'000'000;
}  // namespace

bool has_clock_epoch(const RankTrace& tr) {
  if (tr.base_time_ns >= 0) return true;
  // Kineto (schemaVersion) writes Unix-epoch ts, or ts relative to baseTimeNanoseconds
  if (!tr.legacy_profiler && tr.producer.find("(Kineto) schemaVersion") != std::string::npos) return true;
  const auto [lo, hi] = time_range(tr);
  return lo == std::numeric_limits<int64_t>::max() || lo >= kProfilerStartClockNs;
}

void join_process_windows(std::vector<RankTrace>& traces, const Interner& names, ImportProblems& problems) {
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> groups;  // (dir, worker) -> traces
  std::vector<HandlerFileName> file_names(traces.size());
  for (size_t i = 0; i < traces.size(); ++i) {
    const RankTrace& t = traces[i];
    if (t.categories_from_cat || t.sources.size() != 1) continue;  // an Embedscope export's rank, or joined
    file_names[i] = handler_file_name(t.file);
    if (file_names[i].ok) groups[{file_names[i].dir, file_names[i].worker}].push_back(i);
  }
  std::vector<bool> gone(traces.size(), false);
  for (auto& group : groups) {
    const auto& key = group.first;
    std::vector<size_t>& members = group.second;  // a named reference: clang 14 cannot capture a binding
    if (members.size() < 2) continue;
    // one process: no rank in any file, or one rank in every file
    const bool no_rank = std::none_of(members.begin(), members.end(), [&](size_t i) { return traces[i].rank_known; });
    const bool one_rank = std::all_of(members.begin(), members.end(), [&](size_t i) {
      return traces[i].rank_known && traces[i].rank == traces[members.front()].rank;
    });
    if (!no_rank && !one_rank) continue;
    const bool bases = std::all_of(members.begin(), members.end(), [&](size_t i) { return traces[i].base_time_ns >= 0; });
    const bool absolute = !bases && std::all_of(members.begin(), members.end(), [&](size_t i) {
      return traces[i].base_time_ns < 0 && has_clock_epoch(traces[i]);
    });
    // each window's shift onto the first one's clock, and the order
    std::vector<std::pair<int64_t, int64_t>> range(traces.size());
    for (size_t i : members) range[i] = time_range(traces[i]);
    std::vector<int64_t> shift(traces.size(), 0);
    if (bases || absolute) {
      for (size_t i : members) shift[i] = bases ? traces[i].base_time_ns - traces[members.front()].base_time_ns : 0;
      std::stable_sort(members.begin(), members.end(),
                       [&](size_t a, size_t b) {  // windows without an event last
                         if (empty(range[a]) || empty(range[b])) return !empty(range[a]) && empty(range[b]);
                         return range[a].first + shift[a] < range[b].first + shift[b];
                       });
    } else {
      std::stable_sort(members.begin(), members.end(),
                       [&](size_t a, size_t b) { return file_names[a].stamp_ns < file_names[b].stamp_ns; });
      // onto the first window that holds an event (a window without any has nothing to place)
      const auto f = std::find_if(members.begin(), members.end(), [&](size_t i) { return !empty(range[i]); });
      if (f != members.end())
        for (size_t i : members)
          if (!empty(range[i]))
            shift[i] = (file_names[i].stamp_ns - file_names[*f].stamp_ns) + (range[*f].second - range[i].second);
    }
    for (size_t i : members)  // onto the first window's clock
      if (i != members.front()) shift[i] -= shift[members.front()];
    shift[members.front()] = 0;
    // one process's windows follow one another; windows that ran at the same time are not one's
    bool concurrent = false;
    int64_t moved = 0;
    for (size_t k = 1; k < members.size() && !concurrent; ++k) {
      const size_t prev = members[k - 1], cur = members[k];
      if (empty(range[cur]) || empty(range[prev])) continue;  // no event to overlap
      const int64_t prev_end = range[prev].second + shift[prev], start = range[cur].first + shift[cur];
      if (start >= prev_end) continue;
      if (bases || absolute || prev_end - start > kStampToleranceNs) concurrent = true;
      else shift[cur] += prev_end - start, ++moved;
    }
    if (concurrent) continue;
    // join, in time order, onto the first window
    RankTrace& into = traces[members.front()];
    std::string files = into.file, gaps;
    // the stub: the last window's lone empty step, after windows that held steps
    const RankTrace& last = traces[members.back()];
    const bool stub = is_stub_window(last, names) &&
                      std::any_of(members.begin(), members.end() - 1, [&](size_t i) { return !traces[i].steps.empty(); });
    const std::string stub_example =
        stub ? fmt::format("{} holds only ProfilerStep#{} ({:.3f} us) with no op in it but aten::empty "
                           "(record_function's own): the step that step() began just before the profiler stopped, "
                           "written as a window of its own; not a step (its {} events kept, in no step)",
                           last.file, last.steps.front().number,
                           static_cast<double>(last.steps.front().end - last.steps.front().ts) / 1e3, last.events.size())
             : std::string();
    const std::string stub_file = last.file;
    std::string window_file = into.file;  // the file of the window appended last
    for (size_t k = 1; k < members.size(); ++k) {
      const size_t i = members[k];
      // The window before this one was cut short: the step its cut fell in is incomplete as the
      // last window's is (trace_builder.cpp), its events ending before the next window's begin
      // (tester57b: only the last window's cut step was made incomplete).
      if (into.cut && into.last_before_cut >= 0) {
        RankTrace::WindowCut c;
        c.last_before_cut = into.last_before_cut;
        c.file = window_file;
        for (size_t m = k; m < members.size(); ++m)
          if (!empty(range[members[m]])) {
            c.next_window_ts = range[members[m]].first + shift[members[m]];
            break;
          }
        into.earlier_window_cuts.push_back(std::move(c));
      }
      window_file = traces[i].file;
      files += ", " + traces[i].file;
      if (!(bases || absolute))
        gaps += (gaps.empty() ? "" : ", ") + ms_text(file_names[i].stamp_ns - file_names[members[k - 1]].stamp_ns);
      if (k + 1 == members.size() && stub) traces[i].steps.clear();  // the stub's span: no step
      append_window(into, std::move(traces[i]), shift[i]);
      gone[i] = true;
    }
    const std::string who = no_rank ? fmt::format("worker \"{}\", no distributedInfo.rank", key.second)
                                    : fmt::format("worker \"{}\", each distributedInfo.rank {}", key.second, into.rank);
    const std::string how =
        bases      ? std::string("placed on their own clock (ts from each file's baseTimeNanoseconds)")
        : absolute ? std::string("placed on their own clock (absolute ts)")
                   : fmt::format("their ts count from each window's own profiler start (no epoch), so each window is "
                                 "placed by the time stamp in its file name (when tensorboard_trace_handler wrote "
                                 "it): its last event at that time, {} after the previous window's (to the ms, and "
                                 "the export's own time){}",
                                 gaps,
                                 moved ? fmt::format("; {} window(s) that would then start before the previous one "
                                                     "ended start at its end",
                                                     moved)
                                       : std::string());
    problems.add("windows_of_one_process", Severity::info, {into.file, -1},
                 fmt::format("{} ({}) are {} successive profiling windows of one process: imported as one rank, {}",
                             files, who, members.size(), how));
    if (stub) problems.add("stub_window", Severity::info, {stub_file, -1}, stub_example);
  }
  size_t kept = 0;
  for (size_t i = 0; i < traces.size(); ++i)
    if (!gone[i]) {
      if (kept != i) traces[kept] = std::move(traces[i]);
      ++kept;
    }
  traces.resize(kept);
}

}  // namespace embedscope::sessions::importers::kineto
