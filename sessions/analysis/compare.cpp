#include "embedscope/sessions/analysis/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/gpu_kernels.h"  // gpu_kernel_figures: HTA's overlap
#include "embedscope/sessions/analysis/gpu_run.h"
#include "embedscope/sessions/analysis/plan_diff.h"
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
    {"step time min (measured steps)", "step_time_min_ns"},
    {"step time max (measured steps)", "step_time_max_ns"},
    {"throughput", "throughput_per_s"},
    {"exposed communication (per rank and step)", "exposed_comm_ns_per_rank_step"},
    {"exposed communication, host threads (per rank and step)", "host_exposed_comm_ns_per_rank_step"},
    {"GPU busy (mean over ranks)", "gpu_busy_pct"},
    {"overlap %", "overlap_pct"},
    {"GPU kernels overlap % (HTA's comm/comp overlap)", "hta_overlap_pct"},
    {"peak allocated (largest rank)", "peak_allocated_bytes"},
    {"peak reserved (largest rank)", "peak_reserved_bytes"},
    {"imbalance: ids looked up (max/mean a step, mean over steps)", "lookups_max_over_mean_per_step"},
    {"imbalance: ids looked up (max/mean of the run's totals)", "lookups_max_over_mean"},
    {"imbalance: lookup time (max/mean)", "lookup_time_max_over_mean"},
    {"loss (last measured step)", "loss_last_step"},
    {"held-out AUC", "held_out_auc"},
    {"bytes sent per step (all ranks)", "wire_bytes_per_step"},
    {"bytes sent per token (all ranks, split checks left out)", "wire_bytes_per_token"},
};
static_assert(std::size(kFigures) == kCompareFigureCount);

bool is_duration(CompareFigure f) {
  return f == CompareFigure::StepMean || f == CompareFigure::StepP50 || f == CompareFigure::StepP99 ||
         f == CompareFigure::StepMin || f == CompareFigure::StepMax || f == CompareFigure::ExposedComm || f == CompareFigure::HostExposedComm;
}
bool is_percent(CompareFigure f) {
  return f == CompareFigure::Overlap || f == CompareFigure::HtaOverlap || f == CompareFigure::GpuBusy;
}
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
  const double steps = static_cast<double>(st.counted_steps());  // the time figures' steps (drain left out)
  switch (f) {
    // a trace has no memory counters (its 0 B are "not recorded") and no ids looked up (tester37 D2)
    case CompareFigure::PeakAllocated:
      return st.has_memory ? std::optional<double>(static_cast<double>(st.peak_allocated_bytes)) : std::nullopt;
    case CompareFigure::PeakReserved:
      return st.has_memory ? std::optional<double>(static_cast<double>(st.peak_reserved_bytes)) : std::nullopt;
    case CompareFigure::HeldOutAuc: return st.held_out_auc;  // evaluated after the run: steps aside
    case CompareFigure::HtaOverlap: return s.hta_overlap_pct;  // HTA's own step rule, not the step windows
    default: break;
  }
  // a run without measured steps (out of memory in warm-up, a crash in its first step) has no
  // step figures, only memory
  if (st.steps <= 0) return std::nullopt;
  switch (f) {
    case CompareFigure::StepMean: return st.step_time_ns.mean;
    case CompareFigure::StepP50: return static_cast<double>(st.step_time_ns.p50);
    case CompareFigure::StepP99: return static_cast<double>(st.step_time_ns.p99);
    case CompareFigure::StepMin: return static_cast<double>(st.step_time_ns.min);
    case CompareFigure::StepMax: return static_cast<double>(st.step_time_ns.max);
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
    case CompareFigure::LookupImbalancePerStep:
      return st.has_load ? std::optional<double>(st.lookups_max_over_mean_per_step) : std::nullopt;
    case CompareFigure::LookupImbalance: return st.has_load ? std::optional<double>(st.lookups_max_over_mean) : std::nullopt;
    case CompareFigure::LookupTimeImbalance:
      return st.has_load ? st.lookup_time_max_over_mean : std::nullopt;  // nullopt: not recorded ("-")
    case CompareFigure::Loss: return st.loss.empty() ? std::nullopt : std::optional<double>(st.loss.back());
    case CompareFigure::WireBytesPerStep:
    case CompareFigure::WireBytesPerToken: {
      if (s.wire.bytes_unknown || steps <= 0) return std::nullopt;
      int64_t sent = 0;
      for (const auto& rk : st.ranks) sent += rk.bytes_sent;
      if (f == CompareFigure::WireBytesPerStep) return static_cast<double>(sent) / steps;
      if (s.rate.unit != "tokens" || s.rate.per_step <= 0) return std::nullopt;
      return static_cast<double>(sent - s.wire.split_check_bytes) / (steps * static_cast<double>(s.rate.per_step));
    }
    default: return std::nullopt;
  }
}

