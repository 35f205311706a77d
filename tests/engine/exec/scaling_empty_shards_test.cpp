// The scaling study names every table of a point's type whose row split leaves ranks without
// rows (ScalingPoint::empty_shard_tables), not only those with fewer rows than the ranks:
// TorchRec's split (row_wise_split) gives blocks of ceil(rows / ranks), the remainder, then none.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/scaling_study.h"
#include "embedscope/engine/workload/presets.h"

namespace es = embedscope::engine;

// tiny's tables, row_wise: t_small 1 row, t_a 10, t_b 100, t_c 1000. By hand at 8 ranks:
// t_small fewer rows than ranks (ranks 1-7 none); t_a block ceil(10/8) = 2, 5 full blocks on
// ranks 0-4, ranks 5-7 none; t_b block 13, 7 x 13 = 91 and 9 on rank 7; t_c 8 x 125. So
// {t_small, t_a} (before: t_small only, t_a's 3 empty shards unnamed). At 4 ranks: t_a block 3,
// 3 x 3 + 1 fills all 4; t_small alone. At 16 ranks: t_b block 7, 14 x 7 + 2 on rank 14, rank 15
// none; t_c block 63, 15 x 63 = 945 + 55: full. So {t_small, t_a, t_b}. table_wise: none.
TEST(ScalingEmptyShards, EveryRowSplitThatLeavesARankWithoutRowsIsNamed) {
  es::WorkloadSpec base = es::load_preset("tiny");
  base.steps = 1;
  base.warmup_steps = 0;
  es::ScalingStudyOptions o;
  o.hardware = "h100_sxm";  // 8 GPUs a node
  o.gpus = {4, 8, 16};
  o.shardings = {es::ShardingType::row_wise, es::ShardingType::table_wise};
  const auto points = es::run_scaling_study(base, o);
  ASSERT_EQ(points.size(), 6u);
  using Names = std::vector<std::string>;
  const Names want[] = {{"t_small"}, {"t_small", "t_a"}, {"t_small", "t_a", "t_b"}, {}, {}, {}};
  for (size_t k = 0; k < points.size(); ++k) {
    ASSERT_TRUE(points[k].error.empty()) << k << ": " << points[k].error;
    EXPECT_EQ(points[k].empty_shard_tables, want[k]) << es::to_string(points[k].sharding) << " " << points[k].gpus;
    EXPECT_TRUE(points[k].other_types.empty()) << k;
  }
  // the JSON carries them and reads them back
  const es::ScalingStudy st{"tiny", "h100_sxm", 8, base.batch_size, 1, points};
  const nlohmann::json j = es::to_json(st);
  EXPECT_EQ(j["points"][1]["empty_shard_tables"], nlohmann::json::array({"t_small", "t_a"}));
  EXPECT_FALSE(j["points"][3].contains("empty_shard_tables"));
  EXPECT_EQ(es::scaling_study_from_json(j, "study.json").points[2].empty_shard_tables, want[2]);
}
