#include "charts/block_map.h"

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include "charts/colors.h"
#include "embedscope/sessions/model/units.h"

namespace embedscope::ui {

int64_t map_scale_bytes(const std::vector<sessions::MemoryBlockRecord>& blocks, int64_t width_bytes, bool cut) {
  struct Segment {
    int64_t size = 0, largest_block = 0;
  };
  std::map<uint64_t, Segment> segments;  // address -> size, its largest block
  for (const auto& b : blocks) {
    auto& s = segments[static_cast<uint64_t>(b.segment_address)];
    s.size = b.segment_size;
    s.largest_block = std::max(s.largest_block, b.size);
  }
  int64_t widest = 1;
  for (const auto& [a, s] : segments) widest = std::max(widest, s.size);
  int64_t scale = widest;
  if (cut && segments.size() > 1) {
    int64_t s_cut = 0;
    for (const auto& [a, s] : segments) {
      const bool dwarfing = static_cast<double>(s.largest_block) >= kCutShare * static_cast<double>(s.size);
      // a segment no block fills spans its true width; one a block fills keeps what lies beside that
      // block to scale, in at most three quarters of the width
      s_cut = std::max(s_cut, dwarfing ? ((s.size - s.largest_block) * 4 + 2) / 3 : s.size);
    }
    if (s_cut > 0 && widest > 2 * s_cut) scale = s_cut;
  }
  return std::max(scale, width_bytes);
}

std::vector<MapBlock> layout_blocks(const std::vector<sessions::MemoryBlockRecord>& blocks, int64_t width_bytes, bool cut) {
  std::map<uint64_t, int64_t> segments;  // address -> size
  for (const auto& b : blocks) segments[static_cast<uint64_t>(b.segment_address)] = b.segment_size;
  const int64_t widest = map_scale_bytes(blocks, width_bytes, cut);
  std::map<uint64_t, int> row;
  for (const auto& [a, s] : segments) row.emplace(a, static_cast<int>(row.size()));
  // a segment wider than the scale (only with cut): its largest block (the first of equals) gives up the excess
  std::map<uint64_t, size_t> cut_block;  // segment address -> index into blocks
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto seg = static_cast<uint64_t>(blocks[i].segment_address);
    if (segments[seg] <= widest) continue;
    auto it = cut_block.find(seg);
    if (it == cut_block.end() || blocks[i].size > blocks[it->second].size) cut_block[seg] = i;
  }
  std::vector<MapBlock> out;
  size_t largest = blocks.size();
  for (size_t i = 0; i < blocks.size(); ++i)
    if (!blocks[i].allocated && (largest == blocks.size() || blocks[i].size > blocks[largest].size)) largest = i;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto& b = blocks[i];
    const auto seg = static_cast<uint64_t>(b.segment_address);
    int64_t from = static_cast<int64_t>(static_cast<uint64_t>(b.address) - seg), size = b.size, cut_bytes = 0;
    if (auto it = cut_block.find(seg); it != cut_block.end()) {
      const auto& c = blocks[it->second];
      const int64_t excess = std::min(segments[seg] - widest, c.size);
      if (it->second == i) {
        cut_bytes = excess;
        size -= excess;
      } else if (static_cast<uint64_t>(b.address) > static_cast<uint64_t>(c.address)) {
        from -= excess;
      }
    }
    const double x0 = static_cast<double>(from) / static_cast<double>(widest);
    MapBlock m{row[seg], x0, x0 + static_cast<double>(size) / static_cast<double>(widest), b, i == largest};
    m.cut_bytes = cut_bytes;
    out.push_back(std::move(m));
  }
  return out;
}

int64_t byte_tick_step(int64_t width_bytes, int max_ticks) {
  const int64_t w = std::max<int64_t>(1, width_bytes);
  for (int64_t step = 1; step < (int64_t{1} << 40); step <<= 1)
    if (w / step <= std::max(1, max_ticks)) return step;
  return int64_t{1} << 40;
}

std::string byte_tick_label(int64_t bytes) {
  const std::string plain = sessions::format_bytes(bytes);
  if (std::llabs(bytes) < 1024) return plain;
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024.0;
  int u = 0;
  while (std::abs(v) >= 1024.0 && u < 3) { v /= 1024.0; ++u; }
  for (int decimals = 1; decimals <= 3; ++decimals) {  // the fewest decimals that say the tick exactly
    const double scale = std::pow(10.0, decimals);
    if (decimals == 3 || std::abs(std::round(v * scale) - v * scale) < 1e-6) {
      if (decimals == 1) return plain;
      char out[48];
      std::snprintf(out, sizeof out, "%.*f %s", decimals, v, units[u]);
      return out;
    }
  }
  return plain;
}