WireFacts wire_facts(const SessionReader& session, const RunStats& stats) {
  WireFacts w;
  w.bytes_unknown = collective_bytes_unknown(session);
  std::set<int64_t> counted;  // the steps analyze counts the bytes of
  for (const auto& t : stats.per_step)
    if (!t.drain) counted.insert(t.step);
  for (const auto& c : session.collectives())
    if (c.step >= 0 && counted.count(c.step) && c.name.ends_with("/split_check")) w.split_check_bytes += c.bytes_sent;
  return w;
}

std::string compare_value_text(CompareFigure f, double v, const std::string& unit) {
  if (is_duration(f)) return format_duration(static_cast<int64_t>(v));
  if (is_percent(f)) return fmt::format("{:.1f} %", v);
  switch (f) {
    case CompareFigure::Throughput: return format_rate(v) + (unit.empty() ? std::string() : " " + unit + "/s");
    case CompareFigure::PeakAllocated:
    case CompareFigure::PeakReserved:
      return (v < 0 ? "-" : "") + format_bytes(static_cast<int64_t>(std::abs(v)));
    case CompareFigure::Loss: return fmt::format("{:.5f}", v);  // fp16 vs fp32 moves the 4th decimal
    case CompareFigure::HeldOutAuc: return fmt::format("{:.4f}", v);
    case CompareFigure::WireBytesPerStep:  // a mean over steps: whole bytes
      return (v < 0 ? "-" : "") + format_bytes(std::llround(std::abs(v)));
    case CompareFigure::WireBytesPerToken: return fmt::format("{:.1f} B", v);
    default: return fmt::format("{:.2f}", v);
  }
}

std::string compare_cell_text(const ComparedSession& s, CompareFigure f) {
  if ((f == CompareFigure::WireBytesPerStep || f == CompareFigure::WireBytesPerToken) && s.wire.bytes_unknown &&
      s.stats.steps > 0)
    return "unknown";  // an imported trace's collectives without sizes: not 0 B
  const auto v = compare_value(s, f);
  return v ? compare_value_text(f, *v, s.rate.unit) : std::string("-");
}

std::string figure_level(const ComparedSession& s, CompareFigure f) {
  if (f != CompareFigure::ExposedComm && f != CompareFigure::Overlap) return "";
  return s.stats.stream_ranks ? "GPU streams" : s.stats.simulated ? "simulated ranks" : "host threads";
}

