// The noise verdicts of a comparison (compare.h): the within-run test of two mean step times by
// batch means, the run-to-run noise of repeated configurations, and the lines `compare` prints.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/units.h"  // format_duration

namespace embedscope::sessions {

const char* step_test_method_key(StepTestMethod m) {
  return m == StepTestMethod::WelchSteps ? "welch_steps" : "batch_means";
}

std::optional<StepTimeTest> step_series_test(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (static_cast<int64_t>(a.size()) < kMinWelchSamples || static_cast<int64_t>(b.size()) < kMinWelchSamples)
    return std::nullopt;
  StepTimeTest t;
  t.base = *batch_means(a);
  t.other = *batch_means(b);
  t.base_lag1 = lag1_autocorrelation(a);
  t.other_lag1 = lag1_autocorrelation(b);
  t.base_bound = white_noise_lag1_bound(t.base.n);
  t.other_bound = white_noise_lag1_bound(t.other.n);
  // a negative r1 makes sd / sqrt(n) err large: only a positive one beyond the bound is a drift
  t.method = t.base_lag1 <= t.base_bound && t.other_lag1 <= t.other_bound ? StepTestMethod::WelchSteps
                                                                         : StepTestMethod::BatchMeans;
  t.diff_ns = t.other.mean - t.base.mean;
  if (t.method == StepTestMethod::WelchSteps) {
    const double va = t.base.iid_se * t.base.iid_se, vb = t.other.iid_se * t.other.iid_se;
    t.se_ns = std::sqrt(va + vb);
    t.test = two_means_test(t.base.mean, va, static_cast<double>(t.base.n - 1), t.other.mean, vb,
                            static_cast<double>(t.other.n - 1));
  } else {
    t.se_ns = std::sqrt(t.base.se * t.base.se + t.other.se * t.other.se);
    t.test = two_means_test(t.base.mean, t.base.se * t.base.se, t.base.df, t.other.mean, t.other.se * t.other.se,
                            t.other.df);
    t.powerless = !t.test.differs && std::min(t.base.batches, t.other.batches) < kMinPoweredBatches;
  }
  return t;
}

std::optional<StepTimeTest> step_time_test(const ComparedSession& base, const ComparedSession& other) {
  if (base.stats.steps <= 0 || other.stats.steps <= 0) return std::nullopt;
  if (base.stats.simulated || other.stats.simulated) return std::nullopt;  // no noise to test
  return step_series_test(base.stats.step_series_ns, other.stats.step_series_ns);
}

bool same_configuration(const SessionReader& a, const SessionReader& b) {
  if (a.meta(meta::kImported) == "1" || b.meta(meta::kImported) == "1") return false;
  auto workload = [](const SessionReader& s) {
    auto w = nlohmann::json::parse(s.meta(meta::kWorkloadJson), nullptr, false);
    if (w.is_object()) w.erase("steps");  // a longer run of the same step is the same configuration
    return w;
  };
  const auto wa = workload(a), wb = workload(b);
  if (!wa.is_object() || wa != wb) return false;
  const auto pa = nlohmann::json::parse(a.meta(meta::kShardingPlanJson), nullptr, false);
  const auto pb = nlohmann::json::parse(b.meta(meta::kShardingPlanJson), nullptr, false);
  if (pa.is_discarded() != pb.is_discarded() || (!pa.is_discarded() && pa != pb)) return false;
  for (const char* key : {meta::kWorldSize, meta::kBackend})
    if (a.meta(key) != b.meta(key)) return false;
  if (a.meta(meta::kSimulated, "0") != b.meta(meta::kSimulated, "0")) return false;
  const std::string ha = a.meta(meta::kHost), hb = b.meta(meta::kHost);
  return ha.empty() || hb.empty() || ha == hb;
}

RunToRunNoise apply_run_to_run_noise(std::vector<ComparedSession>& cs, const std::vector<const SessionReader*>& sessions) {
  RunToRunNoise out;
  if (cs.size() != sessions.size()) return out;
  const auto has_steps = [&](size_t i) { return cs[i].stats.steps > 0 && cs[i].stats.step_time_ns.count > 0; };
  // a simulation repeats its step times exactly: in no group (its spread 0 is no machine's noise)
  const auto measured = [&](size_t i) { return has_steps(i) && !cs[i].stats.simulated; };
  out.baseline_simulated = !cs.empty() && cs[0].stats.simulated;
  for (size_t i = 0; i < cs.size(); ++i) {
    cs[i].configuration = -1;
    if (has_steps(i)) ++(cs[i].stats.simulated ? out.simulated_sessions : out.measured_sessions);
    if (!has_steps(i)) continue;
    if (!measured(i)) {
      cs[i].configuration = static_cast<int>(i);
      continue;
    }
    for (size_t k = 0; k < i && cs[i].configuration < 0; ++k) {
      // the same file twice is no repeat (comparison_warnings says so): it has no run-to-run spread
      std::error_code ec;
      if (std::filesystem::equivalent(sessions[k]->path(), sessions[i]->path(), ec) && !ec) continue;
      if (cs[k].configuration == static_cast<int>(k) && !cs[k].stats.simulated && same_configuration(*sessions[k], *sessions[i]))
        cs[i].configuration = static_cast<int>(k);
    }
    if (cs[i].configuration < 0) cs[i].configuration = static_cast<int>(i);
  }
  for (size_t i = 0; i < cs.size(); ++i) {
    if (cs[i].configuration != static_cast<int>(i)) continue;
    RunToRunNoise::Group g;
    for (size_t k = i; k < cs.size(); ++k)
      if (cs[k].configuration == static_cast<int>(i)) g.sessions.push_back(k);
    if (g.sessions.size() < 2) continue;
    double lo = cs[i].stats.step_time_ns.mean, hi = lo;
    for (const size_t k : g.sessions) {
      lo = std::min(lo, cs[k].stats.step_time_ns.mean);
      hi = std::max(hi, cs[k].stats.step_time_ns.mean);
    }
    g.fastest_mean_ns = lo;
    g.spread_ns = hi - lo;
    g.spread_pct = lo > 0 ? 100.0 * (hi - lo) / lo : 0.0;
    if (out.groups.empty() || g.spread_pct > out.spread_pct) out.spread_pct = g.spread_pct, out.spread_ns = g.spread_ns;
    out.groups.push_back(std::move(g));
  }
  for (auto& s : cs) s.run_to_run_pct = out.measured() ? std::optional<double>(out.spread_pct) : std::nullopt;
  return out;
}

const char* step_verdict_key(StepVerdict v) {
  switch (v) {
    case StepVerdict::NotTested: return "not_tested";
    case StepVerdict::TooFewSteps: return "too_few_steps";
    case StepVerdict::Simulated: return "simulated";
    case StepVerdict::ModelVsMeasured: return "model_vs_measured";
    case StepVerdict::SameConfiguration: return "same_configuration";
    case StepVerdict::WithinStepNoise: return "within_step_noise";
    case StepVerdict::WithinRunToRun: return "within_run_to_run_noise";
    case StepVerdict::Differ: return "differ";
  }
  return "not_tested";
}

namespace {
// |diff| within the run-to-run noise: at most run_to_run_pct % of the faster of the two means
bool within_run_to_run(const ComparedSession& base, const ComparedSession& other) {
  if (!other.run_to_run_pct || base.stats.steps <= 0 || other.stats.steps <= 0) return false;
  const double a = base.stats.step_time_ns.mean, b = other.stats.step_time_ns.mean;
  return std::abs(b - a) <= *other.run_to_run_pct / 100.0 * std::min(a, b);
}
}  // namespace

StepVerdict step_verdict(const ComparedSession& base, const ComparedSession& other) {
  if (base.stats.steps > 0 && other.stats.steps > 0 && (base.stats.simulated || other.stats.simulated))
    return base.stats.simulated && other.stats.simulated ? StepVerdict::Simulated : StepVerdict::ModelVsMeasured;
  if (base.configuration >= 0 && base.configuration == other.configuration) return StepVerdict::SameConfiguration;
  const std::optional<StepTimeTest> t = step_time_test(base, other);
  if (t && !t->test.differs && !t->powerless) return StepVerdict::WithinStepNoise;
  if (within_run_to_run(base, other)) return StepVerdict::WithinRunToRun;
  if (t && t->powerless) return StepVerdict::TooFewSteps;
  return t ? StepVerdict::Differ : StepVerdict::NotTested;
}

bool within_noise(const ComparedSession& base, const ComparedSession& other) {
  const StepVerdict v = step_verdict(base, other);
  return v == StepVerdict::SameConfiguration || v == StepVerdict::WithinStepNoise || v == StepVerdict::WithinRunToRun;
}

std::string step_time_test_text(const ComparedSession& base, const ComparedSession& other, const std::string& base_label,
                                const std::string& label) {
  const StepVerdict v = step_verdict(base, other);
  const double a = base.stats.step_time_ns.mean, b = other.stats.step_time_ns.mean;
  const auto diff_text = [&] {
    return fmt::format("{}{} ({}{:.1f} %)", b >= a ? "+" : "-", format_duration(static_cast<int64_t>(std::llround(std::abs(b - a)))),
                       b >= a ? "+" : "", a > 0 ? 100.0 * (b - a) / a : 0.0);
  };
  const auto run_to_run = [&] {
    return fmt::format("the run-to-run noise ({:.1f} %, {} of the faster mean here)", *other.run_to_run_pct,
                       format_duration(static_cast<int64_t>(std::llround(*other.run_to_run_pct / 100.0 * std::min(a, b)))));
  };
  if (v == StepVerdict::SameConfiguration)
    return fmt::format("step times {} vs {}: the same configuration; {} is run-to-run noise", label, base_label, diff_text());
  if (v == StepVerdict::Simulated)
    return fmt::format("step times {} vs {}: both simulated: {} is the cost model's difference, exact (a simulation's "
                       "steps do not vary from run to run: no noise test)",
                       label, base_label, diff_text());
  if (v == StepVerdict::ModelVsMeasured) {
    const bool other_sim = other.stats.simulated;
    // the model's figure against the measured one: the model's relative error
    const double model = other_sim ? b : a, run = other_sim ? a : b;
    const double rel = run > 0 ? 100.0 * (model - run) / run : 0.0;
    return fmt::format("step times {} vs {}: a model-vs-measurement comparison ({} simulated, {} measured): the "
                       "simulated mean step is {:.1f} % {} the measured one ({}{}); no significance verdict (the "
                       "simulation has no noise, and the measurement's noise is not the model's error)",
                       label, base_label, other_sim ? label : base_label, other_sim ? base_label : label, std::abs(rel),
                       rel >= 0 ? "above" : "below", model >= run ? "+" : "-",
                       format_duration(static_cast<int64_t>(std::llround(std::abs(model - run)))));
  }
  const std::optional<StepTimeTest> t = step_time_test(base, other);
  if (!t) {
    std::vector<std::string> few;
    for (const auto& [l, s] : {std::pair{base_label, &base}, std::pair{label, &other}}) {
      const int64_t n = s->stats.steps > 0 ? static_cast<int64_t>(s->stats.step_series_ns.size()) : 0;
      if (n < kMinWelchSamples) few.push_back(fmt::format("{} has {} counted step{}", l, n, n == 1 ? "" : "s"));
    }
    const std::string head = fmt::format("step times {} vs {}: no within-run test ({}; it needs {} in each)", label,
                                         base_label, fmt::join(few, ", "), kMinWelchSamples);
    if (v == StepVerdict::WithinRunToRun) return head + fmt::format("; {} is within {}: noise on this machine", diff_text(), run_to_run());
    if (other.run_to_run_pct) return head + fmt::format("; {} is beyond {}", diff_text(), run_to_run());
    return head;
  }
  const bool welch = t->method == StepTestMethod::WelchSteps;
  const std::string method =
      welch ? fmt::format("Welch's t on the steps, 95 %; lag-1 autocorrelation {:.2f} and {:.2f}, within +-{:.2f}",
                          t->base_lag1, t->other_lag1, std::max(t->base_bound, t->other_bound))
            : fmt::format("batch means, 95 %; lag-1 autocorrelation {:.2f} and {:.2f}, above +-{:.2f}", t->base_lag1,
                          t->other_lag1, std::max(t->base_bound, t->other_bound));
  const std::string head = fmt::format("step times {} vs {} ({}): {}, t {:.2f}, df {:.1f}, critical {:.3f}: ", label,
                                       base_label, method, diff_text(), t->test.t, t->test.df, t->test.critical);
  switch (v) {
    case StepVerdict::WithinStepNoise: return head + "within the steps' noise";
    case StepVerdict::TooFewSteps:
      return head + fmt::format("too few steps to tell (the steps drift, so only batch means test them, and {} "
                                "batches a run leave df {:.1f}); run >= {} steps",
                                std::min(t->base.batches, t->other.batches), t->test.df, kMinPoweredBatchSteps);
    case StepVerdict::WithinRunToRun: return head + "the steps differ, but by less than " + run_to_run() + ": noise on this machine";
    default: break;
  }
  if (other.run_to_run_pct) return head + fmt::format("they differ, beyond {}", run_to_run());
  return head + "they differ within this pair of runs; run-to-run noise not measured (run the baseline twice to measure it)";
}

std::string run_to_run_text(const RunToRunNoise& noise, const std::vector<std::string>& labels) {
  if (noise.simulated_sessions > 0 && noise.measured_sessions == 0)
    return "run-to-run noise: none (every session is simulated: the cost model gives the same step times every run; "
           "the differences are the model's, exact)";
  if (!noise.measured())
    return fmt::format("run-to-run noise: not measured (no two {}sessions ran the same configuration): the verdicts "
                       "below are within-run only; run {} twice to measure it",
                       noise.simulated_sessions > 0 ? "measured " : "",
                       noise.baseline_simulated ? "a measured configuration" : "the baseline");
  std::string out;
  for (const auto& g : noise.groups) {
    std::vector<std::string> names;
    for (const size_t i : g.sessions) names.push_back(i < labels.size() ? labels[i] : std::to_string(i));
    out += fmt::format("{}run-to-run noise: {} runs of the same configuration ({}) differ by {}{} ({:.1f} %): differences "
                       "below that are noise on this machine",
                       out.empty() ? "" : "\n", g.sessions.size() == 2 ? std::string("two") : std::to_string(g.sessions.size()),
                       fmt::join(names, ", "), g.sessions.size() == 2 ? "" : "up to ",
                       format_duration(static_cast<int64_t>(std::llround(g.spread_ns))), g.spread_pct);
  }
  if (noise.groups.size() > 1) out += fmt::format("\ndifferences are held against the largest, {:.1f} %", noise.spread_pct);
  return out;
}

}  // namespace embedscope::sessions
