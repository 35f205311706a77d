// The rebalancing policy (issue 17, engine/rebalance/policy.h) against hand-computed numbers:
// imbalance, bytes of a move, LPT and descent proposals, refusals for memory and for the
// per-move byte budget, the loads of shards that cannot move, and the trigger.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/rebalance/policy.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"
#include "engine/rebalance/policy_fixtures.h"

using namespace embedscope::engine;
using namespace embedscope::engine::rebalance;
using nlohmann::json;
using embedscope::test_support::first_shard_ranks;
using embedscope::test_support::table_load;

namespace {

/// `ranks[t]` is the rank of table t (table_wise, rows x dim fp32 each, one feature each),
/// rows[t] its rows; optimizer sgd.
WorkloadSpec tables_on(int world, const std::vector<int>& ranks, const std::vector<int64_t>& rows, int64_t dim = 16,
                       const std::string& optimizer = "sgd") {
  json j = {{"name", "rebalance_policy"},
            {"batch_size", 8},
            {"steps", 4},
            {"devices", {{"count", world}, {"memory_bytes", int64_t{1} << 30}}},
            {"optimizer", {{"type", optimizer}}},
            {"dense", nullptr},
            {"tables", json::array()},
            {"sharding", {{"default", "table_wise"}, {"tables", json::object()}}}};
  for (size_t t = 0; t < ranks.size(); ++t) {
    const std::string n = "t" + std::to_string(t);
    j["tables"].push_back({{"name", n}, {"num_embeddings", rows[t]}, {"embedding_dim", dim}, {"feature_names", {"f" + std::to_string(t)}}});
    if (ranks[t] >= 0) j["sharding"]["tables"][n] = {{"type", "table_wise"}, {"ranks", {ranks[t]}}};
  }
  return parse_workload(j, "rebalance_policy");
}

}  // namespace

TEST(RebalancePolicy, ImbalanceIsMaxOverMean) {
  EXPECT_DOUBLE_EQ(imbalance({30, 10, 10, 10}), 2.0);
  EXPECT_DOUBLE_EQ(imbalance({5, 5}), 1.0);
  EXPECT_DOUBLE_EQ(imbalance({0, 0, 0}), 1.0);
  EXPECT_DOUBLE_EQ(imbalance({}), 1.0);
  EXPECT_DOUBLE_EQ(imbalance({12, 0, 0}), 3.0);  // one rank does everything: the rank count
}

TEST(RebalancePolicy, MoveBytesAreWeightsPlusOptimizerState) {
  // 1000 rows x 16 fp32 = 64000 bytes of weights
  EXPECT_EQ(table_wise_move_bytes(tables_on(2, {0}, {1000}, 16, "sgd"), 0), 64000);
  EXPECT_EQ(table_wise_move_bytes(tables_on(2, {0}, {1000}, 16, "rowwise_adagrad"), 0), 64000 + 1000 * 4);
  EXPECT_EQ(table_wise_move_bytes(tables_on(2, {0}, {1000}, 16, "adam"), 0), 64000 + 2 * 64000);
  WorkloadSpec s = tables_on(2, {0}, {1000}, 16);
  s.tables[0].data_type = TableDataType::fp16;
  EXPECT_EQ(table_wise_move_bytes(s, 0), 1000 * 32);
  s.tables[0].data_type = TableDataType::int8;  // a byte a value and 8 bytes a row (scale, bias)
  EXPECT_EQ(table_wise_move_bytes(s, 0), 1000 * (16 + 8));
  s.tables[0].data_type = TableDataType::fp32;
  s.tables[0].hash_size = 250;  // the table stores hash_size rows
  EXPECT_EQ(table_wise_move_bytes(s, 0), 250 * 64);
}

