// The scaling study: each point is the simulated run of the workload at that size (checked
// against a run the test makes itself), its figures are those of that run's session (comm shares
// summed from the session's ops with SQL, not from the study's events), and a point that cannot
// run keeps its reason while the study goes on.
#include <gtest/gtest.h>
#include <unistd.h>

#include <sqlite3.h>

#include <filesystem>
#include <string>
#include <vector>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/exec/scaling_study.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "support/cli_run.h"

#include <nlohmann/json.hpp>

namespace es = embedscope::engine;
namespace fs = std::filesystem;

namespace {
const std::string kScalingProfile = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";  // 2 GPUs a node, 4 nodes

// Sum of the measured steps' comm op durations of `rank`, every op or all but the dense all-reduce.
int64_t comm_ns(const std::string& session, int rank, bool embedding_only) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(session.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  const std::string sql = "SELECT coalesce(sum(dur_ns), 0) FROM op_view WHERE category = 'comm' AND step >= 0 AND rank = " +
                          std::to_string(rank) + (embedding_only ? " AND name <> 'dense_all_reduce'" : "");
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  EXPECT_EQ(sqlite3_step(st), SQLITE_ROW);
  const int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}
}  // namespace

TEST(ScalingStudy, EachPointIsTheSimulatedRunAtThatSize) {
  es::WorkloadSpec base = es::load_preset("tiny");
  base.steps = 3;
  base.warmup_steps = 1;
  const fs::path dir = fs::temp_directory_path() / "embedscope_scaling_study";
  fs::remove_all(dir);
  es::ScalingStudyOptions o;
  o.hardware = kScalingProfile;
  o.gpus = {1, 2, 4, 16};  // 16: more than the profile's 4 nodes x 2 GPUs
  o.shardings = {es::ShardingType::table_wise, es::ShardingType::row_wise};
  o.session_dir = dir.string();
  int called = 0;
  o.on_point = [&](const es::ScalingPoint&) { ++called; };
  const auto points = es::run_scaling_study(base, o);
  ASSERT_EQ(points.size(), 8u);
  EXPECT_EQ(called, 8);
  for (size_t k = 0; k < points.size(); ++k) {
    const es::ScalingPoint& p = points[k];
    EXPECT_EQ(p.sharding, k < 4 ? es::ShardingType::table_wise : es::ShardingType::row_wise);
    EXPECT_EQ(p.gpus, o.gpus[k % 4]);
    if (p.gpus == 16) {  // refused, the study went on
      EXPECT_NE(p.error.find("16"), std::string::npos) << p.error;
      EXPECT_EQ(p.step_time_ns, 0);
      EXPECT_TRUE(p.session_path.empty());
      continue;
    }
    ASSERT_TRUE(p.error.empty()) << p.error;
    EXPECT_EQ(p.nodes, p.gpus <= 2 ? 1 : 2);
    // the same run, made here: devices, node shape and sharding type set by hand
    es::WorkloadSpec s = base;
    s.devices.backend = es::Backend::simulated;
    s.devices.hardware = kScalingProfile;
    s.devices.memory_bytes = int64_t{8} << 30;
    s.devices.count = p.gpus;
    s.sharding.local_world_size = std::min(p.gpus, 2);
    s.sharding.default_type = p.sharding;
    s.sharding.per_table.clear();
    // the plan the study says it runs: the search restricted to the point's sharding type, a table
    // too short for a row split (t_small, 1 row, row_wise on 2 and 4 GPUs) split into empty shards
    // as `run --sharding row_wise` splits it (tester49 F6)
    const es::PlanSearchResult searched =
        es::plan_search(s, es::load_hardware_profile(kProfile), es::PlanSearchOptions{{p.sharding}});
    EXPECT_EQ(p.placement, searched.proposer);
    es::ShardingPlan plan = searched.plan;
    const es::ShardingPlan uniform = es::plan_sharding(s);
    std::vector<std::string> split;
    for (es::TablePlan& tp : plan.tables)
      if (tp.type != p.sharding) {
        for (const es::TablePlan& u : uniform.tables)
          if (u.table == tp.table) tp = u;
        split.push_back(s.tables[static_cast<size_t>(tp.table)].name);
      }
    EXPECT_EQ(p.empty_shard_tables, split) << p.gpus;
    if (p.sharding == es::ShardingType::row_wise && p.gpus > 1) {
      EXPECT_EQ(split, std::vector<std::string>{"t_small"});
    }
    const es::RunResult r = es::run_training(s, plan);
    ASSERT_EQ(r.step_time_ns.size(), 3u);
    std::vector<int64_t> t = r.step_time_ns;
    std::sort(t.begin(), t.end());
    EXPECT_EQ(p.step_time_ns, t[1]);
    EXPECT_DOUBLE_EQ(p.samples_per_s, static_cast<double>(base.batch_size * p.gpus) * 1e9 / static_cast<double>(t[1]));
    // one baseline for every type (misc55, tester55 F3): the best per-GPU rate at 1 GPU
    const double baseline = std::max(points[0].samples_per_s, points[4].samples_per_s);
    EXPECT_DOUBLE_EQ(p.scaling_efficiency, (p.samples_per_s / p.gpus) / baseline);
    // comm shares from the session's ops
    ASSERT_EQ(p.session_path, (dir / (std::string(es::to_string(p.sharding)) + "_" + std::to_string(p.gpus) + ".db")).string());
    int64_t measured = 0;
    for (int64_t x : r.step_time_ns) measured += x;
    double emb = 0, all = 0;
    for (int rank = 0; rank < p.gpus; ++rank) {
      emb += static_cast<double>(comm_ns(p.session_path, rank, true)) / static_cast<double>(measured) / p.gpus;
      all += static_cast<double>(comm_ns(p.session_path, rank, false)) / static_cast<double>(measured) / p.gpus;
    }
    EXPECT_NEAR(p.embedding_comm_share, emb, 1e-12) << p.gpus;
    EXPECT_NEAR(p.comm_share, all, 1e-12) << p.gpus;
    if (p.gpus > 1) { EXPECT_LT(p.embedding_comm_share, p.comm_share); }  // the dense all-reduce is not embedding comm
    int64_t peak = 0;
    for (const auto& rk : r.ranks) peak = std::max(peak, rk.memory_bytes);
    EXPECT_EQ(p.memory_bytes_per_gpu, peak);
    EXPECT_GT(peak, 0);
  }
  EXPECT_DOUBLE_EQ(std::max(points[0].scaling_efficiency, points[4].scaling_efficiency), 1.0);
  fs::remove_all(dir);
}