CompareDelta compare_delta(const ComparedSession& base, const ComparedSession& other, CompareFigure f) {
  CompareDelta d;
  const auto a = compare_value(base, f), b = compare_value(other, f);
  if (!a || !b) {
    d.text = "-";
    return d;
  }
  // GPU streams against host threads or simulated ranks: two measures, no difference (tester54 F5)
  if (const std::string la = figure_level(base, f), lb = figure_level(other, f);
      la != lb && (la == "GPU streams" || lb == "GPU streams")) {
    d.not_comparable = lb + " vs " + la;
    d.text = "not comparable (" + d.not_comparable + ")";
    return d;
  }
  if (f == CompareFigure::Throughput && base.rate.unit != other.rate.unit) {  // tokens against samples: no difference
    d.text = fmt::format("units differ ({}/s vs {}/s)", other.rate.unit, base.rate.unit);
    return d;
  }
  d.diff = *b - *a;
  // a difference that its text rounds to zero reads 0, not "-0.00000 (-0.0 %)" (tester48 F14.5)
  const bool reads_zero = is_percent(f) ? fmt::format("{:.1f}", std::abs(*d.diff)) == "0.0"
                                        : compare_value_text(f, std::abs(*d.diff), base.rate.unit) ==
                                              compare_value_text(f, 0.0, base.rate.unit);
  const std::string sign = *d.diff > 0 && !reads_zero ? "+" : "";
  // a difference of two percentages is in percentage points, not a percentage
  if (is_percent(f)) {
    d.text = reads_zero ? std::string("0.0 points") : fmt::format("{}{:.1f} points", sign, *d.diff);
    return d;
  }
  // the values shown differ while their difference rounds to zero (tester50 F12: loss 0.66410 vs
  // 0.66409, "0.00000"): the difference with the decimals it needs (up to 12), sign included,
  // "-0.000003 (-0.0004 %)"
  const int decimals = f == CompareFigure::Loss ? 5 : f == CompareFigure::HeldOutAuc ? 4 : 2;
  const bool fixed = !is_duration(f) && !is_percent(f) && f != CompareFigure::Throughput &&
                     f != CompareFigure::PeakAllocated && f != CompareFigure::PeakReserved &&
                     f != CompareFigure::WireBytesPerStep && f != CompareFigure::WireBytesPerToken;
  if (reads_zero && fixed && *d.diff != 0 &&
      compare_value_text(f, *a, base.rate.unit) != compare_value_text(f, *b, base.rate.unit)) {
    int more = decimals + 1;
    while (more < 12 && fmt::format("{:.{}f}", std::abs(*d.diff), more) == fmt::format("{:.{}f}", 0.0, more)) ++more;
    d.text = fmt::format("{}{:.{}f}", *d.diff > 0 ? "+" : "-", std::abs(*d.diff), more);
    if (*a != 0) {
      d.percent = 100 * *d.diff / *a;
      d.text += fmt::format(" ({}{:.1g} %)", *d.diff > 0 ? "+" : "", *d.percent);
    }
    return d;
  }
  if (reads_zero) {
    d.text = compare_value_text(f, 0.0, base.rate.unit);
    if (*a != 0) {
      d.percent = 100 * *d.diff / *a;
      d.text += " (0.0 %)";
    }
    return d;
  }
  d.text = sign + compare_value_text(f, *d.diff, base.rate.unit);
  if (*a != 0) {
    d.percent = 100 * *d.diff / *a;
    d.text += fmt::format(" ({}{:.1f} %)", *d.diff > 0 ? "+" : "", *d.percent);  // a small -0.00009 keeps its sign
  }
  const bool like_work = base.rate.per_step == other.rate.per_step || base.rate.per_step == 0 || other.rate.per_step == 0;
  if ((f == CompareFigure::StepMean || f == CompareFigure::StepP50 || (f == CompareFigure::Throughput && like_work)) &&
      *d.diff != 0) {
    switch (step_verdict(base, other)) {
      case StepVerdict::SameConfiguration:
      case StepVerdict::WithinStepNoise:
      case StepVerdict::WithinRunToRun:
        d.within_noise = true;
        d.text += ", within noise";
        break;
      case StepVerdict::TooFewSteps: d.text += ", too few steps to tell"; break;
      case StepVerdict::Simulated: d.text += ", exact (simulated)"; break;
      case StepVerdict::ModelVsMeasured: d.text += ", model vs measured"; break;
      default: break;
    }
  }
  return d;
}

std::string measure_note(const std::vector<ComparedSession>& sessions, const std::vector<std::string>& labels) {
  if (labels.size() != sessions.size()) return "";
  // a simulated session's figures are the cost model's ops per rank, neither (tester45 F12.2)
  std::vector<std::string> streams, threads, simulated, no_host;
  for (size_t i = 0; i < sessions.size(); ++i) {
    const RunStats& st = sessions[i].stats;
    (st.simulated ? simulated : st.stream_ranks ? streams : threads).push_back(labels[i]);
    if (!compare_value(sessions[i], CompareFigure::HostExposedComm)) no_host.push_back(labels[i]);
  }
  if (streams.empty() || (threads.empty() && simulated.empty())) return "";
  std::vector<std::string> others;
  if (!threads.empty()) others.push_back(fmt::format("those of {} its host threads' spans", fmt::join(threads, ", ")));
  if (!simulated.empty())
    others.push_back(
        fmt::format("those of {} the cost model's compute and comm ops per simulated rank", fmt::join(simulated, ", ")));
  std::string note = fmt::format(
      "not the same measure: the communication, overlap and idle figures of {} are its GPU streams' (kernels and "
      "copies), {}; differences between GPU-stream figures and the others are not computed (not comparable); ",
      fmt::join(streams, ", "), fmt::join(others, ", "));
  if (no_host.empty()) return note + "the row 'exposed communication, host threads' compares the host threads of all";
  // an imported trace's host threads are not analysed: the host row is "-" for it (tester54 F5)
  const bool one = no_host.size() == 1;
  std::vector<std::string> not_streams = threads;  // the sessions of the other levels
  not_streams.insert(not_streams.end(), simulated.begin(), simulated.end());
  note += fmt::format("no row compares {} like for like with {}: {} {} no host-thread figures (an imported trace's "
                      "host threads are not analysed; the row 'exposed communication, host threads' is - for {})",
                      fmt::join(no_host, ", "), fmt::join(not_streams, ", "), fmt::join(no_host, ", "),
                      one ? "has" : "have", one ? "it" : "them");
  if (sessions.size() - no_host.size() >= 2) {
    std::vector<std::string> with_host;
    for (const auto& l : labels)
      if (std::find(no_host.begin(), no_host.end(), l) == no_host.end()) with_host.push_back(l);
    note += fmt::format("; that row compares the host threads of {}", fmt::join(with_host, ", "));
  }
  return note;
}

