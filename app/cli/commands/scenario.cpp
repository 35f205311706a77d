// `embedscope scenario`: a teaching scenario (engine/workload/scenario.h) run headless - every
// run of it (DLRM and lm_embedding alike) into DIR/ID-N.db, the names the workbench's scenario
// view opens with Open folder..., then the comparison of the runs' sessions
// (exec/scenario_run.h: step time, exposed communication, comm share, bytes on the wire per
// sample or token, peak memory) as a table or JSON.

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "output_guard.h"
#include "embedscope/engine/exec/scenario_run.h"
#include "embedscope/engine/exec/write_room.h"
#include "embedscope/engine/workload/scenario.h"
#include "embedscope/engine/workload/spec_error.h"
#include "embedscope/sessions/analysis/compare.h"  // within_noise, step_time_test: the workbench's Figures verdict
#include "embedscope/engine/workload/hash_warnings.h"
#include "embedscope/engine/workload/state_precision.h"
#include "embedscope/sessions/analysis/noise.h"
#include "embedscope/sessions/analysis/stats.h"  // drain_steps_text
#include "embedscope/sessions/model/units.h"
#include "embedscope/sessions/store/session.h"
#include "interrupt.h"
#include "output/output.h"
#include "run_common.h"

namespace embedscope::cli {

namespace es = embedscope::engine;
using nlohmann::json;
using sessions::format_bytes;

namespace {

struct ScenarioState {
  std::string scenario;  // NAME or FILE.json
  int64_t steps = 0;
  CLI::Option* steps_option = nullptr;  // given: every run's steps
  std::string output = ".";
  bool overwrite = false;
  bool json = false;
  bool list = false;
};

/// One run's line of the comparison, or why it has none.
struct ScenarioRow {
  std::string session;
  std::optional<es::ScenarioFigures> figures;  // none when the run did not start
  std::optional<sessions::RunStats> stats;     // its session's stats (with figures): the noise tests
  std::string error;                           // how it failed, or why it did not run
  bool bad_input = false;
};

std::string run_kind(const es::ScenarioRun& run) { return run.lm ? "lm_embedding" : "dlrm"; }

int cmd_scenario_list(const ScenarioState& s) {
  const std::vector<es::Scenario> all = es::builtin_scenarios();
  if (s.json) {
    json j = json::array();
    for (const auto& sc : all) {
      json runs = json::array();
      for (const auto& r : sc.runs) runs.push_back({{"label", r.label}, {"kind", run_kind(r)}, {"steps", r.steps()},
                                                    {"world_size", r.world_size()}});
      j.push_back({{"id", sc.id}, {"title", sc.title}, {"runs", runs}});
    }
    std::cout << dump(j) << "\n";
    return 0;
  }
  std::cout << fmt::format("{:<38} {:>4}  {}\n", "scenario", "runs", "title");
  for (const auto& sc : all) std::cout << fmt::format("{:<38} {:>4}  {}\n", sc.id, sc.runs.size(), sc.title);
  return 0;
}

json figures_json(const es::ScenarioFigures& f) {
  return {{"ended", f.ended},
          {"simulated", f.simulated},
          {"steps", f.steps},
          {"counted_steps", f.counted_steps},
          {"pipeline", f.pipeline},
          {"drain_steps", f.drain_steps},
          {"all_drain", f.all_drain},
          {"samples_per_step", f.samples_per_step},
          {"tokens_per_sample", f.tokens_per_sample},
          {"step_time_mean_ns", f.step_mean_ns},
          {"step_time_p50_ns", f.step_p50_ns},
          {"samples_per_s", f.samples_per_s},
          {"exposed_comm_ns", f.exposed_comm_ns},  // summed over the counted steps
          {"exposed_comm_per_step_ns", f.exposed_comm_per_step_ns},
          {"overlap_pct", f.overlap_pct},
          {"comm_share", f.comm_share},
          {"embedding_comm_share", f.embedding_comm_share},
          {"bytes_sent", f.bytes_sent},
          {"bytes_per_sample", f.bytes_per_sample},
          {"bytes_per_token", f.bytes_per_token},
          {"split_check_bytes", f.split_check_bytes},
          {"split_check_bytes_per_token", f.split_check_bytes_per_token},
          {"peak_allocated_bytes", f.peak_allocated_bytes},
          {"peak_reserved_bytes", f.peak_reserved_bytes},
          {"final_loss", f.simulated || f.steps == 0 ? json(nullptr) : json(f.final_loss)},  // a simulated run does not train
          {"held_out_auc", f.held_out_auc ? json(*f.held_out_auc) : json(nullptr)},
          {"held_out_auc_se", f.held_out_auc_se ? json(*f.held_out_auc_se) : json(nullptr)},
          {"held_out_loss", f.held_out_loss ? json(*f.held_out_loss) : json(nullptr)},
          {"table_weight_bytes", f.table_weight_bytes ? json(*f.table_weight_bytes) : json(nullptr)},
          {"optimizer_state_bytes", f.optimizer_state_bytes ? json(*f.optimizer_state_bytes) : json(nullptr)},
          {"max_relative_error", f.max_relative_error ? json(*f.max_relative_error) : json(nullptr)},
          {"collisions_per_step", f.collisions_per_step ? json(*f.collisions_per_step) : json(nullptr)}};
}

// The run with the lowest held-out loss (the figure remedies are judged by: a lower training
// loss or a higher AUC can hide a worse held-out loss); none when no run has one.
std::optional<size_t> lowest_held_out_loss(const std::vector<ScenarioRow>& rows) {
  std::optional<size_t> best;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].figures || !rows[i].figures->held_out_loss) continue;
    if (!best || *rows[i].figures->held_out_loss < *rows[*best].figures->held_out_loss) best = i;
  }
  return best;
}

