#include "charts/active_timeline.h"

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <cmath>

#include "charts/block_map.h"
#include "embedscope/sessions/model/units.h"

namespace embedscope::ui {

namespace {
constexpr int kLeft = 72, kRight = 12, kTop = 20, kBottom = 30;
QString bytes(int64_t b) { return QString::fromStdString(sessions::format_bytes(b)); }
QString ms(int64_t ns) { return QString::number(static_cast<double>(ns) / 1e6, 'f', 3) + " ms"; }
}  // namespace

ActiveTimeline::ActiveTimeline(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumHeight(200);
}

void ActiveTimeline::set_data(std::shared_ptr<const sessions::MemoryHistory> history,
                              std::vector<sessions::TimelineColumn> columns, std::vector<sessions::MemoryFrame> frames,
                              std::vector<sessions::MemoryStackFrame> stacks) {
  history_ = std::move(history);
  columns_ = std::move(columns);
  frames_ = std::move(frames);
  stacks_ = std::move(stacks);
  // the y axis fits the active bytes; the reserved line joins them when it is at most twice as
  // high (else it runs along the top, clipped: a 2 MiB segment must not flatten 70 KiB of blocks)
  int64_t active = 1, reserved = 0;
  for (const auto& c : columns_) {
    active = std::max(active, c.active);
    reserved = std::max(reserved, c.reserved);
  }
  top_ = reserved <= 2 * active ? std::max(active, reserved) : active;
  render();
  update();
}

void ActiveTimeline::set_cursor(int64_t entry) {
  cursor_ = entry;
  update();
}

QRectF ActiveTimeline::plot_rect() const {
  return QRectF(kLeft, kTop, std::max(1, width() - kLeft - kRight), std::max(1, height() - kTop - kBottom));
}

int ActiveTimeline::column_at(double x) const {
  const QRectF r = plot_rect();
  if (columns_.empty() || x < r.left() || x >= r.right()) return -1;
  return std::min(static_cast<int>(columns_.size()) - 1,
                  static_cast<int>((x - r.left()) / r.width() * static_cast<double>(columns_.size())));
}

int32_t ActiveTimeline::allocation_at(double x, double y) const {
  const int c = column_at(x);
  const QRectF r = plot_rect();
  if (c < 0 || !history_ || y < r.top() || y > r.bottom()) return -1;
  const auto b = static_cast<int64_t>((r.bottom() - y) / r.height() * static_cast<double>(top_));
  return sessions::band_at(*history_, columns_[static_cast<size_t>(c)], b);
}

QString ActiveTimeline::describe(int32_t a) const {
  if (!history_ || a < 0) return {};
  const sessions::MemoryAllocation& al = history_->allocations()[static_cast<size_t>(a)];
  const auto& entries = history_->entries();
  auto when = [&](int64_t e) {
    return e < 0 ? QString("before the trace") : QString("entry %1 (%2)").arg(e).arg(ms(entries[static_cast<size_t>(e)].time_ns));
  };
  QString life = QString("allocated at %1, ").arg(when(al.alloc_entry));
  if (al.free_entry >= 0) {
    life += QString("freed at %1").arg(when(al.free_entry));
    if (al.alloc_entry >= 0)
      life += QString(": %1 entries, %2")
                  .arg(al.free_entry - al.alloc_entry)
                  .arg(ms(entries[static_cast<size_t>(al.free_entry)].time_ns - entries[static_cast<size_t>(al.alloc_entry)].time_ns));
  } else {
    life += "live at the end of the trace";
  }
  if (al.free_requested_entry >= 0 && al.free_requested_entry != al.free_entry)
    life += QString("\nfree requested at entry %1, pending on another stream until it completed").arg(al.free_requested_entry);
  QString text = QString("%1: %2 (requested %3), stream %4\n%5")
                     .arg(QString::fromStdString(al.tag.empty() ? "(no tag)" : al.tag), bytes(al.size), bytes(al.requested))
                     .arg(al.stream)
                     .arg(life);
  const auto frames = sessions::stack_frames(al.stack_id, frames_, stacks_);
  for (size_t i = 0; i < frames.size() && i < 12; ++i) text += "\n  " + QString::fromStdString(frames[i]);
  return text;
}

void ActiveTimeline::resizeEvent(QResizeEvent*) { render(); }

void ActiveTimeline::render() {
  const QRectF r = plot_rect();
  bands_ = QImage(std::max(1, static_cast<int>(r.width())), std::max(1, static_cast<int>(r.height())),
                  QImage::Format_ARGB32_Premultiplied);
  bands_.fill(Qt::transparent);
  if (!history_ || columns_.empty()) return;
  QPainter p(&bands_);
  const double cw = static_cast<double>(bands_.width()) / static_cast<double>(columns_.size());
  const double h = bands_.height(), scale = h / static_cast<double>(top_);
  for (size_t c = 0; c < columns_.size(); ++c) {
    const double x0 = std::floor(static_cast<double>(c) * cw), x1 = std::floor(static_cast<double>(c + 1) * cw);
    // each band from its top down to the top of the last one drawn: no seams between bands, and
    // a band under a quarter pixel is covered by the next one drawn
    double below = h;
    for (const auto& b : columns_[c].bands) {
      const sessions::MemoryAllocation& al = history_->allocations()[static_cast<size_t>(b.allocation)];
      const double y0 = h - static_cast<double>(b.offset + al.size) * scale;
      if (below - y0 < 0.25) continue;
      p.fillRect(QRectF(x0, y0, std::max(1.0, x1 - x0), below - y0), BlockMap::color_of_tag(al.tag));
      below = y0;
    }
  }
  // reserved bytes as a line over the bands
  p.setPen(QPen(QColor(0xff, 0x7f, 0x0e), 1.5));
  QPolygonF line;
  for (size_t c = 0; c < columns_.size(); ++c) {
    const double y = std::max(0.5, h - static_cast<double>(columns_[c].reserved) * scale);
    line << QPointF(static_cast<double>(c) * cw, y) << QPointF(static_cast<double>(c + 1) * cw, y);
  }
  p.drawPolyline(line);
}

void ActiveTimeline::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  const QColor text = palette().color(QPalette::Text);
  const QRectF r = plot_rect();
  p.setPen(text);
  p.drawText(QRectF(kLeft, 0, r.width(), kTop), Qt::AlignLeft | Qt::AlignVCenter,
             "active memory timeline: live blocks, oldest at the bottom; orange: reserved (along the top when "
             "above); dashed: the map's entry");
  if (!history_ || columns_.empty()) {
    p.drawText(r, Qt::AlignCenter, history_ ? "no allocator events" : "computing...");
    return;
  }
  p.drawImage(r.topLeft(), bands_);
  p.setPen(QPen(text, 1));
  p.drawLine(r.bottomLeft(), r.bottomRight());
  p.drawLine(r.bottomLeft(), r.topLeft());
  // byte ticks on y, entry ticks on x
  const int64_t ystep = byte_tick_step(top_, 5);
  for (int64_t b = 0; b <= top_; b += ystep) {
    const double y = r.bottom() - static_cast<double>(b) / static_cast<double>(top_) * r.height();
    p.drawLine(QPointF(r.left() - 4, y), QPointF(r.left(), y));
    p.drawText(QRectF(0, y - 8, kLeft - 6, 16), Qt::AlignRight | Qt::AlignVCenter, bytes(b));
  }
  const int64_t n = history_->size();
  const int64_t xstep = count_tick_step(n, 8);
  for (int64_t e = 0; e < n; e += xstep) {
    const double x = r.left() + static_cast<double>(e) / static_cast<double>(n) * r.width();
    p.drawLine(QPointF(x, r.bottom()), QPointF(x, r.bottom() + 4));
    const double lx = std::clamp(x - 40, 0.0, std::max(0.0, width() - 80.0));  // the last label stays inside
    p.drawText(QRectF(lx, r.bottom() + 4, 80, 14), Qt::AlignHCenter | Qt::AlignTop, QString::number(e));
  }
  p.drawText(QRectF(r.left(), r.bottom() + 15, r.width(), 14), Qt::AlignHCenter | Qt::AlignTop, "trace entry");
  if (cursor_ >= 0 && n > 0) {
    const double x = r.left() + (static_cast<double>(cursor_) + 0.5) / static_cast<double>(n) * r.width();
    p.setPen(QPen(palette().color(QPalette::Highlight), 1, Qt::DashLine));
    p.drawLine(QPointF(x, r.top()), QPointF(x, r.bottom()));
  }
}

void ActiveTimeline::mouseMoveEvent(QMouseEvent* e) {
  const int32_t a = allocation_at(e->position().x(), e->position().y());
  if (a < 0) {
    QToolTip::hideText();
    return;
  }
  QToolTip::showText(e->globalPosition().toPoint(), describe(a), this);
}

void ActiveTimeline::mousePressEvent(QMouseEvent* e) {
  const int c = column_at(e->position().x());
  if (c >= 0) emit entry_clicked(columns_[static_cast<size_t>(c)].entry);
}

}  // namespace embedscope::ui
