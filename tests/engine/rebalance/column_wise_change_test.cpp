// A hot table changed from table_wise to column_wise by the policy (issue 17,
// RebalanceSpec::column_wise_hot_tables): its column blocks, the bytes they move with their
// optimizer state (one rowwise_adagrad accumulator a row in every block), the predicted load,
// the proposal against whole moves and row_wise, and the blocks of rows and columns a reshard
// copies - all against hand-computed values.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "embedscope/engine/rebalance/policy.h"
#include "embedscope/engine/rebalance/reshard.h"
#include "embedscope/engine/rebalance/type_change.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/engine/workload/spec_error.h"

using namespace embedscope::engine;
using namespace embedscope::engine::rebalance;

namespace {

/// Table t (rows[t] x 16 fp32, `opt`) table_wise on rank ranks[t]; the policy may change hot
/// tables to column_wise (and to row_wise with `row_wise`).
WorkloadSpec cw_spec(int world, const std::vector<int>& ranks, const std::vector<int64_t>& rows, const char* opt,
                     bool row_wise = false) {
  using nlohmann::json;
  json j = {{"name", "column_wise_change"},
            {"batch_size", 8},
            {"steps", 4},
            {"devices", {{"count", world}, {"memory_bytes", int64_t{1} << 30}}},
            {"optimizer", {{"type", opt}}},
            {"dense", nullptr},
            {"tables", json::array()},
            {"sharding", {{"default", "table_wise"}, {"tables", json::object()}}},
            {"rebalance", {{"every", 2}, {"column_wise_hot_tables", true}, {"row_wise_hot_tables", row_wise}}}};
  for (size_t t = 0; t < ranks.size(); ++t) {
    const std::string n = "t" + std::to_string(t);
    j["tables"].push_back({{"name", n}, {"num_embeddings", rows[t]}, {"embedding_dim", 16}, {"feature_names", {"f" + std::to_string(t)}}});
    j["sharding"]["tables"][n] = {{"type", "table_wise"}, {"ranks", {ranks[t]}}};
  }
  return parse_workload(j, "column_wise_change");
}

ObservedLoad cw_table_load(const std::vector<int64_t>& ids) {
  ObservedLoad l;
  for (int64_t v : ids) l.ids.push_back({v});
  return l;
}

}  // namespace

// 4 ranks; t0 (1000 rows, 800 ids) on rank 0, t1..t3 (100 rows; 100, 50, 50 ids) on ranks 1..3:
// loads {800, 100, 50, 50}. t0 goes column_wise in 16 / 4 = 4 blocks of 4 columns: block 0
// stays on rank 0, blocks 1..3 go to the other ranks least loaded first (2, 3, then 1), 200
// ids' worth each: {200, 300, 250, 250}, imbalance 1.2. Bytes (sgd): 3 blocks x 1000 rows x 4
// columns x 4 = 48000.
TEST(ColumnWiseChange, AHotTableIsSplitIntoColumnBlocks) {
  const WorkloadSpec s = cw_spec(4, {0, 1, 2, 3}, {1000, 100, 100, 100}, "sgd");
  const Proposal p = propose(s, plan_sharding(s), cw_table_load({800, 100, 50, 50}), 0);
  ASSERT_TRUE(p.worth_it());
  EXPECT_TRUE(p.moves.empty());
  ASSERT_EQ(p.changes.size(), 1u);
  EXPECT_EQ(p.changes[0].table, 0);
  EXPECT_EQ(p.changes[0].from, 0);
  EXPECT_EQ(p.changes[0].to_type, ShardingType::column_wise);
  EXPECT_EQ(p.changes[0].bytes, 48000);
  EXPECT_EQ(p.bytes_moved, 48000);
  EXPECT_EQ(p.load_after, (std::vector<int64_t>{200, 300, 250, 250}));
  EXPECT_DOUBLE_EQ(p.imbalance_after, 1.2);
  const TablePlan& t0 = p.plan.tables[0];
  EXPECT_EQ(t0.type, ShardingType::column_wise);
  ASSERT_EQ(t0.shards.size(), 4u);
  const int ranks[4] = {0, 2, 3, 1};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(t0.shards[i].rank, ranks[i]) << i;
    EXPECT_EQ(t0.shards[i].col_offset, 4 * static_cast<int64_t>(i));
    EXPECT_EQ(t0.shards[i].num_cols, 4);
    EXPECT_EQ(t0.shards[i].row_offset, 0);
    EXPECT_EQ(t0.shards[i].num_rows, 1000);
  }
}