// The held-out loss cell: "0.7221", "+15.2 %" of run 0's after it for the other runs, and " *"
// on the lowest of the scenario's (when more than one run has one).
std::string held_out_loss_cell(const std::vector<ScenarioRow>& rows, size_t i, std::optional<size_t> best) {
  const es::ScenarioFigures& f = *rows[i].figures;
  if (!f.held_out_loss) return "-";
  std::string cell = fmt::format("{:.4f}", *f.held_out_loss);
  const auto& first = rows[0].figures;
  if (i > 0 && first && first->held_out_loss && *first->held_out_loss > 0)
    cell += fmt::format(" {:+.1f}%", 100.0 * (*f.held_out_loss / *first->held_out_loss - 1.0));
  int with = 0;
  for (const auto& r : rows) with += r.figures && r.figures->held_out_loss ? 1 : 0;
  if (best && *best == i && with > 1) cell += " *";
  return cell;
}

// Run i's held-out AUC against run 0's with the noise of both (tester42 F5); none unless both
// have an AUC and its standard error, and for run 0 itself.
std::optional<sessions::AucDifference> auc_vs_first(const std::vector<ScenarioRow>& rows, size_t i) {
  if (i == 0 || rows.empty() || !rows[0].figures || !rows[i].figures) return std::nullopt;
  const es::ScenarioFigures &a = *rows[i].figures, &b = *rows[0].figures;
  if (!a.held_out_auc || !a.held_out_auc_se || !b.held_out_auc || !b.held_out_auc_se) return std::nullopt;
  return sessions::auc_difference(*a.held_out_auc, *a.held_out_auc_se, *b.held_out_auc, *b.held_out_auc_se);
}

// The steps column: the measured steps, "C of N" where a pipeline's drain steps are left out of
// the figures (tester52 F1: "6" read as the steps every figure covered).
// A run's difference from run 0 in step time or exposed communication per step (ns), and whether
// it is within the runs' step-to-step noise: step time by compare's within_noise (its test of the
// counted steps' times, the verdict the workbench's Figures page prints), exposed communication by
// the same test of the counted steps' exposed communication, mean over ranks. tested false where
// either run has fewer than kMinWelchSamples counted steps or the test has no power (too few
// steps of drifting runs).
struct NoiseVerdict {
  double diff_ns = 0;
  bool tested = false;
  bool within_noise = false;
};

