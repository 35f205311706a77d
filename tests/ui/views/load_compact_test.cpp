// Tester38 #14: the Load view's heatmaps and charts stay compact however tall the window (the
// report grows it to show the input table whole: a 4-rank heatmap had ~570 px per rank row).
#include <gtest/gtest.h>

#include <QApplication>
#include <qcustomplot.h>

#include <memory>

#include "support/step_sessions.h"
#include "views/load_view.h"

using namespace embedscope;
using namespace embedscope::ui;

TEST(LoadCompact, HeatmapRowsAndChartsAreCappedInATallWindow) {
  // 2 ranks: 150 px of title and column names + 2 x 48 px = 246 px
  EXPECT_EQ(LoadView::heatmap_max_height(2), 246);
  EXPECT_EQ(LoadView::heatmap_max_height(4), 342);
  EXPECT_EQ(LoadView::heatmap_max_height(0), 200);  // never below the plots' minimum
  LoadView view(std::make_shared<const sessions::SessionReader>(test_support::load_session()));
  view.resize(1600, 7420);  // the tester's report page height
  view.show();
  QApplication::processEvents();
  EXPECT_EQ(view.shard_map()->height(), 246);
  EXPECT_EQ(view.step_map()->height(), 246);
  EXPECT_EQ(view.imbalance_plot()->height(), LoadView::kMaxChartPx);
  EXPECT_LE(view.row_plot()->height(), LoadView::kMaxChartPx + 40);
}
