#pragma once
// The segment timeline, as PyTorch memory_viz's "Active Cached Segment Timeline": x is the trace
// entry, y the bytes; every reserved segment is a band from the entry that made it to the one
// that released it, stacked in the order the segments were made (the oldest at the bottom), its
// height the segment's bytes, in a light shade of its colour with the bytes of its active blocks
// (allocated or pending free) in the full colour at its foot, a line of the background between
// bands. A segment's colour is that of the allocation that made it on the block map and the
// active memory timeline (BlockMap::color_of_tag of its stack's innermost function); segments
// without a stack (made before the trace, or an engine run's) share one slate blue. Each pixel column shows the
// segments at its entry of most reserved bytes (sessions segment_timeline), so peaks are never
// skipped. Hover a band: the segment's address, bytes, stream, pool, the stack that allocated
// it and its lifetime; click: segment_clicked with that column's entry and the segment's
// address (the memory view scrubs there and marks the segment's row on the block map). The
// cursor marks the entry the block map shows. Draws only: the model is sessions'.

#include <QColor>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "charts/entry_chart.h"
#include "embedscope/sessions/analysis/segment_timeline.h"

namespace embedscope::ui {

/// The segment timeline's baseline (tester43 F13: a DLRM run's weights segment was one solid
/// slab, its per-step blocks a fringe on top): the bytes of the bottom band that stay active in
/// every column from the first one where it holds at least `live_bytes` (the active timeline's
/// whole_trace_baseline: blocks live for the whole trace), at most `live_bytes`. 0 when
/// `live_bytes` is 0, when no column's bottom band reaches it, or when the bottom band is not
/// one segment from there on. Columns before that first one are drawn cut at the baseline.
/// Bottom bands {segment 0: active 0, 700, 650, 690} with live 600 -> 600; with live 680 -> 650.
int64_t segment_baseline(const sessions::SegmentTimeline& timeline, int64_t live_bytes);

class SegmentTimelineChart : public EntryChart {
  Q_OBJECT

 public:
  explicit SegmentTimelineChart(QWidget* parent = nullptr);
  /// Shows `timeline` of `history` (frames and stacks name the segments' stacks in tooltips).
  /// `live_bytes`: the bytes live for the whole trace (whole_trace_baseline; segment_baseline).
  void set_data(std::shared_ptr<const sessions::MemoryHistory> history, sessions::SegmentTimeline timeline,
                std::vector<sessions::MemoryFrame> frames, std::vector<sessions::MemoryStackFrame> stacks,
                int64_t live_bytes = 0);
  /// Draws from segment_baseline() up (the default) or from 0; the title says which.
  void set_baseline_enabled(bool on);
  bool baseline_enabled() const { return baseline_on_; }
  int64_t baseline_bytes() const { return baseline_; }
  const sessions::SegmentTimeline& timeline() const { return timeline_; }
  /// The segment (SegmentTimeline::segments index) under the widget point, or -1.
  int32_t segment_at(double x, double y) const;
  /// The tooltip of segment `s` in `column` (its bytes and active share there; column -1: none):
  /// address, bytes, stream, pool, lifetime in entries and time, the allocating stack.
  QString describe(int32_t s, int column = -1) const;
  /// The colour of segment `s` (see the top of this file): its active share is drawn in it, the
  /// rest of its band in reserved_color(s), the colour washed three quarters towards white.
  QColor color_of(int32_t s) const;
  QColor reserved_color(int32_t s) const;
  /// The colour of segments without a stack.
  static QColor no_stack_color() { return QColor(0x6a, 0x7f, 0x9a); }

 signals:
  /// A band was clicked: the column's entry and the segment's base address (int64 bit pattern).
  void segment_clicked(int64_t entry, int64_t segment_address);
  /// Clicked where no band is: the column's entry.
  void entry_clicked(int64_t entry);

 protected:
  int column_count() const override { return static_cast<int>(timeline_.columns.size()); }
  int64_t y_top() const override { return std::max(timeline_.peak_reserved, y_bottom() + 1); }
  int64_t y_bottom() const override { return baseline_on_ ? baseline_ : 0; }
  void render_bands(QImage& bands) const override;
  QString title() const override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mousePressEvent(QMouseEvent*) override;

 private:
  sessions::SegmentTimeline timeline_;
  std::vector<sessions::MemoryFrame> frames_;
  std::vector<sessions::MemoryStackFrame> stacks_;
  std::vector<QColor> colors_;  // per segment
  int64_t baseline_ = 0;
  bool baseline_on_ = true;
};

}  // namespace embedscope::ui
