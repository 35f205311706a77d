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
  st.has_memory = true;  // memory counters recorded (else the peaks read "-": tester41 #17)
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
  a.dropped_events = 3117;  // trace_diff_test's: 2503 of the last step, 614 with no launch (tester47 F6)
  a.dropped_last_step = 2503;
  a.dropped_no_launch = 614;
  b.rank = 2;  // no communication kernels
  b.compute_ns = 1'500;
  GpuKernelsModel m({a, b});
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  EXPECT_EQ(m.data(m.index(0, GpuKernelsModel::Overlap)).toString(), "68.80 %");
  EXPECT_DOUBLE_EQ(m.data(m.index(0, GpuKernelsModel::Overlap), Qt::UserRole).toDouble(), 68.8012);
  // the UI's ms/us (tester38 #9), parts with their share of the kernel time (46.91 / 628.371 = 7.47 %)
  EXPECT_EQ(m.data(m.index(0, GpuKernelsModel::KernelTime)).toString(), "628.37 ms");
  EXPECT_EQ(m.data(m.index(0, GpuKernelsModel::Idle)).toString(), "46.91 ms (7.5 %)");
  EXPECT_EQ(m.data(m.index(0, GpuKernelsModel::Compute)).toString(), "429.22 ms (68.3 %)");
  EXPECT_EQ(m.data(m.index(0, GpuKernelsModel::NonCompute)).toString(), "152.25 ms (24.2 %)");
  EXPECT_EQ(m.data(m.index(0, GpuKernelsModel::NonCompute), Qt::UserRole).toLongLong(), 152'245'000);
  EXPECT_EQ(m.data(m.index(1, GpuKernelsModel::Overlap)).toString(), "no communication");  // never NaN
  EXPECT_FALSE(m.data(m.index(1, GpuKernelsModel::Overlap), Qt::UserRole).isValid());
  EXPECT_EQ(m.data(m.index(1, GpuKernelsModel::Compute)).toString(), "1.5 us");  // no kernel time: no share
  EXPECT_FALSE(m.headerData(GpuKernelsModel::Idle, Qt::Horizontal, Qt::ToolTipRole).toString().isEmpty());
  // the last profiler step's events are left out as HTA does, not lost (tester40 #7: "dropped")
  EXPECT_EQ(m.headerData(GpuKernelsModel::Dropped, Qt::Horizontal, Qt::DisplayRole).toString(), "last step");
  // tester47 F6: the GPU events with no launch (in no step) have a column of their own
  EXPECT_EQ(m.headerData(GpuKernelsModel::DroppedNoLaunch, Qt::Horizontal, Qt::DisplayRole).toString(), "no launch");
  EXPECT_EQ(m.data(m.index(0, GpuKernelsModel::Dropped)).toLongLong(), 2503);
  EXPECT_EQ(m.data(m.index(0, GpuKernelsModel::DroppedNoLaunch)).toLongLong(), 614);
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
  // the Summary's line: the excess in bytes and percent (tester38 #10), no cuda note on a cpu run
  const QString line = m.under_planned_text();
  const double pct = 100.0 * (1 << 20) / static_cast<double>(est[0].total());
  EXPECT_TRUE(line.contains(QString("(+1.0 MiB, %1% of the plan)").arg(pct, 0, 'f', 2))) << line.toStdString();
  EXPECT_FALSE(line.contains("cuda backend")) << line.toStdString();
}

