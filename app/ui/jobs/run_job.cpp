#include "jobs/run_job.h"

#include <QFileInfo>
#include <QThread>

#include <algorithm>

#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::ui {

QString format_eta(double seconds) {
  if (seconds < 60) return QString("%1 s").arg(std::max(0.0, seconds), 0, 'f', 1);
  const auto s = static_cast<int64_t>(seconds);
  if (s < 3600) return QString("%1 min %2 s").arg(s / 60).arg(s % 60);
  return QString("%1 h %2 min").arg(s / 3600).arg(s % 3600 / 60);
}

RunJob::RunJob(engine::WorkloadSpec spec, QString session_path, bool overwrite, QObject* parent)
    : QObject(parent), spec_(std::move(spec)), session_path_(std::move(session_path)), overwrite_(overwrite) {}

RunJob::RunJob(engine::LmWorkloadSpec spec, QString session_path, bool overwrite, QObject* parent)
    : QObject(parent), lm_(std::move(spec)), session_path_(std::move(session_path)), overwrite_(overwrite) {}

RunJob::~RunJob() {
  if (!thread_) return;
  cancel_ = true;
  thread_->wait();
  delete thread_;
}

void RunJob::on_step(const engine::StepProgress& p) {
  const auto now = std::chrono::steady_clock::now();
  if (p.step > 1 && p.step < p.total_steps && now - last_progress_ < progress_interval_) return;
  last_progress_ = now;
  QMetaObject::invokeMethod(
      this, [this, p] { emit progress(p.step, p.total_steps, p.samples_per_s, p.eta_s); }, Qt::QueuedConnection);
}

void RunJob::run_lm_job() {
  engine::LmRunOptions opt;
  opt.session_path = session_path_.toStdString();
  opt.overwrite = overwrite_;
  opt.cancel = &cancel_;
  opt.on_step = [this](const engine::StepProgress& p) { on_step(p); };
  try {
    const engine::LmRunResult r = engine::run_lm(*lm_, opt);
    result_path_ = session_path_;
    result_ended_ = engine::to_string(r.ended);
  } catch (const engine::SpecError& e) {  // refused before the session was made
    result_ended_ = "error";
    result_message_ = QString::fromUtf8(e.what());
  } catch (const sessions::SessionWriteError& e) {
    // no room for the session (a full disk) when it was made: a write failure with nothing
    // recorded, as a DLRM run reports it (run_training, retest49 R7), not a refused workload
    result_ended_ = engine::to_string(engine::RunEnd::write_failed);
    result_message_ = QString::fromUtf8(e.what()) + "; nothing was recorded, and the half-created file was removed";
  } catch (const sessions::SessionError& e) {
    result_ended_ = "error";
    result_message_ = QString::fromUtf8(e.what());
  } catch (const engine::LmRunError& e) {
    // the run says how it ended and where its session is ("" when none was kept: a write that
    // failed before anything was committed), as the CLI reports it (commands/lm.cpp)
    result_path_ = QString::fromStdString(e.session_path);
    result_ended_ = engine::to_string(e.ended);
    result_message_ = QString::fromUtf8(e.what());
  } catch (const std::exception& e) {  // the ranks could not be set up: the session says how it ended
    result_message_ = QString::fromUtf8(e.what());
    try {
      result_ended_ = QString::fromStdString(sessions::SessionReader(opt.session_path).status());
      result_path_ = session_path_;
    } catch (const std::exception&) {  // no session to say it (none kept, or unreadable)
      result_ended_ = engine::to_string(engine::RunEnd::crashed);
    }
  }
}

void RunJob::say_when_no_session() {
  if (result_ended_ == "error" || (!result_path_.isEmpty() && QFileInfo::exists(result_path_))) return;
  result_path_.clear();
  result_message_ += QString(result_message_.isEmpty() ? "" : "\n") + kNoSessionWritten;
}

void RunJob::start() {
  if (thread_) return;
  running_ = true;
  thread_ = QThread::create([this] {
    if (lm_) {
      run_lm_job();
      return;
    }
    engine::TrainerOptions opt;
    opt.session_path = session_path_.toStdString();
    opt.session_overwrite = overwrite_;
    opt.keep_events = false;
    opt.cancel = &cancel_;
    opt.on_step = [this](const engine::StepProgress& p) { on_step(p); };  // rank 0's thread
    try {
      const engine::RunResult r = engine::run_training(spec_, engine::plan_sharding(spec_), opt);
      result_path_ = QString::fromStdString(r.session_path);
      result_ended_ = engine::to_string(r.ended);
      result_message_ = QString::fromStdString(r.error);
    } catch (const std::exception& e) {  // SpecError (plan, memory) or SessionError (the file)
      result_ended_ = "error";
      result_message_ = QString::fromUtf8(e.what());
    }
  });
  // QThread::finished is emitted from the worker; the queued slot runs here after the pending
  // progress events, so finished() always comes last.
  connect(thread_, &QThread::finished, this, [this] {
    running_ = false;
    say_when_no_session();
    emit finished(result_path_, result_ended_, result_message_);
  }, Qt::QueuedConnection);
  thread_->start();
}

}  // namespace embedscope::ui
