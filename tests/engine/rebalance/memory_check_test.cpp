// The cheap memory checks of the rebalancing proposal (issue 17: a firing refused for memory
// cost 70-205 ms in full estimates): one rank's estimate equals that rank's in every rank's
// estimate, with SlotShares built from any plan of the spec; the lower bound is the rank's
// estimate now plus the new shards' bytes, never above the full estimate; and a move over the
// bound is refused with it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "embedscope/engine/rebalance/policy.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"
#include "engine/rebalance/policy_fixtures.h"
#include "engine/rebalance/straggler_workload.h"
#include "planner/memory_replay.h"

using namespace embedscope::engine;
using namespace embedscope::engine::rebalance;
using nlohmann::json;

namespace {

/// 2 ranks, sgd, fp32 x 16: t0 (1000 rows) and t2 (1000) on rank 0, t1 (`rows1`) on rank 1.
WorkloadSpec memcheck_spec(int64_t rows1, int64_t memory_bytes) {
  json j = {{"name", "memory_check"},
            {"batch_size", 8},
            {"steps", 4},
            {"devices", {{"count", 2}, {"memory_bytes", memory_bytes}}},
            {"optimizer", {{"type", "sgd"}}},
            {"dense", nullptr},
            {"tables", json::array()},
            {"sharding", {{"default", "table_wise"}, {"tables", json::object()}}}};
  const int64_t rows[3] = {1000, rows1, 1000};
  const int ranks[3] = {0, 1, 0};
  for (int t = 0; t < 3; ++t) {
    const std::string n = "t" + std::to_string(t);
    j["tables"].push_back({{"name", n}, {"num_embeddings", rows[t]}, {"embedding_dim", 16}, {"feature_names", {"f" + std::to_string(t)}}});
    j["sharding"]["tables"][n] = {{"type", "table_wise"}, {"ranks", {ranks[t]}}};
  }
  return parse_workload(j, "memory_check");
}

std::vector<int64_t> memcheck_totals(const std::vector<DeviceMemoryEstimate>& est) {
  std::vector<int64_t> out;
  for (const auto& e : est) out.push_back(e.total());
  return out;
}

}  // namespace

TEST(RebalanceMemoryCheck, OneRanksEstimateIsThatOfEveryRanks) {
  json j = embedscope::test_support::straggler_workload("memory_check_zipf");
  for (auto& f : j["features"]) f["ids"] = {{"distribution", "zipf"}, {"alpha", 1.05}};  // SlotShares' hot rows
  const WorkloadSpec spec = parse_workload(j, "memory_check_zipf");
  const ShardingPlan greedy = plan_sharding(spec);
  ShardingPlan moved = greedy;  // h0 (table 3) from rank 3 to rank 0
  ASSERT_EQ(moved.tables[3].shards[0].rank, 3);
  moved.tables[3].shards[0].rank = 0;
  // shares from the other plan: they depend on the features' tables only
  const detail::SlotShares shares(spec, detail::Layout(spec, greedy));
  for (const ShardingPlan* p : std::vector<const ShardingPlan*>{&greedy, &moved}) {
    const std::vector<DeviceMemoryEstimate> all = estimate_memory(spec, *p);
    ASSERT_EQ(all.size(), 4u);
    EXPECT_EQ(memcheck_totals(detail::estimate_memory(spec, *p, shares)), memcheck_totals(all));
    for (int r = 0; r < 4; ++r) {
      const DeviceMemoryEstimate one = detail::estimate_rank_memory(spec, *p, r, shares);
      const DeviceMemoryEstimate& e = all[static_cast<size_t>(r)];
      EXPECT_EQ(one.rank, r);
      EXPECT_EQ(one.weights, e.weights);
      EXPECT_EQ(one.optimizer_state, e.optimizer_state);
      EXPECT_EQ(one.dense, e.dense);
      EXPECT_EQ(one.buffers, e.buffers);
      EXPECT_EQ(one.total(), e.total());
    }
    EXPECT_THROW(detail::estimate_rank_memory(spec, *p, 4, shares), std::out_of_range);
  }
  // the move changes rank 0's and rank 3's estimates (the checks are not of equal plans)
  EXPECT_GT(estimate_memory(spec, moved)[0].total(), estimate_memory(spec, greedy)[0].total());
}

TEST(RebalanceMemoryCheck, TheBoundIsTheEstimateNowPlusTheNewShards) {
  const WorkloadSpec spec = memcheck_spec(3000, int64_t{1} << 30);
  const ShardingPlan cur = plan_sharding(spec);
  ASSERT_EQ(embedscope::test_support::first_shard_ranks(cur), (std::vector<int>{0, 1, 0}));
  const std::vector<int64_t> now = memcheck_totals(estimate_memory(spec, cur));
  ShardingPlan next = cur;
  next.tables[2].shards[0].rank = 1;  // t2: 1000 x 16 x 4 = 64000 B of weights, sgd keeps no state
  const std::vector<MemoryBound> b = memory_lower_bound(spec, cur, now, next, 2);
  ASSERT_EQ(b.size(), 1u);  // rank 0 held t2 already
  EXPECT_EQ(b[0].rank, 1);
  EXPECT_EQ(b[0].added, 64000);
  EXPECT_EQ(b[0].at_least, now[1] + 64000);
  EXPECT_LE(b[0].at_least, estimate_memory(spec, next)[1].total());  // a lower bound
  EXPECT_TRUE(memory_lower_bound(spec, cur, now, cur, 2).empty());    // nothing new anywhere
  WorkloadSpec host = spec;
  host.tables[2].placement = TablePlacement::host;  // its rows are not in device memory
  EXPECT_TRUE(memory_lower_bound(host, cur, now, next, 2).empty());
}

TEST(RebalanceMemoryCheck, AMoveOverTheBoundIsRefusedByIt) {
  // loads: t0 100, t2 50 on rank 0, t1 10 on rank 1: moving t2 to rank 1 would balance
  // ({100, 60}); rank 1's memory leaves 32000 B for it, and t2 is 64000 B
  const WorkloadSpec roomy = memcheck_spec(3000, int64_t{1} << 30);
  const ShardingPlan cur = plan_sharding(roomy);
  const std::vector<int64_t> now = memcheck_totals(estimate_memory(roomy, cur));
  ASSERT_GT(now[1], now[0]);  // rank 1 (192000 B of t1) is the fuller: the capacity fits both now
  const Proposal free_move = propose(roomy, cur, embedscope::test_support::table_load({100, 10, 50}), 0);
  ASSERT_EQ(free_move.moves.size(), 1u);
  EXPECT_EQ(free_move.moves[0].table, 2);
  const WorkloadSpec tight = memcheck_spec(3000, now[1] + 32000);
  const Proposal p = propose(tight, cur, embedscope::test_support::table_load({100, 10, 50}), 0);
  EXPECT_TRUE(p.moves.empty());
  ASSERT_FALSE(p.refused.empty());
  const RefusedMove& r = p.refused[0];
  EXPECT_EQ(r.table, 2);
  EXPECT_EQ(r.to, 1);
  EXPECT_EQ(r.cause, "memory");
  EXPECT_NE(r.reason.find("from rank 0 to rank 1: rank 1 would need at least "), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("+ the table's new shards 62.5 KiB)"), std::string::npos) << r.reason;
  // the full estimate agrees: the bound refused nothing that fits
  ShardingPlan next = cur;
  next.tables[2].shards[0].rank = 1;
  EXPECT_GT(estimate_memory(tight, next)[1].total(), tight.devices.memory_bytes);
}
