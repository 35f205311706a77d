#pragma once
// RunJob: one training run (engine::run_training) off the GUI thread, with progress, cancel and
// the session it wrote. Used by the workload designer and by any view that starts runs.

#include <QObject>
#include <QString>

#include <atomic>
#include <chrono>
#include <memory>

#include <optional>

#include "embedscope/engine/exec/run.h"  // StepProgress
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/engine/workload/spec.h"

class QThread;

namespace embedscope::ui {

/// A time left for a progress line: "12.3 s" under a minute, "4 min 29 s" under an hour, else
/// "4 h 29 min" (truncated, not rounded).
QString format_eta(double seconds);

/// The last line of RunJob::finished's message for a run that left no session (the CLI's words,
/// commands/run_common.cpp).
inline constexpr const char* kNoSessionWritten = "no session was written";

class RunJob : public QObject {
  Q_OBJECT

 public:
  /// `spec` must be valid (engine::validate); the session goes to `session_path`
  /// (sessions/schema/FORMAT.md), replacing a regular file there when `overwrite`.
  RunJob(engine::WorkloadSpec spec, QString session_path, bool overwrite = false, QObject* parent = nullptr);
  /// An lm_embedding run (engine::run_lm) of `spec` (valid), the same way, with the same
  /// progress (LmRunOptions::on_step: `samples_per_s` counts sequences).
  RunJob(engine::LmWorkloadSpec spec, QString session_path, bool overwrite = false, QObject* parent = nullptr);
  /// Cancels a run still going and waits for its thread.
  ~RunJob() override;

  /// Starts the run on a worker thread and returns at once. Call once.
  void start();
  /// Asks the run to stop after the current step (all ranks agree on it); it then ends
  /// "cancelled" and keeps the steps run so far. Safe from any thread, also before start().
  void cancel() { cancel_ = true; }
  /// True from start() until finished() has been emitted.
  bool running() const { return running_; }
  const QString& session_path() const { return session_path_; }
  /// The least time between two progress() signals of intermediate steps (default 50 ms, so a
  /// fast run does not flood the GUI thread); 0 reports every step. Set before start().
  void set_progress_interval(std::chrono::milliseconds interval) { progress_interval_ = interval; }

 signals:
  /// After a step, in the thread that owns the job (at most about every progress interval, and
  /// always for the first and the last measured step), DLRM and lm_embedding runs alike. `step`: measured steps done (0 during warmup);
  /// `samples_per_s`: global samples per second so far; `eta_s`: seconds left.
  void progress(qint64 step, qint64 steps, double samples_per_s, double eta_s);
  /// Once, when the run has ended and its thread is done, in the thread that owns the job.
  /// `ended`: how the run ended, as its session says it (complete, cancelled, crashed, oom, hang,
  /// write_failed, ...), DLRM and lm_embedding runs alike, or "error" when the engine refused the
  /// workload before running. `session_path`: the session written, empty when there is none (a
  /// refused workload; a run whose session could not be written, e.g. on a full disk, or that
  /// was cancelled before it started). `message`: the engine's message when not complete, else
  /// empty; when a run that was not refused left no session, it ends with the line
  /// kNoSessionWritten ("no session was written"), as the CLI says it.
  void finished(const QString& session_path, const QString& ended, const QString& message);

 private:
  engine::WorkloadSpec spec_;
  std::optional<engine::LmWorkloadSpec> lm_;  // an lm_embedding run instead
  void run_lm_job();  // on the worker thread
  void say_when_no_session();  // after the worker: a run without a session says so (finished)
  void on_step(const engine::StepProgress& p);  // rank 0's thread: progress(), throttled
  QString session_path_;
  bool overwrite_;
  std::atomic<bool> cancel_{false};
  bool running_ = false;
  QThread* thread_ = nullptr;
  std::chrono::steady_clock::time_point last_progress_{};
  std::chrono::milliseconds progress_interval_{50};
  // results, written by the worker before it ends and read after QThread::finished
  QString result_path_, result_ended_, result_message_;
};

}  // namespace embedscope::ui
