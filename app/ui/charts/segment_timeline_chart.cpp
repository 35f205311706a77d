#include "charts/segment_timeline_chart.h"

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <cmath>

#include "charts/block_map.h"
#include "embedscope/sessions/analysis/memory_analysis.h"
#include "embedscope/sessions/model/units.h"

namespace embedscope::ui {

namespace {
constexpr int kLeft = 72, kRight = 12, kTop = 20, kBottom = 30;
QString bytes(int64_t b) { return QString::fromStdString(sessions::format_bytes(b)); }
QString ms(int64_t ns) { return QString::number(static_cast<double>(ns) / 1e6, 'f', 3) + " ms"; }
}  // namespace

SegmentTimelineChart::SegmentTimelineChart(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumHeight(160);
}

QColor SegmentTimelineChart::color_of(int32_t s) const {
  return s >= 0 && static_cast<size_t>(s) < colors_.size() ? colors_[static_cast<size_t>(s)] : no_stack_color();
}

QColor SegmentTimelineChart::reserved_color(int32_t s) const {
  const QColor c = color_of(s);
  return QColor((c.red() + 3 * 255) / 4, (c.green() + 3 * 255) / 4, (c.blue() + 3 * 255) / 4);
}

void SegmentTimelineChart::set_data(std::shared_ptr<const sessions::MemoryHistory> history,
                                    sessions::SegmentTimeline timeline, std::vector<sessions::MemoryFrame> frames,
                                    std::vector<sessions::MemoryStackFrame> stacks) {
  history_ = std::move(history);
  timeline_ = std::move(timeline);
  frames_ = std::move(frames);
  stacks_ = std::move(stacks);
  colors_.clear();
  for (const auto& seg : timeline_.segments) {
    const auto f = sessions::stack_frames(seg.stack_id, frames_, stacks_);
    // the tag of the allocations it made: the innermost function ("forward (train.py:20)" -> "forward")
    colors_.push_back(f.empty() ? no_stack_color() : BlockMap::color_of_tag(f[0].substr(0, f[0].find(" ("))));
  }
  render();
  update();
}

void SegmentTimelineChart::set_cursor(int64_t entry) {
  cursor_ = entry;
  update();
}

QRectF SegmentTimelineChart::plot_rect() const {
  return QRectF(kLeft, kTop, std::max(1, width() - kLeft - kRight), std::max(1, height() - kTop - kBottom));
}

int SegmentTimelineChart::column_at(double x) const {
  const QRectF r = plot_rect();
  const auto& cols = timeline_.columns;
  if (cols.empty() || x < r.left() || x >= r.right()) return -1;
  return std::min(static_cast<int>(cols.size()) - 1, static_cast<int>((x - r.left()) / r.width() * static_cast<double>(cols.size())));
}

int32_t SegmentTimelineChart::segment_at(double x, double y) const {
  const int c = column_at(x);
  const QRectF r = plot_rect();
  if (c < 0 || y < r.top() || y > r.bottom()) return -1;
  const auto b = static_cast<int64_t>((r.bottom() - y) / r.height() * static_cast<double>(timeline_.peak_reserved));
  const auto& col = timeline_.columns[static_cast<size_t>(c)];
  const int32_t band = sessions::segment_band_at(col, b);
  return band < 0 ? -1 : col.bands[static_cast<size_t>(band)].segment;
}

QString SegmentTimelineChart::describe(int32_t s, int column) const {
  if (!history_ || s < 0 || static_cast<size_t>(s) >= timeline_.segments.size()) return {};
  const sessions::SegmentLife& seg = timeline_.segments[static_cast<size_t>(s)];
  const auto& entries = history_->entries();
  auto when = [&](int64_t e) {
    return QString("entry %1 (%2)").arg(e).arg(ms(entries[static_cast<size_t>(e)].time_ns));
  };
  QString text = QString("segment at 0x%1: %2%3, %4 pool (by its size), stream %5")
                     .arg(static_cast<qulonglong>(seg.address), 0, 16)
                     .arg(bytes(seg.size))
                     .arg(seg.resized ? QString(" at most (made with %1, grown and shrunk: expandable)").arg(bytes(seg.first_size))
                                      : QString())
                     .arg(seg.small_pool ? "small" : "large")
                     .arg(seg.stream < 0 ? QString("unknown") : QString::number(seg.stream));
  QString life = seg.start_entry >= 0 ? QString("made at %1").arg(when(seg.start_entry)) : QString("made before the trace");
  if (seg.end_entry >= 0) {
    life += QString(", released at %1").arg(when(seg.end_entry));
    if (seg.start_entry >= 0)
      life += QString(": %1 entries, %2")
                  .arg(seg.end_entry - seg.start_entry)
                  .arg(ms(entries[static_cast<size_t>(seg.end_entry)].time_ns - entries[static_cast<size_t>(seg.start_entry)].time_ns));
  } else {
    life += ", still reserved at the end of the trace";
  }
  text += "\n" + life;
  if (column >= 0 && static_cast<size_t>(column) < timeline_.columns.size()) {
    const auto& col = timeline_.columns[static_cast<size_t>(column)];
    for (const auto& b : col.bands)
      if (b.segment == s)
        text += QString("\nafter entry %1: %2 of %3 active (%4%)")
                    .arg(col.entry)
                    .arg(bytes(b.active), bytes(b.size))
                    .arg(b.size > 0 ? 100.0 * static_cast<double>(b.active) / static_cast<double>(b.size) : 0.0, 0, 'f', 1);
  }
  const auto frames = sessions::stack_frames(seg.stack_id, frames_, stacks_);
  if (frames.empty()) text += seg.start_entry >= 0 ? "\n(no stack recorded)" : "";
  else text += "\nallocated by:";
  for (size_t i = 0; i < frames.size() && i < 12; ++i) text += "\n  " + QString::fromStdString(frames[i]);
  return text;
}

void SegmentTimelineChart::resizeEvent(QResizeEvent*) { render(); }

void SegmentTimelineChart::render() {
  const QRectF r = plot_rect();
  bands_ = QImage(std::max(1, static_cast<int>(r.width())), std::max(1, static_cast<int>(r.height())),
                  QImage::Format_ARGB32_Premultiplied);
  bands_.fill(Qt::transparent);
  const auto& cols = timeline_.columns;
  if (!history_ || cols.empty()) return;
  QPainter p(&bands_);
  const double cw = static_cast<double>(bands_.width()) / static_cast<double>(cols.size());
  const double h = bands_.height(), scale = h / static_cast<double>(timeline_.peak_reserved);
  const QColor separator = palette().color(QPalette::Base);
  for (size_t c = 0; c < cols.size(); ++c) {
    const double x0 = std::floor(static_cast<double>(c) * cw), x1 = std::floor(static_cast<double>(c + 1) * cw);
    const double w = std::max(1.0, x1 - x0);
    // each band from its top down to the top of the last one drawn (no seams); its active share
    // at its foot; a band under a quarter pixel is covered by the next one
    double below = h;
    for (const auto& b : cols[c].bands) {
      const double y0 = h - static_cast<double>(b.offset + b.size) * scale;
      if (below - y0 < 0.25) continue;
      p.fillRect(QRectF(x0, y0, w, below - y0), reserved_color(b.segment));
      const double ya = std::max(y0, below - static_cast<double>(b.active) * scale);
      if (b.active > 0) p.fillRect(QRectF(x0, ya, w, below - ya), color_of(b.segment));
      if (below - y0 >= 4) p.fillRect(QRectF(x0, y0, w, 1), separator);  // where one band ends
      below = y0;
    }
  }
}

void SegmentTimelineChart::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  const QColor text = palette().color(QPalette::Text);
  const QRectF r = plot_rect();
  p.setPen(text);
  p.drawText(QRectF(kLeft, 0, r.width(), kTop), Qt::AlignLeft | Qt::AlignVCenter,
             "segment timeline: reserved segments, oldest at the bottom; full colour: active, light: cached; "
             "click: the segment on the map");
  if (!history_ || timeline_.columns.empty()) {
    p.drawText(r, Qt::AlignCenter, history_ ? "no allocator events" : "computing...");
    return;
  }
  p.drawImage(r.topLeft(), bands_);
  p.setPen(QPen(text, 1));
  p.drawLine(r.bottomLeft(), r.bottomRight());
  p.drawLine(r.bottomLeft(), r.topLeft());
  const int64_t top = timeline_.peak_reserved;
  const int64_t ystep = byte_tick_step(top, 4);
  for (int64_t b = 0; b <= top; b += ystep) {
    const double y = r.bottom() - static_cast<double>(b) / static_cast<double>(top) * r.height();
    p.drawLine(QPointF(r.left() - 4, y), QPointF(r.left(), y));
    p.drawText(QRectF(0, y - 8, kLeft - 6, 16), Qt::AlignRight | Qt::AlignVCenter, bytes(b));
  }
  const int64_t n = history_->size();
  const int64_t xstep = count_tick_step(n, 8);
  for (int64_t e = 0; e < n; e += xstep) {
    const double x = r.left() + static_cast<double>(e) / static_cast<double>(n) * r.width();
    p.drawLine(QPointF(x, r.bottom()), QPointF(x, r.bottom() + 4));
    const double lx = std::clamp(x - 40, 0.0, std::max(0.0, width() - 80.0));
    p.drawText(QRectF(lx, r.bottom() + 4, 80, 14), Qt::AlignHCenter | Qt::AlignTop, QString::number(e));
  }
  p.drawText(QRectF(r.left(), r.bottom() + 15, r.width(), 14), Qt::AlignHCenter | Qt::AlignTop, "trace entry");
  if (cursor_ >= 0 && n > 0) {
    const double x = r.left() + (static_cast<double>(cursor_) + 0.5) / static_cast<double>(n) * r.width();
    p.setPen(QPen(palette().color(QPalette::Highlight), 1, Qt::DashLine));
    p.drawLine(QPointF(x, r.top()), QPointF(x, r.bottom()));
  }
}

void SegmentTimelineChart::mouseMoveEvent(QMouseEvent* e) {
  const int32_t s = segment_at(e->position().x(), e->position().y());
  if (s < 0) {
    QToolTip::hideText();
    return;
  }
  QToolTip::showText(e->globalPosition().toPoint(), describe(s, column_at(e->position().x())), this);
}

void SegmentTimelineChart::mousePressEvent(QMouseEvent* e) {
  const int c = column_at(e->position().x());
  if (c < 0) return;
  const int64_t entry = timeline_.columns[static_cast<size_t>(c)].entry;
  const int32_t s = segment_at(e->position().x(), e->position().y());
  if (s >= 0) emit segment_clicked(entry, static_cast<int64_t>(timeline_.segments[static_cast<size_t>(s)].address));
  else emit entry_clicked(entry);
}

}  // namespace embedscope::ui
