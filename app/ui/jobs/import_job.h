#pragma once
// ImportJob: an import of other tools' traces (Kineto JSON, PyTorch memory snapshots; see
// sessions/importers/importer.h) into a new session, off the GUI thread, with progress and
// cancel. File > Open and drag and drop in the workbench start one, then open the session.

#include <QObject>
#include <QString>
#include <QStringList>

#include <atomic>

class QThread;

namespace embedscope::ui {

class ImportJob : public QObject {
  Q_OBJECT

 public:
  /// Imports `sources` (files or directories) into the new session `target` (which must not
  /// exist: see core/import_target.h).
  /// `allow_disjoint`: import ranks whose time ranges do not overlap (traces of different jobs?)
  /// as one session instead of refusing them (ended "disjoint"), as `embedscope import
  /// --allow-disjoint` does.
  ImportJob(QStringList sources, QString target, QObject* parent = nullptr, bool allow_disjoint = false);
  /// Cancels an import still going and waits for its thread.
  ~ImportJob() override;

  /// Starts the import on a worker thread and returns at once. Call once.
  void start();
  /// Asks the import to stop at its next check (before each file and before writing). The
  /// session is then closed "cancelled" and removed with its -wal and -shm files, so nothing
  /// half-written stays behind claimed as complete. Safe from any thread.
  void cancel() { cancel_ = true; }
  bool running() const { return running_; }
  bool allow_disjoint() const { return allow_disjoint_; }
  const QString& target() const { return target_; }
  const QStringList& sources() const { return sources_; }

 signals:
  /// Now and then, in the thread that owns the job: the fraction done (0..1) and what it does.
  void progress(double fraction, const QString& what);
  /// Once, after the worker ended, in the thread that owns the job. `ended`: "complete" (the
  /// session at target() is complete), "cancelled", "error" (no session is left; `message`
  /// says why, naming the file) or "disjoint" (refused: the ranks' time ranges do not overlap,
  /// as `embedscope import` refuses them, tester42 F12; no session is left; `message` is the
  /// refusal, importers' disjoint_refusal; a job made with allow_disjoint imports them anyway).
  void finished(const QString& ended, const QString& message);

 private:
  QStringList sources_;
  QString target_;
  std::atomic<bool> cancel_{false};
  bool allow_disjoint_ = false;
  bool running_ = false;
  QThread* thread_ = nullptr;
  QString ended_, message_;  // written by the worker before it ends
};

}  // namespace embedscope::ui
