#include "charts/active_timeline.h"

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <cmath>

#include "charts/block_map.h"

namespace embedscope::ui {

int64_t whole_trace_baseline(const sessions::MemoryHistory& history) {
  int64_t bytes = 0;
  size_t kept = 0;
  for (const auto& al : history.allocations()) {
    if (al.free_entry >= 0 || al.free_requested_entry >= 0 || al.pending_at_start) break;
    bytes += al.size;
    ++kept;
  }
  return kept == history.allocations().size() ? 0 : bytes;
}

ActiveTimeline::ActiveTimeline(QWidget* parent) : EntryChart(parent, 200) {}

void ActiveTimeline::set_baseline_enabled(bool on) {
  baseline_on_ = on;
  fit_top();
  refresh();
}

void ActiveTimeline::fit_top() {
  // the y axis fits the active bytes; the reserved line joins them when it is at most twice as
  // high (else it runs along the top, clipped: a 2 MiB segment must not flatten 70 KiB of blocks),
  // both above the baseline when it is drawn
  const int64_t bottom = y_bottom();
  int64_t active = bottom + 1, reserved = 0;
  for (const auto& c : columns_) {
    active = std::max(active, c.active);
    reserved = std::max(reserved, c.reserved);
  }
  top_ = reserved - bottom <= 2 * (active - bottom) ? std::max(active, reserved) : active;
}

void ActiveTimeline::set_data(std::shared_ptr<const sessions::MemoryHistory> history,
                              std::vector<sessions::TimelineColumn> columns, std::vector<sessions::MemoryFrame> frames,
                              std::vector<sessions::MemoryStackFrame> stacks) {
  history_ = std::move(history);
  columns_ = std::move(columns);
  frames_ = std::move(frames);
  stacks_ = std::move(stacks);
  baseline_ = history_ ? whole_trace_baseline(*history_) : 0;
  fit_top();
  refresh();
}

int32_t ActiveTimeline::allocation_at(double x, double y) const {
  const int c = column_at(x);
  const QRectF r = plot_rect();
  if (c < 0 || !history_ || y < r.top() || y > r.bottom()) return -1;
  const auto b = y_bottom() + static_cast<int64_t>((r.bottom() - y) / r.height() * static_cast<double>(top_ - y_bottom()));
  return sessions::band_at(*history_, columns_[static_cast<size_t>(c)], b);
}

QString ActiveTimeline::describe(int32_t a) const {
  if (!history_ || a < 0) return {};
  const sessions::MemoryAllocation& al = history_->allocations()[static_cast<size_t>(a)];
  const auto& entries = history_->entries();
  auto when = [&](int64_t e) { return e < 0 ? QString("before the trace") : entry_time(e); };
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

QString ActiveTimeline::title() const {
  if (y_bottom() > 0)  // said first: a narrow chart cuts the end of its title
    return QString("active memory timeline above %1 live for the whole run: live blocks, oldest at the bottom; "
                   "orange: reserved; dashed: the map's entry")
        .arg(bytes(y_bottom()));
  return "active memory timeline: live blocks, oldest at the bottom; orange: reserved (along the top when above); "
         "dashed: the map's entry";
}

void ActiveTimeline::render_bands(QImage& bands) const {
  QPainter p(&bands);
  const double cw = static_cast<double>(bands.width()) / static_cast<double>(columns_.size());
  const int64_t bottom = y_bottom();
  const double h = bands.height(), scale = h / static_cast<double>(std::max<int64_t>(1, top_ - bottom));
  for (size_t c = 0; c < columns_.size(); ++c) {
    const double x0 = std::floor(static_cast<double>(c) * cw), x1 = std::floor(static_cast<double>(c + 1) * cw);
    // each band from its top down to the top of the last one drawn: no seams between bands, and
    // a band under a quarter pixel is covered by the next one drawn
    double below = h;
    for (const auto& b : columns_[c].bands) {
      const sessions::MemoryAllocation& al = history_->allocations()[static_cast<size_t>(b.allocation)];
      const double y0 = h - static_cast<double>(b.offset + al.size - bottom) * scale;  // under the baseline: y0 >= h
      if (below - y0 < 0.25) continue;
      p.fillRect(QRectF(x0, y0, std::max(1.0, x1 - x0), below - y0), BlockMap::color_of_tag(al.tag));
      below = y0;
    }
  }
  // reserved bytes as a line over the bands
  p.setPen(QPen(QColor(0xff, 0x7f, 0x0e), 1.5));
  QPolygonF line;
  for (size_t c = 0; c < columns_.size(); ++c) {
    const double y = std::clamp(h - static_cast<double>(columns_[c].reserved - bottom) * scale, 0.5, h);
    line << QPointF(static_cast<double>(c) * cw, y) << QPointF(static_cast<double>(c + 1) * cw, y);
  }
  p.drawPolyline(line);
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
