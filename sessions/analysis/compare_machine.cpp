// Whether the machine, not what differs between two compared runs, changed their step times
// (compare.h machine_difference): the dense part does the same work in both, so a difference of
// its time beyond the steps' noise is the machine's (other jobs' load, another host).
#include <cmath>
#include <cstdlib>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/units.h"  // format_duration

namespace embedscope::sessions {

std::vector<int64_t> dense_series_ns(const RunStats& st) {
  std::map<int64_t, std::pair<double, int>> by_step;
  for (const auto& r : st.per_step) {
    if (r.drain || r.step < 0) continue;
    auto& [sum, n] = by_step[r.step];
    sum += static_cast<double>(r.by_category_ns[static_cast<size_t>(OpCategory::dense)]);
    ++n;
  }
  std::vector<int64_t> out;
  out.reserve(by_step.size());
  for (const auto& [step, v] : by_step) out.push_back(std::llround(v.first / v.second));
  return out;
}

bool dense_work_alike(const SessionReader& a, const SessionReader& b) {
  for (const SessionReader* s : {&a, &b})
    if (s->meta(meta::kImported) == "1" || s->meta(meta::kSimulated, "0") == "1") return false;
  const auto workload = [](const SessionReader& s) {
    auto w = nlohmann::json::parse(s.meta(meta::kWorkloadJson), nullptr, false);
    if (w.is_object())
      for (const char* k : {"sharding", "steps", "warmup_steps", "rebalance", "seed"}) w.erase(k);
    return w;
  };
  const auto wa = workload(a), wb = workload(b);
  if (!wa.is_object() || wa != wb) return false;
  return a.meta(meta::kWorldSize) == b.meta(meta::kWorldSize) && a.meta(meta::kBackend) == b.meta(meta::kBackend);
}

std::optional<MachineDifference> machine_difference(const SessionReader& ra, const ComparedSession& base,
                                                    const SessionReader& rb, const ComparedSession& other) {
  if (base.stats.steps <= 0 || other.stats.steps <= 0 || !dense_work_alike(ra, rb)) return std::nullopt;
  const std::vector<int64_t> a = dense_series_ns(base.stats), b = dense_series_ns(other.stats);
  const auto t = step_series_test(a, b);
  if (!t || !t->test.differs || t->base.mean <= 0 || t->other.mean <= 0) return std::nullopt;
  MachineDifference d;
  d.base_dense_ns = t->base.mean;
  d.other_dense_ns = t->other.mean;
  d.ratio = t->other.mean / t->base.mean;
  d.test = *t;
  if (std::abs(d.ratio - 1.0) < kMachineDifferenceMin) return std::nullopt;
  return d;
}

std::string machine_difference_text(const MachineDifference& d, const SessionReader& ra, const SessionReader& rb,
                                    const std::string& base_label, const std::string& label) {
  const bool slower = d.ratio >= 1.0;
  const std::string how =
      slower ? fmt::format("{:.2f}x as long a step in {}", d.ratio, label)
             : fmt::format("{:.2f}x as long a step in {}", 1.0 / d.ratio, base_label);
  std::string load;  // what the sessions recorded of the other processes' load
  for (const char* key : {meta::kCpuOtherRunnable, meta::kCpuOtherCores}) {
    const std::string va = ra.meta(key), vb = rb.meta(key);
    if (va.empty() || vb.empty()) continue;
    load = fmt::format("; other processes' {} {} in {} vs {} in {}",
                       key == std::string(meta::kCpuOtherRunnable) ? "runnable threads" : "busy cores", vb, label, va,
                       base_label);
    break;
  }
  return fmt::format(
      "the machine differed between the runs: the dense part (the same MLPs on the same batch, which no sharding "
      "changes) took {} ({} {}, {} {} per rank and step, beyond the steps' noise: {} t {:.2f}, df {:.1f}){}; the "
      "step times carry that: rerun both on an equally loaded machine before blaming the difference on the settings",
      how, label, format_duration(std::llround(d.other_dense_ns)), base_label, format_duration(std::llround(d.base_dense_ns)),
      d.test.method == StepTestMethod::WelchSteps ? "Welch's" : "batch means", d.test.test.t, d.test.test.df, load);
}

}  // namespace embedscope::sessions
