// Moves that do not pay (issue 17, rebalance/policy.h propose, kPruneTolerance): after the
// candidate is chosen, its whole-table moves are undone largest bytes first where the predicted
// maximum rank load with the table back stays within the chosen maximum x 1.02. Hand-computed
// proposals (what the policy moved before this rule, and what it moves now), the tolerance's
// edge, and a live run that makes the pruned proposal and still equals the unsharded reference.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "embedscope/engine/rebalance/policy.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"
#include "engine/parity_check.h"
#include "engine/rebalance/policy_fixtures.h"

using namespace embedscope::engine;
using namespace embedscope::engine::rebalance;
using nlohmann::json;
using embedscope::test_support::first_shard_ranks;
using embedscope::test_support::table_load;

namespace {

struct PruneTable {
  std::string name;
  int64_t rows;
  int64_t dim;
  int rank;
};

/// Table-wise tables on the given ranks (one feature each), `world` ranks of 1 GiB, sgd unless
/// `optimizer` says otherwise.
WorkloadSpec prune_spec(int world, const std::vector<PruneTable>& tables, const std::string& optimizer = "sgd") {
  json j = {{"name", "rebalance_prune"},
            {"batch_size", 8},
            {"steps", 4},
            {"devices", {{"count", world}, {"memory_bytes", int64_t{1} << 30}}},
            {"optimizer", {{"type", optimizer}}},
            {"dense", nullptr},
            {"tables", json::array()},
            {"sharding", {{"default", "table_wise"}, {"tables", json::object()}}}};
  for (const PruneTable& t : tables) {
    j["tables"].push_back({{"name", t.name}, {"num_embeddings", t.rows}, {"embedding_dim", t.dim}, {"feature_names", {"f_" + t.name}}});
    j["sharding"]["tables"][t.name] = {{"type", "table_wise"}, {"ranks", {t.rank}}};
  }
  return parse_workload(j, "rebalance_prune");
}

}  // namespace

TEST(PruneMoves, ColdTablesThatChangeNoMaximumStay) {
  // 3 ranks. hot (300 ids), warm_a (200), warm_b (150) on rank 0, 1,000 rows x 16 fp32 each
  // (64,000 bytes with sgd); cold_a, cold_b (10 ids each) on rank 1, 500,000 rows x 16 fp32
  // (32,000,000 bytes each). Loads {650, 20, 0}: mean 670 / 3, imbalance 1950 / 670.
  const WorkloadSpec s = prune_spec(3, {{"hot", 1000, 16, 0}, {"warm_a", 1000, 16, 0}, {"warm_b", 1000, 16, 0},
                                        {"cold_a", 500000, 16, 1}, {"cold_b", 500000, 16, 1}});
  const ShardingPlan cur = plan_sharding(s);
  ASSERT_EQ(first_shard_ranks(cur), (std::vector<int>{0, 0, 0, 1, 1}));
  const ObservedLoad load = table_load({300, 200, 150, 10, 10});
  const Proposal p = propose(s, cur, load, 0);
  EXPECT_EQ(p.load_before, (std::vector<int64_t>{650, 20, 0}));
  EXPECT_DOUBLE_EQ(p.imbalance_before, 1950.0 / 670.0);
  // Before the rule (the policy of branch rebalance4): LPT places hot (stays: every rank empty),
  // warm_a -> rank 1, warm_b -> rank 2, then cold_a -> rank 2 (150 < 200 < 300) and cold_b ->
  // rank 2 (160): {300, 200, 170}, 4 moves, 2 x 64,000 + 2 x 32,000,000 = 64,128,000 bytes.
  // Descent reaches the same maximum 300 with 4 moves of the same bytes (hot -> 1, warm_a -> 2,
  // cold_a -> 0, cold_b -> 0), so LPT won the tie. Now: cold_a back to rank 1 gives {300, 210,
  // 160}, cold_b back {300, 220, 150}: the maximum stays 300, so both stay where they were;
  // warm_a back would give {500, 20, 150}, warm_b back {450, 220, 0}: both needed.
  EXPECT_EQ(first_shard_ranks(p.plan), (std::vector<int>{0, 1, 2, 1, 1}));
  ASSERT_EQ(p.moves.size(), 2u);
  EXPECT_EQ(p.moves[0].table, 1);
  EXPECT_EQ(p.moves[0].from, 0);
  EXPECT_EQ(p.moves[0].to, 1);
  EXPECT_EQ(p.moves[0].bytes, 64000);
  EXPECT_EQ(p.moves[1].table, 2);
  EXPECT_EQ(p.moves[1].to, 2);
  EXPECT_EQ(p.bytes_moved, 128000);
  EXPECT_EQ(p.load_after, (std::vector<int64_t>{300, 220, 150}));
  // the same predicted maximum, so the same max/mean as before the rule: 300 x 3 / 670
  EXPECT_DOUBLE_EQ(p.imbalance_after, 900.0 / 670.0);
  EXPECT_TRUE(p.worth_it());
  EXPECT_TRUE(p.refused.empty());
  EXPECT_EQ(load_per_rank(p.plan, load), p.load_after);
}