// The regression of the scaling study's first version: table_row_wise placed by bytes put 11 of
// criteo_kaggle's small tables on one node at 128 GPUs (ids looked up max/mean 6.7), so per-GPU
// throughput rose from 128 to 256 GPUs (478k -> 625k samples/s) as the tables spread out. Placed
// by time, weak scaling loses from 64 to 128 GPUs.
//
// 128 -> 256 is not asserted (since sim50): at 16 nodes the busiest node holds 2 of the 26 tables,
// at 32 nodes 1, so its share of the W x B bags is 2 / 128 GPUs against 1 / 256: the same load,
// and which small, skewed tables share a node at 128 decides the difference (0.53 vs 0.48 ms a
// step, ids looked up max/mean 5.22 vs 5.96).
//
// From 32 nodes on, every table has a node of its own (26 tables), and a larger cluster only adds
// nodes; then, by the cost model, every byte a table's node moves grows with the world W while the
// rest of the step does not (B = 512 samples a GPU, dim 16, one id a bag, h100_sxm: NIC 46 GB/s,
// NVLink 460 GB/s, 8 GPUs a node). A rank of such a node, on the step's critical path (its calls
// are serialized: input dist, lookup, output dist, dense, gradient dist, optimizer), moves:
//   input_dist/lengths               (W - 8) x 512 x 8 B (int64) from the other nodes, NIC
//   output_dist/all_to_all_cross_node (W/8 - 1) x 512 x 16 x 4 B to the other nodes, NIC
//   grad_dist/all_to_all_cross_node   the same back
//   output_dist/reduce_scatter_intra_node 7/8 x W x 512 x 16 x 4 B in the node, NVLink
//   grad_dist/all_gather_intra_node   the same
// plus its shard's share of the W x 512 ids (input_dist/ids, lookup, kjt_permute, the fused
// update), while the dense part, the latencies and the dense all-reduce (2 (n-1)/n of its
// buffer) stay (the all-reduce's +162 ns from 256 to 512 GPUs, +81 ns to 1024, is the one term
// not linear in W). So the step time is affine in W, t(W) = C + a W, and the per-GPU throughput
// B / t(W) falls with every doubling, while the cluster's W B / t(W) tends to B / a (here a = 538
// ns a GPU: about 0.95e9 samples/s, whatever the cluster's size). By hand, the
// collective terms alone add, from 256 to 512 GPUs (+256 GPUs, +32 nodes):
//   lengths 256 x 512 x 8 B = 1,048,576 B / 46e9 = 22,795 ns; each cross-node all-to-all
//   32 x 512 x 64 B = 1,048,576 B: 22,795 ns (twice); reduce-scatter and all-gather 7/8 x 256 x
//   512 x 64 B = 7,340,032 B / 460e9 = 15,957 ns (twice): 100,299 ns,
// a lower bound of t(512) - t(256) (the hot shard's ids, lookup and update add the rest: 137,642
// ns a step in all, 0.480 -> 0.617 -> 0.893 ms at 256, 512, 1024 GPUs).
TEST(ScalingStudy, TableRowWisePerGpuThroughputFallsAsTheClusterGrows) {
  es::WorkloadSpec base = es::load_preset("criteo_kaggle");
  base.steps = 2;
  base.warmup_steps = 1;
  es::ScalingStudyOptions o;
  o.hardware = "h100_sxm";
  o.gpus = {64, 128, 256, 512, 1024};
  o.shardings = {es::ShardingType::table_row_wise};
  const auto points = es::run_scaling_study(base, o);
  ASSERT_EQ(points.size(), 5u);
  for (const auto& p : points) ASSERT_TRUE(p.error.empty()) << p.error;
  EXPECT_GE(points[0].samples_per_s / 64, points[1].samples_per_s / 128);
  EXPECT_EQ(points[1].placement, "uniform:table_row_wise");
  // 256, 512, 1024 GPUs: a node for every table, step time affine in W
  const double t256 = static_cast<double>(points[2].step_time_ns), t512 = static_cast<double>(points[3].step_time_ns),
               t1024 = static_cast<double>(points[4].step_time_ns);
  EXPECT_GT(points[2].samples_per_s / 256, points[3].samples_per_s / 512);  // per GPU: falls
  EXPECT_GT(points[3].samples_per_s / 512, points[4].samples_per_s / 1024);
  EXPECT_GE(t512 - t256, 100299.0);  // the collectives' hand-derived growth (above)
  // affine: each doubling adds twice what the one before added ((1024 - 512) / (512 - 256) = 2),
  // the dense all-reduce's 2 (n-1)/n aside (a few hundred ns)
  EXPECT_NEAR((t1024 - t512) / (t512 - t256), 2.0, 0.01) << t256 << " " << t512 << " " << t1024;
}

