#include "timeline_widget.h"

#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "colors.h"

namespace embedscope::ui {

TimelineWidget::TimelineWidget(std::shared_ptr<const sessions::SessionReader> session, QWidget* parent)
    : QWidget(parent), session_(std::move(session)), scale_(0, 1, 800) {
  for (const auto& l : session_->lanes())
    rows_.push_back({l.rank, l.lane, QString("rank %1 %2").arg(l.rank).arg(QString::fromStdString(l.name)), {}});
  int64_t begin = std::numeric_limits<int64_t>::max(), end = 0;
  for (const auto& o : session_->all_ops()) {
    for (auto& r : rows_)
      if (r.rank == o.rank && r.lane == o.lane) {
        r.ops.push_back(o);
        break;
      }
    begin = std::min(begin, o.start_ns);
    end = std::max(end, o.end_ns);
  }
  for (const auto& st : session_->steps()) {
    begin = std::min(begin, st.start_ns);
    end = std::max(end, st.end_ns);
  }
  if (begin > end) begin = end = 0;
  std::map<int32_t, std::vector<sessions::Interval>> compute;
  for (const auto& r : rows_)
    for (const auto& o : r.ops)
      if (o.category != sessions::OpCategory::comm && o.category != sessions::OpCategory::memcpy)
        compute[o.rank].push_back({o.start_ns, o.end_ns});
  for (auto& [rank, v] : compute) compute_[rank] = sessions::merge_intervals(std::move(v));
  std::set<int64_t> starts;
  for (const auto& st : session_->steps())
    if (st.rank == 0) starts.insert(st.start_ns);
  step_starts_.assign(starts.begin(), starts.end());
  scale_ = TimeScale(begin, end, 800);  // the extent of what was recorded (not the setup before it)
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setMinimumHeight(kAxis + kRowHeight * static_cast<int>(std::max<size_t>(rows_.size(), 1)) + 4);
}

void TimelineWidget::resizeEvent(QResizeEvent*) { scale_.set_width(std::max(1, width() - kGutter)); }

void TimelineWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  const QColor text = palette().text().color();
  // time axis: ~8 ticks at round values
  const double span = static_cast<double>(scale_.t1() - scale_.t0());
  const double raw = span / 8;
  const double mag = std::pow(10.0, std::floor(std::log10(std::max(raw, 1.0))));
  const double tick = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
  p.setPen(text);
  const auto origin = static_cast<double>(origin_ns_);
  for (double t = std::ceil((static_cast<double>(scale_.t0()) - origin) / tick) * tick + origin;
       t < static_cast<double>(scale_.t1()); t += tick) {
    const int x = kGutter + static_cast<int>(scale_.x(static_cast<int64_t>(t)));
    p.drawLine(x, kAxis - 6, x, kAxis);
    p.drawText(x + 3, kAxis - 8, QString::fromStdString(format_duration(static_cast<int64_t>(t - origin))));
  }
  // step boundaries
  p.setPen(QPen(palette().mid().color(), 1, Qt::DashLine));
  int last_x = -100;
  for (int64_t s : step_starts_) {
    if (s < scale_.t0() || s >= scale_.t1()) continue;
    const int x = kGutter + static_cast<int>(scale_.x(s));
    if (x - last_x < 6) continue;  // zoomed out over many steps: a line every few pixels at most
    last_x = x;
    p.drawLine(x, kAxis, x, kAxis + static_cast<int>(rows_.size()) * kRowHeight);
  }
  // rows
  for (size_t i = 0; i < rows_.size(); ++i) {
    const int y = row_y(i);
    p.setPen(text);
    p.drawText(QRect(4, y, kGutter - 8, kRowHeight), Qt::AlignVCenter | Qt::AlignLeft, rows_[i].label);
    const auto& compute = compute_[rows_[i].rank];
    for (const LaneBox& b : fold_lane(rows_[i].ops, scale_)) {
      const QRectF r(kGutter + b.x0, y + 3, std::max(1.0, b.x1 - b.x0), kRowHeight - 6);
      QColor c = category_color(b.category);
      if (b.count > 1) c = c.lighter(130);  // folded: many ops in this pixel
      p.fillRect(r, c);
      if (b.category != sessions::OpCategory::comm || b.count > 1) continue;
      // hidden communication: the parts of this op that overlap the rank's compute
      const auto& o = rows_[i].ops[b.first];
      auto it = std::partition_point(compute.begin(), compute.end(),
                                     [&](const sessions::Interval& iv) { return iv.end <= o.start_ns; });
      for (; it != compute.end() && it->start < o.end_ns; ++it) {
        const double x0 = std::max(0.0, scale_.x(std::max(it->start, o.start_ns)));
        const double x1 = std::min(scale_.width(), scale_.x(std::min(it->end, o.end_ns)));
        if (x1 > x0) p.fillRect(QRectF(kGutter + x0, y + 3, std::max(1.0, x1 - x0), kRowHeight - 6), hidden_comm_color());
      }
    }
  }
}

