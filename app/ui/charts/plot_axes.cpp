#include "charts/plot_axes.h"

#include <QFontMetrics>

#include <algorithm>
#include <cmath>

#include "charts/colors.h"

namespace embedscope::ui {

namespace {
// QCustomPlot's tick step, rounded up to a whole 1, 2 or 5 x 10^k; labels as integers.
class IntegerTicker : public QCPAxisTicker {
 public:
  explicit IntegerTicker(int count) { setTickCount(count); }

 protected:
  double getTickStep(const QCPRange& range) override {
    const double raw = range.size() / std::max(1, tickCount());
    if (raw <= 1) return 1;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double m = raw / mag;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * mag;
  }
  int getSubTickCount(double) override { return 0; }
  QString getTickLabel(double tick, const QLocale& locale, QChar, int) override {
    return locale.toString(static_cast<qlonglong>(std::llround(tick)));
  }
};
}  // namespace

QSharedPointer<QCPAxisTicker> integer_ticker(int tick_count) { return QSharedPointer<IntegerTicker>::create(tick_count); }

QCPColorGradient heat_gradient() {
  QCPColorGradient g;
  g.clearColorStops();
  for (int i = 0; i <= 20; ++i) g.setColorStopAt(i / 20.0, heat_color(i / 20.0));
  g.setColorInterpolation(QCPColorGradient::ciRGB);
  return g;
}

namespace {
bool vertical(const QCPAxis* axis) {
  return axis->axisType() == QCPAxis::atLeft || axis->axisType() == QCPAxis::atRight;
}

// The px along the axis its title may take: its axis rect's height (left, right) or width.
int axis_length(const QCPAxis* axis) {
  return vertical(axis) ? axis->axisRect()->height() : axis->axisRect()->width();
}

// The widest line of `label` in `font`, px.
int label_width(const QString& label, const QFont& font) {
  const QFontMetrics fm(font);
  int w = 0;
  for (const QString& line : label.split('\n')) w = std::max(w, fm.horizontalAdvance(line));
  return w;
}

// The least distance between neighbouring ticks of `ticks` on `axis`, px (a large number for < 2).
double least_spacing(const QCPAxis* axis, const QVector<double>& ticks) {
  double least = 1e9;
  for (int i = 1; i < ticks.size(); ++i)
    least = std::min(least, std::abs(axis->coordToPixel(ticks[i]) - axis->coordToPixel(ticks[i - 1])));
  return least;
}

// Gives `axis` the most ticks up to `max_ticks` whose labels keep 2 px apart; true when it changed.
bool fit_ticks(QCPAxis* axis, int max_ticks) {
  QSharedPointer<QCPAxisTicker> ticker = axis->ticker();
  if (!ticker || axis_length(axis) <= 0) return false;
  const double need = QFontMetrics(axis->tickLabelFont()).height() + 2;
  const int before = ticker->tickCount();
  int count = std::max(1, max_ticks);
  for (; count > 1; --count) {
    ticker->setTickCount(count);
    QVector<double> ticks;
    ticker->generate(axis->range(), axis->parentPlot()->locale(), axis->numberFormat().at(0), axis->numberPrecision(), ticks,
                     nullptr, nullptr);
    QVector<double> inside;  // generate keeps one tick beyond each end
    for (double t : ticks)
      if (axis->range().contains(t)) inside << t;
    if (least_spacing(axis, inside) >= need) break;
  }
  ticker->setTickCount(count);
  return count != before;
}

// Titles `axis` with the first of its choices that fits; true when the title changed.
bool fit_label(QCPAxis* axis) {
  const QStringList choices = axis->property("label_choices").toStringList();
  if (choices.isEmpty()) return false;
  QString chosen = choices.back();
  for (const QString& c : choices)
    if (label_width(c, axis->labelFont()) <= axis_length(axis)) {
      chosen = c;
      break;
    }
  if (chosen == axis->label()) return false;
  axis->setLabel(chosen);
  return true;
}
}  // namespace

void set_label_choices(QCPAxis* axis, const QStringList& choices) {
  axis->setProperty("label_choices", choices);
  if (!choices.isEmpty()) axis->setLabel(choices.front());
}

void keep_axes_readable(QCustomPlot* plot, int max_ticks) {
  QObject::connect(plot, &QCustomPlot::afterLayout, plot, [plot, max_ticks] {
    bool changed = false;
    for (QCPAxis* axis : plot->axisRect()->axes(QCPAxis::atLeft | QCPAxis::atRight)) {
      if (!axis->visible()) continue;
      changed |= fit_ticks(axis, max_ticks);
      changed |= fit_label(axis);
    }
    if (changed) plot->replot(QCustomPlot::rpQueuedReplot);
  });
}

std::vector<QRectF> tick_label_rects(QCPAxis* axis) {
  std::vector<QRectF> out;
  const QFontMetrics fm(axis->tickLabelFont());
  const QVector<double> ticks = axis->tickVector();
  const QVector<QString> labels = axis->tickVectorLabels();
  for (int i = 0; i < ticks.size() && i < labels.size(); ++i) {
    if (!axis->range().contains(ticks[i])) continue;
    const double at = axis->coordToPixel(ticks[i]);
    const QSizeF size(fm.horizontalAdvance(labels[i]), fm.height());
    const QRect r = axis->axisRect()->rect();
    const double gap = axis->tickLabelPadding();
    switch (axis->axisType()) {
      case QCPAxis::atLeft: out.emplace_back(r.left() - gap - size.width(), at - size.height() / 2, size.width(), size.height()); break;
      case QCPAxis::atRight: out.emplace_back(r.right() + gap, at - size.height() / 2, size.width(), size.height()); break;
      case QCPAxis::atBottom: out.emplace_back(at - size.width() / 2, r.bottom() + gap, size.width(), size.height()); break;
      case QCPAxis::atTop: out.emplace_back(at - size.width() / 2, r.top() - gap - size.height(), size.width(), size.height()); break;
    }
  }
  return out;
}

bool axis_label_fits(QCPAxis* axis) { return label_width(axis->label(), axis->labelFont()) <= axis_length(axis); }

}  // namespace embedscope::ui
