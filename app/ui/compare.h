#pragma once
// Comparing sessions (two in File > Compare Sessions, two or more in a teaching scenario):
// their `stats` figures side by side with differences, charts on shared axes, their timelines
// one above the other on one time scale aligned by step, and their memory side by side.
// Figures come from sessions::analyze (views never compute what an analysis can).

#include <QAbstractTableModel>
#include <QWidget>

#include <memory>
#include <optional>
#include <vector>

#include "embedscope/sessions/analysis.h"
#include "embedscope/sessions/analysis/step_windows.h"
#include "embedscope/sessions/session.h"

class QCustomPlot;
class QSpinBox;
class QTabWidget;
class QTableView;

namespace embedscope::ui {

class TimelineWidget;
class MemoryCompare;

/// One session to compare, with the label shown for it ("A", a file name, a scenario run's label).
struct LabelledSession {
  QString label;
  std::shared_ptr<const sessions::SessionReader> session;
};

/// The `stats` figures of N sessions: one row per figure, columns
/// [figure, session 0 .. session N-1, session 1 - session 0, ..., session N-1 - session 0].
/// DisplayRole: formatted text ("+1.20 ms (+15.3 %)" for a difference); Qt::UserRole: the raw
/// number (ns, samples/s, %, bytes, ratio; a difference as the plain difference). A session
/// without measured steps shows "-" (and no UserRole value) for every figure but the memory ones.
class CompareModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Figure { StepMean, StepP50, StepP99, Throughput, ExposedComm, Overlap, PeakAllocated, PeakReserved,
                LookupImbalance, LookupTimeImbalance, FigureCount };
  CompareModel(std::vector<QString> labels, std::vector<sessions::RunStats> stats, QObject* parent = nullptr);
  int rowCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : FigureCount; }
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  /// The raw value of `figure` in `stats` (units as above).
  static double value(const sessions::RunStats& stats, Figure figure);
  const std::vector<sessions::RunStats>& stats() const { return stats_; }

 private:
  std::vector<QString> labels_;
  std::vector<sessions::RunStats> stats_;
};

/// The timelines of N sessions one above the other on one time scale: each session is shifted
/// so that the chosen step starts at 0 in all of them (sessions::align_offsets), and zooming or panning
/// any one of them moves all (they share the aligned extent, so the views stay equal).
class TimelineStack : public QWidget {
  Q_OBJECT

 public:
  TimelineStack(const std::vector<LabelledSession>& sessions, int64_t align_step, QWidget* parent = nullptr);
  size_t size() const { return timelines_.size(); }
  TimelineWidget* timeline(size_t i) { return timelines_[i]; }
  /// Offset (ns) subtracted from session i's times to get the shared, aligned time.
  int64_t offset(size_t i) const { return offsets_[i]; }
  int64_t align_step() const { return align_step_; }
  /// Re-aligns on `step` and shows it.
  void align_to_step(int64_t step);
  /// Shows aligned time [t0, t1) in every timeline.
  void show_range(int64_t t0_ns, int64_t t1_ns);
  /// Shows the aligned step, from 0 to the end of the longest one.
  void fit_step();
  /// The aligned time at the left edge of the views.
  int64_t view_t0() const;

 private:
  void sync_from(size_t i);
  std::vector<TimelineWidget*> timelines_;
  std::vector<std::vector<sessions::StepMetric>> steps_;
  std::vector<std::pair<int64_t, int64_t>> extents_;  // each session's own [first, last] ns
  std::vector<int64_t> offsets_;
  int64_t align_step_ = 0;
  bool syncing_ = false;
};

/// The comparison page: "Figures" (CompareModel, step time per step and exposed communication
/// per rank on shared axes), "Timelines" (TimelineStack with the step to align) and "Memory"
/// (MemoryCompare). Throws sessions::SessionError if a session cannot be read.
class CompareView : public QWidget {
  Q_OBJECT

 public:
  CompareView(const std::vector<LabelledSession>& sessions, int64_t align_step = 0, QWidget* parent = nullptr);
  CompareModel* model() { return model_; }
  TimelineStack* timelines() { return stack_; }
  MemoryCompare* memory() { return memory_; }
  QTabWidget* pages() { return pages_; }
  QCustomPlot* step_plot() { return step_plot_; }
  QCustomPlot* exposed_plot() { return exposed_plot_; }

 private:
  QTabWidget* pages_;
  CompareModel* model_ = nullptr;
  TimelineStack* stack_ = nullptr;
  MemoryCompare* memory_ = nullptr;
  QCustomPlot* step_plot_ = nullptr;
  QCustomPlot* exposed_plot_ = nullptr;
};

/// The colour of session i in every comparison chart.
QColor session_color(size_t i);

}  // namespace embedscope::ui
