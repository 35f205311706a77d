#pragma once
// The segment and block map of an allocator snapshot, like PyTorch's allocator state history:
// one row per segment, blocks coloured by tag when allocated (hatched while their free is
// pending on another stream), grey when free, the largest free block outlined; above the rows a
// colour legend of the tags shown (kLegendRow px per line of entries 200 px wide) and a byte
// scale (kScaleHeight px: ticks of the widest segment's bytes), so the first row starts at
// kMargin + legend lines x kLegendRow + kScaleHeight.
// Hovering a block shows its size, requested size and tag; clicking it emits block_clicked.

#include <QColor>
#include <QWidget>

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/sessions/model/events.h"

namespace embedscope::ui {

/// A block placed on the map: row = segment (address order), [x0, x1) as fractions of the
/// largest segment's size.
struct MapBlock {
  int row = 0;
  double x0 = 0, x1 = 0;
  sessions::MemoryBlockRecord block;
  bool largest_free = false;
};
/// Lays out a snapshot's blocks (the segments in address order, unsigned: PyTorch addresses
/// above 2^63 sort after the others). x is a fraction of the largest segment, or of
/// `width_bytes` when that is larger (two maps drawn on one scale).
std::vector<MapBlock> layout_blocks(const std::vector<sessions::MemoryBlockRecord>& blocks, int64_t width_bytes = 0);

/// Tick spacing of a byte axis `width_bytes` wide: the smallest power of two bytes (1 B, 2 B, ...
/// 512 B, 1 KiB, 2 KiB, ... 1 TiB) that gives at most `max_ticks` intervals (>= 1 B). Binary
/// steps, as format_bytes rolls over at 1024: ticks read 512.0 KiB, 1.0 MiB, 1.5 MiB, never
/// "1000.0 KiB" between "500.0 KiB" and a "1.5 MiB" that is really 1.46 MiB (tester35 D13).
int64_t byte_tick_step(int64_t width_bytes, int max_ticks = 6);

/// The label of the byte tick at `bytes`: format_bytes's unit (binary, rolling over at 1024) and
/// its one decimal, or two or three where one would round the tick ("1.25 MiB", not "1.2 MiB").
std::string byte_tick_label(int64_t bytes);

/// The px a byte tick label ("120.0 MiB", 8 pt) is given on a map's scale, its gap included.
inline constexpr double kByteTickLabelPx = 80;
/// The most byte-scale intervals that fit a map `width_px` wide: one label each kByteTickLabelPx,
/// 1 to 6 (tester42 F26: 11 maps side by side, 6 labels each 130 px wide overprinted).
/// 250 px -> 3, 1000 px -> 6, 40 px -> 1.
int byte_ticks_for_width(double width_px);

/// Tick spacing of a count axis (trace entries) `n` long: the smallest of 1, 2, 5, 10, 20, 50,
/// ... that gives at most `max_ticks` intervals.
int64_t count_tick_step(int64_t n, int max_ticks);

/// The map of one snapshot (see the top of this file).
class BlockMap : public QWidget {
  Q_OBJECT

 public:
  explicit BlockMap(QWidget* parent = nullptr);
  /// Shows `blocks`; `width_bytes` as in layout_blocks.
  void set_blocks(std::vector<sessions::MemoryBlockRecord> blocks, int64_t width_bytes = 0);
  static constexpr int kRowHeight = 18;
  static constexpr int kMargin = 8;
  static constexpr int kScaleHeight = 22;   ///< the byte scale below the rows
  static constexpr int kLegendRow = 18;     ///< one row of the legend
  const std::vector<MapBlock>& layout() const { return layout_; }
  /// The bytes the full width stands for.
  int64_t width_bytes() const { return width_bytes_; }
  /// The tags of the legend, in order (most bytes first), then "free".
  const std::vector<std::string>& legend() const { return legend_; }
  /// Outlines the row of the segment at `segment_address` (int64 bit pattern; the segment
  /// timeline's click) until the next set_blocks; an address the map does not show outlines none.
  void highlight_segment(int64_t segment_address);
  /// The row of the segment at `segment_address`, or -1; and the widget rectangle of a row.
  int row_of_segment(int64_t segment_address) const;
  QRect row_rect(int row) const;
  /// The highlighted row, or -1.
  int highlighted_row() const { return highlight_; }
  /// The layout index of the block at widget point (x, y), or -1.
  int block_at(double x, double y) const;
  /// The fill colour of a block (free blocks share one grey).
  static QColor color_of(const sessions::MemoryBlockRecord& b);
  /// The colour of an allocation tag: the engine's tags have fixed colours; any other (a PyTorch
  /// snapshot's innermost function) the colour use_tag_colors gave it, else one of ten by a hash
  /// of its name, so it is stable.
  static QColor color_of_tag(const std::string& tag);
  /// Gives the tags of one session (the memory view's: its allocations' tags) distinct colours
  /// (tester43 F6: `forward` and `all_to_all` hashed to the same green of the ten). In name
  /// order, each tag not of the engine keeps its colour (its hash's, or one an earlier call gave)
  /// when no earlier tag of `tags` has it, else takes the next of the ten (in the ten's order,
  /// wrapping) that none has; past ten tags colours repeat. Remembered process-wide, so the table
  /// of stacks, the timelines and the map agree, and a tag keeps its colour unless it collides
  /// within a later call's set. Returns the number of tags given another colour by this call.
  static int use_tag_colors(std::vector<std::string> tags);

 signals:
  /// A block was clicked: its index in layout().
  void block_clicked(int index);

 protected:
  void paintEvent(QPaintEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mousePressEvent(QMouseEvent*) override;

 private:
  int rows_ = 0;
  int highlight_ = -1;
  int legend_rows() const;
  std::vector<MapBlock> layout_;
  std::vector<std::string> legend_;
  int64_t width_bytes_ = 0;
};

}  // namespace embedscope::ui
