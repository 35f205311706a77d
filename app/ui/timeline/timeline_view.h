#pragma once
// The timeline page: a toolbar (zoom history back / forward, fit the measured steps (F), show
// everything with the warm-up (Shift+F), fit a step, search by name), a colour legend, the
// TimelineWidget, and a side panel with the selected op's details and the per-op-name
// totals of the selected time range (RangeTotalsModel, all ranks or per rank).
// Keys: Ctrl+F search, Enter / F3 next match, Shift+Enter / Shift+F3 previous (the bar says "match 3
// of 120"); the step box names what the view shows.

#include <QWidget>

#include <memory>
#include <optional>
#include <vector>

#include "embedscope/sessions/analysis/critical_path.h"
#include "embedscope/sessions/store/session.h"

class QLabel;
class QLineEdit;
class QCheckBox;
class QSpinBox;
class QTableView;
class QToolButton;

namespace embedscope::ui {

class TimelineWidget;
class RangeTotalsModel;
class StepBox;
class ColourLegend;
class AnalysisJob;

class TimelineView : public QWidget {
  Q_OBJECT

 public:
  /// Reads every lane of `session` (throws sessions::SessionError on a damaged file).
  explicit TimelineView(std::shared_ptr<const sessions::SessionReader> session, QWidget* parent = nullptr);
  TimelineWidget* timeline() { return timeline_; }
  /// The session the view shows.
  const std::shared_ptr<const sessions::SessionReader>& session() const { return session_; }
  RangeTotalsModel* totals() { return totals_; }
  QLineEdit* search_box() { return search_; }
  QLabel* details() { return details_; }
  /// Beside the search box: "match 3 of 120" after a jump to a match, "no match", or nothing.
  QLabel* search_status() { return search_status_; }
  /// The note that says when warm-up steps are out of view ("" when none are).
  QLabel* view_note() { return view_note_; }
  StepBox* step_box() { return step_box_; }
  ColourLegend* legend() { return legend_; }
  /// Next / previous match of the search box's text; false when none.
  bool find_next(bool forward = true);
  /// Sums the range totals per rank (true) or over all ranks.
  void set_per_rank(bool per_rank);
  /// Draws the critical path of every measured step on the timeline or hides it. Key P. The
  /// path is analysed on first use (sessions::analyze) off the GUI thread: until it arrives the
  /// box reads "critical path (computing...)" and critical_path_job()->busy() is true.
  void show_critical_path(bool on);
  AnalysisJob* critical_path_job() { return path_job_; }
  /// Fits the slowest measured step, the one `embedscope stats` names slowest (report_step of
  /// sessions::analyze_step_times, core/timeline_nav.h: the report's timeline-step.png's), and the
  /// step box names it (View > Go to Slowest Step, Ctrl+Shift+S). The step times are read once,
  /// off the GUI thread (slowest_job()); without a counted measured step the toolbar note says
  /// "no slowest step: no measured step was counted" and the view stays.
  void go_to_slowest_step();
  AnalysisJob* slowest_job() { return slowest_job_; }

 protected:
  bool eventFilter(QObject* watched, QEvent* e) override;  // Shift+Enter in the search box

 private:
  void update_step_box();
  void update_details();
  void update_totals();
  void update_buttons();
  TimelineWidget* timeline_;
  RangeTotalsModel* totals_;
  QLineEdit* search_;
  QLabel *details_, *range_label_, *search_status_;
  QCheckBox *per_rank_, *critical_path_;
  AnalysisJob* path_job_;  // the critical path, analysed on first use
  AnalysisJob* slowest_job_;  // the slowest step, read on first use
  std::optional<std::optional<int64_t>> slowest_;  // once read: the step, or none
  std::shared_ptr<const sessions::SessionReader> session_;
  std::vector<sessions::PathSegment> path_;  // every measured step's, once analysed
  bool path_loaded_ = false;
  StepBox* step_box_;
  QLabel* view_note_;  // "2 warm-up steps left of the view (Shift+F ...)"
  ColourLegend* legend_;
  QToolButton *back_, *forward_;
};

}  // namespace embedscope::ui
