// The Trade-offs chart plots the held-out loss when every run on it has one (a user's Adam with
// fp16 optimizer state was the chart's lowest point by training loss while its held-out loss was
// 15 % worse); with a run that has none it keeps the training loss (tradeoffs_view_test.cpp).
// Sessions of support/tradeoff_sessions.h: fp16 rows held-out loss 0.52, fp32 0.51.
#include <gtest/gtest.h>

#include <QApplication>
#include <qcustomplot.h>

#include "jobs/analysis_job.h"
#include "views/tradeoffs_view.h"
#include "ui/support/tradeoff_sessions.h"

using namespace embedscope;
using namespace embedscope::ui;

TEST(TradeoffsHeldOutAxis, PlotsTheHeldOutLossWhenEveryRunHasOne) {
  const std::vector<std::string> paths = tradeoff_fixtures::tradeoff_study();
  std::vector<LabelledSession> sessions = {{"fp16 rows", std::make_shared<const sessions::SessionReader>(paths[0])},
                                           {"fp32", std::make_shared<const sessions::SessionReader>(paths[1])}};
  TradeoffsView view(sessions);
  view.resize(1200, 800);
  view.show();
  ASSERT_TRUE(wait_for_analyses(&view));
  QApplication::processEvents();
  QCustomPlot* plot = view.plot();
  ASSERT_EQ(plot->graphCount(), 2);
  const double mib = 1024.0 * 1024.0;
  for (int g = 0; g < plot->graphCount(); ++g) {
    const QCPGraph* graph = plot->graph(g);
    ASSERT_EQ(graph->data()->size(), 1);
    const bool fp32 = graph->name() == "fp32";
    EXPECT_DOUBLE_EQ(graph->data()->at(0)->key, (fp32 ? 48e6 : 40e6) / mib);
    EXPECT_DOUBLE_EQ(graph->data()->at(0)->value, fp32 ? 0.51 : 0.52) << graph->name().toStdString();
  }
  EXPECT_EQ(plot->yAxis->label().toStdString(), "held-out loss (dashed: fp32)");
}