int byte_ticks_for_width(double width_px) {
  return std::clamp(static_cast<int>(width_px / kByteTickLabelPx), 1, 6);
}

int64_t count_tick_step(int64_t n, int max_ticks) {
  for (int64_t p = 1;; p *= 10)
    for (int64_t m : {1, 2, 5})
      if (n / (m * p) <= max_ticks) return m * p;
}

namespace {
// The first row's y: below the legend and the byte scale (nothing above it on an empty map).
int rows_top(bool empty, int legend_rows) {
  return empty ? BlockMap::kMargin : BlockMap::kMargin + legend_rows * BlockMap::kLegendRow + BlockMap::kScaleHeight;
}
}  // namespace

BlockMap::BlockMap(QWidget* parent) : QWidget(parent) { setMouseTracking(true); }

namespace {
const std::map<std::string, QColor>& engine_tag_colors() {
  static const std::map<std::string, QColor> known = {
      {"weights", QColor(0x1f, 0x77, 0xb4)},     {"optimizer_state", QColor(0xff, 0x7f, 0x0e)},
      {"kjt", QColor(0x8e, 0x8e, 0x8e)},          {"pooled_output", QColor(0x2c, 0xa0, 0x2c)},
      {"gradients", QColor(0x94, 0x67, 0xbd)},    {"comm_buffer", QColor(0xd6, 0x27, 0x28)},
      {"activations", QColor(0x17, 0xbe, 0xcf)},  {"dense", QColor(0x8c, 0x56, 0x4b)}};
  return known;
}
// Tableau 10 without its grey (free blocks are grey): the colours of tags not of the engine
constexpr size_t kTagColors = 10;
const QColor& tag_color(size_t i) {
  static const QColor ten[kTagColors] = {QColor(0x4e, 0x79, 0xa7), QColor(0xf2, 0x8e, 0x2b), QColor(0xe1, 0x57, 0x59),
                                         QColor(0x76, 0xb7, 0xb2), QColor(0x59, 0xa1, 0x4f), QColor(0xed, 0xc9, 0x48),
                                         QColor(0xb0, 0x7a, 0xa1), QColor(0xff, 0x9d, 0xa7), QColor(0x9c, 0x75, 0x5f),
                                         QColor(0x6b, 0x4c, 0x9a)};
  return ten[i % kTagColors];
}
// FNV-1a of the name: the tag's colour slot when use_tag_colors did not give it another
size_t hash_slot(const std::string& tag) {
  uint32_t h = 2166136261u;
  for (unsigned char c : tag) h = (h ^ c) * 16777619u;
  return h % kTagColors;
}
// The slots use_tag_colors gave (GUI thread only, as painting)
std::map<std::string, size_t>& assigned_slots() {
  static std::map<std::string, size_t> given;
  return given;
}
}  // namespace

QColor BlockMap::color_of_tag(const std::string& tag) {
  if (auto it = engine_tag_colors().find(tag); it != engine_tag_colors().end()) return it->second;
  if (auto it = assigned_slots().find(tag); it != assigned_slots().end()) return tag_color(it->second);
  return tag_color(hash_slot(tag));
}

int BlockMap::use_tag_colors(std::vector<std::string> tags) {
  std::sort(tags.begin(), tags.end());
  tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
  std::set<size_t> used;
  int moved = 0;
  for (const auto& tag : tags) {
    if (engine_tag_colors().count(tag)) continue;
    const auto it = assigned_slots().find(tag);
    const size_t now = it != assigned_slots().end() ? it->second : hash_slot(tag);
    size_t slot = now;
    if (used.size() < kTagColors)
      while (used.count(slot)) slot = (slot + 1) % kTagColors;
    used.insert(slot);
    if (slot == now) continue;
    ++moved;
    assigned_slots()[tag] = slot;
  }
  return moved;
}

QColor BlockMap::color_of(const sessions::MemoryBlockRecord& b) {
  if (!b.allocated) return QColor(0xdd, 0xdd, 0xdd);
  return color_of_tag(b.tag);
}