// Per counted step (drain steps left out), the mean over ranks of the exposed communication (ns).
std::vector<double> exposed_per_counted_step(const sessions::RunStats& st) {
  std::map<int64_t, std::pair<double, int>> by_step;
  for (const auto& r : st.per_step) {
    if (r.drain || r.step < 0) continue;
    auto& [sum, n] = by_step[r.step];
    sum += static_cast<double>(r.exposed_comm_ns);
    ++n;
  }
  std::vector<double> out;
  for (const auto& [step, v] : by_step) out.push_back(v.first / v.second);
  return out;
}

// The test compare gives step times (sessions::step_series_test: Welch's t on the steps where
// neither series drifts, batch means where one does), of another per-step series (ns); nullopt
// with fewer than kMinWelchSamples values on either side.
std::optional<sessions::StepTimeTest> series_test(const std::vector<double>& a, const std::vector<double>& b) {
  const auto as_ns = [](const std::vector<double>& v) {
    std::vector<int64_t> out;
    for (double x : v) out.push_back(static_cast<int64_t>(std::llround(x)));
    return out;
  };
  return sessions::step_series_test(as_ns(a), as_ns(b));
}

std::optional<NoiseVerdict> step_vs_first(const std::vector<ScenarioRow>& rows, size_t i) {
  if (i == 0 || !rows[0].stats || !rows[i].stats || !rows[0].figures || !rows[i].figures) return std::nullopt;
  if (rows[0].figures->steps == 0 || rows[i].figures->steps == 0) return std::nullopt;
  sessions::ComparedSession a, b;
  a.stats = *rows[0].stats;
  b.stats = *rows[i].stats;
  NoiseVerdict v;
  v.diff_ns = rows[i].figures->step_mean_ns - rows[0].figures->step_mean_ns;
  // no test, or one without the power to tell (too few steps of drifting runs): '?'
  const sessions::StepVerdict verdict = sessions::step_verdict(a, b);
  v.tested = verdict != sessions::StepVerdict::NotTested && verdict != sessions::StepVerdict::TooFewSteps;
  // two simulations: no noise, the model's difference exact; equal means are the same step
  v.within_noise = verdict == sessions::StepVerdict::Simulated ? v.diff_ns == 0 : sessions::within_noise(a, b);
  return v;
}

std::optional<NoiseVerdict> exposed_vs_first(const std::vector<ScenarioRow>& rows, size_t i) {
  if (i == 0 || !rows[0].stats || !rows[i].stats || !rows[0].figures || !rows[i].figures) return std::nullopt;
  if (rows[0].figures->steps == 0 || rows[i].figures->steps == 0) return std::nullopt;
  NoiseVerdict v;
  v.diff_ns = rows[i].figures->exposed_comm_per_step_ns - rows[0].figures->exposed_comm_per_step_ns;
  const auto t = series_test(exposed_per_counted_step(*rows[0].stats), exposed_per_counted_step(*rows[i].stats));
  v.tested = t && !t->powerless;
  v.within_noise = v.tested && !t->test.differs;
  return v;
}

// "+124.55 ms noise", "-310.20 ms", "+12.00 ms ?" (no test, or too few steps to tell), "-" for run 0
std::string verdict_cell(const std::optional<NoiseVerdict>& v) {
  if (!v) return "-";
  return fmt::format("{:+.2f} ms{}", v->diff_ns / 1e6, !v->tested ? " ?" : v->within_noise ? " noise" : "");
}

json verdict_json(const NoiseVerdict& v) {
  return {{"difference_ns", v.diff_ns}, {"tested", v.tested}, {"within_noise", v.tested && v.within_noise}};
}

std::string steps_cell(const es::ScenarioFigures& f) {
  return f.counted_steps != f.steps ? fmt::format("{} of {}", f.counted_steps, f.steps) : std::to_string(f.steps);
}

