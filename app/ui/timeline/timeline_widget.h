#pragma once
// The timeline: one row per rank and lane, ops as boxes coloured by category, step boundaries,
// a time axis in readable units. Wheel and W/S zoom at the cursor, drag and A/D pan, F fits the
// measured steps (the default view), Shift+F everything (warm-up steps and set-up included),
// 0..9 (step 0..9, as `stats` numbers them) or a double click fit a step, Backspace / Shift+Backspace (or Alt+Left / Alt+Right) go
// back and forward through the zoom history; hovering shows the op's name, rank, lane, start,
// duration and bytes; a click selects an op (outlined); Shift+drag, or a drag on the time axis,
// selects a time range; a hung run's collective that timed out is marked. Communication is split as Holistic Trace Analysis counts it: the parts
// that ran while the same rank computed are drawn light ("hidden"), the rest solid red
// ("exposed"), and the part before every rank had started (the first collective waiting for a
// slower rank's set-up, setup_waits) in the set-up colour. Every lane's ops are loaded once; each paint binary-searches the visible range
// and folds sub-pixel runs (fold_lane), so painting cost follows the pixels, not the events.

#include <QWidget>

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/critical_path.h"
#include "embedscope/sessions/store/session.h"
#include "core/rebalance_marks.h"
#include "core/timeline_math.h"
#include "core/timeline_nav.h"

namespace embedscope::ui {

class TimelineWidget : public QWidget {
  Q_OBJECT

 public:
  /// Reads every lane of `session` (throws sessions::SessionError on a damaged file).
  explicit TimelineWidget(std::shared_ptr<const sessions::SessionReader> session, QWidget* parent = nullptr);
  TimeScale& scale() { return scale_; }
  /// Geometry: the first pixel column of the time area and the y of a row.
  static constexpr int kGutter = 210;  // "rank 0 annot. stream 40", "rank 1 python3.8 2568503", "rank 0 GPU compute stream" whole
  static constexpr int kAxis = 24;
  static constexpr int kRowHeight = 22;
  int row_y(size_t row) const { return kAxis + static_cast<int>(row) * kRowHeight; }
  size_t rows() const { return rows_.size(); }
  /// A row's label ("rank 0 compute"; an overflow row: "rank 0 trainer (overlap)"; an
  /// import's "rank 0 annot. stream 7"): short and unique in the session (core/lane_labels.h).
  QString row_label(size_t row) const { return rows_[row].label; }
  /// The hover text of a row's label: the label and, where it is shorter, the lane's whole name
  /// ("rank 0 stream 7 (cuda:0 NVIDIA A100-PG509-200)").
  QString row_tooltip(size_t row) const;
  /// The time axis labels t - origin (ns): a comparison aligns sessions on a step this way.
  void set_time_origin(int64_t origin_ns) { origin_ns_ = origin_ns; update(); }

  /// The ops of a row, sorted by start.
  const std::vector<sessions::OpRecord>& row_ops(size_t row) const { return rows_[row].ops; }
  const sessions::OpRecord& op(OpRef r) const { return rows_[r.row].ops[r.index]; }
  /// The op under a widget pixel (a pixel of slack either side), if any.
  std::optional<OpRef> op_at(QPoint p) const;
  /// The ops of a row that did not end (sessions/model/did_not_end.h: imported events the
  /// profiler never saw end, zero-length), as indices into row_ops(row), by start. They are drawn
  /// as a thin line with an open-ended arrow at their start, their tooltip says "did not end";
  /// they count as neither compute nor communication (hidden communication, set-up waits), and
  /// they stay inside the pannable extent so that a marker outside the valid events' range can
  /// be reached.
  const std::vector<size_t>& row_did_not_end(size_t row) const { return rows_[row].did_not_end; }
  /// The op that did not end whose marker is within 4 px of widget pixel p, if any (checked
  /// before op_at: the marker sits on or beside the ops around it).
  std::optional<OpRef> did_not_end_at(QPoint p) const;
  /// The tooltip of op r: name, rank, lane, category, start, duration (or "did not end"), step,
  /// bytes and set-up wait where there are any.
  QString op_tooltip(OpRef r) const;

  /// Selection: the op shown outlined and in the details. `centre` pans it into the middle of
  /// the view (zooming out when it is wider than the view), as a step of the zoom history.
  std::optional<OpRef> selected() const { return selected_; }
  void select(std::optional<OpRef> op, bool centre = false);
  /// Name, rank, lane, step, start, duration, bytes and, for a communication op, the rank's
  /// collective records inside its span (op, group, sequence, bytes, peers, per-peer element
  /// counts), as HTML.
  QString details(OpRef op) const;

  /// The selected time range [t0, t1), ns (nullopt: none).
  std::optional<ViewRange> range() const { return range_; }
  void set_range(std::optional<ViewRange> r);
  /// range_totals over every row for the selected range (empty without one).
  std::vector<OpTotal> totals(bool per_rank) const;