void BlockMap::set_blocks(std::vector<sessions::MemoryBlockRecord> blocks, int64_t width_bytes) {
  layout_ = layout_blocks(blocks, width_bytes, cut_);
  width_bytes_ = map_scale_bytes(blocks, width_bytes, cut_);
  rows_ = 0;
  highlight_ = -1;
  std::map<std::string, int64_t> by_tag;
  bool any_free = false;
  for (const auto& b : layout_) {
    rows_ = std::max(rows_, b.row + 1);
    if (b.block.allocated) by_tag[b.block.tag] += b.block.size;
    else any_free = true;
  }
  std::vector<std::pair<std::string, int64_t>> tags(by_tag.begin(), by_tag.end());
  std::stable_sort(tags.begin(), tags.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  legend_.clear();
  for (const auto& [t, n] : tags) legend_.push_back(t);
  if (any_free) legend_.push_back("free");
  if (std::any_of(layout_.begin(), layout_.end(), [](const MapBlock& b) { return b.cut_bytes > 0; }))
    legend_.push_back(kCutLegend);
  setMinimumHeight(2 * kMargin + rows_ * kRowHeight + (layout_.empty() ? 0 : kScaleHeight + legend_rows() * kLegendRow));
  update();
}

int BlockMap::legend_rows() const {
  // entries of at most 200 px side by side; at least one row when there is anything to name
  const int per_row = std::max(1, (std::max(width(), 400) - 2 * kMargin) / 200);
  return legend_.empty() ? 0 : static_cast<int>((legend_.size() + static_cast<size_t>(per_row) - 1) / static_cast<size_t>(per_row));
}

void BlockMap::highlight_segment(int64_t segment_address) {
  highlight_ = row_of_segment(segment_address);
  update();
}

int BlockMap::row_of_segment(int64_t segment_address) const {
  for (const auto& b : layout_)
    if (b.block.segment_address == segment_address) return b.row;
  return -1;
}

QRect BlockMap::row_rect(int row) const {
  return QRect(0, rows_top(layout_.empty(), legend_rows()) + row * kRowHeight, width(), kRowHeight);
}

int BlockMap::block_at(double x, double y) const {
  const double w = width() - 2 * kMargin;
  const double fx = (x - kMargin) / w;
  const int top = rows_top(layout_.empty(), legend_rows());
  if (y < top) return -1;
  const int row = static_cast<int>((y - top) / kRowHeight);
  for (size_t i = 0; i < layout_.size(); ++i)
    if (layout_[i].row == row && fx >= layout_[i].x0 && fx < layout_[i].x1) return static_cast<int>(i);
  return -1;
}

void BlockMap::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  const double w = width() - 2 * kMargin;
  const int top = rows_top(layout_.empty(), legend_rows());
  for (const auto& b : layout_) {
    const QRectF r(kMargin + b.x0 * w, top + b.row * kRowHeight + 2, std::max(1.0, (b.x1 - b.x0) * w),
                   kRowHeight - 4);
    p.fillRect(r, color_of(b.block));
    if (b.block.pending_free) p.fillRect(r, QBrush(palette().color(QPalette::Base), Qt::BDiagPattern));
    if (b.largest_free) {
      p.setPen(QPen(palette().color(QPalette::Text), 2));
      p.drawRect(r);
    }
    if (b.cut_bytes > 0) {  // a cut block: a break mark (two slashes of the background) and its true size
      const double cx = r.center().x();
      p.setPen(QPen(palette().color(QPalette::Base), 3));
      for (double dx : {-5.0, 3.0}) p.drawLine(QPointF(cx + dx, r.bottom() + 1), QPointF(cx + dx + 6, r.top() - 1));
      const QString size = QString::fromStdString(sessions::format_bytes(b.block.size));
      p.setPen(QPen(b.block.allocated ? QColor(Qt::white) : palette().color(QPalette::Text), 1));
      QFont f = font();
      f.setPointSizeF(std::max(6.0, f.pointSizeF() * 0.8));
      p.setFont(f);
      const QRectF left(r.left() + 3, r.top(), cx - 8 - r.left() - 3, r.height());
      if (left.width() > p.fontMetrics().horizontalAdvance(size)) p.drawText(left, Qt::AlignLeft | Qt::AlignVCenter, size);
      p.setFont(font());
    }
  }
  if (highlight_ >= 0) {  // the segment the segment timeline's click named
    p.setPen(QPen(palette().color(QPalette::Highlight), 2));
    p.setBrush(Qt::NoBrush);
    p.drawRect(QRectF(kMargin - 3, top + highlight_ * kRowHeight, w + 6, kRowHeight));
  }
  if (layout_.empty()) return;
  // the legend (a swatch and the tag, entries of 200 px), then the byte scale: above the rows
  const QColor text = palette().color(QPalette::Text);
  QFont f = font();
  f.setPointSizeF(std::max(6.0, f.pointSizeF() * 0.85));
  p.setFont(f);
  const int per_row = std::max(1, (std::max(width(), 400) - 2 * kMargin) / 200);
  for (size_t i = 0; i < legend_.size(); ++i) {
    const int col = static_cast<int>(i) % per_row, row = static_cast<int>(i) / per_row;
    const QRectF sw(kMargin + col * 200, kMargin / 2 + row * kLegendRow + 3, 12, 12);
    sessions::MemoryBlockRecord r;
    r.allocated = legend_[i] != "free" && legend_[i] != kCutLegend;
    r.tag = legend_[i];
    p.fillRect(sw, color_of(r));
    if (legend_[i] == kCutLegend) {  // the break mark of a cut block
      p.setPen(QPen(palette().color(QPalette::Base), 2));
      p.drawLine(QPointF(sw.left() + 3, sw.bottom()), QPointF(sw.left() + 7, sw.top()));
      p.drawLine(QPointF(sw.left() + 7, sw.bottom()), QPointF(sw.left() + 11, sw.top()));
    }
    p.setPen(QPen(text, 1));
    const QString name = legend_[i] == "free" ? QString("free (largest outlined)") : QString::fromStdString(legend_[i]);
    p.drawText(QRectF(sw.right() + 4, sw.top() - 3, 180, kLegendRow), Qt::AlignLeft | Qt::AlignVCenter,
               p.fontMetrics().elidedText(name, Qt::ElideRight, 180));
  }
  const int y0 = top - 4;  // the axis line just above the first row, labels above it
  p.setPen(QPen(text, 1));
  p.drawLine(QPointF(kMargin, y0), QPointF(kMargin + w, y0));
  const int64_t step = byte_tick_step(width_bytes_, byte_ticks_for_width(w));  // labels that fit (tester42 F26)
  for (int64_t at = 0; at <= width_bytes_; at += step) {
    const double x = kMargin + w * static_cast<double>(at) / static_cast<double>(width_bytes_);
    p.drawLine(QPointF(x, y0 - 4), QPointF(x, y0));
    const QString label = QString::fromStdString(byte_tick_label(at));
    const double tw = p.fontMetrics().horizontalAdvance(label);
    p.drawText(QPointF(std::clamp(x - tw / 2, 0.0, std::max(0.0, width() - tw)), y0 - 6), label);
  }
}

