#include "charts/plot_axes.h"

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

}  // namespace embedscope::ui
