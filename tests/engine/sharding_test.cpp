#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "embedscope/engine/planner/host_placement.h"
#include "embedscope/engine/sharding/sharding.h"

#include <fmt/format.h>

using namespace embedscope::engine;

TEST(Splits, UnevenRowsAndColumns) {
  EXPECT_EQ(even_split(10, 4), (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(even_split(3, 4), (std::vector<int64_t>{1, 1, 1, 0}));
  EXPECT_EQ(even_split(0, 2), (std::vector<int64_t>{0, 0}));
  EXPECT_THROW(even_split(3, 0), std::invalid_argument);
  // TorchRec's row-wise split (_calculate_rw_shard_sizes_and_offsets), by hand: block =
  // ceil(rows / parts), rows / block ranks of a block, then the remainder, then 0.
  EXPECT_EQ(row_wise_split(10, 4), (std::vector<int64_t>{3, 3, 3, 1}));  // block 3: 3 full, 10 - 9
  EXPECT_EQ(row_wise_split(5, 4), (std::vector<int64_t>{2, 2, 1, 0}));   // TorchRec's docstring example
  EXPECT_EQ(row_wise_split(14, 8), (std::vector<int64_t>{2, 2, 2, 2, 2, 2, 2, 0}));  // block 2: 7 full, rest 0
  EXPECT_EQ(row_wise_split(3, 4), (std::vector<int64_t>{1, 1, 1, 0}));
  EXPECT_EQ(row_wise_split(9, 4), (std::vector<int64_t>{3, 3, 3, 0}));
  EXPECT_EQ(row_wise_split(8, 4), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(row_wise_split(1, 1), (std::vector<int64_t>{1}));
  EXPECT_EQ(row_wise_split(0, 2), (std::vector<int64_t>{0, 0}));
  // criteo_kaggle's t_cat_3 / 100 (22,026 rows) on 8 ranks: block 2,754, 7 x 2,754 = 19,278, last 2,748
  EXPECT_EQ(row_wise_split(22026, 8), (std::vector<int64_t>{2754, 2754, 2754, 2754, 2754, 2754, 2754, 2748}));
  EXPECT_THROW(row_wise_split(3, 0), std::invalid_argument);
  EXPECT_THROW(row_wise_split(-1, 2), std::invalid_argument);
  EXPECT_EQ(column_split(16, 3), (std::vector<int64_t>{8, 4, 4}));
  EXPECT_EQ(column_split(18, 4), (std::vector<int64_t>{4, 4, 4, 6}));
  EXPECT_EQ(column_split(6, 4), (std::vector<int64_t>{2, 2, 1, 1}));
  EXPECT_EQ(column_split(128, 2), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(column_split(1, 1), (std::vector<int64_t>{1}));
  EXPECT_THROW(column_split(3, 4), std::invalid_argument);
}

namespace {
WorkloadSpec spec4() {
  WorkloadSpec s;
  s.name = "s";
  s.tables = {{"big", 1000, 16, Pooling::sum, {"a"}},
              {"mid", 500, 16, Pooling::sum, {"b"}},
              {"small", 10, 16, Pooling::sum, {"c"}},
              {"rows", 10, 8, Pooling::sum, {"d"}}};
  for (const char* f : {"a", "b", "c", "d"}) s.features.push_back(FeatureSpec{f, {}, {}});
  s.batch_size = 4;
  s.devices.count = 4;
  s.devices.memory_bytes = 1 << 30;
  return s;
}
}  // namespace

TEST(Plan, RowWiseOffsetsAndEmptyRank) {
  WorkloadSpec s = spec4();
  s.sharding.default_type = ShardingType::row_wise;
  ShardingPlan p = plan_sharding(s);
  const auto& rows = p.tables[3].shards;
  ASSERT_EQ(rows.size(), 4u);
  std::vector<int64_t> off, n;
  for (const auto& sh : rows) {
    off.push_back(sh.row_offset);
    n.push_back(sh.num_rows);
  }
  // 10 rows over 4 ranks as TorchRec splits them: block ceil(10 / 4) = 3, ranks 0-2 a block,
  // rank 3 the remaining 10 - 9 = 1 (the balanced split was 3, 3, 2, 2)
  EXPECT_EQ(off, (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(n, (std::vector<int64_t>{3, 3, 3, 1}));
  // a table of 3 rows over 4 ranks: rank 3's shard is empty (0 rows at offset 3)
  s.tables[3].num_embeddings = 3;
  p = plan_sharding(s);
  ASSERT_EQ(p.tables[3].shards.size(), 4u);
  EXPECT_EQ(p.tables[3].shards[3].rank, 3);
  EXPECT_EQ(p.tables[3].shards[3].row_offset, 3);
  EXPECT_EQ(p.tables[3].shards[3].num_rows, 0);
}

// table_row_wise and grid_shard split a node's rows as row_wise splits the world's: 10 rows over
// a node of 4 ranks -> 3, 3, 3, 1 at offsets 0, 3, 6, 9.
TEST(Plan, TableRowWiseAndGridFollowTorchRecRowSplit) {
  WorkloadSpec s = spec4();
  s.sharding.local_world_size = 4;
  for (ShardingType t : {ShardingType::table_row_wise, ShardingType::grid_shard}) {
    s.sharding.default_type = t;
    const ShardingPlan p = plan_sharding(s);
    std::vector<int64_t> off, n;
    for (const auto& sh : p.tables[3].shards) {
      off.push_back(sh.row_offset);
      n.push_back(sh.num_rows);
    }
    EXPECT_EQ(off, (std::vector<int64_t>{0, 3, 6, 9})) << to_string(t);
    EXPECT_EQ(n, (std::vector<int64_t>{3, 3, 3, 1})) << to_string(t);
  }
}

TEST(Plan, GreedyTableWiseAndExplicitRanks) {
  WorkloadSpec s = spec4();
  s.sharding.per_table["small"] = {ShardingType::table_wise, {3}, -1};
  s.sharding.per_table["rows"] = {ShardingType::column_wise, {1, 2}, -1};
  ShardingPlan p = plan_sharding(s);
  // largest first onto the least-loaded rank: big -> 0, mid -> next empty rank
  EXPECT_EQ(p.tables[0].shards[0].rank, 0);
  EXPECT_NE(p.tables[1].shards[0].rank, 0);
  EXPECT_EQ(p.tables[2].shards[0].rank, 3);
  ASSERT_EQ(p.tables[3].shards.size(), 2u);
  EXPECT_EQ(p.tables[3].shards[0].rank, 1);
  EXPECT_EQ(p.tables[3].shards[0].num_cols, 4);
  EXPECT_EQ(p.tables[3].shards[1].col_offset, 4);
  auto j = to_json(s, p);
  EXPECT_EQ(j["tables"][3]["sharding_type"], "column_wise");
  EXPECT_EQ(j["tables"][3]["shards"][1]["rank"], 2);
}

TEST(Plan, ColumnWiseDefaultShardCountAndTableRowWiseNodes) {
  WorkloadSpec s = spec4();
  s.sharding.default_type = ShardingType::column_wise;
  ShardingPlan p = plan_sharding(s);
  EXPECT_EQ(p.tables[0].shards.size(), 4u);  // 16 columns / 4 -> 4 shards of 4
  EXPECT_EQ(p.tables[3].shards.size(), 2u);  // 8 columns -> 2 shards
  s.sharding.default_type = ShardingType::table_row_wise;
  s.sharding.local_world_size = 2;
  s.sharding.per_table["small"] = {ShardingType::table_row_wise, {}, 1};
  p = plan_sharding(s);
  EXPECT_EQ(p.local_world_size, 2);
  EXPECT_EQ(p.tables[2].node, 1);
  EXPECT_EQ(p.tables[2].shards[0].rank, 2);
  EXPECT_EQ(p.tables[2].shards[1].rank, 3);
  EXPECT_EQ(p.tables[2].shards[1].row_offset, 5);
  EXPECT_EQ(p.tables[0].node, 0);  // biggest table to the emptiest node
  EXPECT_EQ(p.tables[1].node, 1);
}

// plan_overrides pins a plan in the spec: a hand-made plan of every pinnable type (big
// column_wise on ranks 3, 1 in column order, mid table_row_wise on node 1, small table_wise on
// rank 2, rows table_column_wise on node 0 with one 8-wide shard) comes back from plan_sharding
// shard for shard; row_wise and data_parallel keep their type.
TEST(Plan, OverridesPinAGivenPlan) {
  WorkloadSpec s = spec4();
  s.sharding.local_world_size = 2;
  ShardingPlan p = plan_sharding(s);
  p.tables[0].type = ShardingType::column_wise;
  p.tables[0].shards = {{1, 0, 1000, 8, 8}, {3, 0, 1000, 0, 8}};
  p.tables[1].type = ShardingType::table_row_wise;
  p.tables[1].node = 1;
  p.tables[1].shards = {{2, 0, 250, 0, 16}, {3, 250, 250, 0, 16}};
  p.tables[2].shards = {{2, 0, 10, 0, 16}};
  p.tables[3].type = ShardingType::table_column_wise;
  p.tables[3].node = 0;
  p.tables[3].shards = {{0, 0, 10, 0, 8}};
  const auto o = plan_overrides(s, p);
  ASSERT_EQ(o.size(), 4u);
  EXPECT_EQ(o.at("big").ranks, (std::vector<int>{3, 1}));
  EXPECT_EQ(o.at("mid").node, 1);
  EXPECT_EQ(o.at("small").ranks, (std::vector<int>{2}));
  EXPECT_EQ(o.at("rows").node, 0);
  EXPECT_TRUE(o.at("rows").ranks.empty());
  s.sharding.per_table = o;
  const ShardingPlan q = plan_sharding(s);
  ASSERT_EQ(q.tables[0].shards.size(), 2u);
  EXPECT_EQ(q.tables[0].shards[0].rank, 3);  // columns [0, 8)
  EXPECT_EQ(q.tables[0].shards[1].rank, 1);
  EXPECT_EQ(q.tables[1].shards[0].rank, 2);
  EXPECT_EQ(q.tables[1].shards[1].rank, 3);
  EXPECT_EQ(q.tables[2].shards[0].rank, 2);
  ASSERT_EQ(q.tables[3].shards.size(), 2u);  // 8 columns: 2 shards of 4 on node 0's ranks
  EXPECT_EQ(q.tables[3].shards[0].rank / 2, 0);
  EXPECT_EQ(q.tables[3].shards[1].rank / 2, 0);
  p.tables.pop_back();
  EXPECT_THROW(plan_overrides(s, p), std::invalid_argument);
}

TEST(Memory, EstimateAndBreakdownError) {
  WorkloadSpec s = spec4();
  s.optimizer.type = OptimizerType::adam;
  s.sharding.default_type = ShardingType::data_parallel;
  s.memory.allocator = AllocatorKind::direct;  // no 2 MiB segment floor on these small devices
  ShardingPlan p = plan_sharding(s);
  auto est = estimate_memory(s, p);
  ASSERT_EQ(est.size(), 4u);
  // every replica: tables of 1000, 500 and 10 rows x 16 and 10 x 8 floats, each buffer rounded
  // up to the allocator's 512 B: 64,000 + 32,256 (32,000) + 1,024 (640) + 512 (320)
  EXPECT_EQ(est[2].weights, 64000 + 32256 + 1024 + 512);
  EXPECT_EQ(est[2].optimizer_state, 2 * est[2].weights);
  s.devices.memory_bytes = est[0].total() - 1;
  try {
    check_memory_fits(s, est);
    FAIL() << "expected SpecError";
  } catch (const SpecError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("/devices/memory_bytes"), std::string::npos) << m;
    // the 4 data_parallel replicas need the same: one line for them (tester46 F10)
    EXPECT_NE(m.find("\n  ranks 0-3: needs "), std::string::npos) << m;
    EXPECT_NE(m.find(" each"), std::string::npos) << m;
    EXPECT_EQ(m.find("\n  rank "), std::string::npos) << m;
    EXPECT_NE(m.find("weights 95.5 KiB"), std::string::npos) << m;
    EXPECT_NE(m.find("optimizer state 191.0 KiB"), std::string::npos) << m;
  }
  s.devices.memory_bytes = est[0].total();
  EXPECT_NO_THROW(check_memory_fits(s, est));
  s.memory.allocator = AllocatorKind::caching;  // the caching allocator needs one 2 MiB segment at least
  try {
    check_memory_fits(s, est);
    FAIL() << "expected SpecError";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("smaller than one 2.0 MiB segment of the caching allocator"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(100), "100 B");
}

namespace {
std::string fmt_name(const char* prefix, int i) { return fmt::format("{}{}", prefix, i); }
// The hot-table workload's shape: hot 5,000 x 16 (312.5 KiB fp32), t0..t5 2,000 x 16 (125 KiB
// each), 4 ranks in 2 nodes of 2, table_wise by default.
WorkloadSpec hot_spec() {
  WorkloadSpec s;
  s.name = "hot";
  s.tables.push_back({"hot", 5000, 16, Pooling::sum, {"f_hot"}});
  s.features.push_back(FeatureSpec{"f_hot", {}, {}});
  for (int i = 0; i < 6; ++i) {
    s.tables.push_back({fmt_name("t", i), 2000, 16, Pooling::sum, {fmt_name("f", i)}});
    s.features.push_back(FeatureSpec{fmt_name("f", i), {}, {}});
  }
  s.batch_size = 64;
  s.devices.count = 4;
  s.devices.memory_bytes = 1 << 30;
  s.sharding.default_type = ShardingType::table_wise;
  s.sharding.local_world_size = 2;
  return s;
}
std::vector<int> table_wise_ranks(const ShardingPlan& p) {  // the rank of t0..t5
  std::vector<int> r;
  for (size_t i = 1; i < p.tables.size(); ++i) r.push_back(p.tables[i].shards.at(0).rank);
  return r;
}
}  // namespace

// A table_row_wise hot table counts on its node's ranks before the other tables are placed:
// hot (320,000 B) first onto node 0 as 2 x 160,000 B on ranks 0, 1; then each 128,000 B table onto
// the least-loaded rank: t0 -> 2, t1 -> 3 (0 < 160,000), t2 -> 2, t3 -> 3 (128,000 < 160,000),
// t4 -> 0, t5 -> 1 (256,000 > 160,000): 288,000 B on every rank. (Round robin 0,1,2,3,0,1 before:
// 416,000 / 416,000 / 128,000 / 128,000 B.)
TEST(Plan, TableRowWiseOverrideCountsOnItsRanks) {
  WorkloadSpec s = hot_spec();
  s.sharding.per_table["hot"] = {ShardingType::table_row_wise, {}, -1};
  ShardingPlan p = plan_sharding(s);
  EXPECT_EQ(p.tables[0].node, 0);
  EXPECT_EQ(table_wise_ranks(p), (std::vector<int>{2, 3, 2, 3, 0, 1}));
  // pinned on node 1: ranks 2, 3 hold 160,000 B each, so t0 -> 0, t1 -> 1, t2 -> 0, t3 -> 1, t4 -> 2, t5 -> 3
  s.sharding.per_table["hot"] = {ShardingType::table_row_wise, {}, 1};
  p = plan_sharding(s);
  EXPECT_EQ(p.tables[0].node, 1);
  EXPECT_EQ(table_wise_ranks(p), (std::vector<int>{0, 1, 0, 1, 2, 3}));
  // a grid_shard hot table: 4 column blocks of 4 on min(2 nodes, 16 / 4) = 2 nodes, 8 columns
  // each, split by rows over the node's 2 ranks: 2,500 x 8 x 4 = 80,000 B on every rank; then
  // round robin is the least-loaded order: 0, 1, 2, 3, 0, 1
  s.sharding.per_table["hot"] = {ShardingType::grid_shard, {}, -1};
  p = plan_sharding(s);
  EXPECT_EQ(table_wise_ranks(p), (std::vector<int>{0, 1, 2, 3, 0, 1}));
}

// A host_cached hot table is placed by its device bytes (500 rows x 16 x 4 = 32,000 -> 32,256 B
// in 512 B blocks), after the six 128,000 B tables (ranks 0, 1, 2, 3, 0, 1): onto rank 2 (128,000
// B, the lower of ranks 2, 3), beside t2. Its 64 x 4 x 4 = 1,024 ids a step are 40% of 2,560;
// rank 2 looks up 1,024 + 256 = 1,280 (50%): max/mean 1,280 / 640 = 2.00. The warning says so;
// the same table on the device gets none (it is placed first, alone on rank 0).
TEST(Plan, HostCachedHotTableBesideAnotherIsWarned) {
  WorkloadSpec s = hot_spec();
  s.sharding.local_world_size = 0;
  s.features[0].pooling_factor = {true, 4.0, 4};
  EXPECT_TRUE(host_table_placement_warnings(s, plan_sharding(s)).empty());
  s.tables[0].placement = TablePlacement::host_cached;
  s.tables[0].cache_load_factor = 0.1;
  const ShardingPlan p = plan_sharding(s);
  ASSERT_EQ(p.tables[0].shards.at(0).rank, 2);
  const auto w = host_table_placement_warnings(s, p);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0],
            "table \"hot\" (placement host_cached) is placed by its device bytes (its 31.5 KiB cache) and shares rank 2 "
            "with \"t2\": it has 40.0% of the expected lookups, more than a rank's mean share 25.0%, and rank 2 50.0% "
            "(ids max/mean 2.00 predicted); the planner does not count a table's lookups. Shard it row_wise (a "
            "sharding override) to spread its lookups, or give the other tables ranks away from rank 2");
  // pinned by the workload: its place is the user's
  s.sharding.per_table["hot"] = {ShardingType::table_wise, {2}, -1};
  EXPECT_TRUE(host_table_placement_warnings(s, plan_sharding(s)).empty());
}
