// The policy's change of a hot table from table_wise to row_wise (issue 17,
// RebalanceSpec::row_wise_hot_tables, engine/rebalance/policy.h propose and type_change.h)
// against hand-computed loads and bytes: when the change wins, when moving whole tables wins,
// the byte budget refusing it, and the flag off.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "embedscope/engine/rebalance/policy.h"
#include "embedscope/engine/rebalance/type_change.h"
#include "embedscope/engine/workload/spec.h"

using namespace embedscope::engine;
using namespace embedscope::engine::rebalance;
using nlohmann::json;

namespace {

/// Table t (rows[t] x 16 fp32, sgd: 64 bytes a row) table_wise on rank ranks[t], the policy
/// allowed to change hot tables to row_wise.
WorkloadSpec hot_spec(int world, const std::vector<int>& ranks, const std::vector<int64_t>& rows) {
  json j = {{"name", "row_wise_change"},
            {"batch_size", 8},
            {"steps", 4},
            {"devices", {{"count", world}, {"memory_bytes", int64_t{1} << 30}}},
            {"optimizer", {{"type", "sgd"}}},
            {"dense", nullptr},
            {"tables", json::array()},
            {"sharding", {{"default", "table_wise"}, {"tables", json::object()}}},
            {"rebalance", {{"every", 2}, {"row_wise_hot_tables", true}}}};
  for (size_t t = 0; t < ranks.size(); ++t) {
    const std::string n = "t" + std::to_string(t);
    j["tables"].push_back({{"name", n}, {"num_embeddings", rows[t]}, {"embedding_dim", 16}, {"feature_names", {"f" + std::to_string(t)}}});
    j["sharding"]["tables"][n] = {{"type", "table_wise"}, {"ranks", {ranks[t]}}};
  }
  return parse_workload(j, "row_wise_change");
}

ObservedLoad rw_table_load(const std::vector<int64_t>& ids) {
  ObservedLoad l;
  for (int64_t v : ids) l.ids.push_back({v});
  return l;
}

}  // namespace

// 4 ranks; t0 (1000 rows, 800 ids) on rank 0, t1..t3 (100 rows; 100, 50, 50 ids) on ranks 1..3:
// loads {800, 100, 50, 50}, mean 250. No whole move helps (t0 alone is 800 anywhere). Row_wise,
// t0's 800 ids spread 200 a rank over its 250-row shards: {200, 300, 250, 250}, imbalance
// 300 / 250 = 1.2, and LPT / descent on t1..t3 find nothing better. Bytes: the 750 rows that
// leave rank 0, 64 each.
TEST(RowWiseChange, AHotTableAboveTheMeanIsSplitOverEveryRank) {
  const WorkloadSpec s = hot_spec(4, {0, 1, 2, 3}, {1000, 100, 100, 100});
  const ShardingPlan cur = plan_sharding(s);
  const Proposal p = propose(s, cur, rw_table_load({800, 100, 50, 50}), 0);
  ASSERT_TRUE(p.worth_it());
  EXPECT_TRUE(p.moves.empty());
  ASSERT_EQ(p.changes.size(), 1u);
  EXPECT_EQ(p.changes[0].table, 0);
  EXPECT_EQ(p.changes[0].from, 0);
  EXPECT_EQ(p.changes[0].from_type, ShardingType::table_wise);
  EXPECT_EQ(p.changes[0].to_type, ShardingType::row_wise);
  EXPECT_EQ(p.changes[0].ids, 800);
  EXPECT_EQ(p.changes[0].bytes, 750 * 64);
  EXPECT_EQ(p.bytes_moved, 48000);
  EXPECT_EQ(p.load_before, (std::vector<int64_t>{800, 100, 50, 50}));
  EXPECT_EQ(p.load_after, (std::vector<int64_t>{200, 300, 250, 250}));
  EXPECT_DOUBLE_EQ(p.imbalance_before, 3.2);
  EXPECT_DOUBLE_EQ(p.imbalance_after, 1.2);
  const TablePlan& t0 = p.plan.tables[0];
  EXPECT_EQ(t0.type, ShardingType::row_wise);
  ASSERT_EQ(t0.shards.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(t0.shards[static_cast<size_t>(r)].rank, r);
    EXPECT_EQ(t0.shards[static_cast<size_t>(r)].row_offset, 250 * r);
    EXPECT_EQ(t0.shards[static_cast<size_t>(r)].num_rows, 250);
    EXPECT_EQ(t0.shards[static_cast<size_t>(r)].num_cols, 16);
  }
  for (int t = 1; t < 4; ++t) EXPECT_EQ(p.plan.tables[static_cast<size_t>(t)].shards[0].rank, t);
}