std::optional<double> hta_overlap_pct(const SessionReader& session) {
  if (session.meta(meta::kImported) != "1") return std::nullopt;
  double sum = 0;
  int n = 0;
  for (const auto& r : gpu_kernel_figures(session))
    if (r.has_comm) sum += r.overlap_pct, ++n;
  return n > 0 ? std::optional<double>(sum / n) : std::nullopt;
}

std::vector<std::string> comparison_warnings(const std::vector<const SessionReader*>& sessions,
                                             const std::vector<std::string>& labels) {
  std::vector<std::string> out;
  if (sessions.empty() || labels.size() != sessions.size()) return out;
  const auto world = [](const SessionReader& s) {
    const std::string w = s.meta(meta::kWorldSize);
    try {
      if (!w.empty()) return static_cast<int64_t>(std::stoll(w));
    } catch (const std::exception&) {
    }
    return static_cast<int64_t>(s.ranks().size());
  };
  const SessionReader& base = *sessions[0];
  const std::string base_ran = what_it_ran(base);
  const int64_t base_world = world(base);
  const auto simulated = [](const SessionReader& s) { return s.meta(meta::kSimulated, "0") == "1"; };
  const bool base_simulated = simulated(base);
  for (size_t i = 1; i < sessions.size(); ++i) {
    const SessionReader& s = *sessions[i];
    std::error_code ec;
    if (std::filesystem::equivalent(base.path(), s.path(), ec) && !ec) {
      out.push_back(fmt::format("{} is the same file as {} ({}): every difference is 0 by construction", labels[i],
                                labels[0], s.path()));
      continue;
    }
    std::vector<std::string> why;
    if (const std::string ran = what_it_ran(s); ran != base_ran)
      why.push_back(fmt::format("another workload ({} vs {})", ran, base_ran));
    if (const int64_t w = world(s); w != base_world)
      why.push_back(fmt::format("another world size ({} vs {} ranks)", w, base_world));
    if (const bool sim = simulated(s); sim != base_simulated)  // tester42 F17
      why.push_back(fmt::format("{} vs {} (the cost model's times against a run's)", sim ? "SIMULATED" : "measured",
                                base_simulated ? "SIMULATED" : "measured"));
    if (!why.empty())
      out.push_back(fmt::format("{} is not like-for-like with {}: {}; its differences mix {}", labels[i], labels[0],
                                fmt::join(why, ", "), why.size() == 1 ? "that change with any other" : "those changes"));
  }
  return out;
}

std::string what_it_ran(const SessionReader& s) {
  const std::string name = s.meta(meta::kWorkloadName);
  if (s.meta(meta::kImported) != "1") return name.empty() ? std::string("unnamed workload") : name;
  // what was imported first: a snapshot's name (its file) alone read as a run (tester37 #20)
  const std::string format = s.meta(meta::kImportFormat);
  const std::string kind = format == "torch_memory_snapshot" ? "imported memory snapshot"
                           // torch without Kineto (the legacy profiler, testerB F12): not a Kineto trace
                           : format == "kineto_json" && s.meta(meta::kImportProducer).find("legacy, no Kineto") != std::string::npos
                               ? "imported PyTorch profiler trace (legacy, no Kineto)"
                           : format == "kineto_json"         ? "imported PyTorch profiler (Kineto) trace"
                           : format == "nsys_sqlite"         ? "imported Nsight Systems export"
                                                             : "imported " + (format.empty() ? std::string("profiler") : format) +
                                                       " trace";
  return name.empty() ? kind : kind + " " + name;
}

