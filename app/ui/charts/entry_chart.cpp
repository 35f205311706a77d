#include "charts/entry_chart.h"

#include <QPainter>

#include <algorithm>

#include "charts/block_map.h"
#include "embedscope/sessions/model/units.h"

namespace embedscope::ui {

namespace {
constexpr int kLeft = 72, kRight = 12, kTop = 20, kBottom = 30;
}  // namespace

EntryChart::EntryChart(QWidget* parent, int minimum_height) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumHeight(minimum_height);
}

QString EntryChart::bytes(int64_t b) { return QString::fromStdString(sessions::format_bytes(b)); }
QString EntryChart::ms(int64_t ns) { return QString::number(static_cast<double>(ns) / 1e6, 'f', 3) + " ms"; }

QString EntryChart::entry_time(int64_t e) const {
  return QString("entry %1 (%2)").arg(e).arg(ms(history_->entries()[static_cast<size_t>(e)].time_ns));
}

void EntryChart::set_cursor(int64_t entry) {
  cursor_ = entry;
  update();
}

QRectF EntryChart::title_rect() const {
  const int w = std::max(1, width() - kLeft - kRight);
  const int h = fontMetrics().boundingRect(QRect(0, 0, w, 100000), Qt::TextWordWrap, title()).height() + 4;
  return QRectF(kLeft, 0, w, std::max(kTop, h));
}

QRectF EntryChart::plot_rect() const {
  const int top = static_cast<int>(title_rect().height());
  return QRectF(kLeft, top, std::max(1, width() - kLeft - kRight), std::max(1, height() - top - kBottom));
}

int EntryChart::column_at(double x) const {
  const QRectF r = plot_rect();
  const int n = column_count();
  if (n <= 0 || x < r.left() || x >= r.right()) return -1;
  return std::min(n - 1, static_cast<int>((x - r.left()) / r.width() * static_cast<double>(n)));
}

std::vector<EntryChart::YTick> EntryChart::y_ticks() const {
  std::vector<YTick> out;
  if (!history_ || column_count() == 0) return out;
  const QRectF r = plot_rect();
  const int64_t bottom = std::max<int64_t>(0, y_bottom());
  const int64_t top = std::max<int64_t>(bottom + 1, y_top());
  const double label_h = fontMetrics().height();
  const double px_per_byte = r.height() / static_cast<double>(top - bottom);
  int64_t step = byte_tick_step(top - bottom, byte_ticks_);
  while (static_cast<double>(step) * px_per_byte < label_h + 2 && step < top - bottom) step *= 2;
  for (int64_t b = (bottom + step - 1) / step * step; b <= top; b += step) {
    const double y = r.bottom() - static_cast<double>(b - bottom) * px_per_byte;
    out.push_back({b, QRectF(0, y - label_h / 2, kLeft - 6, label_h), QString::fromStdString(byte_tick_label(b))});
  }
  return out;
}

void EntryChart::refresh() {
  const QRectF r = plot_rect();
  bands_ = QImage(std::max(1, static_cast<int>(r.width())), std::max(1, static_cast<int>(r.height())),
                  QImage::Format_ARGB32_Premultiplied);
  bands_.fill(Qt::transparent);
  if (history_ && column_count() > 0) render_bands(bands_);
  update();
}

void EntryChart::resizeEvent(QResizeEvent*) { refresh(); }

void EntryChart::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  const QColor text = palette().color(QPalette::Text);
  const QRectF r = plot_rect();
  p.setPen(text);
  p.drawText(title_rect(), Qt::AlignLeft | Qt::AlignVCenter | Qt::TextWordWrap, title());
  if (!history_ || column_count() == 0) {
    p.drawText(r, Qt::AlignCenter, history_ ? "no allocator events" : "computing...");
    return;
  }
  p.drawImage(r.topLeft(), bands_);
  p.setPen(QPen(text, 1));
  p.drawLine(r.bottomLeft(), r.bottomRight());
  p.drawLine(r.bottomLeft(), r.topLeft());
  // byte ticks on y, entry ticks on x
  for (const YTick& t : y_ticks()) {
    const double y = t.label.center().y();
    p.drawLine(QPointF(r.left() - 4, y), QPointF(r.left(), y));
    p.drawText(t.label, Qt::AlignRight | Qt::AlignVCenter, t.text);
  }
  const int64_t n = history_->size();
  // as many entry labels as fit side by side, at most 8 (the widest label is the last entry's)
  const int x_fit = static_cast<int>(r.width() / (fontMetrics().horizontalAdvance(QString::number(n)) + 16));
  const int64_t xstep = count_tick_step(n, std::clamp(x_fit, 1, 8));
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

}  // namespace embedscope::ui
