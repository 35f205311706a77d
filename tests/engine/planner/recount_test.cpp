// plan44's recount (tester44 F1): a scored candidate counts among the "possible" plans by its
// full memory check (plan_stats' fits), not by the partitioner's bound, which is the device's
// memory less the dense part and the fewest buffers of a rank in the all-table_wise reference plan.
// A data-parallel plan has fewer buffers than that (no all-to-all), so the bound can call it over
// capacity while it fits: it must still be counted ("found 1 possible plan(s)", not 0).
#include <gtest/gtest.h>

#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "engine/planner/round_profile.h"

using namespace embedscope::engine;

// tiny on 4 GPU ranks (direct allocator), the search restricted to data_parallel: one proposal,
// uniform:data_parallel, every table on every rank. Each rank then needs weights 512 + 512 + 2,560
// + 48,128 = 51,712 B (t_small 16 B, t_a 320 B, t_b 2,400 B, t_c 48,000 B, each rounded up to
// 512 B), dense 16,896 B and buffers 5,120 B: 73,728 B, exactly the devices' memory, so it fits.
// The partitioner's bound: 73,728 - 16,896 (dense) - 6,656 (rank 3's buffers in the table_wise
// reference, the fewest) = 50,176 B < the 50,736 B of shards on each rank: over capacity.
TEST(PlannerRecount, ACandidateThatFitsCountsAsPossible) {
  WorkloadSpec spec = load_preset("tiny");
  spec.devices.count = 4;
  spec.memory.allocator = AllocatorKind::direct;
  spec.devices.memory_bytes = 73728;
  // the reference figures the bound is made of (the premise)
  for (const auto& e : estimate_memory(spec, plan_sharding(spec))) {
    EXPECT_EQ(e.dense, 16896) << e.rank;
    if (e.rank == 3) EXPECT_EQ(e.buffers, 6656);
    EXPECT_GE(e.buffers, 6656) << e.rank;
  }
  PlanSearchOptions only_dp;
  only_dp.sharding_types = {ShardingType::data_parallel};
  const PlanSearchResult r = plan_search(spec, planner_testing::round_profile("recount"), only_dp);
  EXPECT_EQ(r.proposer, "uniform:data_parallel");
  for (const auto& e : estimate_memory(spec, r.plan)) {
    EXPECT_EQ(e.weights, 51712) << e.rank;
    EXPECT_EQ(e.buffers, 5120) << e.rank;
    EXPECT_EQ(e.total(), 73728) << e.rank;
  }
  EXPECT_TRUE(r.stats.fits);
  EXPECT_EQ(r.proposals, 1);
  EXPECT_EQ(r.feasible, 1) << "the plan that fits was not counted as possible";
  // one byte less: the same plan no longer fits, and nothing else is proposed
  spec.devices.memory_bytes = 73727;
  EXPECT_THROW((void)plan_search(spec, planner_testing::round_profile("recount"), only_dp), NoPlanFits);
}
