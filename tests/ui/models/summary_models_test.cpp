// The summary's models: peak allocated per rank, HTA's GPU-kernel figures, and the flag on a
// rank whose measured peak exceeds the plan.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QAbstractItemModelTester>
#include <QColor>

#include <filesystem>

#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include <nlohmann/json.hpp>

#include "models/gpu_kernels_model.h"
#include "models/rank_stats_model.h"
#include "models/sharding_plan_model.h"

using namespace embedscope;
using namespace embedscope::ui;

TEST(RankStatsModel, ShowsPeakAllocatedBesidePeakReserved) {
  sessions::RunStats st;
  sessions::RankStats r;
  r.rank = 0;
  r.peak_allocated_bytes = 24 << 20;
  r.peak_reserved_bytes = 26 << 20;
  st.ranks.push_back(r);
  RankStatsModel m(st);
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  EXPECT_EQ(m.headerData(RankStatsModel::PeakAllocated, Qt::Horizontal).toString(), "peak allocated");
  EXPECT_EQ(m.headerData(RankStatsModel::PeakReserved, Qt::Horizontal).toString(), "peak reserved");
  EXPECT_EQ(m.data(m.index(0, RankStatsModel::PeakAllocated), Qt::UserRole).toLongLong(), 24 << 20);
  EXPECT_EQ(m.data(m.index(0, RankStatsModel::PeakAllocated)).toString(), "24.0 MiB");
  EXPECT_EQ(m.data(m.index(0, RankStatsModel::PeakReserved)).toString(), "26.0 MiB");
}

TEST(GpuKernelsModel, HtaFiguresAndNoCommunication) {
  sessions::RankKernelFigures a, b;
  a.rank = 1;
  a.has_comm = true;
  a.overlap_pct = 68.8012;
  a.idle_ns = 46'910'000;
  a.compute_ns = 429'216'000;
  a.non_compute_ns = 152'245'000;
  a.kernel_time_ns = 628'371'000;
  a.gpu_events = 5000;
  b.rank = 2;  // no communication kernels
  b.compute_ns = 1'500;
  GpuKernelsModel m({a, b});
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  EXPECT_EQ(m.data(m.index(0, GpuKernelsModel::Overlap)).toString(), "68.80 %");
  EXPECT_DOUBLE_EQ(m.data(m.index(0, GpuKernelsModel::Overlap), Qt::UserRole).toDouble(), 68.8012);
  EXPECT_EQ(m.data(m.index(0, GpuKernelsModel::Idle)).toString(), "46910 us");
  EXPECT_EQ(m.data(m.index(0, GpuKernelsModel::Compute)).toString(), "429216 us");
  EXPECT_EQ(m.data(m.index(0, GpuKernelsModel::NonCompute), Qt::UserRole).toLongLong(), 152'245'000);
  EXPECT_EQ(m.data(m.index(1, GpuKernelsModel::Overlap)).toString(), "no communication");  // never NaN
  EXPECT_FALSE(m.data(m.index(1, GpuKernelsModel::Overlap), Qt::UserRole).isValid());
  EXPECT_EQ(m.data(m.index(1, GpuKernelsModel::Compute)).toString(), "1.500 us");
  EXPECT_FALSE(m.headerData(GpuKernelsModel::Idle, Qt::Horizontal, Qt::ToolTipRole).toString().isEmpty());
}

TEST(ShardingPlanModel, FlagsARankWhosePeakExceedsThePlan) {
  const engine::WorkloadSpec spec = engine::load_preset("tiny");
  const engine::ShardingPlan plan = engine::plan_sharding(spec);
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_underplan_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "2");
    w.set_metadata("workload_json", engine::to_json(spec).dump());
    w.set_metadata("sharding_plan_json", engine::to_json(spec, plan).dump());
    w.close("oom");
  }
  const auto est = engine::estimate_memory(spec, plan);
  sessions::SessionReader r(path.string());
  sessions::RunStats st = sessions::analyze(r);
  ASSERT_EQ(st.ranks.size(), 2u);
  st.ranks[0].peak_allocated_bytes = est[0].total() + (1 << 20);  // 1 MiB over the plan
  st.ranks[1].peak_allocated_bytes = est[1].total() - 1;          // under it
  ShardingPlanModel m(r, st);
  EXPECT_EQ(m.under_planned(), (std::vector<int>{0}));
  const QModelIndex peak0 = m.index(0, ShardingPlanModel::PeakMemory), peak1 = m.index(1, ShardingPlanModel::PeakMemory);
  EXPECT_TRUE(m.data(peak0).toString().endsWith("(+1.0 MiB over the plan)")) << m.data(peak0).toString().toStdString();
  EXPECT_EQ(m.data(peak0, Qt::UserRole).toLongLong(), est[0].total() + (1 << 20));
  EXPECT_EQ(m.data(peak0, Qt::ForegroundRole).value<QColor>(), QColor(0xd0, 0x10, 0x10));
  EXPECT_NE(m.data(peak0, Qt::ToolTipRole).toString().indexOf("under-estimated"), -1);
  EXPECT_FALSE(m.data(peak1).toString().contains("over the plan"));
  EXPECT_FALSE(m.data(peak1, Qt::ForegroundRole).isValid());
}
