#include "charts/colors.h"

#include <QEvent>

#include <algorithm>
#include <cmath>
#include <iterator>

#include <qcustomplot.h>

namespace embedscope::ui {

namespace {
void apply_palette(QCustomPlot* plot) {
  const QPalette& pal = plot->palette();
  const QColor text = pal.color(QPalette::Text), grid = pal.color(QPalette::Mid);
  plot->setBackground(pal.brush(QPalette::Base));
  auto style_axis = [&](QCPAxis* a) {
    a->setBasePen(QPen(text));
    a->setTickPen(QPen(text));
    a->setSubTickPen(QPen(text));
    a->setTickLabelColor(text);
    a->setLabelColor(text);
    a->grid()->setPen(QPen(grid, 0, Qt::DotLine));
  };
  for (QCPAxisRect* rect : plot->axisRects())
    for (QCPAxis* a : rect->axes()) style_axis(a);
  for (QCPLayoutElement* e : plot->plotLayout()->elements(true)) {
    if (auto* title = qobject_cast<QCPTextElement*>(e)) title->setTextColor(text);
    if (auto* scale = qobject_cast<QCPColorScale*>(e)) style_axis(scale->axis());
  }
  if (plot->legend) {
    plot->legend->setBrush(pal.brush(QPalette::Base));
    plot->legend->setTextColor(text);
    plot->legend->setBorderPen(QPen(grid));
  }
}

// Re-applies the palette when it changes (the system switched between light and dark).
class PaletteFollower : public QObject {
 public:
  explicit PaletteFollower(QCustomPlot* plot) : QObject(plot), plot_(plot) { plot->installEventFilter(this); }
  bool eventFilter(QObject*, QEvent* e) override {
    if (e->type() == QEvent::PaletteChange) {
      apply_palette(plot_);
      plot_->replot();
    }
    return false;
  }

 private:
  QCustomPlot* plot_;
};
}  // namespace

void follow_palette(QCustomPlot* plot) {
  apply_palette(plot);
  if (plot->property("embedscope_follows_palette").toBool()) return;
  plot->setProperty("embedscope_follows_palette", true);
  new PaletteFollower(plot);
}

QColor heat_color(double t) {
  struct Stop {
    double at;
    QColor c;
  };
  static const Stop stops[] = {{0.0, QColor(0x1b, 0x0c, 0x5a)}, {0.35, QColor(0x7b, 0x1f, 0xa2)},
                               {0.7, QColor(0xf5, 0x7c, 0x00)}, {1.0, QColor(0xd5, 0x00, 0x00)}};
  t = std::clamp(t, 0.0, 1.0);
  size_t i = 1;
  while (i + 1 < std::size(stops) && t > stops[i].at) ++i;
  const double f = (t - stops[i - 1].at) / (stops[i].at - stops[i - 1].at);
  auto mix = [f](int a, int b) { return static_cast<int>(std::lround(a + f * (b - a))); };
  const QColor &a = stops[i - 1].c, &b = stops[i].c;
  return QColor(mix(a.red(), b.red()), mix(a.green(), b.green()), mix(a.blue(), b.blue()));
}

QColor session_color(size_t i) {
  static const QColor colors[kSessionColors] = {
      QColor(0x1f, 0x77, 0xb4), QColor(0xff, 0x7f, 0x0e), QColor(0x2c, 0xa0, 0x2c), QColor(0xd6, 0x27, 0x28),
      QColor(0x94, 0x67, 0xbd), QColor(0x8c, 0x56, 0x4b), QColor(0xe3, 0x77, 0xc2), QColor(0x7f, 0x7f, 0x7f),
      QColor(0xbc, 0xbd, 0x22), QColor(0x17, 0xbe, 0xcf), QColor(0x39, 0x3b, 0x79), QColor(0xa6, 0xce, 0xe3)};
  return colors[i % kSessionColors];
}

int session_marker(size_t i) {
  static const QCPScatterStyle::ScatterShape shapes[] = {
      QCPScatterStyle::ssDisc,     QCPScatterStyle::ssSquare,        QCPScatterStyle::ssTriangle,
      QCPScatterStyle::ssDiamond,  QCPScatterStyle::ssCross,         QCPScatterStyle::ssTriangleInverted,
      QCPScatterStyle::ssPlus,     QCPScatterStyle::ssCircle,        QCPScatterStyle::ssStar,
      QCPScatterStyle::ssCrossSquare, QCPScatterStyle::ssPlusCircle, QCPScatterStyle::ssPeace};
  return static_cast<int>(shapes[(i + i / kSessionColors) % std::size(shapes)]);
}

Qt::PenStyle session_dash(size_t i) {
  static const Qt::PenStyle styles[] = {Qt::SolidLine, Qt::DashLine, Qt::DotLine, Qt::DashDotLine};
  return styles[(i / kSessionColors) % std::size(styles)];
}

}  // namespace embedscope::ui
