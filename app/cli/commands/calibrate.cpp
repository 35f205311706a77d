// `embedscope calibrate`: this machine's cost-model coefficients fitted from measured sessions
// (engine/cost/calibration.h), written as a hardware profile, and checked by simulating
// sessions with it.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "commands.h"
#include "embedscope/engine/cost/calibration.h"
#include "embedscope/engine/workload/spec_error.h"
#include "embedscope/sessions/model/units.h"
#include "embedscope/sessions/store/session.h"
#include "output/output.h"
#include "output_guard.h"

namespace embedscope::cli {

namespace es = embedscope::engine;
using nlohmann::json;

namespace {

constexpr double kMinUsefulR2 = 0.5;        // below: the fit explains less than half the variance
constexpr double kMaxInSampleError = 0.5;   // above: the profile misses a run (fitted on it, or held out) by > 50%

struct CalibrateState {
  std::vector<std::string> sessions, check;
  std::string output, name = "this_machine";
  bool json = false;
  bool overwrite = false;  // --force-overwrite: replace an existing -o file
  bool no_dense_bench = false;  // --no-dense-bench: one rate for all of the dense op (before dense44)
  bool force = false;  // --force: write a profile whose fit is undetermined (fewer samples than parameters)
};

// The dense microbenchmark (engine cost/dense_microbench.h) as JSON: what was timed, the work
// counts, the thread CPU times (s) and the rates (per CPU second).
json dense_bench_json(const es::DenseMicrobench& b) {
  return {{"model", b.model}, {"batch", b.batch}, {"repetitions", b.repetitions},
          {"work", {{"gemm_flops", b.work.gemm_flops}, {"interaction_ops", b.work.interaction_ops},
                    {"elementwise_ops", b.work.elementwise_ops}, {"interaction_ops_timed", b.interaction_ops_timed}}},
          {"seconds", {{"forward_backward", b.forward_backward_s}, {"gemm", b.gemm_s}, {"interaction", b.interaction_s},
                       {"elementwise", b.elementwise_s}, {"wall", b.wall_s}}},
          {"rates", {{"gemm_flops_per_s", b.gemm_flops_per_s}, {"interaction_ops_per_s", b.interaction_ops_per_s},
                     {"elementwise_ops_per_s", b.elementwise_ops_per_s}}}};
}

std::string rate_text(const es::CalibrationFit& f) {
  if (f.what == "dense") return fmt::format("{:.4g} GFLOP/s", f.rate / 1e9);
  if (f.what == "lookup_bag" || f.what == "input_id" || f.what == "bucketize_item" || f.what == "update_line" ||
      f.what == "lookup_line")  // per-item host work
    return f.rate > 0 ? fmt::format("{:.4g} ns/item", 1e9 / f.rate) : std::string("0 ns/item");
  return fmt::format("{:.4g} GB/s", f.rate / 1e9);
}

// A file given twice would be fitted twice, or checked as "held-out" though the fit saw it
// (tester33 D8): refused, naming it.
void refuse_repeated_sessions(const CalibrateState& s) {
  std::map<std::string, std::string> seen;  // canonical path -> how it was given
  auto add = [&](const std::string& p, const char* as) {
    std::error_code ec;
    const auto canonical = std::filesystem::weakly_canonical(p, ec);
    auto [it, fresh] = seen.try_emplace(ec ? p : canonical.string(), as);
    if (!fresh)
      throw es::SpecError(fmt::format("{}: given twice ({} and {}); a session is fitted once, and a held-out check "
                                      "(--check) must be one the fit did not see",
                                      p, it->second, as));
  };
  for (const auto& p : s.sessions) add(p, "as a session to fit");
  for (const auto& p : s.check) add(p, "with --check");
}

// What makes the fitted profile untrustworthy, said beside the result rather than hidden in it.
std::vector<std::string> calibration_warnings(const es::Calibration& cal,
                                              const std::vector<std::pair<es::CalibrationCheck, bool>>& checks) {
  std::vector<std::string> out;
  if (!cal.dense_bench_error.empty())
    out.push_back(fmt::format("the dense op is fitted at one rate: its microbenchmark gave no rates ({})",
                              cal.dense_bench_error));
  if (cal.compute_ops > 0 && cal.compute_r2 < kMinUsefulR2)
    out.push_back(fmt::format("the compute fit explains little of the measured op times (R^2 {:.3f} < {}): record "
                              "more or longer runs on a quieter machine",
                              cal.compute_r2, kMinUsefulR2));
  for (const auto& [c, in] : checks)
    if (in && std::abs(c.error()) > kMaxInSampleError)
      out.push_back(fmt::format("{}: the profile misses its own calibration run by {:+.1f}% (more than {:.0f}%): it does "
                                "not describe these runs",
                                c.session, 100 * c.error(), 100 * kMaxInSampleError));
  // a held-out miss of the same size (tester55 F7: +68.6% for a 7 ms workload checked against a
  // profile fitted on 50-140 ms criteo steps, without a word)
  for (const auto& [c, in] : checks) {
    if (in || std::abs(c.error()) <= kMaxInSampleError) continue;
    // a run of a fitted configuration: nothing was extrapolated, the runs of it disagree (tester63d F10)
    std::vector<std::string> same;
    int64_t lo = c.measured_ns, hi = c.measured_ns;
    for (const auto& [f, fitted] : checks)
      if (fitted && f.config == c.config) {
        same.push_back(f.session);
        lo = std::min(lo, f.measured_ns), hi = std::max(hi, f.measured_ns);
      }
    if (!same.empty())
      out.push_back(fmt::format("{}: the profile misses this held-out run by {:+.1f}% (more than {:.0f}%), but the run has "
                                "the configuration of fitted session{} {} ({}): nothing is extrapolated - the runs of that "
                                "configuration measured {} .. {} (median step), so the miss is this machine's run-to-run "
                                "noise; record the runs on a quieter machine",
                                c.session, 100 * c.error(), 100 * kMaxInSampleError, same.size() == 1 ? "" : "s",
                                fmt::join(same, ", "), c.config, ms(lo), ms(hi)));
    else
      out.push_back(fmt::format("{}: the profile misses this held-out run by {:+.1f}% (more than {:.0f}%): it does not "
                                "predict that workload ({}); simulating it with this profile extrapolates from the fitted "
                                "sessions - fit a profile from runs like it",
                                c.session, 100 * c.error(), 100 * kMaxInSampleError, c.workload));
  }
  // a bursty run: its "at load" figure is not its own (tester63d F9)
  for (const auto& [c, in] : checks)
    if (const std::string t = es::bursty_check_text(c); !t.empty()) out.push_back(t);
  return out;
}

int cmd_calibrate(const CalibrateState& s) {
  // what --simulate would refuse in the profile written (tester46 F6), refused before the fit
  if (s.name.find_first_not_of(" \t\r\n") == std::string::npos)
    throw es::SpecError(fmt::format("--name '{}': must not be empty (the profile's \"name\"; runs on it say \"hardware "
                                    "profile NAME\")", s.name));
  refuse_repeated_sessions(s);
  // every session readable, before the fit's seconds of work and before -o's folder is made:
  // SessionReader's errors name the file and say what it is (missing, a folder, empty, newer)
  for (const auto& group : {s.sessions, s.check})
    for (const auto& p : group) [[maybe_unused]] const embedscope::sessions::SessionReader opened(p);
  // an existing profile is replaced only when asked, as run / scenario / scaling / export do
  // (tester42 F15: it was overwritten silently); refused before the fit's seconds of work
  std::vector<std::string> inputs = s.sessions;
  inputs.insert(inputs.end(), s.check.begin(), s.check.end());
  refuse_output_that_is_an_input(s.output, "-o", inputs, "calibrate");  // tester45 F7: it destroyed the session
  refuse_existing_output(s.output, "-o", s.overwrite, "calibrate");
  if (!s.output.empty()) make_output_folder(s.output, "-o");  // -o profiles/a.json makes profiles/, as run -o does
  es::DenseBench bench;
  if (!s.no_dense_bench) bench = [](const es::WorkloadSpec& spec) { return es::measure_dense_rates(spec); };
  const es::Calibration cal = es::calibrate(s.sessions, s.name, bench);
  // the fit's own quality (tester63d F1, F5): an undetermined fit is refused unless forced
  const es::FitAssessment assessment = es::assess_fit(cal);
  if (!assessment.undetermined.empty() && !s.force)
    throw es::SpecError(fmt::format(
        "calibrate: the fit is undetermined (fewer samples than parameters: {}); no profile written - fit from more "
        "sessions (other rank counts, sharding types, more steps) or give --force to write it anyway (the profile then "
        "says so)",
        fmt::join(assessment.undetermined, "; ")));
  json profile = es::to_json(cal.profile);
  // the checks (every session in-sample, --check held out) simulate with a profile file: -o,
  // else a private temporary one
  std::string path = s.output;
  std::string temporary;
  if (path.empty()) {
    temporary = (std::filesystem::temp_directory_path() / fmt::format("embedscope_calibrate_{}.json", getpid())).string();
    path = temporary;
  }
  if (!path.empty()) {
    refuse_existing_output(s.output, "-o", s.overwrite, "calibrate");  // again: a run may have started there
    std::ofstream f(path);
    if (!(f << profile.dump(2) << "\n")) throw es::SpecError(fmt::format("-o: cannot write {}", path));
  }
  std::vector<std::pair<es::CalibrationCheck, bool>> checks;  // (check, in sample)
  try {
    for (const auto& p : s.sessions) checks.emplace_back(es::check_calibration(p, path), true);
    for (const auto& p : s.check) checks.emplace_back(es::check_calibration(p, path), false);
  } catch (...) {
    if (!temporary.empty()) std::remove(temporary.c_str());
    throw;
  }
  if (!temporary.empty()) std::remove(temporary.c_str());
  std::vector<std::string> warnings = assessment.warnings;
  for (const auto& u : assessment.undetermined)
    warnings.push_back(fmt::format("{} (undetermined: written because of --force)", u));
  for (auto& w : calibration_warnings(cal, checks)) warnings.push_back(std::move(w));
  // the profile keeps its fit's quality, so that every later use can say it (profile_trust.h)
  profile["fit_quality"] = es::fit_quality_json(cal, checks, warnings, !assessment.undetermined.empty());
  if (!s.output.empty()) {
    std::ofstream f(s.output);
    if (!(f << profile.dump(2) << "\n")) throw es::SpecError(fmt::format("-o: cannot write {}", s.output));
  }
  if (s.json) {
    json j = {{"profile", profile}, {"compute_ops", cal.compute_ops}, {"compute_r2", cal.compute_r2},
              {"collective_r2", cal.collective_r2}, {"skipped_rank_steps", cal.skipped_rank_steps},
              {"cores", cal.cores}, {"background_threads", cal.background_threads}, {"step_scale", cal.step_scale},
              {"background_measured", cal.background_measured}, {"oversubscription_penalty", cal.oversubscription_penalty},
              {"other_groups", cal.other_groups}, {"handoff_ns", cal.handoff_ns}, {"handoff_samples", cal.handoff_samples},
              {"sync_lag_ns", cal.sync_lag_ns}, {"undetermined", assessment.undetermined},
              {"fits", json::array()}, {"checks", json::array()}, {"warnings", warnings}};
    if (cal.dense_measured) j["dense_bench"] = dense_bench_json(cal.dense_bench);
    if (!s.output.empty()) j["written"] = s.output;
    for (const auto& f : cal.fits)
      j["fits"].push_back({{"what", f.what}, {"samples", f.samples}, {"parameters", f.parameters}, {"r2", f.r2},
                           {"rate", f.rate}, {"fitted", f.fitted}, {"note", f.note}});
    for (const auto& [c, in] : checks)
      j["checks"].push_back({{"session", c.session}, {"workload", c.workload}, {"ranks", c.ranks}, {"in_sample", in},
                             {"measured_step_ns", c.measured_ns}, {"simulated_step_ns", c.simulated_ns}, {"error", c.error()},
                             {"measured_comm_ns", c.measured_comm_ns}, {"simulated_comm_ns", c.simulated_comm_ns},
                             {"comm_error", c.comm_error()}, {"background_threads", c.background},
                             {"other_groups", c.other_groups},
                             {"simulated_at_run_load_ns", c.simulated_at_run_load_ns},
                             {"error_at_run_load", c.error_at_run_load()}, {"slowest_step_ns", c.slowest_ns}});
    std::cout << dump(j) << "\n";
    return 0;
  }
  std::cout << fmt::format("calibration of {} from {} session(s): {} compute ops (R^2 {:.3f}), kernel launch {} ns{}\n",
                           cal.profile.name, cal.sessions.size(), cal.compute_ops, cal.compute_r2, cal.kernel_launch_ns,
                           cal.skipped_rank_steps > 0
                               ? fmt::format("; {} (rank, step) pairs skipped (ops unlike the step program)",
                                             cal.skipped_rank_steps)
                               : "");
  std::cout << fmt::format("{:<16} {:>8} {:>7} {:>16}  {}\n", "class", "samples", "params", "rate", "how");
  for (const auto& f : cal.fits)
    std::cout << fmt::format("{:<16} {:>8} {:>7} {:>16}  {}\n", f.what, f.samples,
                             f.parameters > 0 ? std::to_string(f.parameters) : "-", rate_text(f), f.note);
  if (cal.dense_measured) {
    const es::DenseMicrobench& b = cal.dense_bench;
    std::cout << fmt::format(
        "dense op in parts (microbenchmark of {}, thread CPU time, best of {}, {:.2f} s): forward_backward {:.2f} ms = "
        "GEMMs {:.2f} ms ({:.4g} GFLOP/s) + dot interaction {:.2f} ms ({:.4g} G ops/s) + element-wise {:.2f} ms "
        "({:.4g} G ops/s); profile: interaction {:.4g}, element-wise {:.4g} G ops/s\n",
        b.model, b.repetitions, b.wall_s, 1e3 * b.forward_backward_s, 1e3 * b.gemm_s, b.gemm_flops_per_s / 1e9,
        1e3 * b.interaction_s, b.interaction_ops_per_s / 1e9, 1e3 * b.elementwise_s, b.elementwise_ops_per_s / 1e9,
        cal.profile.gpu.dense_interaction_ops_per_s / 1e9, cal.profile.gpu.dense_elementwise_ops_per_s / 1e9);
  }
  std::cout << fmt::format("collectives: latency {} ns within a node (R^2 {:.3f}), {} ns across; a call's wait for a core "
                           "{} ns x clamp(x - 1, 0, 1) (x: runnable threads per core, not scaled by contention)\n",
                           cal.profile.intra_node.latency_ns, cal.collective_r2, cal.profile.inter_node.latency_ns,
                           cal.profile.cpu.call_wait_ns);
  std::cout << fmt::format("hand-off: {} ns between the compute and comm threads (mean over {} (rank, op) gaps, before "
                           "contention)\n",
                           cal.handoff_ns, cal.handoff_samples);
  std::cout << fmt::format("sync lag: {:.0f} ns mean scheduling delay of each member's arrival at a collective (exponential, "
                           "before contention; {})\n",
                           cal.sync_lag_ns,
                           std::any_of(cal.at_bound.begin(), cal.at_bound.end(),
                                       [](const es::BoundHit& b) { return b.field == "/cpu/sync_lag_ns"; })
                               ? "AT THE TOP OF ITS SEARCH: not determined by the data"
                               : "fitted to the sessions' waits for the last member");
  std::cout << fmt::format("contention: {} cores, {} ({}), oversubscription penalty {:.3f}, "
                           "step scale {:.3f}; n ranks run x = (n x {:.2f} + {:.2f}) / {}: max(1, x) x (1 + {:.3f} x "
                           "clamp(x - 1, 0, 1)) times slower than one\n",
                           cal.cores,
                           cal.background_measured ? fmt::format("{:.2f} other task groups", cal.other_groups)
                                                   : fmt::format("{:.2f} background threads", cal.background_threads),
                           cal.background_measured ? "the sessions' measured load, median" : "fitted",
                           cal.oversubscription_penalty, cal.step_scale, 1.0 + cal.other_groups, cal.background_threads,
                           cal.cores, cal.oversubscription_penalty);
  if (!checks.empty()) {
    std::cout << fmt::format("\n{:<10} {:>12} {:>12} {:>8} {:>9} {:>12} {:>12} {:>8}  {}\n", "check", "measured",
                             "simulated", "error", "at load", "comm meas.", "comm sim.", "error", "session");
    for (const auto& [c, in] : checks)
      std::cout << fmt::format("{:<10} {:>12} {:>12} {:>+7.1f}% {:>9} {:>12} {:>12} {:>+7.1f}%  {} ({})\n",
                               in ? "in-sample" : "held-out", ms(c.measured_ns), ms(c.simulated_ns), 100 * c.error(),
                               c.simulated_at_run_load_ns > 0 ? fmt::format("{:+.1f}%", 100 * c.error_at_run_load()) : "-",
                               ms(c.measured_comm_ns), ms(c.simulated_comm_ns), 100 * c.comm_error(), c.session,
                               c.workload);
    std::cout << "(median step time: the nearest-rank p50 of the slowest rank's step times, as stats prints; at load: the error when simulated at the run's own measured "
                 "background load; comm: the collectives' call time per step (each call's last member's end after "
                 "its last arrival), mean over ranks; simulated with the fitted profile)\n";
  }
  for (const auto& w : warnings) fmt::print(stderr, "warning: {}\n", w);
  if (!s.output.empty()) std::cout << fmt::format("profile: {} (use --simulate {})\n", s.output, s.output);
  return 0;
}

}  // namespace

Command add_calibrate_command(CLI::App& app) {
  auto s = std::make_shared<CalibrateState>();
  auto* cmd = app.add_subcommand("calibrate",
                                 "Fit this machine's cost-model coefficients (lookup, optimizer, dense, memory kernels, "
                                 "collectives) from measured sessions into a hardware profile, and check it by "
                                 "simulating sessions");
  // each session is opened before any work (cmd_calibrate), which names a missing file, a folder, an
  // empty file or a newer session as stats does (not CLI11's "sessions: File does not exist: X")
  cmd->add_option("sessions", s->sessions, "Sessions of cpu runs to fit from")->required();
  cmd->add_option("--check", s->check, "Held-out sessions to simulate with the fitted profile (step time vs measured)");
  cmd->add_option("-o,--output", s->output, "Write the profile JSON here (for run/plan/scaling --simulate FILE)")
      ->check(CLI::Validator(
          [](const std::string& v) { return empty_output_name_refusal(v, "leave -o out to write no profile"); }, "NAME"));
  cmd->add_flag("--force-overwrite", s->overwrite, "Replace an existing -o profile");
  cmd->add_flag("--force", s->force,
                "Write the profile even when its fit is undetermined (a rate with fewer samples than parameters); the "
                "profile's fit_quality says so");
  cmd->add_option("--name", s->name, "The profile's name (default this_machine)");
  cmd->add_flag("--json", s->json, "Print the fits, the profile and the checks as JSON");
  cmd->add_flag("--no-dense-bench", s->no_dense_bench,
                "Fit one rate for all of the dense op's flops instead of measuring its GEMM, dot-interaction and "
                "element-wise rates with a microbenchmark (well under a second)");
  return {cmd, [s] { return cmd_calibrate(*s); }, [s] { return s->json; }};
}

}  // namespace embedscope::cli
