// Hot-row replication advice (issue 17, engine/rebalance/hot_rows.h) against hand-computed
// counts: the threshold W x (dim + 1) ids per row per step, exact at the boundary, buckets judged
// on their mean, the bytes replicated per rank, the types that get advice, and bad input.
#include <gtest/gtest.h>

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "embedscope/engine/rebalance/hot_rows.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

using namespace embedscope::engine;
using namespace embedscope::engine::rebalance;
using nlohmann::json;

namespace {

/// 4 ranks; table "rw" (row_wise, 1000 rows x 8 fp32), "tw" (table_wise, 100 rows x 8);
/// optimizer rowwise_adagrad (1 state float a row): a row is 8 x 4 + 4 = 36 bytes.
WorkloadSpec hot_rows_spec(const std::string& rw_type = "row_wise") {
  json j = {{"name", "hot_rows"},
            {"batch_size", 8},
            {"steps", 2},
            {"devices", {{"count", 4}, {"memory_bytes", int64_t{1} << 30}}},
            {"optimizer", {{"type", "rowwise_adagrad"}}},
            {"dense", nullptr},
            {"tables",
             {{{"name", "rw"}, {"num_embeddings", 1000}, {"embedding_dim", 8}, {"feature_names", {"f_rw"}}},
              {{"name", "tw"}, {"num_embeddings", 100}, {"embedding_dim", 8}, {"feature_names", {"f_tw"}}}}},
            {"sharding",
             {{"default", "table_wise"}, {"tables", {{"rw", {{"type", rw_type}}}, {"tw", {{"type", "table_wise"}}}}}}}};
  return parse_workload(j, "hot_rows");
}

}  // namespace

TEST(HotRows, ThresholdIsWorldTimesDimPlusOneIdsPerRowStep) {
  const WorkloadSpec s = hot_rows_spec();
  const ShardingPlan p = plan_sharding(s);
  ASSERT_EQ(p.tables[0].type, ShardingType::row_wise);
  // W = 4, dim = 8: 36 ids per row per step; over 2 steps a row needs more than 72 ids
  const std::vector<std::vector<RowCount>> counts = {
      {{0, 1, 73}, {1, 2, 72}, {5, 6, 500}, {10, 14, 289}, {20, 24, 288}, {30, 31, 0}},
      {{0, 1, 10000}}};  // table_wise: no advice whatever its load
  const auto a = choose_hot_rows(s, p, counts, 2);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].table, 0);
  EXPECT_EQ(a[0].type, ShardingType::row_wise);
  EXPECT_EQ(a[0].threshold_ids_per_row_step, 36);
  // row 0 (73 > 72), row 5 (500 > 72), rows 10..13 (289 > 2 x 4 x 36 = 288); not row 1 (72), rows 20..23 (288)
  ASSERT_EQ(a[0].rows.size(), 3u);
  EXPECT_EQ(a[0].rows[0].row_begin, 0);
  EXPECT_EQ(a[0].rows[1].row_begin, 5);
  EXPECT_EQ(a[0].rows[2].row_begin, 10);
  EXPECT_EQ(a[0].rows[2].row_end, 14);
  EXPECT_EQ(a[0].num_rows, 6);
  EXPECT_EQ(a[0].ids, 73 + 500 + 289);
  EXPECT_EQ(a[0].bytes_per_rank, 6 * 36);
  EXPECT_DOUBLE_EQ(a[0].ids_saved_per_step, 862.0 / 2.0);
  EXPECT_DOUBLE_EQ(a[0].sync_values_per_step, 6.0 * 36.0);
}

TEST(HotRows, BlocksComeBackInRowOrderAndColdTablesAreLeftOut) {
  const WorkloadSpec s = hot_rows_spec("table_row_wise");
  const ShardingPlan p = plan_sharding(s);
  ASSERT_EQ(p.tables[0].type, ShardingType::table_row_wise);
  const auto a = choose_hot_rows(s, p, {{{900, 901, 37}, {3, 4, 100}}, {}}, 1);  // 1 step: > 36
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(a[0].rows.size(), 2u);
  EXPECT_EQ(a[0].rows[0].row_begin, 3);
  EXPECT_EQ(a[0].rows[1].row_begin, 900);
  EXPECT_DOUBLE_EQ(a[0].ids_saved_per_step, 137.0);
  EXPECT_TRUE(choose_hot_rows(s, p, {{{0, 1, 36}}, {}}, 1).empty());  // 36 is not > 36
  EXPECT_TRUE(choose_hot_rows(s, p, {{}, {}}, 3).empty());
}

// grid_shard tables are split by rows too (each column block over one node): the same threshold
// W x (dim + 1) = 36; table_column_wise tables (whole rows) get none.
TEST(HotRows, GridShardTablesGetAdviceAndTableColumnWiseNone) {
  WorkloadSpec s = hot_rows_spec("grid_shard");
  s.sharding.local_world_size = 2;
  const ShardingPlan p = plan_sharding(s);
  ASSERT_EQ(p.tables[0].type, ShardingType::grid_shard);
  ASSERT_EQ(p.tables[0].shards.size(), 4u);  // 2 column blocks of 4 x 2 row shards
  const auto a = choose_hot_rows(s, p, {{{7, 8, 37}, {8, 9, 36}}, {}}, 1);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].type, ShardingType::grid_shard);
  EXPECT_EQ(a[0].threshold_ids_per_row_step, 36);
  ASSERT_EQ(a[0].rows.size(), 1u);
  EXPECT_EQ(a[0].rows[0].row_begin, 7);
  WorkloadSpec c = hot_rows_spec("table_column_wise");
  c.sharding.local_world_size = 2;
  EXPECT_TRUE(choose_hot_rows(c, plan_sharding(c), {{{7, 8, 1000}}, {}}, 1).empty());
}

TEST(HotRows, BadInputNamesTheTableAndBlock) {
  const WorkloadSpec s = hot_rows_spec();
  const ShardingPlan p = plan_sharding(s);
  EXPECT_THROW(choose_hot_rows(s, p, {{}}, 1), std::invalid_argument);            // one table of two
  EXPECT_THROW(choose_hot_rows(s, p, {{}, {}}, 0), std::invalid_argument);        // no steps
  try {
    choose_hot_rows(s, p, {{{990, 1001, 5}}, {}}, 1);
    FAIL() << "a block past the table's rows";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("table \"rw\" block [990, 1001)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(choose_hot_rows(s, p, {{{4, 4, 5}}, {}}, 1), std::invalid_argument);   // empty block
  EXPECT_THROW(choose_hot_rows(s, p, {{{4, 5, -1}}, {}}, 1), std::invalid_argument);  // negative ids
}