TEST(ScalingStudy, RefusesWhatItCannotStudy) {
  const es::WorkloadSpec base = es::load_preset("tiny");
  es::ScalingStudyOptions o;
  o.hardware = kScalingProfile;
  o.shardings = {es::ShardingType::table_wise};
  EXPECT_THROW(es::run_scaling_study(base, o), es::SpecError);  // no sizes
  o.gpus = {0};
  EXPECT_THROW(es::run_scaling_study(base, o), es::SpecError);
  o.gpus = {2};
  o.shardings.clear();
  EXPECT_THROW(es::run_scaling_study(base, o), es::SpecError);
  o.shardings = {es::ShardingType::table_wise};
  o.hardware = "no_such_profile";
  EXPECT_THROW(es::run_scaling_study(base, o), es::SpecError);
}

// Tester33 D12: sizes run in ascending order, each once (the efficiency is relative to the
// smallest); a size above one node that is not whole nodes is refused before any point runs; an
// earlier study's sessions are not replaced unless asked.
TEST(ScalingStudy, SizesAreSortedOnceAndSessionsAreNotReplacedSilently) {
  es::WorkloadSpec base = es::load_preset("tiny");
  base.steps = 1;
  base.warmup_steps = 0;
  es::ScalingStudyOptions o;
  o.hardware = kScalingProfile;  // nodes of 2 GPUs
  o.shardings = {es::ShardingType::table_wise};
  o.gpus = {4, 2, 4};
  const auto points = es::run_scaling_study(base, o);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].gpus, 2);
  EXPECT_EQ(points[1].gpus, 4);
  EXPECT_DOUBLE_EQ(points[0].scaling_efficiency, 1.0);
  o.gpus = {1, 3};
  try {
    es::run_scaling_study(base, o);
    FAIL() << "3 GPUs in nodes of 2 ran";
  } catch (const es::SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("3 GPUs are not whole nodes of 2 GPUs"), std::string::npos) << e.what();
  }
  const fs::path dir = fs::temp_directory_path() / ("embedscope_scaling_keep_" + std::to_string(getpid()));
  fs::remove_all(dir);
  o.gpus = {2};
  o.session_dir = dir.string();
  ASSERT_EQ(es::run_scaling_study(base, o).size(), 1u);
  const fs::path db = dir / "table_wise_2.db";
  ASSERT_TRUE(fs::exists(db));
  const auto written = fs::last_write_time(db);
  try {
    es::run_scaling_study(base, o);
    FAIL() << "an earlier study's session was replaced";
  } catch (const es::SpecError& e) {
    EXPECT_EQ(std::string(e.what()), db.string() + ": already exists; choose another directory (-o) or allow replacing "
                                                   "its sessions (--force-overwrite)");
  }
  EXPECT_EQ(fs::last_write_time(db), written);
  o.overwrite = true;
  EXPECT_EQ(es::run_scaling_study(base, o).size(), 1u);
  fs::remove_all(dir);
}