std::string plan_types(const nlohmann::json& plan) {
  std::vector<std::pair<std::string, int>> counts;  // in order of first appearance
  if (plan.is_object() && plan.contains("tables") && plan["tables"].is_array())
    for (const auto& t : plan["tables"]) {
      const std::string type = t.is_object() && t.contains("sharding_type") && t["sharding_type"].is_string()
                                   ? t["sharding_type"].get<std::string>()
                                   : "?";
      auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == type; });
      if (it == counts.end()) counts.emplace_back(type, 1);
      else ++it->second;
    }
  std::string out;
  for (const auto& [type, n] : counts) out += fmt::format("{}{} {}", out.empty() ? "" : " + ", n, type);
  return out;
}

namespace {
// Leaves of a JSON value as (pointer without the leading '/', compact value), in document order.
void flatten(const nlohmann::json& j, const std::string& at, std::vector<std::pair<std::string, std::string>>& out) {
  if (j.is_object() && !j.empty()) {
    for (const auto& item : j.items()) flatten(item.value(), at.empty() ? item.key() : at + "/" + item.key(), out);
  } else if (j.is_array() && !j.empty()) {
    for (size_t k = 0; k < j.size(); ++k) flatten(j[k], at + "/" + std::to_string(k), out);
  } else {
    out.emplace_back(at, j.is_string() ? j.get<std::string>() : j.dump());
  }
}

}  // namespace

namespace {
// The session's measured steps as `stats` counts them (RunStats::steps: the distinct step
// numbers >= 0 of table `steps`), not the workload's planned `steps` (meta::kSteps): a cancelled,
// crashed or live session holds fewer (tester45 F8: "measured steps 60" for 33 measured).
std::string measured_steps_text(const SessionReader& s) {
  std::set<int64_t> steps;
  for (const auto& m : s.steps())
    if (m.step >= 0) steps.insert(m.step);
  return std::to_string(steps.size());
}

// The raw list (differing_settings' verbose form): every leaf by its pointer, numbered placements.
std::vector<std::string> raw_differing_settings(const std::vector<const SessionReader*>& sessions) {
  const size_t n = sessions.size();
  std::vector<std::string> out(n);
  std::vector<std::string> order;                         // setting names, first appearance
  std::vector<std::map<std::string, std::string>> value(n);
  std::vector<bool> compared(n, false);
  std::vector<nlohmann::json> plans(n);
  for (size_t i = 0; i < n; ++i) {
    const auto w = nlohmann::json::parse(sessions[i]->meta(meta::kWorkloadJson), nullptr, false);
    if (sessions[i]->meta(meta::kImported) == "1" || w.is_discarded() || !w.is_object()) continue;
    compared[i] = true;
    std::vector<std::pair<std::string, std::string>> leaves;
    flatten(w, "", leaves);
    plans[i] = nlohmann::json::parse(sessions[i]->meta(meta::kShardingPlanJson), nullptr, false);
    // no plan with tables (an lm_embedding session): no "plan" leaf, no placement number
    // (tester43 F19: "plan , placement 1" of LM sessions under --verbose)
    if (std::string types = plan_types(plans[i]); !types.empty()) leaves.emplace_back("plan", std::move(types));
    leaves.emplace_back("measured steps", measured_steps_text(*sessions[i]));
    for (auto& [k, v] : leaves) {
      if (std::find(order.begin(), order.end(), k) == order.end()) order.push_back(k);
      value[i][k] = std::move(v);
    }
  }
  // plans of the same types placed differently: numbered placements
  std::vector<size_t> placement(n, 0);
  std::vector<size_t> distinct;  // a session of each distinct plan
  for (size_t i = 0; i < n; ++i) {
    if (!compared[i] || !value[i].count("plan")) continue;
    auto same = std::find_if(distinct.begin(), distinct.end(), [&](size_t d) { return plans[d] == plans[i]; });
    if (same == distinct.end()) {
      distinct.push_back(i);
      placement[i] = distinct.size();
    } else {
      placement[i] = placement[*same];
    }
  }
  std::vector<std::string> types(n);
  for (size_t i = 0; i < n; ++i)
    if (compared[i] && value[i].count("plan")) types[i] = value[i]["plan"];
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < n; ++k)
      if (compared[i] && compared[k] && placement[i] > 0 && placement[k] > 0 && placement[i] != placement[k] &&
          types[i] == types[k]) {
        value[i]["plan"] += fmt::format(", placement {}", placement[i]);
        break;
      }
  static const std::string kMissing = "(none)";
  for (size_t i = 0; i < n; ++i) {
    if (!compared[i]) continue;
    std::string text;
    for (const auto& name : order) {
      const std::string* first = nullptr;
      bool differs = false;
      for (size_t k = 0; k < n && !differs; ++k) {
        if (!compared[k]) continue;
        const auto it = value[k].find(name);
        const std::string* v = it == value[k].end() ? &kMissing : &it->second;
        if (!first) first = v;
        else differs = *v != *first;
      }
      if (!differs) continue;
      const auto it = value[i].find(name);
      text += fmt::format("{}{} {}", text.empty() ? "" : ", ", name, it == value[i].end() ? kMissing : it->second);
    }
    out[i] = text;
  }
  return out;
}

