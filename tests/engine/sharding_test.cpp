#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "embedscope/engine/sharding/sharding.h"

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
