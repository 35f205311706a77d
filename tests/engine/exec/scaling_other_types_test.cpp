// The scaling study says which tables too short for a row split its points split into empty
// shards (tester44 F4, tester49 F6), and a study refused before any point runs prints only its error (F9).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/exec/scaling_study.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "support/cli_run.h"

namespace es = embedscope::engine;
namespace fs = std::filesystem;

namespace {
const std::string kOtherTypesProfile = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";  // 2 a node
}  // namespace

// criteo_kaggle on 8 GPUs: t_cat_8 (3 rows) and t_cat_19 (4 rows) have fewer rows than the 8
// ranks of a row_wise split. The search would keep them table_wise (plan42), which adds a pooled
// all-to-all (tester49 F6: 17 % slower than `run --sharding row_wise`); since fixf49 the row_wise
// point splits them into empty shards as run does and says so (in the point, its JSON and the
// table); the table_wise point has none.
TEST(ScalingOtherTypes, RowWisePointSplitsTheShortTablesAsRunDoes) {
  es::WorkloadSpec base = es::load_preset("criteo_kaggle");
  base.steps = 1;
  base.warmup_steps = 0;
  es::ScalingStudyOptions o;
  o.hardware = kOtherTypesProfile;
  o.gpus = {8};
  o.shardings = {es::ShardingType::row_wise, es::ShardingType::table_wise};
  const auto points = es::run_scaling_study(base, o);
  ASSERT_EQ(points.size(), 2u);
  ASSERT_TRUE(points[0].error.empty()) << points[0].error;
  EXPECT_TRUE(points[0].other_types.empty());
  // every row_wise table with an empty shard: 3 and 4 rows (fewer than the ranks), and by hand
  // from row_wise_split's blocks of ceil(rows / 8): 27 rows 6 x 4 + 3 (rank 7 none), 10 rows
  // 5 x 2 (ranks 5-7 none), 18 rows 6 x 3 (ranks 6-7 none); 15 (7 x 2 + 1) and 24 (8 x 3) fill all 8
  EXPECT_EQ(points[0].empty_shard_tables,
            (std::vector<std::string>{"t_cat_8", "t_cat_13", "t_cat_16", "t_cat_19", "t_cat_21"}));
  EXPECT_TRUE(points[1].other_types.empty());
  EXPECT_TRUE(points[1].empty_shard_tables.empty());
  const es::ScalingStudy st{"criteo_kaggle", "round_numbers", 2, base.batch_size, 1, points};
  const nlohmann::json j = es::to_json(st);
  EXPECT_EQ(j["points"][0]["empty_shard_tables"],
            nlohmann::json::array({"t_cat_8", "t_cat_13", "t_cat_16", "t_cat_19", "t_cat_21"}));
  EXPECT_FALSE(j["points"][0].contains("other_types"));
  EXPECT_FALSE(j["points"][1].contains("empty_shard_tables"));
  const es::ScalingStudy back = es::scaling_study_from_json(j, "study.json");
  EXPECT_EQ(back.points[0].empty_shard_tables, points[0].empty_shard_tables);

  // the point is `run --sharding row_wise` on the same simulated cluster: the same step time
  // (the simulation is deterministic), not the slower plan with two table_wise tables
  es::WorkloadSpec spec = base;
  spec.devices.backend = es::Backend::simulated;
  spec.devices.hardware = kOtherTypesProfile;
  spec.devices.memory_bytes = es::load_hardware_profile(kOtherTypesProfile).gpu.memory_bytes;
  spec.devices.count = 8;
  spec.sharding.local_world_size = 2;
  spec.sharding.default_type = es::ShardingType::row_wise;
  const es::RunResult run = es::run_training(spec, es::plan_sharding(spec), es::TrainerOptions{});
  ASSERT_EQ(run.step_time_ns.size(), 1u);
  EXPECT_EQ(points[0].step_time_ns, run.step_time_ns[0]);
  // an earlier study's JSON (the search's table_wise leftovers) still reads
  nlohmann::json old = j;
  old["points"][0].erase("empty_shard_tables");
  old["points"][0]["other_types"] = nlohmann::json::array({{{"table", "t_cat_8"}, {"sharding", "table_wise"}}});
  const es::ScalingStudy old_back = es::scaling_study_from_json(old, "study.json");
  ASSERT_EQ(old_back.points[0].other_types.size(), 1u);
  EXPECT_EQ(old_back.points[0].other_types[0].second, es::ShardingType::table_wise);
}

TEST(ScalingOtherTypes, CliNotesThemAndPrintsNothingBeforeARefusal) {
  const fs::path dir = fs::temp_directory_path() / "embedscope_scaling_other_types";
  fs::create_directories(dir);
  namespace ts = embedscope::test_support;
  auto r = ts::run_cli(EMBEDSCOPE_CLI, "scaling --preset criteo_kaggle --simulate " + kOtherTypesProfile +
                                           " --gpus 8 --shardings row_wise --steps 1 --warmup-steps 0", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\n  row_wise at 8 GPUs: 5 table(s) split into empty shards: t_cat_8, t_cat_13, t_cat_16, "
                       "t_cat_19, t_cat_21 (too few rows for a block of ceil(rows / ranks) on every rank: the last "
                       "ranks hold none, as `run --sharding row_wise` splits them - `plan --auto --sharding-types "
                       "row_wise` keeps a table with fewer rows than ranks table_wise, which adds a pooled "
                       "all-to-all)\n"),
            std::string::npos)
      << r.out;
  // 3 GPUs are not whole nodes of 2: refused before any point, no header
  r = ts::run_cli(EMBEDSCOPE_CLI, "scaling --preset tiny --simulate " + kOtherTypesProfile + " --gpus 3 --steps 1", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("3 GPUs are not whole nodes of 2 GPUs"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  fs::remove_all(dir);
}
