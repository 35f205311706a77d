// validate() after command-line overrides: the range and cross-reference rules on the typed spec.

#include "spec_test_support.h"

namespace es = embedscope::engine;
using nlohmann::json;
using namespace spec_testing;

namespace {

TEST(SpecValidate, EveryPresetIsValid) {
  for (const auto& name : es::preset_names()) {
    EXPECT_EQ(validate_error(es::load_preset(name)), "<no error>") << name;
  }
}

TEST(SpecValidate, FewerDevicesThanAPinnedRank) {
  json j = base_spec();
  j["devices"]["count"] = 4;
  j["sharding"] = json::parse(R"({"tables": {"t1": {"type": "table_wise", "ranks": [3]}}})");
  es::WorkloadSpec s = es::parse_workload(j, "t.json");
  EXPECT_EQ(validate_error(s), "<no error>");
  s.devices.count = 2;  // --devices 2
  EXPECT_EQ(validate_error(s, "--devices"),
            "--devices: /sharding/tables/t1/ranks/0: must be in [0, 2), got 3 (devices.count is 2)");
}

TEST(SpecValidate, DeviceCountOutOfRange) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.count = 65;
  EXPECT_EQ(validate_error(s), "cli: /devices/count: must be in [1, 64], got 65");
  s.devices.count = 0;
  EXPECT_EQ(validate_error(s), "cli: /devices/count: must be in [1, 64], got 0");
}

TEST(SpecValidate, LocalWorldSizeMustStillDivide) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.count = 4;
  s.sharding.local_world_size = 2;
  EXPECT_EQ(validate_error(s), "<no error>");
  s.devices.count = 3;
  EXPECT_EQ(validate_error(s), "cli: /sharding/local_world_size: must divide devices.count (3), got 2");
}

TEST(SpecValidate, NodeOutOfRangeAfterOverride) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.count = 4;
  s.sharding.local_world_size = 2;
  s.sharding.per_table["t_c"] = es::TableSharding{es::ShardingType::table_row_wise, {}, 1};
  EXPECT_EQ(validate_error(s), "<no error>");
  s.sharding.local_world_size = 0;  // one node of 4 ranks
  EXPECT_EQ(validate_error(s),
            "cli: /sharding/tables/t_c/node: must be in [0, 1), got 1 (1 node(s) of local_world_size 4)");
  s.sharding.per_table["t_c"].type = es::ShardingType::row_wise;  // --sharding t_c=row_wise
  EXPECT_EQ(validate_error(s),
            "cli: /sharding/tables/t_c/node: only allowed for table_row_wise and table_column_wise, not row_wise");
}

TEST(SpecValidate, DefaultShardingAndStepsOverrides) {
  es::WorkloadSpec s = es::load_preset("criteo_kaggle");
  s.sharding.default_type = es::ShardingType::row_wise;
  s.steps = 3;
  EXPECT_EQ(validate_error(s), "<no error>");
  s.steps = 0;
  EXPECT_EQ(validate_error(s, "--steps"), "--steps: /steps: must be > 0, got 0");
}

TEST(SpecValidate, RanksRulesOnTypedSpec) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.sharding.per_table["t_a"] = es::TableSharding{es::ShardingType::row_wise, {0}, -1};
  EXPECT_EQ(validate_error(s), "cli: /sharding/tables/t_a/ranks: not allowed for row_wise");
  s.sharding.per_table["t_a"] = es::TableSharding{es::ShardingType::table_wise, {0, 1}, -1};
  EXPECT_EQ(validate_error(s), "cli: /sharding/tables/t_a/ranks: table_wise takes exactly 1 rank, got 2");
  // t_small has dim 4: at most 4 column shards.
  s.sharding.per_table.erase("t_a");
  s.sharding.per_table["t_small"] =
      es::TableSharding{es::ShardingType::column_wise, {0, 1, 0, 1, 0}, -1};
  EXPECT_EQ(validate_error(s),
            "cli: /sharding/tables/t_small/ranks: column_wise takes 1 to 4 ranks (the table's "
            "embedding_dim), got 5");
  s.sharding.per_table["t_small"].ranks = {1, 0, 1, 0};
  EXPECT_EQ(validate_error(s), "<no error>");
  s.sharding.per_table["nope"] = es::TableSharding{};
  EXPECT_EQ(validate_error(s), "cli: /sharding/tables/nope: no table named \"nope\"");
}

TEST(SpecValidate, CrossReferencesOnTypedSpec) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.tables[1].feature_names = {"ghost"};
  EXPECT_EQ(validate_error(s), "cli: /tables/1/feature_names/0: no feature named \"ghost\"");
  s = es::load_preset("tiny");
  s.tables[1].feature_names.clear();
  s.features.erase(s.features.begin() + 1);  // f_a
  EXPECT_EQ(validate_error(s), "cli: /tables/1/feature_names: must not be empty");
  s = es::load_preset("tiny");
  s.features.push_back(es::FeatureSpec{"extra", {}, {}});
  EXPECT_EQ(validate_error(s), "cli: /features/5: feature \"extra\" is not used by any table");
}

TEST(SpecValidate, DotInteractionDimsOnTypedSpec) {
  es::WorkloadSpec s = es::load_preset("criteo_kaggle");
  s.tables[5].embedding_dim = 32;
  EXPECT_EQ(validate_error(s),
            "cli: /dense/interaction: dot needs every table's embedding_dim to equal the last "
            "bottom_mlp width (16); table \"t_cat_5\" has embedding_dim 32");
  s.dense->interaction = es::Interaction::cat;  // cat accepts any dims
  EXPECT_EQ(validate_error(s), "<no error>");
}

TEST(SpecValidate, PoolingFactorOnTypedSpec) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.features[0].pooling_factor = es::PoolingFactor{true, 2.5, 2};
  EXPECT_EQ(validate_error(s),
            "cli: /features/0/pooling_factor: fixed pooling factor must be an integer, got 2.5");
  s.features[0].pooling_factor = es::PoolingFactor{true, 2, 3};
  EXPECT_EQ(validate_error(s),
            "cli: /features/0/pooling_factor: fixed pooling factor needs max == mean, got mean 2 "
            "and max 3");
  s.features[0].pooling_factor = es::PoolingFactor{false, 4, 3};
  EXPECT_EQ(validate_error(s), "cli: /features/0/pooling_factor/mean: must be <= max (3), got 4");
}

TEST(SpecValidate, UnresolvedDenseLearningRateIsAccepted) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.optimizer.dense_learning_rate = -1.0;  // the struct default: "same as learning_rate"
  EXPECT_EQ(validate_error(s), "<no error>");
  s.optimizer.dense_learning_rate = 0.0;
  EXPECT_EQ(validate_error(s), "cli: /optimizer/dense_learning_rate: must be > 0, got 0");
}

}  // namespace