bool is_under(const std::string& name, const std::string& prefix) {
  return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 && name[prefix.size()] == '/';
}

/// "sharding/tables/T/hot_rows" (a table's replicated rows, collapse_hot_rows's one leaf).
bool is_hot_rows(const std::string& name) {
  static const std::string kSuffix = "/hot_rows";
  return is_under(name, "sharding/tables") && name.size() > kSuffix.size() &&
         name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

/// A table's hot_rows list, flattened to one leaf a row ("sharding/tables/big/hot_rows/0" ...),
/// as one leaf "sharding/tables/big/hot_rows" of "18 rows (0..17)" (contiguous rows) or "3 rows
/// (0, 5, 9)" / "40 rows (0, 1, 2, 3, ...)" - the replicated rows differ as a whole (tester48 F8:
/// sessions that differed only in hot_rows had no "differs" line). The leaves keep their order.
void collapse_hot_rows(std::vector<std::pair<std::string, std::string>>& leaves) {
  std::vector<std::pair<std::string, std::string>> out;
  std::map<std::string, std::vector<std::string>> rows;  // table's hot_rows name -> its row texts
  for (auto& [k, v] : leaves) {
    const size_t slash = k.rfind('/');
    if (slash != std::string::npos && is_hot_rows(k.substr(0, slash))) {
      const std::string name = k.substr(0, slash);
      if (!rows.count(name)) out.emplace_back(name, "");
      rows[name].push_back(v);
      continue;
    }
    out.emplace_back(std::move(k), std::move(v));
  }
  for (auto& [k, v] : out) {
    const auto it = rows.find(k);
    if (it == rows.end()) continue;
    const std::vector<std::string>& r = it->second;
    bool contiguous = true;
    for (size_t i = 1; i < r.size() && contiguous; ++i)
      contiguous = std::strtoll(r[i].c_str(), nullptr, 10) == std::strtoll(r[i - 1].c_str(), nullptr, 10) + 1;
    if (contiguous && r.size() > 1) {
      v = fmt::format("{} rows ({}..{})", r.size(), r.front(), r.back());
    } else {
      std::string list;
      for (size_t i = 0; i < r.size() && i < 4; ++i) list += (i ? ", " : "") + r[i];
      v = fmt::format("{} row{} ({}{})", r.size(), r.size() == 1 ? "" : "s", list, r.size() > 4 ? ", ..." : "");
    }
  }
  leaves = std::move(out);
}
}  // namespace

