// The search's split proposer (planner/search.h "split"): when one table is too large for a
// device whole, the plan splits that table alone and keeps the others table_wise, rather than
// splitting every table by columns (uniform:column_wise), which is slower.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

using namespace embedscope::engine;

namespace {

// 8 simulated H100 ranks of 1 GiB each, batch 512, sgd; t0: 6,000,000 x 64 fp32 = 1,536,000,000 B
// (more than the 1,073,741,824 B device: no rank holds it whole; an 8-column shard is 192,000,000 B),
// pooling factor 1; t1..t8: 20,000 i x 64 (5.1-41 MB), pooling factor 10, uniform ids.
nlohmann::json big_table_workload() {
  nlohmann::json tables = nlohmann::json::array(), features = nlohmann::json::array();
  tables.push_back({{"name", "t0"}, {"num_embeddings", 6000000}, {"embedding_dim", 64}, {"feature_names", {"f0"}}});
  features.push_back({{"name", "f0"}, {"pooling_factor", 1}, {"ids", {{"distribution", "uniform"}}}});
  for (int i = 1; i < 9; ++i) {
    const std::string t = "t" + std::to_string(i), f = "f" + std::to_string(i);
    tables.push_back({{"name", t}, {"num_embeddings", 20000 * i}, {"embedding_dim", 64}, {"feature_names", {f}}});
    features.push_back({{"name", f}, {"pooling_factor", 10}, {"ids", {{"distribution", "uniform"}}}});
  }
  return {{"name", "big1"},
          {"batch_size", 512},
          {"steps", 3},
          {"devices", {{"count", 8}, {"backend", "simulated"}, {"hardware", "h100_sxm"}, {"memory_bytes", 1073741824}}},
          {"optimizer", {{"type", "sgd"}, {"learning_rate", 0.01}}},
          {"dense", {{"num_dense_features", 13}, {"bottom_mlp", {64}}, {"interaction", "dot"}, {"top_mlp", {64, 1}}}},
          {"tables", tables},
          {"features", features}};
}

}  // namespace

// t0 alone is split (min(8 ranks, 64 / 4) = 8 shards of 8 columns, one a rank: 192,000,000 B), t1..t8
// stay whole; the plan's
// critical path is the one the planner scores for the same workload with t0 fixed column_wise,
// and below the all-column_wise plan's (the search picked that one before the split proposer).
TEST(PlannerSplitTooLarge, SplitsOnlyTheTableThatDoesNotFit) {
  const WorkloadSpec spec = parse_workload(big_table_workload(), "big1");
  const HardwareProfile hw = planning_profile(spec);
  const PlanSearchResult r = plan_search(spec, hw);
  ASSERT_EQ(r.plan.tables.size(), 9u);
  EXPECT_EQ(r.plan.tables[0].type, ShardingType::column_wise);
  ASSERT_EQ(r.plan.tables[0].shards.size(), 8u);
  std::vector<int> per_rank(8, 0);
  for (const Shard& s : r.plan.tables[0].shards) {
    EXPECT_EQ(s.num_cols, 8);
    EXPECT_EQ(s.num_rows, 6000000);
    ++per_rank[static_cast<size_t>(s.rank)];
  }
  for (int n : per_rank) EXPECT_EQ(n, 1);
  for (size_t i = 1; i < 9; ++i) {
    EXPECT_EQ(r.plan.tables[i].type, ShardingType::table_wise) << i;
    EXPECT_EQ(r.plan.tables[i].shards.size(), 1u) << i;
  }
  EXPECT_TRUE(r.stats.fits);

  nlohmann::json fixed = big_table_workload();
  fixed["sharding"] = {{"tables", {{"t0", {{"type", "column_wise"}}}}}};
  const WorkloadSpec fspec = parse_workload(fixed, "big1_cw");
  const PlanSearchResult f = plan_search(fspec, hw);
  EXPECT_EQ(r.stats.critical_path_ns, f.stats.critical_path_ns);

  PlanSearchOptions cw;
  cw.sharding_types = {ShardingType::column_wise};
  const PlanSearchResult all = plan_search(spec, hw, cw);
  for (const TablePlan& tp : all.plan.tables) EXPECT_EQ(tp.type, ShardingType::column_wise);
  EXPECT_LT(r.stats.critical_path_ns, all.stats.critical_path_ns);
}

// A workload file with devices.backend simulated and devices.hardware h100_sxm is planned on the
// profile's devices, as --simulate h100_sxm: 81,559 MiB = 85,520,809,984 B each, not the default
// 8 GiB; a devices.memory_bytes the file gives is kept.
TEST(PlannerSplitTooLarge, SimulatedWorkloadFileTakesTheProfilesMemory) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "es_split_too_large_mem";
  std::filesystem::create_directories(dir);
  nlohmann::json w = big_table_workload();
  w["devices"].erase("memory_bytes");
  std::ofstream(dir / "sim.json") << w.dump();
  EXPECT_EQ(load_workload_file((dir / "sim.json").string()).devices.memory_bytes, 85520809984);
  std::ofstream(dir / "given.json") << big_table_workload().dump();
  EXPECT_EQ(load_workload_file((dir / "given.json").string()).devices.memory_bytes, 1073741824);
}
