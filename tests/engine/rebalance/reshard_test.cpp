// Live resharding's pure pieces (engine/rebalance/reshard.h) against hand-computed numbers: the
// policy's window, the load of a window from all-gathered counters, the per-peer counts of the
// all-to-all of rows, what is refused, and the merge of the ranks' records with the imbalance
// observed after a move.
#include <gtest/gtest.h>

#include "embedscope/engine/rebalance/reshard.h"
#include "embedscope/engine/rebalance/type_change.h"

using namespace embedscope::engine;
using namespace embedscope::engine::rebalance;

namespace {

RebalanceSpec every(int64_t n, int64_t cooldown = 0) {
  RebalanceSpec p;
  p.trigger = RebalanceTrigger::every;
  p.every = n;
  p.cooldown_steps = cooldown;
  return p;
}

/// Two table_wise tables on ranks {0, 0}, one row_wise table over 2 ranks (3 shards in all).
ShardingPlan two_rank_plan() {
  ShardingPlan p;
  p.world_size = 2;
  p.local_world_size = 2;
  TablePlan a{0, ShardingType::table_wise, -1, {}}, b{1, ShardingType::table_wise, -1, {}}, c{2, ShardingType::row_wise, -1, {}};
  a.shards = {{0, 0, 10, 0, 4}};
  b.shards = {{0, 0, 20, 0, 4}};
  c.shards = {{0, 0, 5, 0, 4}, {1, 5, 5, 0, 4}};
  p.tables = {a, b, c};
  return p;
}

}  // namespace

TEST(Reshard, PolicyWindowMirrorsTheTrigger) {
  EXPECT_EQ(policy_window(every(4), 3, -1), 4);
  EXPECT_EQ(policy_window(every(4), 4, -1), 0);
  EXPECT_EQ(policy_window(every(4), 7, 3), 4);
  EXPECT_EQ(policy_window(every(4), 1, -1), 0);
  EXPECT_EQ(policy_window(every(2), 1, -1), 2);
  EXPECT_EQ(policy_window(every(2, 2), 3, 1), 0);  // within the cooldown (3 - 1 <= 2)
  EXPECT_EQ(policy_window(every(2, 2), 5, 1), 2);
  RebalanceSpec when;
  when.trigger = RebalanceTrigger::when;
  when.imbalance_above = 1.5;
  when.window = 3;
  EXPECT_EQ(policy_window(when, 1, -1), 0);  // 2 steps ran, the window is 3
  EXPECT_EQ(policy_window(when, 2, -1), 3);
  EXPECT_EQ(policy_window(when, 4, 2), 0);   // 2 steps since the last rebalance
  EXPECT_EQ(policy_window(when, 5, 2), 3);
  EXPECT_EQ(policy_window(RebalanceSpec{}, 5, -1), 0);  // off
}

