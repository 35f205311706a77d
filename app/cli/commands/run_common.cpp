// The ending, progress lines and second-signal stop shared by the commands that run a workload
// (commands/run_common.h).

#include "run_common.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>

#include <fmt/format.h>

#include "embedscope/sessions/model/unit_ladder.h"  // format_rate
#include "embedscope/sessions/store/end_mark.h"
#include "interrupt.h"
#include "output/output.h"

namespace embedscope::cli {

using nlohmann::json;

int report_failed_run(const std::string& ended, const std::string& error, const std::string& session, bool as_json,
                      bool bad_input) {
  if (session.empty())  // nothing was recorded (a session that could not be written: tester49 F3)
    fmt::print(stderr, "error: run ended {}: {}\nno session was written\n", ended, error);
  else
    fmt::print(stderr, "error: run ended {}: {}\nsession: {}\n", ended, error, session);
  if (as_json)
    std::cout << dump(json{{"ended", ended}, {"error", error}, {"session", session.empty() ? json(nullptr) : json(session)}})
              << "\n";
  return bad_input ? 2 : 1;
}

int report_cancelled_before_run(bool as_json) {
  const char* error = "cancelled before the run started (SIGINT or SIGTERM)";
  fmt::print(stderr, "embedscope run: {}; no session was written\n", error);
  if (as_json) std::cout << dump(json{{"ended", "cancelled"}, {"error", error}, {"session", nullptr}}) << "\n";
  return 0;
}

std::function<void(const engine::StepProgress&)> step_progress_lines(StepLinesSpec spec) {
  const bool tty = isatty(STDERR_FILENO) != 0;
  const int64_t every = std::max<int64_t>(1, spec.steps / 10);
  return [spec = std::move(spec), tty, every,
          last_print = std::chrono::steady_clock::now()](const engine::StepProgress& p) mutable {
    if (spec.steps_done && p.step > 0 && p.step >= p.total_steps) *spec.steps_done = true;
    const char* again = tty ? "\r\033[K" : "";
    const char* end = tty ? "" : "\n";
    if (p.step == 0) {
      fmt::print(stderr, "{}{}warmup {}/{}{}", again, spec.indent, p.warmup_done, spec.warmup_steps, end);
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!tty && !spec.every_step && p.step % every != 0 && p.step != p.total_steps && now - last_print < std::chrono::seconds(2)) return;
    last_print = now;
    const std::string rate = sessions::format_rate(p.samples_per_s * spec.per_sample);
    if (spec.simulated) {
      fmt::print(stderr, "{}{}step {}/{}  {} {}/s (simulated){}", again, spec.indent, p.step, p.total_steps, rate,
                 spec.unit, end);
      return;
    }
    fmt::print(stderr, "{}{}step {}/{}  {} {}/s  ETA {:.1f} s  loss {:.4f}{}", again, spec.indent, p.step,
               p.total_steps, rate, spec.unit, p.eta_s, p.loss, end);
  };
}

StopAtOnce& StopAtOnce::install(bool as_json) {
  // static: the stop thread may outlive the command's function
  static StopAtOnce* const the = [] {
    auto* s = new StopAtOnce;  // never destroyed: the stop thread may read it during exit
    stop_at_once_with([s] { s->stop(); });
    return s;
  }();
  std::lock_guard<std::mutex> lock(the->mu_);
  the->as_json_ = as_json;
  return *the;
}

void StopAtOnce::set_session(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  session_ = path;
  run_ended_ = false;
}

void StopAtOnce::end_run() {
  std::unique_lock<std::mutex> lock(mu_);  // a stop under way holds it until its mark is committed
  if (stopping_) {  // the stop thread ends the process (_exit 130) as soon as stop() returns
    lock.unlock();
    for (;;) pause();
  }
  run_ended_ = true;
  session_.clear();
}

void StopAtOnce::set_json_extra(json extra, std::string note) {
  std::lock_guard<std::mutex> lock(mu_);
  extra_ = std::move(extra);
  note_ = std::move(note);
}

void StopAtOnce::stop() {
  std::unique_lock<std::mutex> lock(mu_);
  if (run_ended_) {  // the run is over and its command is ending the process: nothing to stop
    lock.unlock();
    for (;;) pause();
  }
  stopping_ = true;
  const std::string what = steps_done.load() ? "every measured step had completed; what followed them (the held-out "
                                               "evaluation, the session's closing) did not"
                                             : "the step in progress did not complete";
  const std::string error = "stopped at once by a second Ctrl-C (or SIGTERM): " + what;
  const bool marked = !session_.empty() && sessions::mark_session_ended(session_, "cancelled", error);
  if (session_.empty())
    fmt::print(stderr, "\nstopped at once; no run was in progress\n");
  else
    fmt::print(stderr, "\nstopped at once; session: {} ({})\n", session_,
               marked ? "recorded as cancelled by the user" : "the stop could not be recorded: it reads crashed");
  if (!note_.empty()) fmt::print(stderr, "{}\n", note_);
  // --json prints one object however the run ends (tester46 F20: nothing on stdout here)
  if (as_json_) {
    json j{{"ended", "cancelled"},
           {"stopped_at_once", true},
           {"error", error},
           {"session", session_.empty() ? json() : json(session_)},
           {"recorded", marked}};
    for (const auto& [k, v] : extra_.items()) j[k] = v;
    std::cout << dump(j) << "\n" << std::flush;
  }
}

}  // namespace embedscope::cli