const sessions::OpRecord* TimelineWidget::op_at(QPoint pt) const {
  if (pt.x() < kGutter || pt.y() < kAxis) return nullptr;
  const size_t row = static_cast<size_t>((pt.y() - kAxis) / kRowHeight);
  if (row >= rows_.size()) return nullptr;
  const int64_t t = scale_.t(pt.x() - kGutter);
  const int64_t slack = static_cast<int64_t>(scale_.ns_per_px());
  const auto& ops = rows_[row].ops;
  auto it = std::partition_point(ops.begin(), ops.end(), [&](const sessions::OpRecord& o) { return o.end_ns + slack <= t; });
  return it != ops.end() && it->start_ns - slack <= t ? &*it : nullptr;
}

void TimelineWidget::wheelEvent(QWheelEvent* e) {
  scale_.zoom_at(e->position().x() - kGutter, e->angleDelta().y() > 0 ? 1.25 : 0.8);
  update();
  emit view_changed();
}

void TimelineWidget::mousePressEvent(QMouseEvent* e) {
  dragging_ = e->button() == Qt::LeftButton;
  last_x_ = static_cast<int>(e->position().x());
}

void TimelineWidget::mouseMoveEvent(QMouseEvent* e) {
  const int x = static_cast<int>(e->position().x());
  if (dragging_) {
    scale_.pan(last_x_ - x);
    last_x_ = x;
    update();
    emit view_changed();
    return;
  }
  if (const auto* o = op_at(e->position().toPoint())) {
    QString tip = QString("%1\nrank %2, %3 lane, %4\nstart %5, duration %6")
                      .arg(QString::fromStdString(session_->name(o->name_id)))
                      .arg(o->rank)
                      .arg(o->lane == 0 ? "compute" : "comm")
                      .arg(sessions::to_string(o->category))
                      .arg(QString::fromStdString(format_duration(o->start_ns)))
                      .arg(QString::fromStdString(format_duration(o->end_ns - o->start_ns)));
    if (o->bytes) tip += QString("\n%1 bytes, sequence %2").arg(o->bytes).arg(o->correlation);
    QToolTip::showText(e->globalPosition().toPoint(), tip, this);
  } else {
    QToolTip::hideText();
  }
}

void TimelineWidget::mouseReleaseEvent(QMouseEvent*) { dragging_ = false; }

void TimelineWidget::keyPressEvent(QKeyEvent* e) {
  const double mid = scale_.width() / 2;
  switch (e->key()) {
    case Qt::Key_W: scale_.zoom_at(mid, 1.25); break;
    case Qt::Key_S: scale_.zoom_at(mid, 0.8); break;
    case Qt::Key_A: scale_.pan(-scale_.width() / 10); break;
    case Qt::Key_D: scale_.pan(scale_.width() / 10); break;
    case Qt::Key_F: scale_.fit(); break;
    default: QWidget::keyPressEvent(e); return;
  }
  update();
  emit view_changed();
}

}  // namespace embedscope::ui