TEST(Reshard, WindowLoadSumsTheRanksBlocks) {
  const ShardingPlan p = two_rank_plan();
  ASSERT_EQ(flat_shard_count(p), 4);
  // 2 steps (steps 2 and 3); rank 0 holds t0, t1 and t2's shard 0, rank 1 t2's shard 1
  const std::vector<int64_t> g = {
      3, 7, 1, 0,  // rank 0, step 2
      4, 6, 2, 0,  // rank 0, step 3
      0, 0, 0, 5,  // rank 1, step 2
      0, 0, 0, 1,  // rank 1, step 3
  };
  const WindowLoad w = window_load(p, g, 2, 2, 3);
  EXPECT_EQ(w.load.ids, (std::vector<std::vector<int64_t>>{{7}, {13}, {3, 6}}));
  ASSERT_EQ(w.ids_per_step_rank.size(), 4u);
  EXPECT_EQ(w.ids_per_step_rank[0], (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(w.ids_per_step_rank[2], (std::vector<int64_t>{11, 5}));
  EXPECT_EQ(w.ids_per_step_rank[3], (std::vector<int64_t>{12, 1}));
  EXPECT_THROW(window_load(p, std::vector<int64_t>(15), 2, 2, 3), std::invalid_argument);
  EXPECT_THROW(window_load(p, g, 2, 2, 0), std::invalid_argument);  // 2 steps cannot end at step 0
}

TEST(Reshard, CountsOfTheAllToAllOfRows) {
  WorkloadSpec s;
  s.tables = {{"t0", 1000, 16, Pooling::sum, {"f0"}}, {"t1", 10, 4, Pooling::sum, {"f1"}}};
  s.optimizer.type = OptimizerType::rowwise_adagrad;
  const MoveFloats f = move_floats(s, 0);
  EXPECT_EQ(f.weights, 16000);
  EXPECT_EQ(f.state1, 1000);  // one accumulator a row
  EXPECT_EQ(f.state2, 0);
  EXPECT_EQ(f.total(), 17000);
  // t0: 0 -> 1, t1: 2 -> 0
  ShardingPlan before;
  before.world_size = 4;
  before.tables = {{0, ShardingType::table_wise, -1, {{0, 0, 1000, 0, 16}}}, {1, ShardingType::table_wise, -1, {{2, 0, 10, 0, 4}}}};
  ShardingPlan after = before;
  after.tables[0].shards[0].rank = 1;
  after.tables[1].shards[0].rank = 0;
  const std::vector<RowTransfer> moves = row_transfers(before, after);
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_EQ(moves[0].rows, 1000);
  EXPECT_EQ(moves[1].from, 2);
  EXPECT_EQ(row_floats(s, 0).total(), 17);
  const ReshardCounts r0 = reshard_counts(s, moves, 0, 4), r1 = reshard_counts(s, moves, 1, 4),
                      r2 = reshard_counts(s, moves, 2, 4), r3 = reshard_counts(s, moves, 3, 4);
  EXPECT_EQ(r0.send, (std::vector<int64_t>{0, 17000, 0, 0}));
  EXPECT_EQ(r0.recv, (std::vector<int64_t>{0, 0, 50, 0}));  // 10 x 4 + 10
  EXPECT_EQ(r1.recv, (std::vector<int64_t>{17000, 0, 0, 0}));
  EXPECT_EQ(r2.send, (std::vector<int64_t>{50, 0, 0, 0}));
  EXPECT_EQ(r3.send, (std::vector<int64_t>(4, 0)));
  EXPECT_EQ(r3.recv, (std::vector<int64_t>(4, 0)));
  s.optimizer.type = OptimizerType::adam;
  EXPECT_EQ(move_floats(s, 1).total(), 40 + 40 + 40);  // two moments of rows x dim
  s.optimizer.type = OptimizerType::sgd;
  EXPECT_EQ(move_floats(s, 1).total(), 40);
}

// A hot table of 10 rows on rank 1 split row_wise over 4 ranks (TorchRec's {3, 3, 3, 1} rows): one block per
// new shard, the one for rank 1 a local copy; an unchanged table moves nothing.
TEST(Reshard, TableWiseToRowWiseIsOneBlockPerRank) {
  WorkloadSpec s;
  s.tables = {{"hot", 10, 4, Pooling::sum, {"f0"}}, {"cold", 6, 4, Pooling::sum, {"f1"}}};
  s.optimizer.type = OptimizerType::rowwise_adagrad;  // 4 + 1 floats a row
  ShardingPlan before;
  before.world_size = 4;
  before.tables = {{0, ShardingType::table_wise, -1, {{1, 0, 10, 0, 4}}}, {1, ShardingType::table_wise, -1, {{3, 0, 6, 0, 4}}}};
  ShardingPlan after = before;
  after.tables[0] = row_wise_table_plan(s, 0, 4);
  ASSERT_EQ(after.tables[0].shards.size(), 4u);
  EXPECT_EQ(after.tables[0].shards[2].row_offset, 6);
  EXPECT_EQ(after.tables[0].shards[2].num_rows, 3);
  const std::vector<RowTransfer> x = row_transfers(before, after);
  ASSERT_EQ(x.size(), 4u);
  const int64_t first[4] = {0, 3, 6, 9}, rows[4] = {3, 3, 3, 1};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(x[r].table, 0);
    EXPECT_EQ(x[r].from, 1);
    EXPECT_EQ(x[r].to, r);
    EXPECT_EQ(x[r].from_shard, 0);
    EXPECT_EQ(x[r].to_shard, r);
    EXPECT_EQ(x[r].from_row, first[r]);  // local to the whole table
    EXPECT_EQ(x[r].to_row, 0);
    EXPECT_EQ(x[r].rows, rows[r]);
  }
  EXPECT_EQ(reshard_counts(s, x, 1, 4).send, (std::vector<int64_t>{15, 0, 15, 5}));  // 5 floats a row; nothing to itself
  EXPECT_EQ(reshard_counts(s, x, 1, 4).recv, (std::vector<int64_t>(4, 0)));
  EXPECT_EQ(reshard_counts(s, x, 2, 4).recv, (std::vector<int64_t>{0, 15, 0, 0}));
  EXPECT_EQ(row_wise_change_bytes(s, 0, 1, 4), 7 * (16 + 4));  // 3 + 3 + 1 rows leave rank 1
  // back from row_wise to table_wise on rank 1: the blocks of each old shard
  const std::vector<RowTransfer> back = row_transfers(after, before);
  ASSERT_EQ(back.size(), 4u);
  EXPECT_EQ(back[2].from, 2);
  EXPECT_EQ(back[2].to_row, 6);
  EXPECT_EQ(back[2].from_row, 0);
  ShardingPlan twrw = before;
  twrw.tables[1].type = ShardingType::table_row_wise;
  EXPECT_THROW(row_transfers(before, twrw), std::invalid_argument);
  ShardingPlan three = before;
  three.world_size = 3;
  EXPECT_THROW(row_transfers(before, three), std::invalid_argument);
}

TEST(Reshard, PredictedIdsOfRowShardsFollowTheirRows) {
  WorkloadSpec s;
  s.tables = {{"hot", 10, 4, Pooling::sum, {"f0"}}};
  const TablePlan tp = row_wise_table_plan(s, 0, 4);
  // shards of TorchRec's {3, 3, 3, 1} rows
  EXPECT_EQ(row_wise_predicted_ids(10, tp), (std::vector<int64_t>{3, 3, 3, 1}));
  EXPECT_EQ(row_wise_predicted_ids(7, tp), (std::vector<int64_t>{3, 2, 2, 0}));  // floors of 2.1, 2.1, 2.1, 0.7: {2, 2, 2, 0}, one left
  EXPECT_EQ(row_wise_predicted_ids(0, tp), (std::vector<int64_t>(4, 0)));
  TablePlan empty = tp;
  for (auto& sd : empty.shards) sd.num_rows = 0;
  EXPECT_THROW(row_wise_predicted_ids(5, empty), std::invalid_argument);
  s.optimizer.type = OptimizerType::adam;
  EXPECT_EQ(row_move_bytes(s, 0), 16 + 2 * 16);
}

TEST(Reshard, UnsupportedConfigurationsNameTheField) {
  WorkloadSpec s;
  s.tables = {{"t0", 10, 4, Pooling::sum, {"f0"}}};
  EXPECT_EQ(live_rebalance_unsupported(s, "cuda"), "");  // off: nothing to refuse
  s.rebalance = every(2);
  EXPECT_EQ(live_rebalance_unsupported(s, "cpu"), "");
  EXPECT_NE(live_rebalance_unsupported(s, "cuda").find("/devices/backend"), std::string::npos);
  for (PipelineKind p : {PipelineKind::sparse_dist, PipelineKind::semi_sync}) {  // the batches ahead are sent again
    s.pipeline = p;
    EXPECT_EQ(live_rebalance_unsupported(s, "cpu"), "") << to_string(p);
  }
  s.pipeline = PipelineKind::base;
  s.tables[0].data_type = TableDataType::fp16;
  EXPECT_EQ(live_rebalance_unsupported(s, "cpu").rfind("/tables/0/data_type", 0), 0u);
  s.tables[0].data_type = TableDataType::fp32;
  s.tables[0].low_rank_dim = 2;  // weights are A (rows x 2) and B: not rows of the table
  EXPECT_EQ(live_rebalance_unsupported(s, "cpu"),
            "/tables/0/low_rank_dim: live rebalancing moves full rows, not factorized tables (A x B) (table \"t0\"): "
            "drop low_rank_dim or the rebalance policy");
}

TEST(Reshard, MergeTakesTheSlowestRankAndObservesTheNextWindow) {
  embedscope::sessions::RebalanceRecord a;
  a.step = 3;
  a.window_steps = 2;
  a.moves = 1;
  a.start_ns = 100;
  a.duration_ns = 50;
  embedscope::sessions::RebalanceRecord b = a;
  b.start_ns = 90;
  b.duration_ns = 70;
  const std::vector<std::vector<int64_t>> ids = {{5, 5, 5, 5, 5, 5}, {1, 1, 1, 1, 3, 3}};
  auto out = merge_rebalances({{a}, {b}}, ids);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].start_ns, 90);
  EXPECT_EQ(out[0].duration_ns, 70);
  EXPECT_EQ(out[0].after_steps, 2);
  EXPECT_DOUBLE_EQ(out[0].imbalance_after, 10.0 / 8.0);
  // a second rebalance after step 4 cuts the first's window to step 4 (ids {6, 2}); the second
  // sees step 5 only ({5, 3})
  embedscope::sessions::RebalanceRecord c = a;
  c.step = 4;
  auto two = merge_rebalances({{a, c}}, {{5, 5, 5, 5, 6, 5}, {1, 1, 1, 1, 2, 3}});
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].after_steps, 1);
  EXPECT_DOUBLE_EQ(two[0].imbalance_after, 6.0 / 4.0);
  EXPECT_EQ(two[1].after_steps, 1);
  EXPECT_DOUBLE_EQ(two[1].imbalance_after, 5.0 / 4.0);
  c.step = 5;  // nothing follows the last step
  EXPECT_DOUBLE_EQ(merge_rebalances({{c}}, ids)[0].imbalance_after, -1.0);
  EXPECT_EQ(merge_rebalances({{c}}, ids)[0].after_steps, 0);
  EXPECT_THROW(merge_rebalances({{a}, {}}, ids), std::invalid_argument);
}

