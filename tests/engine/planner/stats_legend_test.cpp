// The statistics table's legend (tester44 F6, F17): the imbalance measures' upper bounds for the
// world size, reached with every lookup on one rank, and the critical path said to be the
// embedding part only.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"

using namespace embedscope::engine;

// p = (1, 0, 0, 0): total variation max |p_i - 1/4| = 0.75, total distance 0.75 + 3 x 0.25 = 1.5
TEST(PlannerStatsLegend, BoundsAreReachedWithEverythingOnOneRank) {
  EXPECT_DOUBLE_EQ(max_total_variation(4), 0.75);
  EXPECT_DOUBLE_EQ(max_total_distance(4), 1.5);
  EXPECT_DOUBLE_EQ(max_total_variation(8), 0.875);
  EXPECT_DOUBLE_EQ(max_total_distance(8), 1.75);
  EXPECT_DOUBLE_EQ(total_variation({1, 0, 0, 0}), max_total_variation(4));
  EXPECT_DOUBLE_EQ(total_distance({1, 0, 0, 0}), max_total_distance(4));
}

// tiny on 4 ranks with every table on rank 0 (the tester's tiny_all0.json): the measures sit at
// their bounds and the legend gives those bounds, not "0 to 1"
TEST(PlannerStatsLegend, TableLegendGivesTheBoundsForTheWorldAndSaysTheDensePartIsOut) {
  WorkloadSpec spec = load_preset("tiny");
  spec.devices.count = 4;
  for (const TableSpec& t : spec.tables) spec.sharding.per_table[t.name] = TableSharding{ShardingType::table_wise, {0}, -1};
  const ShardingPlan plan = plan_sharding(spec);
  const PlanStats st = plan_stats(spec, plan, planning_profile(spec));
  const std::string text = to_text(st);
  EXPECT_NE(text.find("total variation 0.750, total distance 1.500"), std::string::npos) << text;
  EXPECT_NE(text.find("total variation 0 to 0.750, total distance 0 to 1.500, chi divergence 0 to 1.500, KL divergence "
                      "0 to 1.386 for 4 ranks"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("range 0 to 1"), std::string::npos) << text;
  EXPECT_NE(text.find("the embedding part only: the dense part"), std::string::npos) << text;
  const nlohmann::json j = to_json(st);
  EXPECT_DOUBLE_EQ(j["max_total_variation"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(j["max_total_distance"].get<double>(), 1.5);
}
