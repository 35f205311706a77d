// The search does not depend on the workload's as-written default sharding type (tester44 F1):
// the partitioner's memory bound is the dense part and the buffers every plan has, not the
// as-written plan's (whose row_wise buffers at many ranks left no room on any rank: every
// candidate "over capacity", "found 0 possible plan(s)", placement by bytes, a slower plan).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"

using namespace embedscope::engine;

namespace {

// criteo_kaggle on 4 nodes x 8 ranks with 128 MiB a rank. As written row_wise, each rank needs
// 152.5 MiB (64.4 MiB of weights, 14.8 MiB dense, 73.3 MiB of buffers, mostly the row-wise
// output dist of every table's partial sums): it does not fit, and its 88.1 MiB of dense +
// buffers left 39.9 MiB a rank for shards, under the 64.4 MiB that each rank must hold at the
// least (2.01 GiB of weights / 32). As written table_wise the bound was 128 - 18.5 MiB.
WorkloadSpec independent_spec(ShardingType default_type) {
  WorkloadSpec s = load_preset("criteo_kaggle");
  s.devices.count = 32;
  s.sharding.local_world_size = 8;
  s.devices.memory_bytes = int64_t{128} << 20;
  s.sharding.default_type = default_type;
  return s;
}

}  // namespace

TEST(PlannerDefaultIndependent, SamePlanWhateverTheAsWrittenDefault) {
  const WorkloadSpec rw = independent_spec(ShardingType::row_wise);
  const WorkloadSpec tw = independent_spec(ShardingType::table_wise);
  // the as-written row_wise plan does not fit (the premise of the test)
  int64_t rw_total = 0;
  for (const auto& e : estimate_memory(rw, plan_sharding(rw))) rw_total = std::max(rw_total, e.total());
  ASSERT_GT(rw_total, rw.devices.memory_bytes);
  const HardwareProfile hw = planning_profile(rw);
  const PlanSearchResult a = plan_search(rw, hw);
  const PlanSearchResult b = plan_search(tw, hw);
  EXPECT_TRUE(to_json(rw, a.plan) == to_json(tw, b.plan)) << "the plans differ";
  EXPECT_EQ(a.stats.critical_path_ns, b.stats.critical_path_ns);
  EXPECT_EQ(a.proposer, b.proposer);
  // the chosen plan fits, and so is counted among the possible plans
  EXPECT_TRUE(a.stats.fits);
  for (const auto& e : estimate_memory(rw, a.plan)) EXPECT_LE(e.total(), rw.devices.memory_bytes) << e.rank;
  EXPECT_GE(a.feasible, 1);
  EXPECT_GE(b.feasible, 1);
}
