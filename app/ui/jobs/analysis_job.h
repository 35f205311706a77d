#pragma once
// Analyses off the GUI thread, tagged with an id so that a stale result is dropped (KDAB
// Hotspot's pattern). A view owns one AnalysisJob per kind of result; start() runs `work` on
// a worker of QThreadPool::globalInstance() and hands its result to `apply` on the job's own
// thread (the GUI thread), in its event loop, but only when the request is still the latest
// one: a newer start(), a cancel(), or the job's destruction (its view or tab closed) makes an
// older request stale, and its result is dropped, never applied.
//
// A session is read on the worker through a reader of its own (SessionReader connections are
// opened without SQLite's mutex, so one reader must not be used by two threads at once):
// capture the path, not the view's reader.

#include <QObject>
#include <QString>
#include <QStringList>

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

namespace embedscope::ui {

/// One kind of result of a view, computed off the GUI thread (see the top of this file). Not
/// copyable; lives on the GUI thread, usually as a child of its view.
class AnalysisJob : public QObject {
  Q_OBJECT

 public:
  explicit AnalysisJob(QObject* parent = nullptr);
  /// Makes every request stale; a worker still running finishes on its own and its result
  /// is dropped.
  ~AnalysisJob() override;

  /// Starts `work` on a worker thread and returns the request's id (1, 2, ... per job). When it
  /// returns, `apply(result)` runs on this object's thread if the id is still current();
  /// when it throws, `failed(what())` does (same rule). Either way finished(id) follows; a
  /// stale result emits dropped(id) instead. `work` must not touch widgets or the view's
  /// SessionReader.
  template <class T>
  quint64 start(std::function<T()> work, std::function<void(T&)> apply, std::function<void(const QString&)> failed = {}) {
    // the deliveries run on this object's thread, only while it lives (deliver())
    return launch([this, work = std::move(work), apply = std::move(apply), failed = std::move(failed)]() -> Delivery {
      try {
        auto result = std::make_shared<T>(work());
        return [this, apply, result] {
          error_.clear();
          apply(*result);
        };
      } catch (const std::exception& e) {
        const QString what = QString::fromUtf8(e.what());
        return [this, failed, what] {
          error_ = what;
          if (failed) failed(what);
        };
      }
    });
  }
  /// Makes the current request stale (its result will be dropped).
  void cancel();
  /// The id of the latest request (0 before the first).
  quint64 current() const { return current_; }
  /// True while the latest request's result has not arrived ("computing...").
  bool busy() const { return busy_; }
  /// What the latest applied request threw (e.g. "s.db: the session file is truncated or
  /// corrupt (...)"); empty when it returned.
  const QString& error() const { return error_; }

 signals:
  void started(quint64 id);
  /// The result (or failure) of request `id` was applied.
  void finished(quint64 id);
  /// The result of stale request `id` arrived and was not applied.
  void dropped(quint64 id);

 private:
  using Delivery = std::function<void()>;
  struct Guard;  // the worker's way back to this object, cut in the destructor
  quint64 launch(std::function<Delivery()> task);
  void deliver(quint64 id, const Delivery& d);
  std::shared_ptr<Guard> guard_;
  quint64 current_ = 0;
  bool busy_ = false;
  QString error_;
};

/// Processes this thread's events until no AnalysisJob in `root` (itself or a descendant) is
/// busy, or `timeout_ms` passed. True when none is busy. For batch renderers (reports, image
/// exports) and tests that need a view's figures rather than its "computing..." state.
bool wait_for_analyses(QObject* root, int timeout_ms = 120000);

/// The distinct error() of every AnalysisJob in `root` (itself and its descendants), in the
/// order found: a batch renderer fails with them where the CLI would (a corrupt table).
QStringList analysis_errors(QObject* root);

}  // namespace embedscope::ui