void BlockMap::mouseMoveEvent(QMouseEvent* e) {
  const int i = block_at(e->position().x(), e->position().y());
  if (i < 0) {
    QToolTip::hideText();
    return;
  }
  const MapBlock& b = layout_[static_cast<size_t>(i)];
  const QString cut_note = b.cut_bytes > 0 ? QString("\ndrawn cut: %1 of it left out so that the smaller segments show")
                                                 .arg(QString::fromStdString(sessions::format_bytes(b.cut_bytes)))
                                           : QString();
  QToolTip::showText(e->globalPosition().toPoint(),
                     b.block.allocated
                         ? QString("%1: %2 (requested %3)%4\naddress %5")
                               .arg(QString::fromStdString(b.block.tag))
                               .arg(QString::fromStdString(sessions::format_bytes(b.block.size)))
                               .arg(QString::fromStdString(sessions::format_bytes(b.block.requested)))
                               .arg(b.block.pending_free ? ", free pending on another stream" : "")
                               .arg(static_cast<qulonglong>(b.block.address), 0, 16) + cut_note
                         : QString("free: %1%2").arg(QString::fromStdString(sessions::format_bytes(b.block.size)))
                               .arg(b.largest_free ? " (largest free block)" : "") + cut_note,
                     this);
}

void BlockMap::mousePressEvent(QMouseEvent* e) {
  const int i = block_at(e->position().x(), e->position().y());
  if (i >= 0) emit block_clicked(i);
}

}  // namespace embedscope::ui
