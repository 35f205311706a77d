#include "charts/block_map.h"

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "charts/colors.h"
#include "embedscope/engine/sharding/sharding.h"  // format_bytes
#include "embedscope/sessions/model/units.h"

namespace embedscope::ui {

std::vector<MapBlock> layout_blocks(const std::vector<sessions::MemoryBlockRecord>& blocks, int64_t width_bytes) {
  std::map<int64_t, int64_t> segments;  // address -> size
  for (const auto& b : blocks) segments[b.segment_address] = b.segment_size;
  int64_t widest = std::max<int64_t>(1, width_bytes);
  for (const auto& [a, s] : segments) widest = std::max(widest, s);
  std::map<int64_t, int> row;
  for (const auto& [a, s] : segments) row.emplace(a, static_cast<int>(row.size()));
  std::vector<MapBlock> out;
  size_t largest = blocks.size();
  for (size_t i = 0; i < blocks.size(); ++i)
    if (!blocks[i].allocated && (largest == blocks.size() || blocks[i].size > blocks[largest].size)) largest = i;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto& b = blocks[i];
    const double x0 = static_cast<double>(b.address - b.segment_address) / static_cast<double>(widest);
    out.push_back({row[b.segment_address], x0, x0 + static_cast<double>(b.size) / static_cast<double>(widest), b,
                   i == largest});
  }
  return out;
}

BlockMap::BlockMap(QWidget* parent) : QWidget(parent) { setMouseTracking(true); }

QColor BlockMap::color_of(const sessions::MemoryBlockRecord& b) {
  if (!b.allocated) return QColor(0xdd, 0xdd, 0xdd);
  static const std::map<std::string, QColor> known = {
      {"weights", QColor(0x1f, 0x77, 0xb4)},     {"optimizer_state", QColor(0xff, 0x7f, 0x0e)},
      {"kjt", QColor(0x8e, 0x8e, 0x8e)},          {"pooled_output", QColor(0x2c, 0xa0, 0x2c)},
      {"gradients", QColor(0x94, 0x67, 0xbd)},    {"comm_buffer", QColor(0xd6, 0x27, 0x28)},
      {"activations", QColor(0x17, 0xbe, 0xcf)},  {"dense", QColor(0x8c, 0x56, 0x4b)}};
  auto it = known.find(b.tag);
  return it != known.end() ? it->second : QColor(0xbc, 0xbd, 0x22);
}

void BlockMap::set_blocks(std::vector<sessions::MemoryBlockRecord> blocks, int64_t width_bytes) {
  layout_ = layout_blocks(blocks, width_bytes);
  int rows = 0;
  for (const auto& b : layout_) rows = std::max(rows, b.row + 1);
  setMinimumHeight(2 * kMargin + rows * kRowHeight);
  update();
}

void BlockMap::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  const double w = width() - 2 * kMargin;
  for (const auto& b : layout_) {
    const QRectF r(kMargin + b.x0 * w, kMargin + b.row * kRowHeight + 2, std::max(1.0, (b.x1 - b.x0) * w),
                   kRowHeight - 4);
    p.fillRect(r, color_of(b.block));
    if (b.largest_free) {
      p.setPen(QPen(Qt::black, 2));
      p.drawRect(r);
    }
  }
}

void BlockMap::mouseMoveEvent(QMouseEvent* e) {
  const double w = width() - 2 * kMargin;
  const double fx = (e->position().x() - kMargin) / w;
  const int row = static_cast<int>((e->position().y() - kMargin) / kRowHeight);
  for (const auto& b : layout_)
    if (b.row == row && fx >= b.x0 && fx < b.x1) {
      QToolTip::showText(e->globalPosition().toPoint(),
                         b.block.allocated
                             ? QString("%1: %2 (requested %3)\naddress %4")
                                   .arg(QString::fromStdString(b.block.tag))
                                   .arg(QString::fromStdString(sessions::format_bytes(b.block.size)))
                                   .arg(QString::fromStdString(sessions::format_bytes(b.block.requested)))
                                   .arg(b.block.address, 0, 16)
                             : QString("free: %1%2").arg(QString::fromStdString(sessions::format_bytes(b.block.size)))
                                   .arg(b.largest_free ? " (largest free block)" : ""),
                         this);
      return;
    }
  QToolTip::hideText();
}

}  // namespace embedscope::ui
