// exp51: the workbench's side of tester51 F4 (a collective's split check on a row of its own in
// Summary > Collectives, its count and bytes out of the collective's) and F8 (the load metric of
// distinct rows per step, summed, and the input table's distinct rows over all the batches, each
// named what it is).
#include <gtest/gtest.h>
#include <unistd.h>

#include <QAbstractItemModelTester>
#include <QComboBox>

#include <filesystem>
#include <memory>
#include <string>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/load_imbalance.h"
#include "embedscope/sessions/store/session.h"
#include "models/critical_path_model.h"
#include "models/input_stats_model.h"
#include "support/step_sessions.h"
#include "views/load_view.h"

using namespace embedscope;

TEST(Exp51Labels, CollectivesTableListsTheSplitCheckUnderItsCollective) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_exp51_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "2");
    w.add_lane({0, 1, "comm", "thread"});
    w.add_ops({sessions::OpEvent{0, sessions::Lane::comm, sessions::OpCategory::comm, "output_dist/all_to_all", 0, 100, 300,
                                 0, 0},
               sessions::OpEvent{0, sessions::Lane::comm, sessions::OpCategory::comm, "dense_all_reduce", 0, 400, 500, 0, 0}});
    w.add_step({0, 0, 0, 1000, 0.5, 0, 0});
    w.close("complete");
  }
  const sessions::SessionReader session(path.string());
  const auto ops = session.lane_ops(0, 1);
  ASSERT_EQ(ops.size(), 2u);
  sessions::RunStats stats;
  stats.steps = 2;
  // tester51's hand.json a step: the output dist's own 192 B each way (2 all-to-alls), its two
  // checks 64 B each way; 2 steps
  sessions::CollectiveTimes a2a{ops[0].name_id, 4, 2 * (2 * 192 + 2 * 64), 2 * 192, 2 * 192, 600, 400, 20};
  a2a.check_count = 4;
  a2a.check_bytes_sent = a2a.check_bytes_received = 2 * 64;
  stats.collectives.push_back(a2a);
  stats.collectives.push_back({ops[1].name_id, 4, 2 * 32, 2 * 16, 2 * 16, 200, 200, 0});  // no check
  ui::CollectiveTimesModel m(stats, session);
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  using C = ui::CollectiveTimesModel;
  ASSERT_EQ(m.rowCount(), 3);
  EXPECT_EQ(m.data(m.index(0, C::Name)).toString(), "output_dist/all_to_all");
  EXPECT_EQ(m.data(m.index(0, C::Count)).toString(), "2.0");
  EXPECT_EQ(m.data(m.index(0, C::Bytes), Qt::UserRole).toLongLong(), 192);  // TorchRec's figure (was 256)
  EXPECT_EQ(m.data(m.index(0, C::Time), Qt::UserRole).toLongLong(), 300);
  EXPECT_EQ(m.data(m.index(1, C::Name)).toString(), "output_dist/all_to_all/split_check");
  EXPECT_TRUE(m.data(m.index(1, C::Name), Qt::ToolTipRole).toString().contains("not run by TorchRec"));
  EXPECT_EQ(m.data(m.index(1, C::Count)).toString(), "2.0");
  EXPECT_EQ(m.data(m.index(1, C::Bytes), Qt::UserRole).toLongLong(), 64);
  EXPECT_EQ(m.data(m.index(1, C::Received), Qt::UserRole).toLongLong(), 64);
  for (int c : {C::Time, C::Exposed, C::Waiting}) {  // in the collective's op
    EXPECT_EQ(m.data(m.index(1, c)).toString(), "-");
    EXPECT_FALSE(m.data(m.index(1, c), Qt::UserRole).isValid());
  }
  EXPECT_EQ(m.data(m.index(2, C::Name)).toString(), "dense_all_reduce");
  EXPECT_EQ(m.data(m.index(2, C::Bytes), Qt::UserRole).toLongLong(), 16);
  std::filesystem::remove(path);
}

TEST(Exp51Labels, LoadMetricAndInputTableSayWhichDistinctRowsTheyCount) {
  EXPECT_STREQ(sessions::to_string(sessions::LoadMetric::unique_ids), "rows updated (distinct per step)");
  ui::InputStatsModel input;
  EXPECT_EQ(input.headerData(ui::InputStatsModel::Distinct, Qt::Horizontal).toString(), "distinct (all)");
  EXPECT_TRUE(input.headerData(ui::InputStatsModel::Distinct, Qt::Horizontal, Qt::ToolTipRole)
                  .toString()
                  .contains("a row once however many steps name it"));
  // the Load page offers the metric under that name
  ui::LoadView view(std::make_shared<const sessions::SessionReader>(test_support::load_session()));
  bool offered = false;
  for (auto* box : view.findChildren<QComboBox*>())
    for (int i = 0; i < box->count(); ++i) offered = offered || box->itemText(i) == "rows updated (distinct per step)";
  EXPECT_TRUE(offered);
}