TEST(PruneMoves, AGainWithinTwoPercentOfTheMaximumIsNotWorthItsBytes) {
  // 2 ranks: a (100 ids) and cold (1,000,000 rows x 16 fp32, 64,000,000 bytes) on rank 0, b on
  // rank 1. Both searches move cold to rank 1, the only move that lowers the maximum.
  const WorkloadSpec s = prune_spec(2, {{"a", 1000, 16, 0}, {"cold", 1000000, 16, 0}, {"b", 1000, 16, 1}});
  const ShardingPlan cur = plan_sharding(s);
  // cold 2 ids, b 99: {102, 99} -> {100, 101}; back {102, 99}: 102 <= 101 + floor(101 x 0.02) =
  // 103, so it is undone (a gain of 1 of 102): no move, not worth it
  const Proposal small = propose(s, cur, table_load({100, 2, 99}), 0);
  EXPECT_TRUE(small.moves.empty());
  EXPECT_EQ(small.bytes_moved, 0);
  EXPECT_EQ(small.load_after, (std::vector<int64_t>{102, 99}));
  EXPECT_FALSE(small.worth_it());
  EXPECT_EQ(first_shard_ranks(small.plan), first_shard_ranks(cur));
  // cold 5 ids, b 90: {105, 90} -> {100, 95}; back 105 > 100 + 2: kept. Then the exchange of
  // the two ranks' tables (policy.h, "Exchanges that do not pay"): a -> 1, b -> 0, cold home:
  // {95, 100}, the same maximum for 2 x 64,000 bytes instead of 64,000,000 - taken.
  const Proposal big = propose(s, cur, table_load({100, 5, 90}), 0);
  ASSERT_EQ(big.moves.size(), 2u);
  EXPECT_EQ(big.moves[0].table, 0);
  EXPECT_EQ(big.moves[0].to, 1);
  EXPECT_EQ(big.moves[1].table, 2);
  EXPECT_EQ(big.moves[1].to, 0);
  EXPECT_EQ(big.bytes_moved, 128000);
  EXPECT_EQ(big.load_after, (std::vector<int64_t>{95, 100}));
  EXPECT_TRUE(big.worth_it());
}

TEST(PruneMoves, HotTableSplitWithoutTheColdTablesMoves) {
  // hot_table_straggler's hot-table variant at 1/32 of its ids (the window of one step of 32
  // samples): 4 ranks, rowwise_adagrad, 32 columns; cold_0..2 (500,000 rows, 1 id a sample: 32)
  // on ranks 0..2, hot_0 (20,000 rows, 128 a sample: 4096) and hot_1..3 (20,000 rows, 32 a
  // sample: 1024) on rank 3. Loads {32, 32, 32, 7168}: imbalance 7168 x 4 / 7264.
  WorkloadSpec s = prune_spec(4, {{"cold_0", 500000, 32, 0}, {"cold_1", 500000, 32, 1}, {"cold_2", 500000, 32, 2},
                                  {"hot_0", 20000, 32, 3}, {"hot_1", 20000, 32, 3}, {"hot_2", 20000, 32, 3},
                                  {"hot_3", 20000, 32, 3}},
                              "rowwise_adagrad");
  s.rebalance.row_wise_hot_tables = true;
  const ShardingPlan cur = plan_sharding(s);
  const ObservedLoad load = table_load({32, 32, 32, 4096, 1024, 1024, 1024});
  const Proposal p = propose(s, cur, load, 0);
  EXPECT_DOUBLE_EQ(p.imbalance_before, 7168.0 * 4 / 7264);
  // hot_0 alone (4096 > mean 1816) goes row_wise: 1024 ids a rank, {1056, 1056, 1056, 4096}.
  // Before the rule LPT then placed hot_1 on rank 3 (a tie stays), hot_2 -> 0, hot_3 -> 1 and
  // the cold tables cold_0 -> 2 and cold_1 -> 2 (each 500,000 x (128 + 4) = 66,000,000 bytes):
  // {2048, 2048, 1120, 2048}, 2 x 66,000,000 + 2 x 2,640,000 + 1,980,000 = 139,260,000 bytes
  // (the 132.8 MiB of the live run). Now: cold_0 back gives {2080, 2048, 1088, 2048}, cold_1
  // back {2080, 2080, 1056, 2048}: within 2048 + floor(2048 x 0.02) = 2088, undone.
  EXPECT_EQ(first_shard_ranks(p.plan), (std::vector<int>{0, 1, 2, 0, 3, 0, 1}));  // hot_0's row shard 0 on rank 0
  ASSERT_EQ(p.changes.size(), 1u);
  EXPECT_EQ(p.changes[0].table, 3);
  EXPECT_EQ(p.changes[0].to_type, ShardingType::row_wise);
  EXPECT_EQ(p.changes[0].bytes, 3 * 5000 * 132);
  ASSERT_EQ(p.moves.size(), 2u);
  EXPECT_EQ(p.moves[0].table, 5);
  EXPECT_EQ(p.moves[0].to, 0);
  EXPECT_EQ(p.moves[1].table, 6);
  EXPECT_EQ(p.moves[1].to, 1);
  EXPECT_EQ(p.moves[1].bytes, 20000 * 132);
  EXPECT_EQ(p.bytes_moved, 2 * 2640000 + 1980000);
  EXPECT_EQ(p.load_after, (std::vector<int64_t>{2080, 2080, 1056, 2048}));
  EXPECT_DOUBLE_EQ(p.imbalance_after, 2080.0 * 4 / 7264);  // 1.145, was 2048 x 4 / 7264 = 1.128
  EXPECT_TRUE(p.worth_it());
}

