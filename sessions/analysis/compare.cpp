#include "embedscope/sessions/analysis/compare.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>

#include <fmt/format.h>

#include "embedscope/sessions/analysis/gpu_run.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/unit_ladder.h"  // format_rate
#include "embedscope/sessions/model/units.h"        // format_duration, format_bytes

namespace embedscope::sessions {

namespace {
struct FigureInfo {
  const char* name;
  const char* key;
};
constexpr FigureInfo kFigures[] = {
    {"step time mean", "step_time_mean_ns"},
    {"step time p50", "step_time_p50_ns"},
    {"step time p99", "step_time_p99_ns"},
    {"throughput", "throughput_per_s"},
    {"exposed communication (per rank and step)", "exposed_comm_ns_per_rank_step"},
    {"exposed communication, host threads (per rank and step)", "host_exposed_comm_ns_per_rank_step"},
    {"GPU busy (mean over ranks)", "gpu_busy_pct"},
    {"overlap %", "overlap_pct"},
    {"peak allocated (largest rank)", "peak_allocated_bytes"},
    {"peak reserved (largest rank)", "peak_reserved_bytes"},
    {"imbalance: ids looked up (max/mean)", "lookups_max_over_mean"},
    {"imbalance: lookup time (max/mean)", "lookup_time_max_over_mean"},
};
static_assert(std::size(kFigures) == kCompareFigureCount);

bool is_duration(CompareFigure f) {
  return f == CompareFigure::StepMean || f == CompareFigure::StepP50 || f == CompareFigure::StepP99 ||
         f == CompareFigure::ExposedComm || f == CompareFigure::HostExposedComm;
}
bool is_percent(CompareFigure f) { return f == CompareFigure::Overlap || f == CompareFigure::GpuBusy; }
}  // namespace

const char* compare_figure_name(CompareFigure f) {
  const int i = static_cast<int>(f);
  return i >= 0 && i < kCompareFigureCount ? kFigures[i].name : "";
}
const char* compare_figure_key(CompareFigure f) {
  const int i = static_cast<int>(f);
  return i >= 0 && i < kCompareFigureCount ? kFigures[i].key : "";
}

std::optional<double> compare_value(const ComparedSession& s, CompareFigure f) {
  const RunStats& st = s.stats;
  const double steps = static_cast<double>(st.steps);
  switch (f) {
    // a trace has no memory counters (its 0 B are "not recorded") and no ids looked up (tester37 D2)
    case CompareFigure::PeakAllocated:
      return st.has_memory ? std::optional<double>(static_cast<double>(st.peak_allocated_bytes)) : std::nullopt;
    case CompareFigure::PeakReserved:
      return st.has_memory ? std::optional<double>(static_cast<double>(st.peak_reserved_bytes)) : std::nullopt;
    default: break;
  }
  // a run without measured steps (out of memory in warm-up, a crash in its first step) has no
  // step figures, only memory
  if (st.steps <= 0) return std::nullopt;
  switch (f) {
    case CompareFigure::StepMean: return st.step_time_ns.mean;
    case CompareFigure::StepP50: return static_cast<double>(st.step_time_ns.p50);
    case CompareFigure::StepP99: return static_cast<double>(st.step_time_ns.p99);
    case CompareFigure::Throughput:  // a trace has no throughput (no samples or tokens)
      return s.rate.unit.empty() ? std::nullopt : std::optional<double>(s.rate.per_s);
    case CompareFigure::ExposedComm: return static_cast<double>(st.exposed_comm_ns) / steps;
    case CompareFigure::HostExposedComm: {
      if (!st.stream_ranks) return static_cast<double>(st.exposed_comm_ns) / steps;  // host threads' already
      const auto g = gpu_busy_figures(st);
      if (s.imported || !g) return std::nullopt;  // a trace's host spans are not analysed this way
      return static_cast<double>(g->host_exposed_comm_ns) / steps;
    }
    case CompareFigure::GpuBusy: {
      const auto g = gpu_busy_figures(st);
      return g ? std::optional<double>(g->mean_pct) : std::nullopt;
    }
    case CompareFigure::Overlap: return st.overlap_pct;
    case CompareFigure::LookupImbalance: return st.has_load ? std::optional<double>(st.lookups_max_over_mean) : std::nullopt;
    case CompareFigure::LookupTimeImbalance:
      return st.has_load ? std::optional<double>(st.lookup_time_max_over_mean) : std::nullopt;
    default: return std::nullopt;
  }
}

std::string compare_value_text(CompareFigure f, double v, const std::string& unit) {
  if (is_duration(f)) return format_duration(static_cast<int64_t>(v));
  if (is_percent(f)) return fmt::format("{:.1f} %", v);
  switch (f) {
    case CompareFigure::Throughput: return format_rate(v) + (unit.empty() ? std::string() : " " + unit + "/s");
    case CompareFigure::PeakAllocated:
    case CompareFigure::PeakReserved:
      return (v < 0 ? "-" : "") + format_bytes(static_cast<int64_t>(std::abs(v)));
    default: return fmt::format("{:.2f}", v);
  }
}

std::string compare_cell_text(const ComparedSession& s, CompareFigure f) {
  const auto v = compare_value(s, f);
  return v ? compare_value_text(f, *v, s.rate.unit) : std::string("-");
}

CompareDelta compare_delta(const ComparedSession& base, const ComparedSession& other, CompareFigure f) {
  CompareDelta d;
  const auto a = compare_value(base, f), b = compare_value(other, f);
  if (!a || !b) {
    d.text = "-";
    return d;
  }
  if (f == CompareFigure::Throughput && base.rate.unit != other.rate.unit) {  // tokens against samples: no difference
    d.text = fmt::format("units differ ({}/s vs {}/s)", other.rate.unit, base.rate.unit);
    return d;
  }
  d.diff = *b - *a;
  const std::string sign = *d.diff > 0 ? "+" : "";
  // a difference of two percentages is in percentage points, not a percentage
  if (is_percent(f)) {
    d.text = fmt::format("{}{:.1f} points", sign, *d.diff);
    return d;
  }
  d.text = sign + compare_value_text(f, *d.diff, base.rate.unit);
  if (*a != 0) {
    d.percent = 100 * *d.diff / *a;
    d.text += fmt::format(" ({}{:.1f} %)", *d.diff > 0 ? "+" : "", *d.percent);
  }
  return d;
}

std::string what_it_ran(const SessionReader& s) {
  const std::string name = s.meta(meta::kWorkloadName);
  if (s.meta(meta::kImported) != "1") return name.empty() ? std::string("unnamed workload") : name;
  // what was imported first: a snapshot's name (its file) alone read as a run (tester37 #20)
  const std::string format = s.meta(meta::kImportFormat);
  const std::string kind = format == "torch_memory_snapshot" ? "imported memory snapshot"
                           : format == "kineto_json"         ? "imported PyTorch profiler (Kineto) trace"
                           : format == "nsys_sqlite"         ? "imported Nsight Systems export"
                                                             : "imported " + (format.empty() ? std::string("profiler") : format) +
                                                       " trace";
  return name.empty() ? kind : kind + " " + name;
}

std::vector<std::string> distinct_file_names(const std::vector<std::string>& paths) {
  std::vector<std::vector<std::string>> parts;  // each path's components, normalised
  for (const auto& p : paths) {
    std::vector<std::string> c;
    const std::string clean = std::filesystem::path(p).lexically_normal().generic_string();
    size_t at = 0;
    while (at <= clean.size()) {
      const size_t slash = std::min(clean.find('/', at), clean.size());
      if (slash > at && clean.compare(at, slash - at, ".") != 0) c.push_back(clean.substr(at, slash - at));
      at = slash + 1;
    }
    parts.push_back(std::move(c));
  }
  std::vector<size_t> tail(parts.size(), 1);  // how many trailing components each name shows
  auto name = [&](size_t i) {
    const auto& c = parts[i];
    std::string out;
    for (size_t k = c.size() - std::min(tail[i], c.size()); k < c.size(); ++k) out += (out.empty() ? "" : "/") + c[k];
    return out;
  };
  for (bool grew = true; grew;) {
    // the names that two different paths share so far: each shows one more component
    std::vector<bool> grow(parts.size(), false);
    for (size_t i = 0; i < parts.size(); ++i)
      for (size_t j = 0; j < parts.size(); ++j)
        if (i != j && parts[i] != parts[j] && name(i) == name(j)) grow[i] = true;
    grew = false;
    for (size_t i = 0; i < parts.size(); ++i)
      if (grow[i] && tail[i] < parts[i].size()) {
        ++tail[i];
        grew = true;
      }
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < parts.size(); ++i) out.push_back(name(i));
  return out;
}

}  // namespace embedscope::sessions
