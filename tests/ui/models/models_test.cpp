// The item models, each through QAbstractItemModelTester.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <sqlite3.h>
#include <unistd.h>
#include <QAbstractItemModelTester>
#include <QApplication>
#include <QSpinBox>
#include <QDoubleSpinBox>
#include <QComboBox>
#include <QFileInfo>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableWidget>
#include <QTest>
#include <QTimer>
#include <qcustomplot.h>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include "charts/colors.h"
#include "views/compare_view.h"
#include "models/critical_path_model.h"
#include "views/memory_compare.h"
#include "embedscope/engine/workload/scenario.h"
#include "views/scenario_view.h"
#include "core/load_data.h"
#include "views/load_view.h"
#include "views/memory_view.h"
#include "shell/main_window.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/comm/gloo_process_group.h"
#include "embedscope/engine/sharding/sharding.h"
#include "models/range_totals_model.h"
#include "models/rank_stats_model.h"
#include "jobs/analysis_job.h"
#include "jobs/run_job.h"
#include "models/sharding_plan_model.h"
#include "core/timeline_math.h"
#include "timeline/timeline_view.h"
#include "timeline/timeline_widget.h"
#include "views/workload_designer.h"
#include "models/workload_model.h"
#include "support/step_sessions.h"
#include "ui/support/ui_fixtures.h"

using namespace embedscope;
using namespace embedscope::ui;
using namespace embedscope::ui::fixtures;

