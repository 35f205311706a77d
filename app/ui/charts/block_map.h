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
  /// Bytes of this block left out of the drawing (a block that dwarfs the other segments, cut
  /// so they show: layout_blocks with `cut`); 0 for a block drawn to scale.
  int64_t cut_bytes = 0;
};

/// The legend's last entry when a block is drawn cut.
inline constexpr const char* kCutLegend = "drawn cut (true size on it)";

/// A segment is cut on the map when one of its blocks (allocated or free) fills at least this
/// share of it and it is more than twice as wide as the map's scale (map_scale_bytes).
inline constexpr double kCutShare = 0.9;

/// The bytes a map's full width stands for (tester43 F13: a DLRM run's 620 MiB weights segment
/// made its 2 and 20 MiB segments 1-3 px wide, each map "one blue bar").
/// Without `cut`: the largest segment, or `width_bytes` when that is larger (two maps on one
/// scale). With `cut`: S = the widest segment that no single block fills to kCutShare, and at
/// least 4/3 of the bytes beside the largest block of each segment that one does (so a cut
/// block keeps a quarter of the width); when the widest segment is at most 2 S, or there is only
/// one segment, or S is 0, the widest segment (nothing is cut). Then at least `width_bytes`.
/// Segments {620 MiB: one 618.4 MiB block + 1.6 MiB free; 20 MiB: 3.6 MiB + 16.4 MiB free;
/// 2 MiB} -> 20 MiB with cut, 620 MiB without.
int64_t map_scale_bytes(const std::vector<sessions::MemoryBlockRecord>& blocks, int64_t width_bytes, bool cut);

/// Lays out a snapshot's blocks (the segments in address order, unsigned: PyTorch addresses
/// above 2^63 sort after the others). x is a fraction of map_scale_bytes(blocks, width_bytes,
/// cut): the largest segment, or `width_bytes` when that is larger (two maps drawn on one
/// scale). With `cut`, a segment wider than the scale is drawn the scale's width: its largest
/// block loses the excess (MapBlock::cut_bytes, drawn with a break mark) and the blocks after it
/// move left by as much; every other block keeps its true width.
std::vector<MapBlock> layout_blocks(const std::vector<sessions::MemoryBlockRecord>& blocks, int64_t width_bytes = 0,
                                    bool cut = false);

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
  /// Shows `blocks`; `width_bytes` as in layout_blocks, with cut_big_blocks().
  void set_blocks(std::vector<sessions::MemoryBlockRecord> blocks, int64_t width_bytes = 0);
  /// Whether a block that dwarfs the other segments is drawn cut (layout_blocks `cut`; the
  /// default: on). Takes effect at the next set_blocks.
  void set_cut_big_blocks(bool on) { cut_ = on; }
  bool cut_big_blocks() const { return cut_; }
  static constexpr int kRowHeight = 18;
  static constexpr int kMargin = 8;
  static constexpr int kScaleHeight = 22;   ///< the byte scale below the rows
  static constexpr int kLegendRow = 18;     ///< one row of the legend
  const std::vector<MapBlock>& layout() const { return layout_; }
  /// The bytes the full width stands for (map_scale_bytes).
  int64_t width_bytes() const { return width_bytes_; }
  /// The tags of the legend, in order (most bytes first), then "free", then kCutLegend when a
  /// block is drawn cut.
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
  bool cut_ = true;
  int legend_rows() const;
  std::vector<MapBlock> layout_;
  std::vector<std::string> legend_;
  int64_t width_bytes_ = 0;
};

}  // namespace embedscope::ui