std::vector<std::string> differing_settings(const std::vector<const SessionReader*>& sessions, size_t max_settings,
                                            bool verbose) {
  if (verbose) return raw_differing_settings(sessions);
  const size_t n = sessions.size();
  std::vector<std::string> out(n);
  std::vector<std::string> order;  // setting names, first appearance
  std::vector<std::map<std::string, std::string>> value(n);
  std::vector<bool> compared(n, false);
  std::vector<std::string> plan_text(n);
  bool all_plans = true;  // every compared session recorded a plan with tables
  for (size_t i = 0; i < n; ++i) {
    const auto w = nlohmann::json::parse(sessions[i]->meta(meta::kWorkloadJson), nullptr, false);
    if (sessions[i]->meta(meta::kImported) == "1" || w.is_discarded() || !w.is_object()) continue;
    compared[i] = true;
    plan_text[i] = sessions[i]->meta(meta::kShardingPlanJson);
    const auto plan = nlohmann::json::parse(plan_text[i], nullptr, false);
    all_plans = all_plans && plan.is_object() && plan.contains("tables") && plan["tables"].is_array();
    std::vector<std::pair<std::string, std::string>> leaves;
    flatten(w, "", leaves);
    collapse_hot_rows(leaves);
    leaves.emplace_back("plan", plan_types(plan));
    leaves.emplace_back("measured steps", measured_steps_text(*sessions[i]));
    for (auto& [k, v] : leaves) {
      if (v == "{}" || v == "[]") continue;  // an empty object or array: as absent
      if (std::find(order.begin(), order.end(), k) == order.end()) order.push_back(k);
      value[i][k] = std::move(v);
    }
  }
  // the plan: the baseline's types, the others' changes from it, table by table
  const auto base = std::find(compared.begin(), compared.end(), true);
  bool plans_differ = false;
  if (base != compared.end()) {
    const size_t b = static_cast<size_t>(base - compared.begin());
    for (size_t i = b + 1; i < n; ++i) {
      if (!compared[i]) continue;
      const std::vector<std::string> changes = plan_changes(plan_text[b], plan_text[i]);
      const bool same = changes.empty() && value[i]["plan"] == value[b]["plan"];
      plans_differ = plans_differ || !same;
      if (same) {
        value[i]["plan"] = "as the baseline's";
      } else if (!changes.empty()) {
        std::string text;
        for (size_t k = 0; k < changes.size() && k < 4; ++k) text += (k ? "; " : "") + changes[k];
        if (changes.size() > 4) text += fmt::format("; and {} more tables", changes.size() - 4);
        value[i]["plan"] = "vs the baseline: " + text;
      }
    }
  }
  static const std::string kMissing = "\x01";  // absent (never a JSON leaf's text)
  std::vector<std::string> differ;
  for (const auto& name : order) {
    // the plan says each table's sharding, but not its replicated hot rows (tester48 F8)
    if (all_plans && (name == "sharding/tables" || is_under(name, "sharding/tables")) && !is_hot_rows(name)) continue;
    if (name == "plan") {
      if (plans_differ) differ.push_back(name);
      continue;
    }
    const std::string* first = nullptr;
    bool differs = false;
    for (size_t i = 0; i < n && !differs; ++i) {
      if (!compared[i]) continue;
      const auto it = value[i].find(name);
      const std::string* v = it == value[i].end() ? &kMissing : &it->second;
      if (!first) first = v;
      else differs = *v != *first;
    }
    if (differs) differ.push_back(name);
  }
  for (size_t i = 0; i < n; ++i) {
    if (!compared[i]) continue;
    std::vector<std::string> entries;
    auto add = [&](std::string e) {
      if (std::find(entries.begin(), entries.end(), e) == entries.end()) entries.push_back(std::move(e));
    };
    for (const auto& name : differ) {
      if (const auto it = value[i].find(name); it != value[i].end()) {
        add(name + " " + it->second);
        continue;
      }
      // absent here: its nearest recorded ancestor ("rebalance off"), nothing when its children
      // are recorded (they differ in their own right), else the shortest absent pointer
      std::string ancestor, absent;
      for (size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1)) {
        const std::string prefix = name.substr(0, slash);
        if (value[i].count(prefix)) ancestor = prefix;
      }
      if (!ancestor.empty()) {
        add(ancestor + " " + value[i][ancestor]);
        continue;
      }
      const bool has_children = std::any_of(value[i].begin(), value[i].end(), [&](const auto& kv) { return is_under(kv.first, name); });
      if (has_children) continue;
      for (size_t at = 0;;) {
        const size_t slash = name.find('/', at);
        absent = name.substr(0, slash);  // the whole name when there is no further '/'
        const bool recorded = std::any_of(value[i].begin(), value[i].end(),
                                          [&](const auto& kv) { return kv.first == absent || is_under(kv.first, absent); });
        if (!recorded || slash == std::string::npos) break;
        at = slash + 1;
      }
      add(absent + " not set");
    }
    std::string text;
    for (size_t k = 0; k < entries.size() && k < max_settings; ++k) text += (k ? ", " : "") + entries[k];
    if (entries.size() > max_settings) text += fmt::format(" and {} more settings", entries.size() - max_settings);
    out[i] = text;
  }
  return out;
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
