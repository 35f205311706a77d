// What calibrate says about its own fit (cost/calibration.h assess_fit, fit_quality_json): the
// sessions' steps, each rate's samples against its parameters, the values at their search bound,
// and the record of it all that the profile keeps (cost/profile_trust.h reads it).
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "calibration_detail.h"
#include "embedscope/engine/cost/calibration.h"
#include "embedscope/engine/cost/profile_trust.h"
#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::engine {

namespace {

using nlohmann::json;
namespace ss = embedscope::sessions;

constexpr double kMinUsefulCollectiveR2 = 0.5;  // below: latency + bytes / bandwidth explains less than half

std::string ms_text(int64_t ns) { return fmt::format("{:.2f} ms", static_cast<double>(ns) / 1e6); }

}  // namespace

SessionSteps session_steps(const std::string& path) {
  const ss::SessionReader reader(path);
  const calib::Loaded l = calib::load_session(reader, path);
  SessionSteps s;
  s.session = path;
  s.ranks = l.spec.devices.count;
  s.types = ss::plan_types(json::parse(reader.meta(ss::meta::kShardingPlanJson), nullptr, false));
  std::map<int64_t, int64_t> slowest;  // step -> its slowest rank's time
  std::set<int64_t> warmup;
  for (const auto& st : reader.steps()) {
    if (st.step < 0) warmup.insert(st.step);
    else slowest[st.step] = std::max(slowest[st.step], st.end_ns - st.start_ns);
  }
  std::vector<int64_t> t;
  for (const auto& [step, ns] : slowest) t.push_back(ns);
  s.measured = static_cast<int>(t.size());
  s.warmup = static_cast<int>(warmup.size());
  s.median_ns = calib::measured_step_ns(reader, path);
  s.slowest_ns = t.empty() ? 0 : *std::max_element(t.begin(), t.end());
  return s;
}

FitAssessment assess_fit(const Calibration& cal) {
  FitAssessment a;
  std::set<int> ranks;
  std::set<std::string> types;
  for (const SessionSteps& s : cal.session_steps) {
    ranks.insert(s.ranks);
    types.insert(s.types);
    if (s.measured < kMinCalibrationSteps)
      a.warnings.push_back(fmt::format("{}: {} measured step{} (fewer than {}): each op's median is of {} duration{}; "
                                       "record --steps 10 or more",
                                       s.session, s.measured, s.measured == 1 ? "" : "s", kMinCalibrationSteps, s.measured,
                                       s.measured == 1 ? "" : "s"));
    if (s.warmup == 0)
      a.warnings.push_back(fmt::format("{}: no warm-up step: its steps include the cold start (first touches of the "
                                       "tables, allocations, thread start); record with --warmup-steps 1 or more",
                                       s.session));
    if (s.median_ns > 0 && static_cast<double>(s.slowest_ns) >= kBurstySpread * static_cast<double>(s.median_ns))
      a.warnings.push_back(fmt::format("{}: its slowest step took {:.1f}x its median ({} against {}): the machine was "
                                       "busy in bursts, and the run's measured load is its mean over them",
                                       s.session, static_cast<double>(s.slowest_ns) / static_cast<double>(s.median_ns),
                                       ms_text(s.slowest_ns), ms_text(s.median_ns)));
  }
  if (cal.session_steps.size() >= 1 && ranks.size() == 1)
    a.warnings.push_back(fmt::format("the sessions span one rank count ({}): contention is not told from speed, and "
                                     "other rank counts are extrapolated",
                                     *ranks.begin()));
  if (cal.session_steps.size() >= 1 && types.size() == 1)
    a.warnings.push_back(fmt::format("the sessions ran one plan ({}): other sharding types' ops and collectives are "
                                     "extrapolated",
                                     *types.begin()));
  for (const CalibrationFit& f : cal.fits) {
    if (f.samples <= 0 || f.parameters <= 0) continue;
    if (f.samples < f.parameters)
      a.undetermined.push_back(fmt::format("{}: {} sample{} for {} parameters", f.what, f.samples,
                                           f.samples == 1 ? "" : "s", f.parameters));
    else if (f.samples < 2 * f.parameters)
      a.warnings.push_back(fmt::format("{}: {} samples for {} parameters (fewer than 2 a parameter): the least squares "
                                       "(nearly) passes through every sample, so neither its R^2 nor the in-sample check "
                                       "says how well it predicts",
                                       f.what, f.samples, f.parameters));
  }
  for (const CalibrationFit& f : cal.fits)
    if ((f.what == "intra_node" || f.what == "inter_node") && f.fitted && f.r2 < kMinUsefulCollectiveR2) {
      a.warnings.push_back(fmt::format("the {} collective fit explains little of the call times (R^2 {:.3f} < {}): "
                                       "latency + bytes / bandwidth does not describe them",
                                       f.what == "intra_node" ? "within-node" : "cross-node", f.r2, kMinUsefulCollectiveR2));
    }
  for (const BoundHit& b : cal.at_bound)
    a.warnings.push_back(fmt::format("{} hit the top of its search, {:g}: the sessions need more than the model allows, "
                                     "so the value is not determined by the data (a noisy machine?)",
                                     b.field, b.bound));
  return a;
}

