// Integer axes, the heatmaps' colour map and the timeline's colour legend.
#include <gtest/gtest.h>

#include <QImage>
#include <QLocale>

#include <cmath>

#include <qcustomplot.h>

#include "charts/colors.h"
#include "charts/legend.h"
#include "charts/plot_axes.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
// The ticks and labels the ticker gives for `range`.
std::pair<QVector<double>, QVector<QString>> ticks_of(const QSharedPointer<QCPAxisTicker>& t, QCPRange range) {
  QVector<double> ticks, sub;
  QVector<QString> labels;
  t->generate(range, QLocale::c(), 'g', 6, ticks, &sub, &labels);
  EXPECT_TRUE(sub.isEmpty());
  return {ticks, labels};
}
}  // namespace

TEST(IntegerTicker, TicksOnlyAtWholeNumbers) {
  const auto t = integer_ticker();
  // bars centred on ranks 0..3 (range -0.6 .. 3.4): ticks 0, 1, 2, 3, never -0.5 or 0.5
  auto [ticks, labels] = ticks_of(t, {-0.6, 3.4});
  EXPECT_EQ(ticks, (QVector<double>{0, 1, 2, 3}));
  EXPECT_EQ(labels, (QVector<QString>{"0", "1", "2", "3"}));
  // one step (-0.5 .. 0.5): only 0
  std::tie(ticks, labels) = ticks_of(t, {-0.5, 0.5});
  EXPECT_EQ(ticks, (QVector<double>{0}));
  // 1000 rows: steps of 100 or 200, all integers
  std::tie(ticks, labels) = ticks_of(t, {0, 1000});
  ASSERT_GE(ticks.size(), 4);
  for (double x : ticks) EXPECT_EQ(x, std::round(x));
  EXPECT_EQ(ticks[1] - ticks[0], 200);
}

TEST(HeatColor, TheTopIsRedNotWhite) {
  const QColor top = heat_color(1.0), bottom = heat_color(0.0);
  EXPECT_EQ(top, QColor(0xd5, 0x00, 0x00));
  EXPECT_EQ(bottom, QColor(0x1b, 0x0c, 0x5a));
  // clearly hot on both palettes: far from white (light Base) and from black (dark Base)
  auto distance = [](const QColor& a, const QColor& b) {
    return std::abs(a.red() - b.red()) + std::abs(a.green() - b.green()) + std::abs(a.blue() - b.blue());
  };
  EXPECT_GT(distance(top, Qt::white), 400);
  EXPECT_GT(distance(top, Qt::black), 200);
  EXPECT_GT(top.red(), 2 * top.green());  // red, not yellow
  EXPECT_EQ(heat_color(0.7), QColor(0xf5, 0x7c, 0x00));  // a stop
  EXPECT_EQ(heat_color(2.0), top);                       // clamped
  // the QCustomPlot gradient the heatmaps use has the same top
  QCPColorGradient g = heat_gradient();
  EXPECT_EQ(QColor(g.color(1.0, QCPRange(0, 1))), top);
  EXPECT_NE(QColor(g.color(1.0, QCPRange(0, 1))), QColor(Qt::white));
}

TEST(ColourLegend, ShowsEveryTimelineColourWithItsName) {
  const auto entries = timeline_legend();
  ASSERT_EQ(entries.size(), 11u);
  EXPECT_EQ(entries[4].label, "exposed comm");
  EXPECT_EQ(entries[4].color, category_color(sessions::OpCategory::comm));
  EXPECT_EQ(entries[5].color, hidden_comm_color());
  EXPECT_EQ(entries[6].label, "set-up wait");
  EXPECT_EQ(entries[6].color, setup_wait_color());
  EXPECT_EQ(entries[9].label, "lighter shade: folded");  // any category, lightened (tester45 F12.9)
  EXPECT_TRUE(entries.back().line);  // the critical path is drawn as a line
  ColourLegend legend(entries);
  legend.resize(legend.sizeHint());
  const QImage img = legend.grab().toImage();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].line) continue;
    const QPoint c = legend.swatch_rect(i).center();
    EXPECT_EQ(img.pixelColor(c).rgb(), entries[i].color.rgb()) << entries[i].label.toStdString();
  }
  // narrow: the entries wrap onto more rows, each swatch still inside the widget
  const int one_row = legend.heightForWidth(legend.sizeHint().width());
  EXPECT_GT(legend.heightForWidth(200), one_row);
}
