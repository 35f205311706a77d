// misc55 (tester55 F3): a scaling study's efficiency has one baseline for every sharding type -
// the best samples/s per GPU at the smallest size any type ran - so that column_wise, which
// cannot run on 1 GPU, no longer reads 100% at its 2-GPU point (and twice table_wise's
// efficiency at equal per-GPU throughput); its 1-GPU refusal says why.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/scaling_study.h"
#include "embedscope/engine/workload/json_kind.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"

namespace es = embedscope::engine;

namespace {
const std::string kProfile = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";  // 2 GPUs a node

// tiny with every table 16 wide (column_wise needs embedding_dim >= 8), 2 measured steps
es::WorkloadSpec wide_tiny() {
  nlohmann::json j = es::to_json(es::load_preset("tiny"));
  for (auto& t : j["tables"]) t["embedding_dim"] = 16;
  j["steps"] = 2;
  j["warmup_steps"] = 1;
  return es::parse_workload(j, "misc55 wide tiny");
}

es::ScalingPoint point(es::ShardingType type, int gpus, double samples_per_s, const std::string& error = "") {
  es::ScalingPoint p;
  p.sharding = type;
  p.gpus = gpus;
  p.samples_per_s = samples_per_s;
  p.error = error;
  return p;
}
}  // namespace

// By hand: the smallest size any type ran, the best per-GPU rate there.
TEST(Misc55, ScalingBaselineIsTheBestPerGpuRateAtTheSmallestSizeThatRan) {
  using T = es::ShardingType;
  // table_wise 1 GPU 100/s; column_wise refused at 1, 180/s at 2: table_wise at 1, 100 per GPU
  auto b = es::scaling_baseline({point(T::table_wise, 1, 100), point(T::table_wise, 2, 150),
                                 point(T::column_wise, 1, 0, "refused"), point(T::column_wise, 2, 180)});
  ASSERT_TRUE(b);
  EXPECT_EQ(b->sharding, T::table_wise);
  EXPECT_EQ(b->gpus, 1);
  EXPECT_DOUBLE_EQ(b->samples_per_s_per_gpu, 100.0);
  // nothing ran at 1 GPU: of the 2-GPU points the best, 360 / 2 = 180 per GPU
  b = es::scaling_baseline({point(T::table_wise, 1, 0, "does not fit"), point(T::table_wise, 2, 300),
                            point(T::row_wise, 2, 360), point(T::row_wise, 4, 800)});
  ASSERT_TRUE(b);
  EXPECT_EQ(b->sharding, T::row_wise);
  EXPECT_EQ(b->gpus, 2);
  EXPECT_DOUBLE_EQ(b->samples_per_s_per_gpu, 180.0);
  EXPECT_FALSE(es::scaling_baseline({point(T::table_wise, 1, 0, "refused")}));
  // the JSON says it, after the key a study is recognised by (its dump's first)
  es::ScalingStudy st{"w", "p", 2, 8, 2, {point(T::table_wise, 1, 100), point(T::column_wise, 2, 180)}};
  const nlohmann::json j = es::to_json(st);
  EXPECT_EQ(j["efficiency_baseline"], nlohmann::json({{"sharding", "table_wise"}, {"gpus", 1}, {"samples_per_s_per_gpu", 100.0}}));
  EXPECT_EQ(j.dump().rfind("{\"batch_size_per_gpu\"", 0), 0u) << j.dump();
  const std::string file = (std::filesystem::temp_directory_path() / "misc55_study.json").string();
  std::ofstream(file) << j.dump(2);
  EXPECT_EQ(es::json_file_kind(file), es::JsonFileKind::scaling_study);
  std::filesystem::remove(file);
}

TEST(Misc55, ColumnWiseIsScaledAgainstTheSameBaselineAsTableWise) {
  es::ScalingStudyOptions o;
  o.hardware = kProfile;
  o.gpus = {1, 2, 4};
  // column_wise first: its 2-GPU point is not its own 100% even when it runs first
  o.shardings = {es::ShardingType::column_wise, es::ShardingType::table_wise};
  std::vector<es::ScalingPoint> handed;
  o.on_point = [&](const es::ScalingPoint& p) { handed.push_back(p); };
  const auto points = es::run_scaling_study(wide_tiny(), o);
  ASSERT_EQ(points.size(), 6u);
  ASSERT_EQ(handed.size(), 6u);
  // type-major order, as before
  for (size_t k = 0; k < 6; ++k) {
    EXPECT_EQ(points[k].sharding, k < 3 ? es::ShardingType::column_wise : es::ShardingType::table_wise);
    EXPECT_EQ(points[k].gpus, o.gpus[k % 3]);
    // on_point got the efficiency the study returns
    EXPECT_DOUBLE_EQ(handed[k].scaling_efficiency, points[k].scaling_efficiency);
  }
  // column_wise on 1 GPU: refused, saying why
  EXPECT_NE(points[0].error.find("column_wise splits a table's columns over 2 ranks or more: on 1 rank its one column "
                                 "shard would hold every column, which is table_wise"),
            std::string::npos)
      << points[0].error;
  for (size_t k = 1; k < 6; ++k) ASSERT_TRUE(points[k].error.empty()) << points[k].error;
  // the baseline: table_wise at 1 GPU, the only point at the smallest size
  const es::ScalingPoint& tw1 = points[3];
  const double base = tw1.samples_per_s / 1;
  const auto b = es::scaling_baseline(points);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->sharding, es::ShardingType::table_wise);
  EXPECT_EQ(b->gpus, 1);
  EXPECT_DOUBLE_EQ(b->samples_per_s_per_gpu, base);
  EXPECT_DOUBLE_EQ(tw1.scaling_efficiency, 1.0);
  for (size_t k = 1; k < 6; ++k)
    EXPECT_DOUBLE_EQ(points[k].scaling_efficiency, points[k].samples_per_s / points[k].gpus / base) << k;
  // the old rule gave column_wise's first point 100%: here it pays the all-to-all a 1-GPU run
  // does not, so it is below table_wise's 1-GPU rate
  EXPECT_LT(points[1].scaling_efficiency, 0.99);
  // equal per-GPU rates read as equal efficiencies: the ratio of two types' efficiencies at a
  // size is the ratio of their per-GPU rates
  for (size_t k : {1u, 2u})
    EXPECT_NEAR(points[k].scaling_efficiency / points[k + 3].scaling_efficiency,
                points[k].samples_per_s / points[k + 3].samples_per_s, 1e-12);
}
