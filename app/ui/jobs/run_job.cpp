#include "jobs/run_job.h"

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
  } catch (const sessions::SessionError& e) {
    result_ended_ = "error";
    result_message_ = QString::fromUtf8(e.what());
  } catch (const std::exception& e) {  // a rank failed: the session says how the run ended
    result_path_ = session_path_;
    result_message_ = QString::fromUtf8(e.what());
    try {
      result_ended_ = QString::fromStdString(sessions::SessionReader(opt.session_path).status());
    } catch (const std::exception&) {
      result_ended_ = "crashed";
    }
  }
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
    emit finished(result_path_, result_ended_, result_message_);
  }, Qt::QueuedConnection);
  thread_->start();
}

}  // namespace embedscope::ui