TEST(RebalancePolicy, OneStragglerIsCuredByOneMove) {
  // t0 (400 ids) and t1 (300) on rank 0, two tables of 50 on each of ranks 1..3
  const WorkloadSpec s = tables_on(4, {0, 0, 1, 1, 2, 2, 3, 3}, std::vector<int64_t>(8, 1000));
  const ShardingPlan cur = plan_sharding(s);
  ASSERT_EQ(first_shard_ranks(cur), (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
  const ObservedLoad load = table_load({400, 300, 50, 50, 50, 50, 50, 50});
  const Proposal p = propose(s, cur, load, 0);
  EXPECT_EQ(p.load_before, (std::vector<int64_t>{700, 100, 100, 100}));
  EXPECT_DOUBLE_EQ(p.imbalance_before, 2.8);  // 700 / 250
  // LPT ends at {400,300,150,150} with 5 moves, descent at {400,400,100,100} with one: the same
  // maximum, fewer bytes
  ASSERT_EQ(p.moves.size(), 1u);
  EXPECT_EQ(p.moves[0].table, 1);
  EXPECT_EQ(p.moves[0].from, 0);
  EXPECT_EQ(p.moves[0].to, 1);
  EXPECT_EQ(p.moves[0].ids, 300);
  EXPECT_EQ(p.moves[0].bytes, 64000);
  EXPECT_EQ(p.bytes_moved, 64000);
  EXPECT_EQ(p.load_after, (std::vector<int64_t>{400, 400, 100, 100}));
  EXPECT_DOUBLE_EQ(p.imbalance_after, 1.6);  // 400 / 250
  EXPECT_TRUE(p.worth_it());
  EXPECT_TRUE(p.refused.empty());
  EXPECT_EQ(first_shard_ranks(p.plan), (std::vector<int>{0, 1, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(load_per_rank(p.plan, load), p.load_after);
}

TEST(RebalancePolicy, LptWinsWhereNoSingleMoveHelps) {
  // rank 0: 5 + 5, rank 1: 4 + 4; no single move lowers the maximum 10 (5 -> rank 1 gives 13),
  // LPT places 5, 5, 4, 4 as {5+4, 5+4}
  const WorkloadSpec s = tables_on(2, {0, 0, 1, 1}, std::vector<int64_t>(4, 1000));
  const Proposal p = propose(s, plan_sharding(s), table_load({5, 5, 4, 4}), 0);
  EXPECT_NEAR(p.imbalance_before, 10.0 / 9.0, 1e-12);
  EXPECT_EQ(p.load_after, (std::vector<int64_t>{9, 9}));
  EXPECT_DOUBLE_EQ(p.imbalance_after, 1.0);
  // t0 stays (every rank empty, ties stay); t1 -> rank 1; t2 stays on rank 1 (5 = 5, stays);
  // t3 -> rank 0 (5 < 10)
  EXPECT_EQ(first_shard_ranks(p.plan), (std::vector<int>{0, 1, 1, 0}));
  ASSERT_EQ(p.moves.size(), 2u);
  EXPECT_EQ(p.moves[0].table, 1);
  EXPECT_EQ(p.moves[1].table, 3);
  EXPECT_EQ(p.bytes_moved, 2 * 64000);
}

TEST(RebalancePolicy, BalancedLoadProposesNothing) {
  const WorkloadSpec s = tables_on(2, {0, 1}, {1000, 1000});
  const Proposal p = propose(s, plan_sharding(s), table_load({70, 70}), 0);
  EXPECT_TRUE(p.moves.empty());
  EXPECT_FALSE(p.worth_it());
  EXPECT_DOUBLE_EQ(p.imbalance_after, 1.0);
}

TEST(RebalancePolicy, AMoveBeyondTheByteBudgetIsRefusedAndExplained) {
  const WorkloadSpec s = tables_on(4, {0, 0, 1, 1, 2, 2, 3, 3}, std::vector<int64_t>(8, 1000));
  const ShardingPlan cur = plan_sharding(s);
  const Proposal p = propose(s, cur, table_load({400, 300, 50, 50, 50, 50, 50, 50}), 50000);  // < 64000
  EXPECT_TRUE(p.moves.empty());
  EXPECT_FALSE(p.worth_it());
  EXPECT_EQ(p.load_after, p.load_before);
  EXPECT_EQ(first_shard_ranks(p.plan), first_shard_ranks(cur));
  ASSERT_FALSE(p.refused.empty());
  // LPT (the tie goes to it): t0 stays, t1's first choice is rank 1
  EXPECT_EQ(p.refused[0].table, 1);
  EXPECT_EQ(p.refused[0].to, 1);
  EXPECT_EQ(p.refused[0].bytes, 64000);
  EXPECT_EQ(p.refused[0].reason, "table \"t1\" (62.5 KiB) from rank 0 to rank 1: exceeds max_bytes_per_move: 0 B "
                                 "already moved + 62.5 KiB > 48.8 KiB");
  // a budget of one table: the one move of the descent
  const Proposal one = propose(s, cur, table_load({400, 300, 50, 50, 50, 50, 50, 50}), 64000);
  ASSERT_EQ(one.moves.size(), 1u);
  EXPECT_EQ(one.bytes_moved, 64000);
  EXPECT_DOUBLE_EQ(one.imbalance_after, 1.6);
}

TEST(RebalancePolicy, AMoveThatWouldExceedADevicesMemoryIsRefusedAndExplained) {
  // rank 0: t0, t1 (1 MiB each: 16384 x 16 fp32, 300 ids each); rank 1: t2 (3 MiB, no ids).
  // Memory: rank 1's estimate and 0.5 MiB, so rank 1 cannot take another MiB.
  WorkloadSpec s = tables_on(2, {0, 0, 1}, {16384, 16384, 49152});
  const ShardingPlan cur = plan_sharding(s);
  const auto est = estimate_memory(s, cur);
  ASSERT_EQ(est[1].weights, int64_t{3} << 20);
  s.devices.memory_bytes = est[1].total() + (int64_t{1} << 19);
  const Proposal p = propose(s, cur, table_load({300, 300, 0}), 0);
  EXPECT_TRUE(p.moves.empty());
  EXPECT_FALSE(p.worth_it());
  EXPECT_DOUBLE_EQ(p.imbalance_before, 2.0);
  // both searches end at the current plan (maximum 600, nothing moved): LPT's is kept, where t0
  // stays (every rank empty: a tie stays) and t1's move to rank 1 (300 < 600) is refused
  ASSERT_EQ(p.refused.size(), 1u);
  EXPECT_EQ(p.refused[0].table, 1);
  for (const RefusedMove& r : p.refused) {
    EXPECT_EQ(r.from, 0);
    EXPECT_EQ(r.to, 1);
    EXPECT_EQ(r.bytes, int64_t{1} << 20);
    EXPECT_NE(r.reason.find("(1.0 MiB) from rank 0 to rank 1: rank 1 would need "), std::string::npos) << r.reason;
    // refused on the lower bound (memory_lower_bound: its estimate now + the new shard), without
    // the full estimate; the full one is over too
    EXPECT_NE(r.reason.find("rank 1 would need at least 4.0 MiB of 3.5 MiB (its estimate now 3.0 MiB + the table's "
                            "new shards 1.0 MiB)"), std::string::npos) << r.reason;
    EXPECT_EQ(r.cause, "memory");
  }
  ShardingPlan moved = cur;
  moved.tables[1].shards[0].rank = 1;
  EXPECT_GT(estimate_memory(s, moved)[1].total(), s.devices.memory_bytes);
  // with room for it, the same load moves one table
  s.devices.memory_bytes = int64_t{1} << 30;
  const Proposal ok = propose(s, cur, table_load({300, 300, 0}), 0);
  ASSERT_EQ(ok.moves.size(), 1u);
  EXPECT_EQ(ok.load_after, (std::vector<int64_t>{300, 300}));
}

// A move that fits once made but not while it runs: rank 1 holds t1's new shard (1 MiB) and the
// all-to-all's receive buffer (1 MiB) beside everything it held before, so with room for one
// more MiB only, the steady-state check passes and the move must still be refused.
TEST(RebalancePolicy, AMoveThatFitsAfterButNotDuringIsRefusedAndExplained) {
  WorkloadSpec s = tables_on(2, {0, 0, 1}, {16384, 16384, 49152});  // as above: 1, 1 and 3 MiB
  const ShardingPlan cur = plan_sharding(s);
  const auto est = estimate_memory(s, cur);
  const int64_t mib = int64_t{1} << 20;
  s.devices.memory_bytes = est[1].total() + mib + mib / 2;  // after the move rank 1 needs est + 1 MiB
  ShardingPlan moved = cur;
  moved.tables[1].shards[0].rank = 1;
  for (const auto& e : estimate_memory(s, moved)) ASSERT_LE(e.total(), s.devices.memory_bytes) << e.rank;
  const Proposal p = propose(s, cur, table_load({300, 300, 0}), 0);
  EXPECT_TRUE(p.moves.empty());
  ASSERT_EQ(p.refused.size(), 1u);
  EXPECT_EQ(p.refused[0].table, 1);
  EXPECT_EQ(p.refused[0].to, 1);
  const std::string& why = p.refused[0].reason;
  EXPECT_NE(why.find("rank 1 would need " + format_bytes(est[1].total() + 2 * mib) + " of " +
                     format_bytes(s.devices.memory_bytes) + " during the move"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("its new shards 1.0 MiB, sent 0 B, received 1.0 MiB"), std::string::npos) << why;
  // a byte short: the rounded figures read the same, so the exact bytes are given
  const int64_t need = est[1].total() + 2 * mib;
  s.devices.memory_bytes = need - 1;
  const Proposal tight = propose(s, cur, table_load({300, 300, 0}), 0);
  ASSERT_EQ(tight.refused.size(), 1u);
  EXPECT_NE(tight.refused[0].reason.find(fmt::format("rank 1 would need {} ({} B) of {} ({} B) during the move",
                                                     format_bytes(need), need, format_bytes(need - 1), need - 1)),
            std::string::npos)
      << tight.refused[0].reason;
  // with the 2 MiB the move holds, it is made
  s.devices.memory_bytes = need;
  const Proposal ok = propose(s, cur, table_load({300, 300, 0}), 0);
  ASSERT_EQ(ok.moves.size(), 1u);
  EXPECT_EQ(ok.moves[0].to, 1);
}

TEST(RebalancePolicy, ShardsThatCannotMoveStayAsTheirRanksBaseLoad) {
  // t0 row_wise over 2 ranks (200 + 200 ids), t1 and t2 table_wise on rank 0 (100 ids each)
  json j = {{"name", "mixed"},
            {"batch_size", 8},
            {"devices", {{"count", 2}}},
            {"dense", nullptr},
            {"tables", {{{"name", "t0"}, {"num_embeddings", 1000}, {"embedding_dim", 8}, {"feature_names", {"f0"}}},
                        {{"name", "t1"}, {"num_embeddings", 1000}, {"embedding_dim", 8}, {"feature_names", {"f1"}}},
                        {{"name", "t2"}, {"num_embeddings", 1000}, {"embedding_dim", 8}, {"feature_names", {"f2"}}}}},
            {"sharding", {{"tables", {{"t0", {{"type", "row_wise"}}},
                                      {"t1", {{"type", "table_wise"}, {"ranks", {0}}}},
                                      {"t2", {{"type", "table_wise"}, {"ranks", {0}}}}}}}}};
  const WorkloadSpec s = parse_workload(j, "mixed");
  const ShardingPlan cur = plan_sharding(s);
  ASSERT_EQ(cur.tables[0].shards.size(), 2u);
  ObservedLoad load;
  load.ids = {{200, 200}, {100}, {100}};
  EXPECT_EQ(load_per_rank(cur, load), (std::vector<int64_t>{400, 200}));
  const Proposal p = propose(s, cur, load, 0);
  ASSERT_EQ(p.moves.size(), 1u);
  EXPECT_EQ(p.moves[0].to, 1);
  EXPECT_EQ(p.load_after, (std::vector<int64_t>{300, 300}));
  EXPECT_EQ(p.plan.tables[0].shards[0].rank, 0);  // the row_wise shards stay
  EXPECT_EQ(p.plan.tables[0].shards[1].rank, 1);
  ObservedLoad wrong;
  wrong.ids = {{400}, {100}, {100}};
  EXPECT_THROW(load_per_rank(cur, wrong), std::invalid_argument);
}

TEST(RebalancePolicy, EveryNStepsWithACooldown) {
  RebalanceSpec every;
  every.trigger = RebalanceTrigger::every;
  every.every = 5;
  const std::vector<std::vector<int64_t>> ids(12, std::vector<int64_t>{1, 1});
  EXPECT_FALSE(should_rebalance(every, 3, -1, ids));
  EXPECT_EQ(should_rebalance(every, 4, -1, ids).value_or(""), "every 5 steps");
  EXPECT_EQ(should_rebalance(every, 9, 4, ids).value_or(""), "every 5 steps");
  every.cooldown_steps = 5;  // 9 - 4 = 5 steps after the last: still cooling down
  EXPECT_FALSE(should_rebalance(every, 9, 4, ids));
  EXPECT_THROW(should_rebalance(every, 12, -1, ids), std::invalid_argument);  // 12 rows: steps 0..11
  RebalanceSpec off;
  EXPECT_FALSE(should_rebalance(off, 4, -1, ids));
}

TEST(RebalancePolicy, WhenTheImbalanceOverTheWindowExceedsTheThreshold) {
  RebalanceSpec when;
  when.trigger = RebalanceTrigger::when;
  when.imbalance_above = 1.4;
  when.window = 2;
  const std::vector<std::vector<int64_t>> ids = {{10, 10}, {30, 10}, {30, 10}, {10, 30}};
  EXPECT_FALSE(should_rebalance(when, 0, -1, ids));  // one step: less than a window
  EXPECT_FALSE(should_rebalance(when, 1, -1, ids));  // {40, 20}: 40 / 30 = 1.33
  EXPECT_EQ(should_rebalance(when, 2, -1, ids).value_or(""), "imbalance 1.50 > 1.40 over steps 1..2");  // {60, 20}
  EXPECT_FALSE(should_rebalance(when, 2, 1, ids));   // one step since the last rebalance
  EXPECT_FALSE(should_rebalance(when, 3, -1, ids));  // {40, 40}
  when.imbalance_above = 1.5;                        // strictly above
  EXPECT_FALSE(should_rebalance(when, 2, -1, ids));
}

TEST(RebalancePolicy, ATableTheSearchMovesTwiceIsMovedAndCountedOnce) {
  // six tables of 10 ids on rank 0 of 3; t4, t5 are 4x bigger. Descent: t0 -> 1, t1 -> 1,
  // t2 -> 1, t3 -> 2, then t0 on from rank 1 to rank 2: {20, 20, 20} with t0 net 0 -> 2.
  // LPT reaches {20, 20, 20} too but moves t4 and t5 (t1, t2, t4, t5): more bytes.
  const WorkloadSpec s = tables_on(3, {0, 0, 0, 0, 0, 0}, {1000, 1000, 1000, 1000, 4000, 4000});
  const Proposal p = propose(s, plan_sharding(s), table_load({10, 10, 10, 10, 10, 10}), 0);
  EXPECT_EQ(p.load_after, (std::vector<int64_t>{20, 20, 20}));
  EXPECT_EQ(first_shard_ranks(p.plan), (std::vector<int>{2, 1, 1, 2, 0, 0}));
  ASSERT_EQ(p.moves.size(), 4u);  // net, in table order
  const int to[] = {2, 1, 1, 2};
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(p.moves[k].table, static_cast<int>(k));
    EXPECT_EQ(p.moves[k].from, 0);
    EXPECT_EQ(p.moves[k].to, to[k]);
  }
  EXPECT_EQ(p.bytes_moved, 4 * 64000);  // not 5 hops
  // a budget of four small tables is enough: the second hop of t0 costs nothing more
  EXPECT_EQ(propose(s, plan_sharding(s), table_load({10, 10, 10, 10, 10, 10}), 4 * 64000).bytes_moved, 4 * 64000);
}
