#pragma once
// The active memory timeline, as PyTorch memory_viz's "Active Memory Timeline": x is the trace
// entry, y the bytes; every live block is a band stacked in allocation order (the oldest at the
// bottom), coloured by its tag as on the block map (BlockMap::color_of_tag), with the reserved
// bytes as a line above. Each pixel column shows the layout at its entry of most active bytes
// (sessions active_timeline), so peaks are never skipped. Hover a band: its size, requested
// size, lifetime and stack; click: entry_clicked with that column's entry (the view scrubs
// there). The cursor marks the entry the block map shows.


#include <cstdint>
#include <memory>
#include <vector>

#include "charts/entry_chart.h"
#include "embedscope/sessions/analysis/memory_analysis.h"

namespace embedscope::ui {

/// The bytes of the blocks live for the whole trace, the active timeline's baseline: the longest
/// run of the oldest allocations (MemoryHistory::allocations() order, which is the bands' order
/// bottom up) that are never freed (nor their free requested). They are the lowest bands of every
/// column from the last of them on, so a chart can start its y axis there and show what changes
/// above (tester43 F13: a DLRM run's 618.4 MiB of weights, allocated at entry 1 and live to the
/// end, under ~20 MiB of per-step buffers). 0 when the oldest allocation is freed, or when no
/// allocation is freed at all (then nothing changes above anything).
int64_t whole_trace_baseline(const sessions::MemoryHistory& history);

class ActiveTimeline : public EntryChart {
  Q_OBJECT

 public:
  explicit ActiveTimeline(QWidget* parent = nullptr);
  /// Shows `columns` of `history` (frames and stacks name the bands' stacks in tooltips).
  void set_data(std::shared_ptr<const sessions::MemoryHistory> history, std::vector<sessions::TimelineColumn> columns,
                std::vector<sessions::MemoryFrame> frames, std::vector<sessions::MemoryStackFrame> stacks);
  const std::vector<sessions::TimelineColumn>& columns() const { return columns_; }
  /// The bytes at the top of the y axis: the largest active bytes of any column, or the largest
  /// reserved bytes when those are at most twice as many (both counted above the baseline).
  int64_t top_bytes() const { return top_; }
  /// Draws from whole_trace_baseline() up (the default) or from 0; the title says which.
  void set_baseline_enabled(bool on);
  bool baseline_enabled() const { return baseline_on_; }
  /// whole_trace_baseline() of the history shown (0 without one).
  int64_t baseline_bytes() const { return baseline_; }
  /// The allocation (MemoryHistory::allocations index) under the widget point, or -1.
  int32_t allocation_at(double x, double y) const;
  /// The tooltip of allocation `a`: tag, size (requested), lifetime in entries and time, stack.
  QString describe(int32_t a) const;

 signals:
  void entry_clicked(int64_t entry);

 protected:
  int column_count() const override { return static_cast<int>(columns_.size()); }
  int64_t y_top() const override { return top_; }
  int64_t y_bottom() const override { return baseline_on_ ? baseline_ : 0; }
  void render_bands(QImage& bands) const override;
  QString title() const override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mousePressEvent(QMouseEvent*) override;

 private:
  std::vector<sessions::TimelineColumn> columns_;
  std::vector<sessions::MemoryFrame> frames_;
  std::vector<sessions::MemoryStackFrame> stacks_;
  void fit_top();
  int64_t top_ = 1;
  int64_t baseline_ = 0;
  bool baseline_on_ = true;
};

}  // namespace embedscope::ui
