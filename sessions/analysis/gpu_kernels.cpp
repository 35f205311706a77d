#include "embedscope/sessions/analysis/gpu_kernels.h"
#include "embedscope/sessions/model/did_not_end.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/op_stream.h"

namespace embedscope::sessions {

using importers::KernelClass;

std::vector<GpuSpan> hta_merge(std::vector<GpuSpan> v) {
  std::stable_sort(v.begin(), v.end(), [](const GpuSpan& a, const GpuSpan& b) { return a.start < b.start; });
  std::vector<GpuSpan> out;
  int64_t max_end = std::numeric_limits<int64_t>::min();
  for (const auto& s : v) {
    if (out.empty() || s.start > max_end) out.push_back({s.start, s.end, s.cls});
    else out.back().end = std::max(out.back().end, s.end);
    max_end = std::max(max_end, s.end);
  }
  return out;
}

namespace {
int64_t length(const std::vector<GpuSpan>& merged) {
  int64_t n = 0;
  for (const auto& s : merged) n += s.end - s.start;
  return n;
}

std::vector<GpuSpan> of_class(const std::vector<GpuSpan>& spans, KernelClass c) {
  std::vector<GpuSpan> v;
  for (const auto& s : spans)
    if (s.cls == c) v.push_back(s);
  return hta_merge(std::move(v));
}

// HTA's sweep: +1/-1 at communication starts/ends, +2/-2 at computation ones; time where the
// running sum is 3 is overlap. Equal times are summed before the test, as HTA's zero-length
// rows between them add nothing.
int64_t overlap(const std::vector<GpuSpan>& comm, const std::vector<GpuSpan>& comp) {
  std::vector<std::pair<int64_t, int>> ev;
  for (const auto& s : comm) ev.push_back({s.start, 1}), ev.push_back({s.end, -1});
  for (const auto& s : comp) ev.push_back({s.start, 2}), ev.push_back({s.end, -2});
  std::sort(ev.begin(), ev.end());
  int64_t total = 0;
  int running = 0;
  for (size_t i = 0; i < ev.size();) {
    const int64_t t = ev[i].first;
    while (i < ev.size() && ev[i].first == t) running += ev[i++].second;
    if (running == 3 && i < ev.size()) total += ev[i].first - t;
  }
  return total;
}

double to_double_us(int64_t ns) {
  constexpr int64_t k53 = int64_t{1} << 53;
  if (ns > -k53 && ns < k53) return static_cast<double>(ns) / 1000.0;  // exact / 1000: correctly rounded
  if (ns % 1000 == 0) return static_cast<double>(ns / 1000);
  return static_cast<double>(static_cast<long double>(ns) / 1000.0L);
}
}  // namespace

GpuSpan hta_round(int64_t start, int64_t end, KernelClass cls) {
  const double ts = to_double_us(start);
  const double dur = static_cast<double>(end - start) / 1000.0;
  return {static_cast<int64_t>(std::ceil(ts)) * 1000, static_cast<int64_t>(std::floor(ts + dur)) * 1000, cls};
}

RankKernelFigures kernel_figures(const std::vector<GpuSpan>& spans) {
  RankKernelFigures f;
  f.gpu_events = static_cast<int64_t>(spans.size());
  if (spans.empty()) return f;
  const auto all = hta_merge(spans);
  f.kernel_time_ns = all.back().end - all.front().start;
  f.idle_ns = f.kernel_time_ns - length(all);
  const auto comp = of_class(spans, KernelClass::computation);
  const auto comm = of_class(spans, KernelClass::communication);
  f.compute_ns = length(comp);
  f.non_compute_ns = f.kernel_time_ns - f.compute_ns - f.idle_ns;
  f.comm_ns = length(comm);
  f.has_comm = !comm.empty() && f.comm_ns != 0;
  f.overlap_ns = overlap(comm, comp);
  f.overlap_pct = f.has_comm ? 100.0 * static_cast<double>(f.overlap_ns) / static_cast<double>(f.comm_ns) : 0.0;
  return f;
}

std::vector<RankGpuEvents> kept_gpu_events(const SessionReader& r, const GpuKernelOptions& opt) {
  const auto lanes = r.lanes();
  std::set<std::pair<int32_t, int32_t>> stream_lanes;
  for (const auto& l : lanes)
    if (l.kind == "stream") stream_lanes.insert({l.rank, l.lane});
  if (stream_lanes.empty()) return {};
  const std::string origin_text = r.meta(meta::kImportOriginNs);
  const bool imported = !origin_text.empty();
  // HTA rounds Kineto's float microseconds; an Nsight export has integer ns and is kept exact.
  const bool rounded = opt.whole_us || (imported && r.meta(meta::kImportFormat, "kineto_json") == "kineto_json");
  const int64_t origin = imported ? std::strtoll(origin_text.c_str(), nullptr, 10) : 0;
  // Times as HTA sees them: rounded trace microseconds on imported Kineto traces, exact ns otherwise.
  auto start_of = [&](int64_t s, int64_t e) { return rounded ? hta_round(s + origin, e + origin, KernelClass::other).start : s; };
  auto end_of = [&](int64_t s, int64_t e) { return rounded ? hta_round(s + origin, e + origin, KernelClass::other).end : e; };

  std::map<int32_t, std::vector<StepMetric>> steps;
  std::set<int64_t> step_numbers;
  for (const auto& s : r.steps()) steps[s.rank].push_back(s), step_numbers.insert(s.step);
  const bool filter = step_numbers.size() >= 2;

  struct RankOps {
    std::vector<OpRecord> gpu;
    std::unordered_map<uint64_t, int64_t> launch;  // correlation -> earliest host start (rounded)
    int64_t first_host = std::numeric_limits<int64_t>::max();
  };
  std::map<int32_t, RankOps> by_rank;
  for_each_lane_ops(r, [&](std::vector<OpRecord>& lane) {  // one lane at a time (op_stream.h)
    const bool gpu = stream_lanes.count({lane.front().rank, lane.front().lane}) > 0;
    RankOps& ro = by_rank[lane.front().rank];
    // ops that did not end (model/did_not_end.h) have no duration to count, and their start would
    // stretch the first-to-last-kernel span and move the first host op: left out (HTA would add
    // the trace's negative dur into its sums; issue 12 counts an unfinished event as no time)
    auto unfinished = [&](const OpRecord& o) { return o.start_ns == o.end_ns && did_not_end(o.start_ns, o.end_ns, r.name(o.name_id)); };
    if (gpu) {
      for (const auto& o : lane)
        if (!unfinished(o)) ro.gpu.push_back(o);
      return;
    }
    for (const auto& o : lane) {
      if (unfinished(o)) continue;
      const int64_t s = start_of(o.start_ns, o.end_ns);
      ro.first_host = std::min(ro.first_host, s);
      if (imported && o.correlation) {
        auto [it, fresh] = ro.launch.try_emplace(o.correlation, s);
        if (!fresh) it->second = std::min(it->second, s);
      }
    }
  });
  std::vector<RankGpuEvents> out;
  for (auto& [rank, ro] : by_rank) {
    if (ro.gpu.empty()) continue;
    // The rank's last step: HTA's last_profiler_start / last_profiler_end.
    int64_t last_start = std::numeric_limits<int64_t>::max(), last_end = std::numeric_limits<int64_t>::max();
    if (filter) {
      auto it = steps.find(rank);
      if (it != steps.end() && !it->second.empty()) {
        last_start = last_end = std::numeric_limits<int64_t>::min();
        for (const auto& s : it->second) {
          last_start = std::max(last_start, start_of(s.start_ns, s.end_ns));
          last_end = std::max(last_end, end_of(s.start_ns, s.end_ns));
        }
      } else {
        last_start = last_end = ro.first_host;  // HTA: no ProfilerStep on the rank -> its first host op
      }
    }
    std::vector<GpuSpan> spans;
    int64_t dropped = 0, dropped_no_launch = 0, warmup = 0;
    for (const auto& o : ro.gpu) {
      if (!imported && o.step < 0) {  // a warm-up step of Embedscope's own run
        ++warmup;
        continue;
      }
      // by name, as HTA; an op the session already files as communication (a collective the
      // engine ran or simulated under its own name) is communication whatever its name, and one
      // it files as a copy (the engine's CUPTI names them memcpy_htod, memset, ...; HTA's Kineto
      // names Memcpy HtoD ...) is a memory kernel: in neither class
      const KernelClass k = o.category == OpCategory::comm     ? KernelClass::communication
                            : o.category == OpCategory::memcpy ? KernelClass::memory
                                                               : importers::kernel_class(r.name(o.name_id));
      GpuSpan s = rounded ? hta_round(o.start_ns + origin, o.end_ns + origin, k) : GpuSpan{o.start_ns, o.end_ns, k};
      s.name_id = o.name_id;
      if (filter) {
        int64_t launch = s.start;  // a GPU event without a launch is judged by its own start
        if (imported && o.correlation) {
          auto l = ro.launch.find(o.correlation);
          if (l == ro.launch.end()) {  // no launch: dropped, in no step (not the last step's)
            ++dropped;
            ++dropped_no_launch;
            continue;
          }
          launch = l->second;
        }
        const bool keep = opt.keep_last_step ? launch <= last_end : launch < last_start;
        if (!keep) {
          ++dropped;
          continue;
        }
      }
      spans.push_back(s);
    }
    RankKernelFigures f;
    f.rank = rank;
    f.dropped_events = dropped;
    f.dropped_no_launch = dropped_no_launch;
    f.dropped_last_step = dropped - dropped_no_launch;
    f.warmup_events = warmup;
    f.microsecond_rounding = rounded;
    f.last_step_rule = filter;
    out.push_back({f, std::move(spans)});
  }
  return out;
}

std::vector<RankKernelFigures> gpu_kernel_figures(const SessionReader& r, const GpuKernelOptions& opt) {
  std::vector<RankKernelFigures> out;
  for (auto& e : kept_gpu_events(r, opt)) {
    RankKernelFigures f = kernel_figures(e.spans);
    f.rank = e.counters.rank;
    f.dropped_events = e.counters.dropped_events;
    f.dropped_no_launch = e.counters.dropped_no_launch;
    f.dropped_last_step = e.counters.dropped_last_step;
    f.warmup_events = e.counters.warmup_events;
    f.microsecond_rounding = e.counters.microsecond_rounding;
    f.last_step_rule = e.counters.last_step_rule;
    out.push_back(f);
  }
  return out;
}

}  // namespace embedscope::sessions