  /// Shows `r` and records it in the zoom history.
  void navigate(ViewRange r);
  ViewRange view() const { return {scale_.t0(), scale_.t1()}; }
  void back();
  void forward();
  const ZoomHistory& history() const { return history_; }
  /// Each step's window over all ranks; fit_step shows one and emits step_fitted (false, and no
  /// signal, when the step is unknown).
  const std::map<int64_t, ViewRange>& steps() const { return steps_; }
  bool fit_step(int64_t step);
  /// Shows the measured steps (measured_extent), or everything when no step is measured (key F).
  void fit();
  /// Warm-up steps of the session (-(lowest step) when it is negative, else 0).
  int64_t warmup_steps() const { return warmup_steps_; }
  /// Per rank the set-up waits (setup_waits over the session's ops).
  const std::map<int32_t, std::vector<ViewRange>>& setup_wait_ranges() const { return setup_; }
  /// A hung session's collective that timed out (hung_op of the end message), drawn outlined
  /// with a dashed line at its end and "timed out"; nullopt for other sessions.
  std::optional<OpRef> hung() const { return hung_; }
  /// Whether a row is a `gpu_sync` lane (host waits for the GPU, drawn in gpu_sync_color).
  bool has_sync_rows() const;
  /// Whether a row is a lane of kind `annotation` (an Nsight export's NVTX ranges, drawn in
  /// annotation_color under their thread; not busy time).
  bool has_annotation_rows() const;
  /// How much of a communication op is set-up wait, ns (0 for other ops).
  int64_t setup_wait_ns(OpRef op) const;
  /// The live rebalances of the session (core/rebalance_marks.h), drawn as a line across the
  /// rows at each one's start with "rebalance" on the time axis; hovering the label or the line
  /// (where no op is under the cursor) shows its text.
  const std::vector<RebalanceMark>& rebalance_marks() const { return marks_; }
  /// The widget x of mark i (kGutter + the scale's x of its time).
  double mark_x(size_t i) const;
  /// The label box of each rebalance marker in view (marks_ order), in widget pixels: over the
  /// time axis, right of its line; the axis' tick labels under one are not drawn.
  std::vector<QRectF> rebalance_label_boxes(const QFontMetrics& fm) const;
  /// The mark within 3 px of widget pixel p (the visible ones), if any.
  std::optional<size_t> mark_at(QPoint p) const;
  /// The critical path to draw (segments of every step, any order; empty: none): a bar under
  /// each op segment on its row, a dotted bar for a gap, and a line where the path moves to
  /// another row.
  void set_critical_path(std::vector<sessions::PathSegment> segments);
  const std::vector<sessions::PathSegment>& critical_path() const { return path_; }
  /// The row of (rank, lane), or rows() when there is none.
  size_t row_of(int32_t rank, int32_t lane) const;
  /// Selects and centres the next (or previous) op after the selection whose name contains
  /// `text` (case-insensitive), in the order of start time, then row, zooming in where it is
  /// narrower than kMatchMinPx (core/timeline_nav.h match_view). False when none matches.
  bool find(const QString& text, bool forward = true);
  /// Where the last find() landed: its place among the ops that match (1-based) and how many
  /// match ("match 3 of 120"); nullopt after a find() that found none.
  struct MatchPlace {
    int64_t position = 0, total = 0;
  };
  const std::optional<MatchPlace>& match_place() const { return match_place_; }
  /// Whether a tooltip this widget showed (an op's, a row label's, a rebalance's) may still be
  /// up: it is hidden whenever the view moves (view_changed) or the widget is resized, since
  /// another op is then under the cursor.
  bool tooltip_shown() const { return tooltip_shown_; }

 signals:
  void selection_changed();
  void range_changed();
  /// The user zoomed or panned (wheel, drag, keys, history); scale() holds the new view.
  void view_changed();
  /// fit_step showed step `step` (keys 0..9, a double click on a step, the step box, the toolbar's Fit step).
  void step_fitted(int64_t step);

 protected:
  void paintEvent(QPaintEvent*) override;
  void resizeEvent(QResizeEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  void mouseDoubleClickEvent(QMouseEvent*) override;
  void keyPressEvent(QKeyEvent*) override;

 private:
  struct Row {
    int32_t rank = 0, lane = 0;
    QString lane_name, label;
    std::vector<sessions::OpRecord> ops;
    LaneIndex index{ops};  // built from ops (declared before it)
    std::vector<size_t> did_not_end;  // indices into ops of the ops that did not end, by start
    bool sync = false;  // the gpu_sync lane: host waits for the GPU, drawn in gpu_sync_color
    bool annotation = false;  // kind `annotation` (NVTX ranges): drawn in annotation_color, not busy
    QString gpu_note;  // a shared GPU's comm stream: what it holds (shared_gpu_comm_note), on hover
  };
  void show_tooltip(QPoint global, const QString& text);
  void hide_tooltip();
  enum class Nav { jump, zoom, pan };
  // Records the current view in the history; successive zooms (or pans) are one entry.
  void commit(Nav kind);

  std::shared_ptr<const sessions::SessionReader> session_;
  std::vector<Row> rows_;
  std::vector<sessions::PathSegment> path_;  // by start
  std::map<int32_t, std::vector<sessions::Interval>> compute_;  // per rank: merged compute time
  std::map<int32_t, std::vector<ViewRange>> setup_;  // per rank: set-up waits
  int64_t warmup_steps_ = 0;
  bool imported_ = false;  // an imported trace: ops before the first profiler step are no warm-up
  std::optional<OpRef> hung_;
  std::vector<RebalanceMark> marks_;
  std::vector<int64_t> step_starts_;
  std::map<int64_t, ViewRange> steps_;
  TimeScale scale_;
  int64_t origin_ns_ = 0;
  ZoomHistory history_{{0, 1}};
  Nav last_nav_ = Nav::jump;
  std::optional<OpRef> selected_;
  std::optional<ViewRange> range_;
  enum class Drag { none, pan, range } drag_ = Drag::none;
  int press_x_ = 0, last_x_ = 0;
  int64_t range_anchor_ = 0;
  mutable std::optional<std::vector<sessions::CollectiveRecord>> collectives_;  // read on first details()
  bool tooltip_shown_ = false;
  QString match_text_;                  // the search text matches_ counts
  std::unique_ptr<MatchIndex> matches_;  // the ops it matches (core/timeline_nav.h)
  std::optional<MatchPlace> match_place_;
};

}  // namespace embedscope::ui
