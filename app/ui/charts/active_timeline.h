#pragma once
// The active memory timeline, as PyTorch memory_viz's "Active Memory Timeline": x is the trace
// entry, y the bytes; every live block is a band stacked in allocation order (the oldest at the
// bottom), coloured by its tag as on the block map (BlockMap::color_of_tag), with the reserved
// bytes as a line above. Each pixel column shows the layout at its entry of most active bytes
// (sessions active_timeline), so peaks are never skipped. Hover a band: its size, requested
// size, lifetime and stack; click: entry_clicked with that column's entry (the view scrubs
// there). The cursor marks the entry the block map shows.

#include <QImage>
#include <QWidget>

#include <cstdint>
#include <memory>
#include <vector>

#include "embedscope/sessions/analysis/memory_analysis.h"

namespace embedscope::ui {

class ActiveTimeline : public QWidget {
  Q_OBJECT

 public:
  explicit ActiveTimeline(QWidget* parent = nullptr);
  /// Shows `columns` of `history` (frames and stacks name the bands' stacks in tooltips).
  void set_data(std::shared_ptr<const sessions::MemoryHistory> history, std::vector<sessions::TimelineColumn> columns,
                std::vector<sessions::MemoryFrame> frames, std::vector<sessions::MemoryStackFrame> stacks);
  void set_cursor(int64_t entry);
  const std::vector<sessions::TimelineColumn>& columns() const { return columns_; }
  /// The bytes at the top of the y axis: the largest active bytes of any column, or the largest
  /// reserved bytes when those are at most twice as many.
  int64_t top_bytes() const { return top_; }
  /// Where the bands are drawn (widget coordinates).
  QRectF plot_rect() const;
  /// The column under widget x, or -1.
  int column_at(double x) const;
  /// The allocation (MemoryHistory::allocations index) under the widget point, or -1.
  int32_t allocation_at(double x, double y) const;
  /// The tooltip of allocation `a`: tag, size (requested), lifetime in entries and time, stack.
  QString describe(int32_t a) const;

 signals:
  void entry_clicked(int64_t entry);

 protected:
  void paintEvent(QPaintEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void resizeEvent(QResizeEvent*) override;

 private:
  void render();
  std::shared_ptr<const sessions::MemoryHistory> history_;
  std::vector<sessions::TimelineColumn> columns_;
  std::vector<sessions::MemoryFrame> frames_;
  std::vector<sessions::MemoryStackFrame> stacks_;
  int64_t top_ = 1;
  int64_t cursor_ = -1;
  QImage bands_;  // the bands, rendered once per size
};

}  // namespace embedscope::ui