std::string bursty_check_text(const CalibrationCheck& c) {
  if (c.measured_ns <= 0 || static_cast<double>(c.slowest_ns) < kBurstySpread * static_cast<double>(c.measured_ns))
    return "";
  return fmt::format("{}: its slowest step took {:.1f}x its median ({} against {}): its load (cpu_other_cores) is the "
                     "run's mean over bursts, so the \"at load\" figure, which applies it to the median step, is not "
                     "that run's",
                     c.session, static_cast<double>(c.slowest_ns) / static_cast<double>(c.measured_ns), ms_text(c.slowest_ns),
                     ms_text(c.measured_ns));
}

json fit_quality_json(const Calibration& cal, const std::vector<std::pair<CalibrationCheck, bool>>& checks,
                      const std::vector<std::string>& warnings, bool forced) {
  json j = {{"sessions", cal.session_steps.size()}, {"steps", json::array()}, {"rates", json::array()},
            {"at_bound", json::array()}, {"checks", json::array()}, {"step_error", json::object()},
            {"warnings", warnings}, {"forced", forced}};
  for (const SessionSteps& s : cal.session_steps)
    j["steps"].push_back({{"session", s.session}, {"measured", s.measured}, {"warmup", s.warmup},
                          {"median_ns", s.median_ns}, {"slowest_ns", s.slowest_ns}});
  for (const CalibrationFit& f : cal.fits)
    j["rates"].push_back({{"what", f.what}, {"points", f.samples}, {"parameters", f.parameters}, {"r2", f.r2},
                          {"fitted", f.fitted}});
  for (const BoundHit& b : cal.at_bound) j["at_bound"].push_back({{"field", b.field}, {"value", b.value}, {"bound", b.bound}});
  ErrorRange in, out;
  for (const auto& [c, in_sample] : checks) {
    j["checks"].push_back({{"session", c.session}, {"in_sample", in_sample}, {"error", c.error()},
                           {"error_at_load", c.simulated_at_run_load_ns > 0 ? json(c.error_at_run_load()) : json()},
                           {"slowest_over_median", c.measured_ns > 0 ? static_cast<double>(c.slowest_ns) /
                                                                           static_cast<double>(c.measured_ns)
                                                                     : 0.0}});
    ErrorRange& r = in_sample ? in : out;
    r.min = r.runs == 0 ? c.error() : std::min(r.min, c.error());
    r.max = r.runs == 0 ? c.error() : std::max(r.max, c.error());
    ++r.runs;
  }
  for (const auto& [key, r] : {std::pair{"in_sample", in}, std::pair{"held_out", out}})
    if (r.runs > 0) j["step_error"][key] = {{"runs", r.runs}, {"min", r.min}, {"max", r.max}};
  return j;
}

}  // namespace embedscope::engine