TEST(RankStatsModel, PassesTheModelTesterAndShowsFigures) {
  sessions::SessionReader r(fixture_session());
  RankStatsModel m(sessions::analyze(r));
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  ASSERT_EQ(m.rowCount(), 2);
  EXPECT_EQ(m.data(m.index(0, RankStatsModel::Compute), Qt::UserRole).toLongLong(), 300'000);
  EXPECT_EQ(m.data(m.index(0, RankStatsModel::Comm), Qt::UserRole).toLongLong(), 400'000);
  EXPECT_EQ(m.data(m.index(0, RankStatsModel::Compute)).toString(), "300.0 us");
  EXPECT_EQ(m.data(m.index(0, RankStatsModel::IdsLookedUp)).toLongLong(), 10);
  EXPECT_EQ(m.headerData(RankStatsModel::ExposedComm, Qt::Horizontal).toString(), "exposed comm");
}

// busy_session's critical paths by hand: step 0 runs rank 1's lookup [150, 250) us, the
// output all-to-all from rank 1's join at 250 to 300, rank 0's dense part [300, 500); step 1
// rank 0's lookup [600, 700) and its gradient all-to-all [700, 800). 550 us of ops. The path
// covers each step's window ([0, 500) and [500, 1000) us on both ranks) with untraced gaps at
// its edges: step 0 from rank 1's window start 0 to its lookup at 150 (150 us; the path ends
// with dense at 500, the window's end), step 1 from 500 to rank 0's lookup at 600 (100 us) and
// from the all-to-all's end at 800 to 1000 (200 us): 450 us of gaps, 1000 us in all, so dense's
// 200 us are 20.0 %.
TEST(CriticalPathModel, PassesTheModelTesterAndShowsThePath) {
  sessions::SessionReader r(busy_session());
  const auto st = sessions::analyze(r);
  CriticalPathModel m(st, r);
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  std::map<QString, qlonglong> on_path;
  for (int i = 0; i < m.rowCount(); ++i)
    on_path[m.data(m.index(i, CriticalPathModel::Op)).toString()] = m.data(m.index(i, CriticalPathModel::OnPath), Qt::UserRole).toLongLong();
  EXPECT_EQ(on_path, (std::map<QString, qlonglong>{{"(gap: untraced)", 450'000},
                                                   {"dense", 200'000},
                                                   {"lookup", 200'000},
                                                   {"output_dist/all_to_all", 50'000},
                                                   {"grad_dist/all_to_all", 100'000}}));
  for (int i = 0; i < m.rowCount(); ++i)
    if (m.data(m.index(i, CriticalPathModel::Op)).toString() == "dense") {
      EXPECT_EQ(m.data(m.index(i, CriticalPathModel::Share)).toString(), "20.0 %");
      EXPECT_EQ(m.data(m.index(i, CriticalPathModel::TopRank)).toInt(), 0);
      EXPECT_EQ(m.data(m.index(i, CriticalPathModel::StepsBounded)).toLongLong(), 1);
    }
  CollectiveTimesModel c(st, r);
  QAbstractItemModelTester ctester(&c, QAbstractItemModelTester::FailureReportingMode::Fatal);
  ASSERT_EQ(c.rowCount(), 2);
  // most exposed first: output_dist 100 + 70 us over 2 steps (rank 0 waited 50 us for rank 1)
  EXPECT_EQ(c.data(c.index(0, CollectiveTimesModel::Name)).toString(), "output_dist/all_to_all");
  EXPECT_EQ(c.data(c.index(0, CollectiveTimesModel::Exposed), Qt::UserRole).toLongLong(), 85'000);
  EXPECT_EQ(c.data(c.index(0, CollectiveTimesModel::Waiting), Qt::UserRole).toLongLong(), 25'000);
  EXPECT_EQ(c.data(c.index(0, CollectiveTimesModel::Count)).toString(), "1.0");  // 2 ops over 2 steps
  EXPECT_EQ(c.data(c.index(1, CollectiveTimesModel::Time)).toString(), "50.0 us");
}

TEST(WorkloadModel, PassesTheModelTesterAndPutsTheValidatorsMessageOnItsCell) {
  WorkloadModel m;
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  m.load_preset("tiny");
  ASSERT_EQ(m.rowCount(), 4);
  EXPECT_EQ(m.error(), QString());
  EXPECT_EQ(m.data(m.index(1, WorkloadModel::Name)).toString(), "t_a");
  EXPECT_EQ(m.data(m.index(3, WorkloadModel::NumEmbeddings)).toString(), "1000");
  EXPECT_EQ(m.data(m.index(1, WorkloadModel::Pooling)).toString(), "mean");
  EXPECT_EQ(m.data(m.index(2, WorkloadModel::PoolingFactor)).toString(), "mean 3, max 6");  // both features of t_b
  EXPECT_EQ(m.data(m.index(3, WorkloadModel::Ids)).toString(), "zipf 1.1");
  EXPECT_EQ(m.data(m.index(0, WorkloadModel::Sharding)).toString(), "default (table_wise)");
  EXPECT_EQ(m.data(m.index(3, WorkloadModel::Ranks)).toString(), "auto: 0");  // the planner's choice
  EXPECT_EQ(m.data(m.index(3, WorkloadModel::Ranks), Qt::EditRole).toString(), "");

  // embedding_dim 0: the engine's message, on that cell, in red
  ASSERT_TRUE(m.setData(m.index(0, WorkloadModel::EmbeddingDim), "0"));
  EXPECT_EQ(m.error_pointer(), "/tables/0/embedding_dim");
  EXPECT_EQ(m.error(), "/tables/0/embedding_dim: must be > 0, got 0");
  EXPECT_EQ(m.error_index(), m.index(0, WorkloadModel::EmbeddingDim));
  EXPECT_TRUE(m.data(m.index(0, WorkloadModel::EmbeddingDim), Qt::BackgroundRole).isValid());
  EXPECT_FALSE(m.data(m.index(0, WorkloadModel::Name), Qt::BackgroundRole).isValid());
  EXPECT_EQ(m.data(m.index(0, WorkloadModel::EmbeddingDim), Qt::ToolTipRole).toString(), m.error());
  EXPECT_FALSE(m.spec().has_value());
  EXPECT_TRUE(m.memory().empty());
  ASSERT_TRUE(m.setData(m.index(0, WorkloadModel::EmbeddingDim), "four"));  // kept as typed, judged by the engine
  EXPECT_TRUE(m.error().startsWith("/tables/0/embedding_dim: must be")) << m.error().toStdString();
  ASSERT_TRUE(m.setData(m.index(0, WorkloadModel::EmbeddingDim), "4"));
  EXPECT_EQ(m.error(), QString());
  EXPECT_TRUE(m.spec().has_value());

  // a feature's error lands on its table's row: t_b serves features 2 and 3
  ASSERT_TRUE(m.setData(m.index(2, WorkloadModel::PoolingFactor), "mean 7, max 6"));
  EXPECT_EQ(m.error_pointer(), "/features/2/pooling_factor/mean");
  EXPECT_EQ(m.error_index(), m.index(2, WorkloadModel::PoolingFactor));
  ASSERT_TRUE(m.setData(m.index(2, WorkloadModel::PoolingFactor), "2"));
  EXPECT_EQ(m.error(), QString());
  EXPECT_EQ(m.workload()["features"][3]["pooling_factor"], 2);
  ASSERT_TRUE(m.setData(m.index(0, WorkloadModel::Ids), "zipf 1.3"));
  EXPECT_EQ(m.workload()["features"][0]["ids"]["distribution"], "zipf");
  EXPECT_DOUBLE_EQ(m.workload()["features"][0]["ids"]["alpha"].get<double>(), 1.3);

  // a per-table override naming a rank the devices do not have: the ranks cell
  ASSERT_TRUE(m.setData(m.index(1, WorkloadModel::Sharding), "table_wise"));
  ASSERT_TRUE(m.setData(m.index(1, WorkloadModel::Ranks), "5"));
  EXPECT_TRUE(m.error_pointer().startsWith("/sharding/tables/t_a/ranks")) << m.error().toStdString();
  EXPECT_EQ(m.error_index(), m.index(1, WorkloadModel::Ranks));
  ASSERT_TRUE(m.setData(m.index(1, WorkloadModel::Ranks), "1"));
  EXPECT_EQ(m.error(), QString());
  EXPECT_EQ(m.data(m.index(1, WorkloadModel::Ranks)).toString(), "1");
  ASSERT_TRUE(m.setData(m.index(1, WorkloadModel::Name), "t_renamed"));  // the override follows the table
  EXPECT_EQ(m.workload()["sharding"]["tables"]["t_renamed"]["ranks"], nlohmann::json::array({1}));
  EXPECT_EQ(m.error(), QString());

  EXPECT_EQ(m.add_table(), 4);
  EXPECT_EQ(m.data(m.index(4, WorkloadModel::Name)).toString(), "t4");
  EXPECT_EQ(m.error(), QString());
  m.remove_table(4);
  EXPECT_EQ(m.rowCount(), 4);
  EXPECT_EQ(m.workload()["features"].size(), 5u);
}

TEST(WorkloadModel, MemoryEstimateOfTheTinyPreset) {
  // tiny on 2 devices, table_wise, greedy largest first: t_c (1000 x 12) on rank 0; t_b (100 x 6),
  // t_a (10 x 8), t_small (1 x 4) on rank 1. fp32 weights: 48000 B and 2400 + 320 + 16 = 2736 B.
  WorkloadModel m;
  m.load_preset("tiny");
  ASSERT_EQ(m.memory().size(), 2u);
  // each shard buffer rounded up to the allocator's 512 B: 1000 x 12 x 4 = 48,000 -> 48,128;
  // 16, 320 and 2,400 B -> 512 + 512 + 2,560
  EXPECT_EQ(m.memory()[0].weights, 48128);
  EXPECT_EQ(m.memory()[1].weights, 3584);
  EXPECT_EQ(m.memory()[0].optimizer_state, 0);  // sgd
  // rowwise_adagrad keeps one float per row (FBGEMM): 1000 x 4 (-> 4,096) and 100 x 4, 10 x 4
  // and 1 x 4 bytes (512 each)
  m.set_value("/optimizer/type", "rowwise_adagrad");
  EXPECT_EQ(m.memory()[0].optimizer_state, 4096);
  EXPECT_EQ(m.memory()[1].optimizer_state, 1536);
  const auto est = engine::estimate_memory(*m.spec(), engine::plan_sharding(*m.spec()));
  EXPECT_EQ(m.memory()[0].total(), est[0].total());

  WorkloadDesigner d("tiny");
  d.model()->set_value("/optimizer/type", "rowwise_adagrad");
  QTableWidget* t = d.memory_table();
  ASSERT_EQ(t->rowCount(), 2);
  EXPECT_EQ(t->item(0, 1)->data(Qt::UserRole).toLongLong(), 48128);  // weights
  EXPECT_EQ(t->item(1, 2)->data(Qt::UserRole).toLongLong(), 1536);   // optimizer state
  EXPECT_EQ(t->item(0, 6)->data(Qt::UserRole).toLongLong(), 64 << 20);  // capacity
}

TEST(ShardingPlanModel, PerRankShardsMemoryAndLoad) {
  const engine::WorkloadSpec spec = engine::load_preset("tiny");  // t_c on rank 0, the other three on rank 1
  const engine::ShardingPlan plan = engine::plan_sharding(spec);
  const auto path = scratch("plan.db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "2");
    w.set_metadata("workload_json", engine::to_json(spec).dump());
    w.set_metadata("sharding_plan_json", engine::to_json(spec, plan).dump());
    // t_c (table 3, shard 0) on rank 0: 10 ids in steps 0 and 1; the warmup step is not counted
    w.add_load({0, 0, 3, 0, 10, 5, 80, 480, 100});
    w.add_load({1, 0, 3, 0, 10, 5, 80, 480, 100});
    w.add_load({-1, 0, 3, 0, 99, 9, 99, 99, 99});
    w.add_load({0, 1, 1, 0, 4, 2, 32, 256, 50});  // t_a on rank 1
    w.add_memory({0, 0, 4000, 8000, 6000, 8000, 2000, 0, 1, 0.0, 0.0});
    w.close("complete");
  }
  sessions::SessionReader r(path.string());
  ShardingPlanModel m(r, sessions::analyze(r));
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  ASSERT_EQ(m.rowCount(), 2);
  const QModelIndex rank0 = m.index(0, 0), rank1 = m.index(1, 0);
  ASSERT_EQ(m.rowCount(rank0), 1);
  ASSERT_EQ(m.rowCount(rank1), 3);
  EXPECT_EQ(m.data(m.index(0, ShardingPlanModel::Sharding)).toString(), "TW: 1");
  EXPECT_EQ(m.data(m.index(1, ShardingPlanModel::Sharding)).toString(), "TW: 3");
  EXPECT_EQ(m.data(m.index(0, ShardingPlanModel::Name, rank0)).toString(), "t_c");
  EXPECT_EQ(m.data(m.index(0, ShardingPlanModel::Size, rank0)).toString(), "1000 x 12 @ 0, 0");
  EXPECT_EQ(m.data(m.index(0, ShardingPlanModel::Size), Qt::UserRole).toLongLong(), 48000);  // weights
  EXPECT_EQ(m.data(m.index(0, ShardingPlanModel::IdsLookedUp)).toLongLong(), 20);
  EXPECT_EQ(m.data(m.index(0, ShardingPlanModel::BytesIn), Qt::UserRole).toLongLong(), 160);
  EXPECT_EQ(m.data(m.index(0, ShardingPlanModel::BytesOut, rank0), Qt::UserRole).toLongLong(), 960);
  EXPECT_EQ(m.data(m.index(0, ShardingPlanModel::PeakMemory), Qt::UserRole).toLongLong(), 6000);
  EXPECT_FALSE(m.data(m.index(1, ShardingPlanModel::PeakMemory), Qt::UserRole).isValid());  // no counters
  const auto est = engine::estimate_memory(spec, plan);
  EXPECT_EQ(m.data(m.index(1, ShardingPlanModel::PlannedMemory), Qt::UserRole).toLongLong(), est[1].total());
  EXPECT_EQ(m.data(m.index(1, ShardingPlanModel::IdsLookedUp)).toLongLong(), 4);
  // a session without a plan: an empty model
  sessions::SessionReader bare(fixture_session());
  EXPECT_EQ(ShardingPlanModel(bare, sessions::analyze(bare)).rowCount(), 0);
}
