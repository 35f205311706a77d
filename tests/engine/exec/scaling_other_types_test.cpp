// The scaling study says which tables its points do not give the point's sharding type
// (tester44 F4), and a study refused before any point runs prints only its error (F9).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/scaling_study.h"
#include "embedscope/engine/workload/presets.h"
#include "support/cli_run.h"

namespace es = embedscope::engine;
namespace fs = std::filesystem;

namespace {
const std::string kOtherTypesProfile = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";  // 2 a node
}  // namespace

// criteo_kaggle on 8 GPUs: t_cat_8 (3 rows) and t_cat_19 (4 rows) have fewer rows than the 8
// ranks of a row_wise split, so the row_wise point keeps them table_wise and says so (in the
// point, its JSON and the table); the table_wise point has none.
TEST(ScalingOtherTypes, RowWisePointNamesTheTablesKeptTableWise) {
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
  ASSERT_EQ(points[0].other_types.size(), 2u);
  EXPECT_EQ(points[0].other_types[0].first, "t_cat_8");
  EXPECT_EQ(points[0].other_types[0].second, es::ShardingType::table_wise);
  EXPECT_EQ(points[0].other_types[1].first, "t_cat_19");
  EXPECT_EQ(points[0].other_types[1].second, es::ShardingType::table_wise);
  EXPECT_TRUE(points[1].other_types.empty());
  const es::ScalingStudy st{"criteo_kaggle", "round_numbers", 2, base.batch_size, 1, points};
  const nlohmann::json j = es::to_json(st);
  EXPECT_EQ(j["points"][0]["other_types"][1]["table"], "t_cat_19");
  EXPECT_EQ(j["points"][0]["other_types"][1]["sharding"], "table_wise");
  EXPECT_FALSE(j["points"][1].contains("other_types"));
  const es::ScalingStudy back = es::scaling_study_from_json(j, "study.json");
  EXPECT_EQ(back.points[0].other_types, points[0].other_types);
}

TEST(ScalingOtherTypes, CliNotesThemAndPrintsNothingBeforeARefusal) {
  const fs::path dir = fs::temp_directory_path() / "embedscope_scaling_other_types";
  fs::create_directories(dir);
  namespace ts = embedscope::test_support;
  auto r = ts::run_cli(EMBEDSCOPE_CLI, "scaling --preset criteo_kaggle --simulate " + kOtherTypesProfile +
                                           " --gpus 8 --shardings row_wise --steps 1 --warmup-steps 0", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\n  row_wise at 8 GPUs: 2 table(s) not row_wise: t_cat_8 table_wise, t_cat_19 table_wise "
                       "(fewer rows than the ranks a row split needs; `run --sharding row_wise` splits them into empty "
                       "shards instead)\n"),
            std::string::npos)
      << r.out;
  // 3 GPUs are not whole nodes of 2: refused before any point, no header
  r = ts::run_cli(EMBEDSCOPE_CLI, "scaling --preset tiny --simulate " + kOtherTypesProfile + " --gpus 3 --steps 1", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("3 GPUs are not whole nodes of 2 GPUs"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  fs::remove_all(dir);
}
