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

/// The segment timeline less its static segments (ux44 left this: when the weights' segment is
/// not the oldest, segment_baseline is 0 and a DLRM run's segment timeline was one 620 MiB slab
/// with its per-step segments a fringe): what PyTorch memory_viz users do by hand, cutting the
/// constant slab out of the middle of the stack.
struct StaticSegmentCut {
  std::vector<int32_t> hidden;  ///< SegmentTimeline::segments indexes left out, in the order made
  int64_t bytes = 0;            ///< the sum of their sizes
  int64_t active = 0;           ///< the sum of their (constant) active bytes
  /// The timeline drawn: every column without the hidden bands, the bands above each moved down
  /// by its size; peak_reserved the largest column's reserved bytes left (>= 1 with columns);
  /// segments as given (indexes unchanged).
  sessions::SegmentTimeline shown;
  /// Per column of `shown`: the heights (bytes from the foot) where a hidden band was taken out,
  /// bottom up; empty where none was live.
  std::vector<std::vector<int64_t>> cuts;
};

/// Finds the static segments of `timeline` and cuts them out. A segment is static when it is at
/// least `min_bytes` (> 0) big, never resized, still reserved at the end of the trace, present
/// from a column in the first tenth of the columns (or the second column) to the last column without a gap, and its
/// active bytes are the same in every column it is in except its first (which may show it made
/// but not yet filled). Nothing is hidden (hidden empty, shown = timeline, cuts all empty) when
/// no segment is static or when the static ones are every band of every column they are in
/// (there would be nothing left to show).
/// Example: columns {A 100 (active 0)}, {A 100 (100), W 1000 (990), B 20 (5)},
/// {A 100 (40), W 1000 (990)} with min 500 -> hidden {W}, shown {A}, {A, B at offset 100},
/// {A}; cuts {}, {100}, {100}; peak 120.
StaticSegmentCut hide_static_segments(const sessions::SegmentTimeline& timeline, int64_t min_bytes);

class SegmentTimelineChart : public EntryChart {
  Q_OBJECT

 public:
  explicit SegmentTimelineChart(QWidget* parent = nullptr);
  /// Shows `timeline` of `history` (frames and stacks name the segments' stacks in tooltips).
  /// `live_bytes`: the bytes live for the whole trace (whole_trace_baseline; segment_baseline).
  void set_data(std::shared_ptr<const sessions::MemoryHistory> history, sessions::SegmentTimeline timeline,
                std::vector<sessions::MemoryFrame> frames, std::vector<sessions::MemoryStackFrame> stacks,
                int64_t live_bytes = 0);
  /// Leaves out the memory live for the whole trace (the default) or not; the title says which.
  /// With static segments (hide_static_segments of at least a quarter of the peak reserved
  /// bytes) they are cut out of the stack, a dashed line where they sit; else the chart starts at
  /// segment_baseline().
  void set_baseline_enabled(bool on);
  /// The static segments cut out when the baseline is enabled (hidden empty: none).
  const StaticSegmentCut& static_cut() const { return cut_; }
  /// The timeline as drawn: static_cut().shown while segments are hidden, else timeline().
  const sessions::SegmentTimeline& shown() const {
    return baseline_on_ && !cut_.hidden.empty() ? cut_.shown : timeline_;
  }
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
  /// The dashed line where static segments were cut out.
  static QColor cut_line_color() { return QColor(0x20, 0x20, 0x20); }
  /// The colour of segments without a stack.
  static QColor no_stack_color() { return QColor(0x6a, 0x7f, 0x9a); }

 signals:
  /// A band was clicked: the column's entry and the segment's base address (int64 bit pattern).
  void segment_clicked(int64_t entry, int64_t segment_address);
  /// Clicked where no band is: the column's entry.
  void entry_clicked(int64_t entry);

 protected:
  int column_count() const override { return static_cast<int>(timeline_.columns.size()); }
  int64_t y_top() const override { return std::max(shown().peak_reserved, y_bottom() + 1); }
  int64_t y_bottom() const override { return baseline_on_ && cut_.hidden.empty() ? baseline_ : 0; }
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
  StaticSegmentCut cut_;
};

}  // namespace embedscope::ui