TEST(PruneMovesLive, ThePrunedProposalTrainsLikeTheReference) {
  // The first test's tables on 3 live ranks: fixed pooling factors 30, 20, 15, 1, 1 at batch 5
  // give 150, 100, 75, 5, 5 ids a step, in the ratio 300 : 200 : 150 : 10 : 10. One rebalance
  // after step 1 (every 2 steps, then the cool-down): warm_a -> 1, warm_b -> 2; the cold tables
  // (which the policy moved to rank 2 before the rule) stay on rank 1.
  WorkloadSpec s = parity_spec(ShardingType::table_wise, 3, Pooling::sum, OptimizerType::rowwise_adagrad);
  s.tables = {{"hot", 12, 4, Pooling::sum, {"f_hot"}},
              {"warm_a", 10, 4, Pooling::sum, {"f_warm_a"}},
              {"warm_b", 9, 4, Pooling::sum, {"f_warm_b"}},
              {"cold_a", 400, 8, Pooling::sum, {"f_cold_a"}},
              {"cold_b", 300, 8, Pooling::sum, {"f_cold_b"}}};
  s.features.clear();
  for (const auto& [name, pf] : std::vector<std::pair<std::string, int>>{
           {"f_hot", 30}, {"f_warm_a", 20}, {"f_warm_b", 15}, {"f_cold_a", 1}, {"f_cold_b", 1}}) {
    FeatureSpec f;
    f.name = name;
    f.pooling_factor = {true, static_cast<double>(pf), pf};
    s.features.push_back(f);
  }
  for (const char* t : {"hot", "warm_a", "warm_b"}) s.sharding.per_table[t] = {ShardingType::table_wise, {0}, -1};
  for (const char* t : {"cold_a", "cold_b"}) s.sharding.per_table[t] = {ShardingType::table_wise, {1}, -1};
  s.steps = 5;
  s.rebalance.trigger = RebalanceTrigger::every;
  s.rebalance.every = 2;
  s.rebalance.cooldown_steps = 10;
  const RunResult run = check_parity(s);
  ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
  ASSERT_EQ(run.rebalances.size(), 1u);
  EXPECT_EQ(run.rebalances[0].step, 1);
  EXPECT_EQ(run.rebalances[0].moves, 2);
  // warm_a: 10 x 4 fp32 + 10 accumulators = 200 bytes; warm_b: 9 x 16 + 9 x 4 = 180
  EXPECT_EQ(run.rebalances[0].bytes_moved, 200 + 180);
  EXPECT_NEAR(run.rebalances[0].imbalance_before, 1950.0 / 670.0, 1e-12);
  EXPECT_NEAR(run.rebalances[0].imbalance_predicted, 900.0 / 670.0, 1e-12);
  ASSERT_EQ(run.plan_changes.size(), 2u);
  EXPECT_EQ(run.plan_changes[0].table_name, "warm_a");
  EXPECT_EQ(run.plan_changes[0].to_rank, 1);
  EXPECT_EQ(run.plan_changes[1].table_name, "warm_b");
  EXPECT_EQ(run.plan_changes[1].to_rank, 2);
  EXPECT_EQ(first_shard_ranks(run.final_plan), (std::vector<int>{0, 1, 2, 1, 1}));
}