// The warning of `stats` (sessions/analysis/stats.h drain_steps_text) for a run every measured
// step of which drains its pipeline, as "run N (LABEL): warning: ..."; "" otherwise.
std::string all_drain_warning(size_t i, const es::ScenarioRun& run, const ScenarioRow& row) {
  if (!row.figures || !row.figures->all_drain) return "";
  const es::ScenarioFigures& f = *row.figures;
  std::string text = sessions::drain_steps_text(f.pipeline, f.steps, f.drain_steps, f.all_drain);
  text.erase(0, text.find_first_not_of(' '));
  return fmt::format("run {} ({}): {}", i, run.label, text);
}

// The run's figures, its label last (labels are long: "vocab_parallel + sequence_parallel (...)").
std::string row_text(size_t i, const es::ScenarioRun& run, const std::vector<ScenarioRow>& rows,
                     const std::optional<sessions::AucDifference>& vs_first, const std::optional<NoiseVerdict>& step_vs,
                     const std::optional<NoiseVerdict>& exposed_vs) {
  const ScenarioRow& row = rows[i];
  if (!row.figures) return fmt::format("{:<2} {:<9} {}: {}\n", i, "-", run.label, row.error);
  const es::ScenarioFigures& f = *row.figures;
  const std::string wire = f.tokens_per_sample > 0 ? fmt::format("{:.1f}/token", f.bytes_per_token)
                                                   : fmt::format("{:.1f}/sample", f.bytes_per_sample);
  const bool measured = f.steps > 0;
  const std::string vs = vs_first ? sessions::auc_difference_cell(*vs_first) : "-";
  // a simulated run does not train: its loss is no figure (tester61a F14), as its AUC
  const bool trained = measured && !f.simulated;
  return fmt::format("{:<2} {:<9} {:>7} {:>12} {:>17} {:>12} {:>17} {:>6.1f}% {:>6.1f}% {:>17} {:>11} {:>11} {:>9} {:>17} {:>7} {:>6} {:>13}  {}\n", i,
                     f.ended, steps_cell(f), measured ? ms(f.step_mean_ns) : "-", verdict_cell(step_vs),
                     measured ? ms(f.exposed_comm_per_step_ns) : "-", verdict_cell(exposed_vs),
                     100 * f.comm_share, 100 * f.embedding_comm_share, measured ? wire : "-",
                     format_bytes(f.peak_allocated_bytes), format_bytes(f.peak_reserved_bytes),
                     trained ? fmt::format("{:.5f}", f.final_loss) : "-",
                     held_out_loss_cell(rows, i, lowest_held_out_loss(rows)), f.held_out_auc ? fmt::format("{:.4f}", *f.held_out_auc) : "-",
                     f.held_out_auc_se ? fmt::format("{:.4f}", *f.held_out_auc_se) : "-", vs, run.label);
}


// After the table: the run whose session could not be written, and the sessions that were
// (tester50 F5). Nothing when every write succeeded.
void say_write_failure(const std::string& failure, std::optional<size_t> failed, const std::vector<ScenarioRow>& rows) {
  if (failure.empty()) return;
  std::string written;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].figures)
      written += fmt::format("{}run {} ({}{})", written.empty() ? "" : ", ", i, rows[i].session,
                             failed && *failed == i ? ", its steps before the failure" : "");
  fmt::print(stderr, "error: scenario: the session of {}\nsessions written: {}\n", failure,
             written.empty() ? "none" : written);
}