// rowwise_adagrad: every block keeps its own accumulator a row, so each moved block carries
// 1000 x (4 x 4 + 4) = 20000 bytes, 60000 in all; row_wise moves 750 rows x (64 + 4) = 51000.
// With both changes allowed and t0's ids observed per row (uniform: 200 in each quarter), the same
// maximum (300) and fewer bytes: row_wise. With sgd both move 48000 bytes: the tie goes to row_wise
// too. Without the ids per row, row_wise's 300 assumes an even spread, and it loses the tie of the
// maximum to column_wise whatever the bytes (tester48 F1).
TEST(ColumnWiseChange, RowWiseWinsATieAndFewerBytes) {
  for (const char* opt : {"rowwise_adagrad", "sgd"}) {
    const WorkloadSpec s = cw_spec(4, {0, 1, 2, 3}, {1000, 100, 100, 100}, opt, true);
    ObservedLoad observed = cw_table_load({800, 100, 50, 50});
    observed.row_counts = {{{0, 250, 200}, {250, 500, 200}, {500, 750, 200}, {750, 1000, 200}}, {}, {}, {}};
    const Proposal p = propose(s, plan_sharding(s), observed, 0);
    ASSERT_EQ(p.changes.size(), 1u) << opt;
    EXPECT_EQ(p.changes[0].to_type, ShardingType::row_wise) << opt;
    EXPECT_TRUE(p.changes[0].rows_observed) << opt;
    const Proposal even = propose(s, plan_sharding(s), cw_table_load({800, 100, 50, 50}), 0);
    ASSERT_EQ(even.changes.size(), 1u) << opt;
    EXPECT_EQ(even.changes[0].to_type, ShardingType::column_wise) << opt;
    const WorkloadSpec c = cw_spec(4, {0, 1, 2, 3}, {1000, 100, 100, 100}, opt);
    const Proposal q = propose(c, plan_sharding(c), cw_table_load({800, 100, 50, 50}), 0);
    ASSERT_EQ(q.changes.size(), 1u) << opt;
    EXPECT_EQ(q.changes[0].bytes, std::string(opt) == "sgd" ? 48000 : 60000) << opt;
  }
}

// A budget below the three blocks refuses the split, naming it; nothing else helps.
TEST(ColumnWiseChange, TheByteBudgetRefusesTheSplit) {
  const WorkloadSpec s = cw_spec(4, {0, 1, 2, 3}, {1000, 100, 100, 100}, "sgd");
  const Proposal p = propose(s, plan_sharding(s), cw_table_load({800, 100, 50, 50}), 40000);
  EXPECT_FALSE(p.worth_it());
  bool named = false;
  for (const auto& r : p.refused)
    named |= r.to == -2 && r.reason.find("from rank 0 to column_wise over 4 ranks: exceeds max_bytes_per_move") != std::string::npos;
  EXPECT_TRUE(named);
}

// The pure pieces: blocks of 16 columns over 3 ranks are {8, 4, 4} (column_split); a table of
// fewer than 8 columns stays one block; bytes and predicted load by hand.
TEST(ColumnWiseChange, BlocksBytesAndPredictedLoad) {
  WorkloadSpec s = cw_spec(3, {1, 0}, {10, 10}, "rowwise_adagrad");
  const TablePlan tp = column_wise_table_plan(s, 0, 1, {2, 0});
  ASSERT_EQ(tp.shards.size(), 3u);
  EXPECT_EQ(tp.shards[0].rank, 1);
  EXPECT_EQ(tp.shards[1].rank, 2);
  EXPECT_EQ(tp.shards[2].rank, 0);
  EXPECT_EQ(tp.shards[0].num_cols, 8);
  EXPECT_EQ(tp.shards[1].col_offset, 8);
  EXPECT_EQ(tp.shards[2].col_offset, 12);
  EXPECT_EQ(tp.shards[2].num_cols, 4);
  EXPECT_EQ(block_move_bytes(s, 0, 10, 4), 10 * (16 + 4));
  EXPECT_EQ(change_bytes(s, tp, 1), 2 * 10 * (16 + 4));
  EXPECT_EQ(column_wise_predicted_load(10, tp), (std::vector<int64_t>{6, 2, 2}));
  EXPECT_EQ(balanced_load(tp, 1, 16, 300, false), 75);  // 4 of 16 columns
  EXPECT_EQ(balanced_load(tp, 1, 16, 300, true), 300);  // lookup ns: as measured
  EXPECT_EQ(balanced_load(plan_sharding(s).tables[0], 0, 16, 300, false), 300);
  s.tables[0].embedding_dim = 6;
  EXPECT_EQ(column_wise_table_plan(s, 0, 1, {2, 0}).shards.size(), 1u);
  TablePlan none = tp;
  for (auto& sd : none.shards) sd.num_cols = 0;
  EXPECT_THROW(column_wise_predicted_load(5, none), std::invalid_argument);
}

