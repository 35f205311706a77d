// Load aggregation and imbalance (sessions/analysis/load_imbalance.h).
#include "embedscope/sessions/analysis/load_imbalance.h"

#include <gtest/gtest.h>

#include "support/step_sessions.h"

using namespace embedscope;
using namespace embedscope::sessions;

TEST(LoadImbalance, AggregatesPerShardPerStepAndImbalance) {
  sessions::SessionReader r(test_support::load_session());
  LoadData d = load_data(r, LoadMetric::ids_looked_up);
  ASSERT_EQ(d.ranks, 2);
  ASSERT_EQ(d.shards, (std::vector<std::string>{"t_a #0", "t_b #1"}));
  EXPECT_DOUBLE_EQ(d.at_shard(0, 0), 50);
  EXPECT_DOUBLE_EQ(d.at_shard(1, 0), 0);
  EXPECT_DOUBLE_EQ(d.at_shard(1, 1), 30);
  ASSERT_EQ(d.steps, (std::vector<int64_t>{0, 1}));
  EXPECT_DOUBLE_EQ(d.imbalance[0], 30.0 / 20.0);
  EXPECT_DOUBLE_EQ(d.imbalance[1], 1.0);
  EXPECT_EQ(d.per_rank, (std::vector<double>{50, 30}));
  EXPECT_DOUBLE_EQ(load_data(r, LoadMetric::lookup_time).at_step(1, 0), 50);
}