// Without the flag only whole tables move: nothing helps, nothing is proposed.
TEST(RowWiseChange, OffByDefault) {
  WorkloadSpec s = hot_spec(4, {0, 1, 2, 3}, {1000, 100, 100, 100});
  s.rebalance.row_wise_hot_tables = false;
  const Proposal p = propose(s, plan_sharding(s), rw_table_load({800, 100, 50, 50}), 0);
  EXPECT_FALSE(p.worth_it());
  EXPECT_TRUE(p.changes.empty());
  EXPECT_TRUE(p.moves.empty());
}

// 2 ranks, t0 (600 ids) and t1 (400) on rank 0: t0 is hot (600 > 500). Moving t1 whole gives
// {600, 400}; splitting t0 gives {300 + 400, 300} = 700 (t1 cannot go to rank 1 below 700), so
// the whole move wins.
TEST(RowWiseChange, AWholeMoveThatBalancesBetterWins) {
  const WorkloadSpec s = hot_spec(2, {0, 0}, {1000, 100});
  const Proposal p = propose(s, plan_sharding(s), rw_table_load({600, 400}), 0);
  ASSERT_TRUE(p.worth_it());
  EXPECT_TRUE(p.changes.empty());
  ASSERT_EQ(p.moves.size(), 1u);
  EXPECT_EQ(p.moves[0].table, 1);
  EXPECT_EQ(p.moves[0].to, 1);
  EXPECT_EQ(p.load_after, (std::vector<int64_t>{600, 400}));
}

// A budget of 40000 bytes < the 48000 the split moves: refused, said why, and nothing else helps.
TEST(RowWiseChange, TheByteBudgetRefusesTheSplit) {
  const WorkloadSpec s = hot_spec(4, {0, 1, 2, 3}, {1000, 100, 100, 100});
  const Proposal p = propose(s, plan_sharding(s), rw_table_load({800, 100, 50, 50}), 40000);
  EXPECT_FALSE(p.worth_it());
  EXPECT_TRUE(p.changes.empty());
  ASSERT_EQ(p.refused.size(), 1u);
  EXPECT_EQ(p.refused[0].table, 0);
  EXPECT_EQ(p.refused[0].to, -1);
  EXPECT_EQ(p.refused[0].bytes, 48000);
  EXPECT_EQ(p.refused[0].reason.rfind("table \"t0\" (46.9 KiB) from rank 0 to row_wise over 4 ranks: exceeds max_bytes_per_move", 0),
            0u)
      << p.refused[0].reason;
}

// A device too small for a row shard: t1 on rank 1 is as big as t0 (1000 rows), and the devices
// hold exactly the current plan, so rank 1 cannot take 250 more rows of t0 (16000 bytes).
TEST(RowWiseChange, ADeviceTooSmallRefusesTheSplit) {
  WorkloadSpec s = hot_spec(4, {0, 1, 2, 3}, {1000, 1000, 100, 100});
  int64_t most = 0;
  for (const DeviceMemoryEstimate& e : estimate_memory(s, plan_sharding(s))) most = std::max(most, e.total());
  s.devices.memory_bytes = most;
  const Proposal p = propose(s, plan_sharding(s), rw_table_load({800, 100, 50, 50}), 0);
  EXPECT_FALSE(p.worth_it());
  EXPECT_TRUE(p.changes.empty());
  ASSERT_EQ(p.refused.size(), 1u);
  EXPECT_EQ(p.refused[0].to, -1);
  EXPECT_NE(p.refused[0].reason.find("from rank 0 to row_wise over 4 ranks: rank 1 would need"), std::string::npos)
      << p.refused[0].reason;
}