// A shard in host memory is not device weights (tester, issue 16): tiny with t_c (1,000 x 12)
// host_cached at load factor 0.01 and t_a (10 x 8) host, sgd (no state). t_c's shard: device
// cache 10 slots x 12 x 4 = 480 B of rows in a 512 B block, host 48,000 B of rows + 8,000 B of
// row -> slot index = 56,000 B (54.7 KiB), hit rate 30 / (30 + 10) = 75.0% (the warmup's counter
// left out); t_a's: no cache, host 320 B, hit rate "-" (no cache), though its lookups all missed.
TEST(ShardingPlanModel, HostCachedShardsShowTheirCacheHostBytesAndHitRate) {
  engine::WorkloadSpec spec = engine::load_preset("tiny");
  spec.tables[3].placement = engine::TablePlacement::host_cached;
  spec.tables[3].cache_load_factor = 0.01;
  spec.tables[1].placement = engine::TablePlacement::host;
  const engine::ShardingPlan plan = engine::plan_sharding(spec);
  int rank_c = -1, rank_a = -1;
  for (const auto& tp : plan.tables) {
    if (tp.table == 3) rank_c = tp.shards.at(0).rank;
    if (tp.table == 1) rank_a = tp.shards.at(0).rank;
  }
  ASSERT_GE(rank_c, 0);
  ASSERT_GE(rank_a, 0);
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_hostcached_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "2");
    w.set_metadata("workload_json", engine::to_json(spec).dump());
    w.set_metadata("sharding_plan_json", engine::to_json(spec, plan).dump());
    sessions::LoadCounter c;
    c.rank = rank_c;
    c.table = 3;
    c.shard = 0;
    c.step = 0;
    c.cache_hits = 30;
    c.cache_misses = 10;
    w.add_load(c);
    c.step = -1;  // warmup: not counted
    c.cache_hits = 0;
    c.cache_misses = 1000;
    w.add_load(c);
    sessions::LoadCounter a;
    a.rank = rank_a;
    a.table = 1;
    a.shard = 0;
    a.step = 0;
    a.cache_misses = 7;
    w.add_load(a);
    w.close("complete");
  }
  sessions::SessionReader r(path.string());
  ShardingPlanModel m(r, sessions::analyze(r));
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  auto shard_of = [&](int rank, const std::string& table) -> const ShardingPlanModel::ShardRow& {
    for (const auto& s : m.ranks()[static_cast<size_t>(rank)].shards)
      if (s.table == table) return s;
    throw std::runtime_error("no shard of " + table);
  };
  const auto& sc = shard_of(rank_c, "t_c");
  EXPECT_EQ(sc.placement, "host_cached");
  EXPECT_EQ(sc.weight_bytes, 0);
  EXPECT_EQ(sc.cache_bytes, 512);
  EXPECT_EQ(sc.host_bytes, 56'000);
  EXPECT_EQ(sc.cache_hits, 30);
  const auto& sa = shard_of(rank_a, "t_a");
  EXPECT_EQ(sa.weight_bytes, 0);
  EXPECT_EQ(sa.cache_bytes, 0);
  EXPECT_EQ(sa.host_bytes, 320);
  // the rows' text: device cache, host bytes and hit rate beside the shape; planned memory = the cache
  const QModelIndex rank_c_index = m.index(rank_c, 0);
  int row_c = -1;
  for (int i = 0; i < m.rowCount(rank_c_index); ++i)
    if (m.data(m.index(i, ShardingPlanModel::Name, rank_c_index)).toString() == "t_c") row_c = i;
  ASSERT_GE(row_c, 0);
  EXPECT_EQ(m.data(m.index(row_c, ShardingPlanModel::Size, rank_c_index)).toString().toStdString(),
            "1000 x 12 @ 0, 0; host_cached: device cache 512 B, host 54.7 KiB, hit rate 75.0%");
  EXPECT_EQ(m.data(m.index(row_c, ShardingPlanModel::PlannedMemory, rank_c_index), Qt::UserRole).toLongLong(), 512);
  const std::string rank_text = m.data(m.index(rank_c, ShardingPlanModel::Size)).toString().toStdString();
  EXPECT_NE(rank_text.find(", device cache 512 B, host "), std::string::npos) << rank_text;
  EXPECT_NE(rank_text.find("hit rate 75.0%"), std::string::npos) << rank_text;
  if (rank_a != rank_c) {  // a rank whose only table in host memory is `host`: no hit rate
    const std::string a_text = m.data(m.index(rank_a, ShardingPlanModel::Size)).toString().toStdString();
    EXPECT_NE(a_text.find("hit rate -"), std::string::npos) << a_text;
  }
  EXPECT_EQ(ShardingPlanModel::hit_rate_text(0, 7, false), "-");
  EXPECT_EQ(ShardingPlanModel::hit_rate_text(0, 0, true), "-");
  EXPECT_EQ(ShardingPlanModel::hit_rate_text(1, 3, true), "25.0%");
  std::filesystem::remove(path);
}

// A factorized shard is A's rows x r and a copy of B (r x dim), not rows x dim (tester D4):
// tiny's t_c (1,000 x 12) with low_rank_dim 4, table_wise: 4 (1,000 x 4 + 4 x 12) = 16,192 B
// (fp32 rows would be 48,000 B); the rank's weights line sums the same figure.
TEST(ShardingPlanModel, LowRankShardsShowTheirFactorBytes) {
  engine::WorkloadSpec spec = engine::load_preset("tiny");
  spec.tables[3].low_rank_dim = 4;
  const engine::ShardingPlan plan = engine::plan_sharding(spec);
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_lowrank_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "2");
    w.set_metadata("workload_json", engine::to_json(spec).dump());
    w.set_metadata("sharding_plan_json", engine::to_json(spec, plan).dump());
    w.close("complete");
  }
  sessions::SessionReader r(path.string());
  ShardingPlanModel m(r, sessions::analyze(r));
  bool found = false;
  for (const auto& rank : m.ranks())
    for (const auto& s : rank.shards)
      if (s.table == "t_c") {
        found = true;
        EXPECT_EQ(s.weight_bytes, 16'192);
      } else if (s.table == "t_b") {
        EXPECT_EQ(s.weight_bytes, s.num_rows * s.num_cols * 4);  // fp32, not factorized
      }
  EXPECT_TRUE(found);
  std::filesystem::remove(path);
}

// Tester38 #9: rank 0 of criteo_cuda4.db (H200) read "kernel time 879898.067 us idle 851972.463 us
// compute 22069.081 us"; now the UI's ms with the share of kernel time (851972463 / 879898067 =
// 96.83 %, 22069081 / 879898067 = 2.51 %).
TEST(GpuKernelsModel, Cuda4FiguresInMillisecondsWithTheirShare) {
  sessions::RankKernelFigures f;
  f.kernel_time_ns = 879'898'067;
  f.idle_ns = 851'972'463;
  f.compute_ns = 22'069'081;
  f.non_compute_ns = 5'856'523;
  GpuKernelsModel m({f});
  EXPECT_EQ(m.data(m.index(0, GpuKernelsModel::KernelTime)).toString(), "879.90 ms");
  EXPECT_EQ(m.data(m.index(0, GpuKernelsModel::Idle)).toString(), "851.97 ms (96.8 %)");
  EXPECT_EQ(m.data(m.index(0, GpuKernelsModel::Compute)).toString(), "22.07 ms (2.5 %)");
  EXPECT_EQ(m.data(m.index(0, GpuKernelsModel::NonCompute)).toString(), "5.86 ms (0.7 %)");
  EXPECT_EQ(m.data(m.index(0, GpuKernelsModel::Idle), Qt::UserRole).toLongLong(), 851'972'463);
}