TEST(ScalingCli, PrintsTheStudyAsJsonAndRefusesBadLists) {
  const fs::path dir = fs::temp_directory_path() / "embedscope_scaling_cli";
  fs::create_directories(dir);
  namespace ts = embedscope::test_support;
  auto r = ts::run_cli(EMBEDSCOPE_CLI, "scaling --preset tiny --simulate " + kScalingProfile +
                                           " --gpus 1,2 --shardings table_wise --steps 2 --warmup-steps 1 --json", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const es::ScalingStudy st = es::scaling_study_from_json(j, "stdout");
  ASSERT_EQ(st.points.size(), 2u);
  EXPECT_EQ(st.points[1].gpus, 2);
  EXPECT_EQ(st.gpus_per_node, 2);
  EXPECT_DOUBLE_EQ(st.points[0].scaling_efficiency, 1.0);
  // the CLI's point is the engine's
  es::WorkloadSpec base = es::load_preset("tiny");
  base.steps = 2;
  base.warmup_steps = 1;
  es::ScalingStudyOptions o;
  o.hardware = kScalingProfile;
  o.gpus = {1, 2};
  o.shardings = {es::ShardingType::table_wise};
  EXPECT_EQ(st.points[1].step_time_ns, es::run_scaling_study(base, o)[1].step_time_ns);
  r = ts::run_cli(EMBEDSCOPE_CLI, "scaling --preset tiny --simulate " + kScalingProfile + " --gpus 0", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--gpus"), std::string::npos) << r.err;
  r = ts::run_cli(EMBEDSCOPE_CLI, "scaling --preset tiny --simulate " + kScalingProfile + " --shardings diagonal", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("diagonal"), std::string::npos) << r.err;
  r = ts::run_cli(EMBEDSCOPE_CLI, "scaling --preset tiny --devices 4", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--simulate"), std::string::npos) << r.err;
  fs::remove_all(dir);
}
