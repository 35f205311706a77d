#pragma once
// The timeline: one row per rank and lane, ops as boxes coloured by category, step boundaries,
// a time axis in readable units. Wheel and W/S zoom at the cursor, drag and A/D pan, F fits,
// hovering shows the op's name, rank, lane, start, duration and bytes. Communication is split
// as Holistic Trace Analysis counts it: the parts that ran while the same rank computed are
// drawn light ("hidden"), the rest solid red ("exposed"). Every lane's ops are
// loaded once; each paint binary-searches the visible range and folds sub-pixel runs
// (fold_lane), so painting cost follows the pixels, not the events.

#include <QWidget>

#include <map>
#include <memory>
#include <vector>

#include "embedscope/sessions/analysis.h"
#include "embedscope/sessions/session.h"
#include "timeline_math.h"

namespace embedscope::ui {

class TimelineWidget : public QWidget {
  Q_OBJECT

 public:
  /// Reads every lane of `session` (throws sessions::SessionError on a damaged file).
  explicit TimelineWidget(std::shared_ptr<const sessions::SessionReader> session, QWidget* parent = nullptr);
  TimeScale& scale() { return scale_; }
  /// Geometry: the first pixel column of the time area and the y of a row.
  static constexpr int kGutter = 120;
  static constexpr int kAxis = 24;
  static constexpr int kRowHeight = 22;
  int row_y(size_t row) const { return kAxis + static_cast<int>(row) * kRowHeight; }
  size_t rows() const { return rows_.size(); }
  /// The time axis labels t - origin (ns): a comparison aligns sessions on a step this way.
  void set_time_origin(int64_t origin_ns) { origin_ns_ = origin_ns; update(); }

 signals:
  /// The user zoomed or panned (wheel, drag, keys); scale() holds the new view.
  void view_changed();

 protected:
  void paintEvent(QPaintEvent*) override;
  void resizeEvent(QResizeEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  void keyPressEvent(QKeyEvent*) override;

 private:
  struct Row {
    int32_t rank = 0, lane = 0;
    QString label;
    std::vector<sessions::OpRecord> ops;
  };
  const sessions::OpRecord* op_at(QPoint p) const;

  std::shared_ptr<const sessions::SessionReader> session_;
  std::vector<Row> rows_;
  std::map<int32_t, std::vector<sessions::Interval>> compute_;  // per rank: merged compute time
  std::vector<int64_t> step_starts_;
  TimeScale scale_;
  int64_t origin_ns_ = 0;
  bool dragging_ = false;
  int last_x_ = 0;
};

}  // namespace embedscope::ui
