#pragma once
// What every command that runs a workload and writes its session says and does the same way,
// whatever the workload (DLRM or lm_embedding) and whichever command runs it (`run`, `scenario`):
// the end of a run that failed, the progress lines, and a second Ctrl-C / SIGTERM
// (tester47 F2, F3, F7: the lm_embedding run had its own, lesser, copy of each).

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/run.h"

namespace embedscope::cli {

/// A run that ended while running (oom, hang, crashed, bad_input, write_failed): prints "error:
/// run ended ENDED: ERROR" and "session: SESSION" ("no session was written" when SESSION is
/// empty) on stderr, and with `as_json` {"ended", "error", "session"} on stdout.
/// Returns the exit code: 2 where the run found bad input (`bad_input`: a malformed input file),
/// else 1 (docs/cli-run.md, "Exit codes").
int report_failed_run(const std::string& ended, const std::string& error, const std::string& session, bool as_json,
                      bool bad_input);

/// A SIGINT or SIGTERM came before the run started (while the workload was read or planned):
/// prints "embedscope run: cancelled before the run started; no session was written" on stderr,
/// and with `as_json` {"ended": "cancelled", "error": ..., "session": null} on stdout. Returns
/// 0, the exit code of a cancelled run.
int report_cancelled_before_run(bool as_json);

/// What the progress lines of a run say (step_progress_lines).
struct StepLinesSpec {
  int64_t steps = 0;          ///< measured steps of the run (a line every steps / 10 when stderr is no terminal)
  int64_t warmup_steps = 0;   ///< shown as "warmup W/N" (0: lm_embedding runs have none)
  bool simulated = false;     ///< "N samples/s (simulated)": no ETA, no loss
  /// The rate's unit: "samples" (a DLRM sample), or "tokens" with `per_sample` the tokens of a
  /// sample (an lm_embedding sequence: its sequence_length).
  std::string unit = "samples";
  double per_sample = 1.0;
  std::string indent;         ///< before each line (`scenario`: two spaces under its "run i/n" line)
  bool every_step = false;    ///< a line every step even when stderr is no terminal (`scenario`'s short runs)
  /// Set once the last measured step has ended (StopAtOnce::steps_done), or null.
  std::atomic<bool>* steps_done = nullptr;
};

/// The run's progress on stderr for TrainerOptions::on_step / LmRunOptions::on_step /
/// ScenarioRunOptions::on_step: "step N/M  R UNIT/s  ETA E s  loss L" (R by format_rate: 1.2k),
/// on one line rewritten in place when stderr is a terminal, else a line every steps / 10 steps
/// (or 2 s; every step with `every_step`) and the last step's. Warm-up steps (StepProgress::step 0) print "warmup W/N".
std::function<void(const engine::StepProgress&)> step_progress_lines(StepLinesSpec spec);

/// What a second Ctrl-C or SIGTERM does to a run that writes a session (the first asked it to
/// stop after the current step: cancel_on_sigint): the process ends at once (exit 130), but first
/// the session being written is marked ended = cancelled with "stopped at once by a second Ctrl-C
/// (or SIGTERM): <what>" (sessions/store/end_mark.h), "stopped at once; session: S (recorded as
/// cancelled by the user)" goes to stderr, and with --json one object
/// {"ended": "cancelled", "stopped_at_once": true, "error", "session", "recorded", extra...} to
/// stdout (tester41 #21, tester46 F20; the lm_embedding run and `scenario` since tester47 F2).
/// One per process, for a command's whole life; its state is read from the stop thread.
class StopAtOnce {
 public:
  /// Installs the handler (interrupt.h stop_at_once_with) once; later calls return the same
  /// object with `as_json` updated.
  static StopAtOnce& install(bool as_json);
  /// The session being written now ("": none, e.g. between a scenario's runs: the stop then
  /// marks nothing and says "no run was in progress").
  void set_session(const std::string& path);
  /// Keys added to the --json object (`scenario`: which run, of how many), and a line printed
  /// after the "stopped at once" one ("": none).
  void set_json_extra(nlohmann::json extra, std::string note = "");
  /// Set once every measured step has completed: a stop then interrupts what follows them (the
  /// held-out evaluation, the session's closing), not a step (tester46 F14).
  std::atomic<bool> steps_done{false};
  /// The run returned (or threw) with its session closed and its end recorded: from now on a
  /// second signal leaves the session and the output to the command, which ends the process by
  /// itself in a moment (the stop thread waits for that). A stop already under way, marking the
  /// session on the stop thread, is waited for here, and then this call never returns (the stop
  /// thread ends the process, exit 130): the command's own ending never runs beside it. Before,
  /// `run` could return and exit(0) while the stop thread was inside the mark's transaction,
  /// leaving FILE.db-journal behind: a hot journal that every read-only open (stats) then refused
  /// ("attempt to write a readonly database"). Idempotent; a later set_session starts the next
  /// run (`scenario`).
  void end_run();

  /// Calls end_run when it goes out of scope: the run's command returning or throwing.
  class RunGuard {
   public:
    explicit RunGuard(StopAtOnce& s) : s_(s) {}
    RunGuard(const RunGuard&) = delete;
    RunGuard& operator=(const RunGuard&) = delete;
    ~RunGuard() { s_.end_run(); }

   private:
    StopAtOnce& s_;
  };

 private:
  StopAtOnce() = default;
  void stop();  // on the stop thread
  std::mutex mu_;
  bool stopping_ = false;  // stop() began: the process ends with exit 130
  bool run_ended_ = false;  // end_run() was called: a stop leaves the ending to the command
  std::string session_;
  nlohmann::json extra_ = nlohmann::json::object();
  std::string note_;
  bool as_json_ = false;
};

}  // namespace embedscope::cli