// The blocks a reshard copies: t0 (10 rows x 16) on rank 1 into 4 column blocks (ranks 1, 3, 0,
// 2): one block of all rows per block, from columns 0, 4, 8, 12 of the old shard; rank 1 sends
// each other rank 10 x (4 + 1) floats (rowwise_adagrad: the row's accumulator travels with each
// block). Back to table_wise on rank 1: the four blocks land at columns 0, 4, 8, 12.
TEST(ColumnWiseChange, ReshardBlocksCarryColumns) {
  const WorkloadSpec s = cw_spec(4, {1, 0}, {10, 10}, "rowwise_adagrad");
  const ShardingPlan before = plan_sharding(s);
  ShardingPlan after = before;
  after.tables[0] = column_wise_table_plan(s, 0, 1, {3, 0, 2});
  const std::vector<RowTransfer> x = row_transfers(before, after);
  ASSERT_EQ(x.size(), 4u);
  const int to[4] = {1, 3, 0, 2};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(x[i].from, 1);
    EXPECT_EQ(x[i].to, to[i]);
    EXPECT_EQ(x[i].to_shard, static_cast<int>(i));
    EXPECT_EQ(x[i].rows, 10);
    EXPECT_EQ(x[i].from_col, 4 * static_cast<int64_t>(i));
    EXPECT_EQ(x[i].to_col, 0);
    EXPECT_EQ(x[i].cols, 4);
  }
  EXPECT_EQ(block_floats(s, 0, 4).total(), 5);
  EXPECT_EQ(reshard_counts(s, x, 1, 4).send, (std::vector<int64_t>{50, 0, 50, 50}));
  EXPECT_EQ(reshard_counts(s, x, 3, 4).recv, (std::vector<int64_t>{0, 50, 0, 0}));
  const std::vector<RowTransfer> back = row_transfers(after, before);
  ASSERT_EQ(back.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(back[i].from, to[i]);
    EXPECT_EQ(back[i].to, 1);
    EXPECT_EQ(back[i].from_col, 0);
    EXPECT_EQ(back[i].to_col, 4 * static_cast<int64_t>(i));
  }
}

// "column_wise_hot_tables" must be a boolean (exit 2 naming the pointer); it round-trips.
TEST(ColumnWiseChange, SpecFieldIsABoolean) {
  using nlohmann::json;
  json j = {{"name", "w"}, {"batch_size", 8}, {"steps", 4}, {"devices", {{"count", 2}}},
            {"tables", {{{"name", "t0"}, {"num_embeddings", 10}, {"embedding_dim", 16}, {"feature_names", {"f0"}}}}},
            {"rebalance", {{"every", 2}, {"column_wise_hot_tables", true}}}};
  const WorkloadSpec s = parse_workload(j, "w");
  EXPECT_TRUE(s.rebalance.column_wise_hot_tables);
  EXPECT_EQ(to_json(s)["rebalance"]["column_wise_hot_tables"], json(true));
  j["rebalance"]["column_wise_hot_tables"] = "yes";
  try {
    parse_workload(j, "w");
    FAIL() << "a string was taken";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("/rebalance/column_wise_hot_tables: must be true or false, got string"),
              std::string::npos)
        << e.what();
  }
}
