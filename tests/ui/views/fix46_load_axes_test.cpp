// tester46 F8: the Load page's two heatmaps had no title on their column axis, so the rank x step
// map's 0, 1, 2 ... read as ranks; they say "table shard" and "measured step" now (the rank axis
// already said "rank").
#include <gtest/gtest.h>

#include <memory>

#include <qcustomplot.h>

#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "support/step_sessions.h"
#include "views/load_view.h"

TEST(Fix46LoadAxes, BothHeatmapsTitleTheirColumnAxis) {
  embedscope::ui::LoadView view(
      std::make_shared<const embedscope::sessions::SessionReader>(embedscope::test_support::load_session()));
  view.resize(900, 600);
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  auto bottom = [](QCustomPlot* p) { return p->axisRect()->axis(QCPAxis::atBottom)->label().toStdString(); };
  auto left = [](QCustomPlot* p) { return p->axisRect()->axis(QCPAxis::atLeft)->label().toStdString(); };
  EXPECT_EQ(bottom(view.shard_map()), "table shard");
  EXPECT_EQ(bottom(view.step_map()), "measured step");
  EXPECT_EQ(left(view.shard_map()), "rank");
  EXPECT_EQ(left(view.step_map()), "rank");
}
