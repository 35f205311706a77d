#pragma once
// The timelines of several sessions one above the other on one time scale, aligned by step
// (sessions/analysis/step_windows.h), zooming and panning together.

#include <QWidget>

#include <cstdint>
#include <utility>
#include <vector>

#include "embedscope/sessions/model/events.h"
#include "models/labelled_session.h"

namespace embedscope::ui {

class TimelineWidget;
class ColourLegend;

/// The timelines of N sessions one above the other on one time scale: each session is shifted
/// so that the chosen step starts at 0 in all of them (sessions::align_offsets), and zooming or panning
/// any one of them moves all (they share the aligned extent, so the views stay equal). The
/// step windows of a run that ended inside a step (no row for it in its steps table) come
/// from a pass over its ops on a worker (an AnalysisJob child; wait_for_analyses); until they
/// arrive such a session is aligned on the steps it recorded.
class TimelineStack : public QWidget {
  Q_OBJECT

 public:
  TimelineStack(const std::vector<LabelledSession>& sessions, int64_t align_step, QWidget* parent = nullptr);
  size_t size() const { return timelines_.size(); }
  TimelineWidget* timeline(size_t i) { return timelines_[i]; }
  /// The colour legend above the timelines (timeline_legend; with "GPU sync wait" where a
  /// session has a gpu_sync lane).
  ColourLegend* legend() { return legend_; }
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
  ColourLegend* legend_ = nullptr;
  std::vector<std::vector<sessions::StepMetric>> steps_;
  std::vector<std::pair<int64_t, int64_t>> extents_;  // each session's own [first, last] ns
  std::vector<int64_t> offsets_;
  int64_t align_step_ = 0;
  bool syncing_ = false;
};

}  // namespace embedscope::ui
