#pragma once
// The segment and block map of an allocator snapshot, like PyTorch's allocator state history:
// one row per segment, blocks coloured by tag when allocated, grey when free, the largest free
// block outlined; hovering a block shows its size, requested size and tag.

#include <QColor>
#include <QWidget>

#include <cstdint>
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
/// Lays out a snapshot's blocks (the segments in address order). x is a fraction of the
/// largest segment, or of `width_bytes` when that is larger (two maps drawn on one scale).
std::vector<MapBlock> layout_blocks(const std::vector<sessions::MemoryBlockRecord>& blocks, int64_t width_bytes = 0);

/// The map of one snapshot: a row of kRowHeight px per segment, each block a box of its tag's
/// colour (grey when free), the largest free block outlined; a tooltip names the block under
/// the mouse.
class BlockMap : public QWidget {
  Q_OBJECT

 public:
  explicit BlockMap(QWidget* parent = nullptr);
  /// Shows `blocks`; `width_bytes` as in layout_blocks.
  void set_blocks(std::vector<sessions::MemoryBlockRecord> blocks, int64_t width_bytes = 0);
  static constexpr int kRowHeight = 18;
  static constexpr int kMargin = 8;
  const std::vector<MapBlock>& layout() const { return layout_; }
  /// The fill colour of a block (free blocks share one grey).
  static QColor color_of(const sessions::MemoryBlockRecord& b);

 protected:
  void paintEvent(QPaintEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;

 private:
  std::vector<MapBlock> layout_;
};

}  // namespace embedscope::ui
