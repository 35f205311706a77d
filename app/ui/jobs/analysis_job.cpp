#include "jobs/analysis_job.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QMetaObject>
#include <QRunnable>
#include <QThread>
#include <QThreadPool>

#include <mutex>

namespace embedscope::ui {

struct AnalysisJob::Guard {
  std::mutex mu;
  AnalysisJob* job = nullptr;  // null once the job is gone
};

AnalysisJob::AnalysisJob(QObject* parent) : QObject(parent), guard_(std::make_shared<Guard>()) { guard_->job = this; }

AnalysisJob::~AnalysisJob() {
  const std::lock_guard lock(guard_->mu);
  guard_->job = nullptr;  // results posted before this are removed with the object's events
}

void AnalysisJob::cancel() {
  ++current_;  // no request has this id: every running one is stale
  busy_ = false;
}

quint64 AnalysisJob::launch(std::function<Delivery()> task) {
  const quint64 id = ++current_;
  busy_ = true;
  emit started(id);
  QThreadPool::globalInstance()->start([guard = guard_, id, task = std::move(task)] {
    Delivery d = task();
    const std::lock_guard lock(guard->mu);
    if (guard->job)  // queued: runs in the job's thread, or never if the job is deleted first
      QMetaObject::invokeMethod(guard->job, [job = guard->job, id, d = std::move(d)] { job->deliver(id, d); },
                                Qt::QueuedConnection);
  });
  return id;
}

void AnalysisJob::deliver(quint64 id, const Delivery& d) {
  if (id != current_) {
    emit dropped(id);
    return;
  }
  busy_ = false;
  d();
  emit finished(id);
}

bool wait_for_analyses(QObject* root, int timeout_ms) {
  auto busy = [root] {
    if (auto* job = qobject_cast<AnalysisJob*>(root); job && job->busy()) return true;
    for (const AnalysisJob* job : root->findChildren<AnalysisJob*>())
      if (job->busy()) return true;
    return false;
  };
  QElapsedTimer clock;
  clock.start();
  while (busy()) {
    if (clock.elapsed() > timeout_ms) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
    QThread::msleep(1);
  }
  return true;
}

QStringList analysis_errors(QObject* root) {
  QStringList out;
  auto add = [&out](const AnalysisJob* job) {
    if (!job->error().isEmpty() && !out.contains(job->error())) out << job->error();
  };
  if (auto* job = qobject_cast<AnalysisJob*>(root)) add(job);
  for (const AnalysisJob* job : root->findChildren<AnalysisJob*>()) add(job);
  return out;
}

}  // namespace embedscope::ui