int cmd_scenario(const ScenarioState& s) {
  if (s.list) return cmd_scenario_list(s);
  if (s.scenario.empty()) throw es::SpecError("scenario: give a scenario NAME or FILE.json (built in: --list)");
  es::Scenario sc = es::find_scenario(s.scenario);
  if (s.steps_option->count() > 0) sc = es::with_steps(std::move(sc), s.steps);
  std::error_code ec;
  std::filesystem::create_directories(s.output, ec);
  if (ec || !std::filesystem::is_directory(s.output))
    throw es::SpecError(fmt::format("-o {}: cannot make the directory{}", s.output, ec ? ": " + ec.message() : ""));
  std::vector<std::string> paths;
  for (size_t i = 0; i < sc.runs.size(); ++i) {
    paths.push_back((std::filesystem::path(s.output) / es::session_file_name(sc, i)).string());
    // refuse before the first run, naming this command's flag (the writer's own refusal names
    // `run`'s: tester42 F15)
    if (!s.overwrite && std::filesystem::exists(paths.back(), ec) && std::filesystem::is_regular_file(paths.back(), ec))
      throw es::SpecError(fmt::format("{}: already exists; choose another directory (-o) or allow overwriting the "
                                      "scenario's sessions (embedscope scenario {} -o {} --force-overwrite)",
                                      paths.back(), s.scenario, s.output));
    sessions::SessionWriter::check_path(paths.back(), s.overwrite);  // not a regular file, or a live run's
  }
  const bool tty = isatty(STDERR_FILENO) != 0;
  // a second one stops at once, the run in progress recorded as cancelled by the user (run_common.h;
  // tester47 F2: the process died by the signal, the session read crashed); installed before the
  // first one's handler, which promises it (retest47 R2)
  StopAtOnce& stop = StopAtOnce::install(s.json);
  const std::atomic<bool>& cancel =
      cancel_on_sigint_or_sigterm("\ncancelling after the current step (Ctrl-C again stops at once)\n");
  fmt::print(stderr, "embedscope scenario: {} ({}), {} runs into {}\n", sc.id, sc.origin, sc.runs.size(), s.output);
  std::vector<ScenarioRow> rows(sc.runs.size());
  int exit_code = 0;
  std::optional<size_t> write_failed_at;  // the run whose session could not be written: no run after it
  std::string write_failure;
  for (size_t i = 0; i < sc.runs.size(); ++i) {
    const es::ScenarioRun& run = sc.runs[i];
    ScenarioRow& row = rows[i];
    row.session = paths[i];
    if (cancel || write_failed_at) {
      row.error = write_failed_at ? fmt::format("not run (run {}'s session could not be written)", *write_failed_at)
                                  : "not run (cancelled)";
      continue;
    }
    fmt::print(stderr, "run {}/{}: {} ({}, {} steps on {} ranks) -> {}\n", i + 1, sc.runs.size(), run.label, run_kind(run),
               run.steps(), run.world_size(), paths[i]);
    if (!run.lm) {  // as `run` warns before it starts (workload_args.cpp): fp16 state, hash_size = rows
      std::vector<std::string> warnings = es::state_precision_warnings(run.spec);
      for (std::string& w : es::hash_size_warnings(run.spec)) warnings.push_back(std::move(w));
      for (const std::string& w : warnings) fmt::print(stderr, "  warning: {}\n", w);
    }
    es::ScenarioRunOptions opt;
    opt.session_path = paths[i];
    opt.overwrite = s.overwrite;
    opt.cancel = &cancel;
    // the lines of `run` (run_common.h), each step's, under the run's line
    StepLinesSpec lines;
    lines.steps = run.steps();
    lines.warmup_steps = run.warmup_steps();
    lines.simulated = !run.lm && run.spec.devices.backend == es::Backend::simulated;
    lines.unit = run.lm ? "tokens" : "samples";
    lines.per_sample = run.lm ? static_cast<double>(run.lm->sequence_length) : 1.0;
    lines.indent = "  ";
    lines.every_step = true;
    stop.steps_done = false;
    lines.steps_done = &stop.steps_done;
    stop.set_json_extra({{"scenario", sc.id}, {"run", i}, {"runs", sc.runs.size()}},
                        i + 1 < sc.runs.size() ? fmt::format("scenario {}: run {} of {} stopped; the later runs were not run",
                                                             sc.id, i + 1, sc.runs.size())
                                               : "");
    stop.set_session(paths[i]);
    opt.on_step = step_progress_lines(lines);
    es::ScenarioRunOutcome out;
    try {
      out = es::run_scenario_run(run, opt);
    } catch (const sessions::SessionError& e) {
      // the session file could not be made or its first records not written (a full disk:
      // tester50 F5 read SQLite's bare text, exit 2, and no table); the path was checked above
      out.ended = es::RunEnd::write_failed;
      out.error = fmt::format("{}{}; nothing was recorded", e.what(), es::session_room_note(paths[i]));
      out.bad_input = false;
    }
    stop.set_session("");  // ended: a stop now leaves its session as it ended
    if (out.ended == es::RunEnd::write_failed) {
      if (out.error.find("; its file system has") == std::string::npos) out.error += es::session_room_note(paths[i]);
      write_failed_at = i;
      write_failure = out.error.find(paths[i]) != std::string::npos ? fmt::format("run {}: {}", i, out.error)
                                                                    : fmt::format("run {} ({}): {}", i, paths[i], out.error);
    }
    if (tty) fmt::print(stderr, "\n");
    row.error = out.error;
    row.bad_input = out.bad_input;
    if (out.ended != es::RunEnd::complete && out.ended != es::RunEnd::cancelled) {
      fmt::print(stderr, "  run ended {}: {}\n", es::to_string(out.ended), out.error);
      exit_code = std::max(exit_code, out.bad_input ? 2 : 1);
    }
    if (!std::filesystem::exists(paths[i]) && out.ended == es::RunEnd::write_failed) continue;  // nothing recorded
    try {
      const sessions::SessionReader reader(paths[i]);
      row.figures = es::scenario_figures(run, reader);
      row.stats = sessions::analyze(reader);
    } catch (const std::exception& e) {  // the run left no readable session
      row.error += (row.error.empty() ? "" : "; ") + std::string(e.what());
      exit_code = std::max(exit_code, 1);
    }
  }
  if (s.json) {
    json runs = json::array();
    for (size_t i = 0; i < sc.runs.size(); ++i) {
      json r = {{"index", i}, {"label", sc.runs[i].label}, {"kind", run_kind(sc.runs[i])}, {"session", rows[i].session}};
      if (rows[i].figures) r["figures"] = figures_json(*rows[i].figures);
      if (std::string w = all_drain_warning(i, sc.runs[i], rows[i]); !w.empty()) {  // tester52 F1
        w.erase(w.find_last_not_of('\n') + 1);
        r["warning"] = w.substr(w.find("warning: ") + 9);
      }
      if (rows[i].figures && rows[i].figures->held_out_loss) {  // the figure remedies are judged by
        r["lowest_held_out_loss"] = lowest_held_out_loss(rows) == i;
        if (i > 0 && rows[0].figures && rows[0].figures->held_out_loss && *rows[0].figures->held_out_loss > 0)
          r["held_out_loss_vs_run_0"] = *rows[i].figures->held_out_loss / *rows[0].figures->held_out_loss - 1.0;
      }
      if (const auto d = auc_vs_first(rows, i))  // tester42 F5: the difference with its noise
        r["held_out_auc_vs_run_0"] = {{"difference", d->diff}, {"se", d->se}, {"within_noise", d->within_noise}};
      if (const auto v = step_vs_first(rows, i)) r["step_time_mean_vs_run_0"] = verdict_json(*v);
      if (const auto v = exposed_vs_first(rows, i)) r["exposed_comm_per_step_vs_run_0"] = verdict_json(*v);
      if (!rows[i].error.empty()) r["error"] = rows[i].error;
      runs.push_back(std::move(r));
    }
    std::cout << dump(json{{"scenario", sc.id}, {"title", sc.title}, {"origin", sc.origin}, {"output", s.output},
                           {"runs", runs}})
              << "\n";
    say_write_failure(write_failure, write_failed_at, rows);
    return exit_code;
  }
  std::cout << fmt::format("scenario {}: {}\n\n", sc.id, sc.title);
  std::cout << fmt::format("{:<2} {:<9} {:>7} {:>12} {:>17} {:>12} {:>17} {:>7} {:>7} {:>17} {:>11} {:>11} {:>9} {:>17} {:>7} {:>6} {:>13}  {}\n",
                           "N", "ended", "steps", "step mean", "vs 0", "exposed/step", "vs 0", "comm", "emb", "bytes on the wire",
                           "peak alloc", "peak resv", "loss", "held-out loss", "AUC", "SE", "AUC vs 0", "run (session ID-N.db)");
  for (size_t i = 0; i < sc.runs.size(); ++i)
    std::cout << row_text(i, sc.runs[i], rows, auc_vs_first(rows, i), step_vs_first(rows, i), exposed_vs_first(rows, i));
  for (size_t i = 0; i < sc.runs.size(); ++i) std::cout << all_drain_warning(i, sc.runs[i], rows[i]);
  std::cout << "\nsteps: the measured steps, 'C of N' where a pipeline's last drain steps are left out of every figure "
               "but peak and loss, as in stats (C counted); step mean: the slowest rank's step time; exposed/step: "
               "exposed communication per rank and counted step, mean over ranks (as compare and stats give it per "
               "step); vs 0: the difference from run 0's, 'noise' when compare's test (95 %: Welch's t on the counted "
               "steps' values, batch means where they drift) finds no difference (the step-to-step noise of the runs could make it; the workbench's Figures page "
               "gives the same verdict for the step time), '?' where a run has fewer than 5 counted steps (no test) "
               "or the steps drift and are too few to tell; "
               "comm / emb: the share of the ranks' step time in collectives / in the embedding's own "
               "(thread-level on CPU ranks); bytes on the wire: every rank's bytes sent per sample, Embedscope's split "
               "checks included as stats counts them (per token for lm_embedding, the split checks left out there: "
               "Megatron runs none); peak: the "
               "largest rank's allocated / reserved device memory; loss: the last measured step's ('-' for a simulated "
               "run, which does not train); held-out loss: the "
               "trained model's mean BCE on held-out generated batches, change from run 0's, '*' the lowest (judge "
               "remedies by it: a lower training loss or a higher AUC can hide a worse held-out loss); AUC: its "
               "ROC AUC on the same batches (run --held-out-batches; '-' where a run was not evaluated); SE: its "
               "standard error from the held-out set's positives and negatives (Hanley & McNeil 1982); AUC vs 0: the "
               "difference from run 0's, 'noise' when within 2 x sqrt(SE^2 + SE0^2) (the held-out sample's chance)\n";
  std::cout << fmt::format("sessions: {}/{}-N.db (embedscope-ui --scenario {} --scenario-sessions {})\n", s.output, sc.id,
                           s.scenario, s.output);
  say_write_failure(write_failure, write_failed_at, rows);
  return exit_code;
}

}  // namespace

Command add_scenario_command(CLI::App& app) {
  auto s = std::make_shared<ScenarioState>();
  auto* cmd = app.add_subcommand("scenario",
                                 "Run every run of a teaching scenario (built-in NAME or FILE.json) into DIR/ID-N.db and "
                                 "print their comparison (step time, exposed comm, comm share, bytes on the wire, peak "
                                 "memory)");
  cmd->add_option("scenario", s->scenario, "A built-in scenario's id (see --list) or a scenario file");
  s->steps_option = cmd->add_option("--steps", s->steps, "Steps of every run (default: each run's own; at least 1)");
  cmd->add_option("-o,--output", s->output, "Directory of the sessions (default: the current one; made when missing)")
      ->check(CLI::Validator(
          [](const std::string& v) { return empty_output_name_refusal(v, "leave -o out for the current folder"); }, "NAME"));
  cmd->add_flag("--force-overwrite", s->overwrite, "Replace existing sessions of the scenario in DIR");
  cmd->add_flag("--json", s->json, "Print the comparison as JSON");
  cmd->add_flag("--list", s->list, "List the built-in scenarios");
  return {cmd, [s] { return cmd_scenario(*s); }, [s] { return s->json; }};
}

}  // namespace embedscope::cli
