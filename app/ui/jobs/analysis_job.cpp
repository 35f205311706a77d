#include "jobs/analysis_job.h"

#include <QMetaObject>
#include <QRunnable>
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

}  // namespace embedscope::ui