// What a move holds besides the old shards while it runs: the new shards, the bytes sent and
// received. The two moves of CountsOfTheAllToAllOfRows (rowwise_adagrad, 17 floats a row of t0,
// 5 of t1): t0 (1000 rows) 0 -> 1 and t1 (10 rows) 2 -> 0; then the 10-row table split row_wise
// over 4 ranks ({3, 3, 2, 2} rows of 5 floats), whose block for rank 1 is a local copy.
TEST(Reshard, MoveTransientBytesAreTheNewShardsAndBothBuffers) {
  WorkloadSpec s;
  s.tables = {{"t0", 1000, 16, Pooling::sum, {"f0"}}, {"t1", 10, 4, Pooling::sum, {"f1"}}};
  s.optimizer.type = OptimizerType::rowwise_adagrad;
  ShardingPlan before;
  before.world_size = 4;
  before.tables = {{0, ShardingType::table_wise, -1, {{0, 0, 1000, 0, 16}}}, {1, ShardingType::table_wise, -1, {{2, 0, 10, 0, 4}}}};
  ShardingPlan after = before;
  after.tables[0].shards[0].rank = 1;
  after.tables[1].shards[0].rank = 0;
  const std::vector<MoveBytes> m = move_transient_bytes(s, before, after);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].new_shards, 200);  // t1: 10 x 5 x 4
  EXPECT_EQ(m[0].send, 68000);      // t0: 1000 x 17 x 4
  EXPECT_EQ(m[0].recv, 200);
  EXPECT_EQ(m[1].new_shards, 68000);
  EXPECT_EQ(m[1].send, 0);
  EXPECT_EQ(m[1].recv, 68000);
  EXPECT_EQ(m[1].total(), 136000);
  EXPECT_EQ(m[2].total(), 200);  // sends t1
  EXPECT_EQ(m[3].total(), 0);
  EXPECT_EQ(move_transient_bytes(s, before, before)[0].total(), 0);  // nothing changes, nothing held
  ShardingPlan split = before;
  split.tables[1] = {1, ShardingType::row_wise, -1, {{0, 0, 3, 0, 4}, {1, 3, 3, 0, 4}, {2, 6, 2, 0, 4}, {3, 8, 2, 0, 4}}};
  const std::vector<MoveBytes> r = move_transient_bytes(s, before, split);
  EXPECT_EQ(r[0].new_shards, 60);  // 3 rows x 5 x 4
  EXPECT_EQ(r[0].recv, 60);
  EXPECT_EQ(r[2].new_shards, 40);  // the local block: a new shard, nothing on the wire
  EXPECT_EQ(r[2].send, 60 + 60 + 40);  // to ranks 0, 1 (3 rows each) and 3 (2 rows)
  EXPECT_EQ(r[2].recv, 0);
}

// The outcome of a move that a failing rank left unfinished: the ranks grouped by the phase they
// reached, in rank order ("" is a rank that had finished its part).
TEST(Reshard, FailedMoveOutcomeNamesEachRanksPhase) {
  EXPECT_EQ(failed_move_outcome({{2, "allocating the new shards"}, {0, "in the reshard all-to-all"}, {3, ""},
                                 {1, "in the reshard all-to-all"}}),
            "failed: the run ended during the move (ranks 0, 1: in the reshard all-to-all; rank 2: allocating the new "
            "shards; rank 3: done); no shard of it is kept: the tables stay where they were before it");
  EXPECT_EQ(failed_move_outcome({{0, "in the reshard all-to-all"}}),
            "failed: the run ended during the move (rank 0: in the reshard all-to-all); no shard of it is kept: the "
            "tables stay where they were before it");
  EXPECT_THROW(failed_move_outcome({}), std::invalid_argument);
}
