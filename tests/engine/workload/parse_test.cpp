// parse_workload: defaults, the accepted forms and the typed values they give.

#include "spec_test_support.h"

namespace es = embedscope::engine;
using nlohmann::json;
using namespace spec_testing;

namespace {

TEST(SpecParse, MinimalSpecGetsDefaults) {
  const json j = json::parse(R"({
    "tables": [{"name": "t", "num_embeddings": 5, "embedding_dim": 3, "feature_names": ["a", "b"]}],
    "batch_size": 4
  })");
  const es::WorkloadSpec s = es::parse_workload(j, "min.json");
  EXPECT_EQ(s.name, "workload");
  EXPECT_EQ(s.description, "");
  EXPECT_EQ(s.source, "");
  ASSERT_EQ(s.tables.size(), 1u);
  EXPECT_EQ(s.tables[0].pooling, es::Pooling::sum);
  ASSERT_EQ(s.features.size(), 2u);
  EXPECT_EQ(s.features[0].name, "a");
  EXPECT_EQ(s.features[1].name, "b");
  for (const auto& f : s.features) {
    EXPECT_TRUE(f.pooling_factor.fixed);
    EXPECT_EQ(f.pooling_factor.mean, 1.0);
    EXPECT_EQ(f.pooling_factor.max, 1);
    EXPECT_EQ(f.ids.kind, es::IdDistributionKind::uniform);
    EXPECT_EQ(f.ids.alpha, 1.15);
    EXPECT_TRUE(f.ids.permute);
    EXPECT_EQ(f.ids.permute_seed, 0u);
  }
  EXPECT_EQ(s.batch_size, 4);
  EXPECT_EQ(s.steps, 10);
  EXPECT_EQ(s.warmup_steps, 0);
  EXPECT_EQ(s.seed, 0u);
  EXPECT_EQ(s.devices.count, 1);
  EXPECT_EQ(s.devices.backend, es::Backend::cpu);
  EXPECT_EQ(s.devices.memory_bytes, int64_t{8589934592});
  EXPECT_EQ(s.optimizer.type, es::OptimizerType::sgd);
  EXPECT_EQ(s.optimizer.learning_rate, 0.01);
  EXPECT_EQ(s.optimizer.eps, 1e-8);
  EXPECT_EQ(s.optimizer.beta1, 0.9);
  EXPECT_EQ(s.optimizer.beta2, 0.999);
  EXPECT_EQ(s.optimizer.dense_learning_rate, 0.01);  // resolved to learning_rate
  EXPECT_FALSE(s.dense.has_value());
  EXPECT_EQ(s.sharding.default_type, es::ShardingType::table_wise);
  EXPECT_EQ(s.sharding.local_world_size, 0);
  EXPECT_TRUE(s.sharding.per_table.empty());
  EXPECT_EQ(s.invalid_ids, es::InvalidIdPolicy::error);
  EXPECT_EQ(s.collective_timeout_ms, 30000);
  EXPECT_EQ(s.pipeline, es::PipelineKind::base);
  EXPECT_EQ(s.qcomms.forward_precision, es::CommPrecision::fp32);
  EXPECT_EQ(s.qcomms.backward_precision, es::CommPrecision::fp32);
  EXPECT_FALSE(s.network.limited());
}

TEST(SpecParse, PipelineQcommsNetworkAndBuckets) {
  json j = base_spec();
  j["pipeline"] = "semi_sync";
  j["qcomms"] = json::parse(R"({"forward_precision": "bf16", "backward_precision": "fp16"})");
  j["network"] = json::parse(R"({"inter_node": {"bandwidth_bytes_per_s": 1e9, "latency_ns": 5000}})");
  j["dense"]["bucket_cap_bytes"] = 4096;
  const es::WorkloadSpec s = es::parse_workload(j, "t.json");
  EXPECT_EQ(s.pipeline, es::PipelineKind::semi_sync);
  EXPECT_EQ(s.qcomms.forward_precision, es::CommPrecision::bf16);
  EXPECT_EQ(s.qcomms.backward_precision, es::CommPrecision::fp16);
  EXPECT_FALSE(s.network.intra_node.limited());  // absent = unlimited
  EXPECT_EQ(s.network.inter_node.bandwidth_bytes_per_s, 1'000'000'000);
  EXPECT_EQ(s.network.inter_node.latency_ns, 5000);
  EXPECT_EQ(s.dense->bucket_cap_bytes, 4096);
  EXPECT_EQ(es::parse_workload(base_spec(), "t.json").dense->bucket_cap_bytes, 25 << 20);  // DDP's 25 MiB
  const json out = es::to_json(s);
  EXPECT_EQ(out.at("network"), json::parse(R"({"inter_node": {"bandwidth_bytes_per_s": 1000000000, "latency_ns": 5000}})"));
  EXPECT_EQ(out.at("pipeline"), "semi_sync");
  expect_same(es::parse_workload(json::parse(out.dump()), "rt"), s);
  EXPECT_EQ(es::pipeline_from_string("sparse_dist", "--pipeline"), es::PipelineKind::sparse_dist);
  try {
    es::pipeline_from_string("async", "--pipeline");
    FAIL() << "no error";
  } catch (const es::SpecError& e) {
    EXPECT_STREQ(e.what(), "--pipeline: must be one of base, sparse_dist, semi_sync, got \"async\"");
  }
}

TEST(SpecParse, OmittedFeaturesAreAppendedInTableOrder) {
  const json j = json::parse(R"({
    "tables": [
      {"name": "t0", "num_embeddings": 5, "embedding_dim": 3, "feature_names": ["x", "listed"]},
      {"name": "t1", "num_embeddings": 5, "embedding_dim": 3, "feature_names": ["y"]}
    ],
    "features": [{"name": "listed", "pooling_factor": 4, "ids": "zipf"}],
    "batch_size": 4
  })");
  const es::WorkloadSpec s = es::parse_workload(j, "t.json");
  ASSERT_EQ(s.features.size(), 3u);
  EXPECT_EQ(s.features[0].name, "listed");
  EXPECT_EQ(s.features[0].pooling_factor.mean, 4.0);
  EXPECT_EQ(s.features[0].pooling_factor.max, 4);
  EXPECT_EQ(s.features[0].ids.kind, es::IdDistributionKind::zipf);
  EXPECT_EQ(s.features[1].name, "x");
  EXPECT_EQ(s.features[2].name, "y");
  EXPECT_EQ(s.features[2].ids.kind, es::IdDistributionKind::uniform);
  EXPECT_EQ(s.feature_index("listed"), 0);
  EXPECT_EQ(s.feature_index("y"), 2);
  EXPECT_EQ(s.feature_index("nope"), -1);
  EXPECT_EQ(s.table_of_feature(0), 0);
  EXPECT_EQ(s.table_of_feature(1), 0);
  EXPECT_EQ(s.table_of_feature(2), 1);
  EXPECT_EQ(s.table_of_feature(3), -1);
}

TEST(SpecParse, PoolingFactorAndIdForms) {
  json j = base_spec();
  j["features"] = json::parse(R"([
    {"name": "f0", "pooling_factor": {"mean": 3.5, "max": 10},
     "ids": {"distribution": "zipf", "alpha": 1.09, "permute": false, "permute_seed": 18446744073709551615}},
    {"name": "f1", "pooling_factor": 0, "ids": "uniform"}
  ])");
  const es::WorkloadSpec s = es::parse_workload(j, "t.json");
  const auto& f0 = s.features[0];
  EXPECT_FALSE(f0.pooling_factor.fixed);
  EXPECT_EQ(f0.pooling_factor.mean, 3.5);
  EXPECT_EQ(f0.pooling_factor.max, 10);
  EXPECT_EQ(f0.ids.kind, es::IdDistributionKind::zipf);
  EXPECT_EQ(f0.ids.alpha, 1.09);
  EXPECT_FALSE(f0.ids.permute);
  EXPECT_EQ(f0.ids.permute_seed, 18446744073709551615ull);
  const auto& f1 = s.features[1];
  EXPECT_TRUE(f1.pooling_factor.fixed);  // 0 ids per bag: every bag empty
  EXPECT_EQ(f1.pooling_factor.mean, 0.0);
  EXPECT_EQ(f1.pooling_factor.max, 0);
  EXPECT_EQ(f1.ids.kind, es::IdDistributionKind::uniform);
}

TEST(SpecParse, IntegralFloatsAreIntegers) {
  json j = base_spec();
  j["batch_size"] = 1e6;
  j["tables"][0]["num_embeddings"] = 2.5e7;
  j["devices"]["memory_bytes"] = 1.6e10;
  j["seed"] = 1e3;
  j["features"][0]["pooling_factor"] = 2.0;
  const es::WorkloadSpec s = es::parse_workload(j, "t.json");
  EXPECT_EQ(s.batch_size, 1000000);
  EXPECT_EQ(s.tables[0].num_embeddings, 25000000);
  EXPECT_EQ(s.devices.memory_bytes, int64_t{16000000000});
  EXPECT_EQ(s.seed, 1000u);
  EXPECT_TRUE(s.features[0].pooling_factor.fixed);
  EXPECT_EQ(s.features[0].pooling_factor.max, 2);
}

TEST(SpecParse, DenseAbsentOrNullIsNullopt) {
  json j = base_spec();
  j.erase("dense");
  EXPECT_FALSE(es::parse_workload(j, "t.json").dense.has_value());
  j["dense"] = nullptr;
  EXPECT_FALSE(es::parse_workload(j, "t.json").dense.has_value());
}

TEST(SpecParse, DenseDcnAndShardingOverrides) {
  json j = base_spec();
  j["devices"]["count"] = 4;
  j["tables"].push_back(json::parse(
      R"({"name": "t2", "num_embeddings": 7, "embedding_dim": 6, "pooling": "mean", "feature_names": ["f2"]})"));
  j["dense"] = json::parse(R"({"num_dense_features": 2, "bottom_mlp": [6, 5], "interaction": "dcn",
                               "top_mlp": [3, 1], "dcn": {"num_layers": 2, "low_rank_dim": 4}})");
  j["sharding"] = json::parse(R"({"default": "row_wise", "local_world_size": 2, "tables": {
      "t0": {"type": "table_wise", "ranks": [3]},
      "t1": {"type": "table_row_wise", "node": 1},
      "t2": {"type": "column_wise", "ranks": [0, 2, 2]}}})");
  j["optimizer"] = json::parse(R"({"type": "adam", "learning_rate": 0.001, "beta1": 0.8,
                                 "beta2": 0.99, "eps": 1e-6, "dense_learning_rate": 0.05})");
  j["invalid_ids"] = "clamp";
  const es::WorkloadSpec s = es::parse_workload(j, "t.json");
  ASSERT_TRUE(s.dense.has_value());
  EXPECT_EQ(s.dense->interaction, es::Interaction::dcn);
  EXPECT_EQ(s.dense->dcn_num_layers, 2);
  EXPECT_EQ(s.dense->dcn_low_rank_dim, 4);
  EXPECT_EQ(s.dense->bottom_mlp, (std::vector<int>{6, 5}));
  EXPECT_EQ(s.tables[2].pooling, es::Pooling::mean);
  EXPECT_EQ(s.sharding.default_type, es::ShardingType::row_wise);
  EXPECT_EQ(s.sharding.local_world_size, 2);
  ASSERT_EQ(s.sharding.per_table.size(), 3u);
  EXPECT_EQ(s.sharding.per_table.at("t0").type, es::ShardingType::table_wise);
  EXPECT_EQ(s.sharding.per_table.at("t0").ranks, std::vector<int>{3});
  EXPECT_EQ(s.sharding.per_table.at("t0").node, -1);
  EXPECT_EQ(s.sharding.per_table.at("t1").type, es::ShardingType::table_row_wise);
  EXPECT_TRUE(s.sharding.per_table.at("t1").ranks.empty());
  EXPECT_EQ(s.sharding.per_table.at("t1").node, 1);
  EXPECT_EQ(s.sharding.per_table.at("t2").ranks, (std::vector<int>{0, 2, 2}));
  EXPECT_EQ(s.optimizer.type, es::OptimizerType::adam);
  EXPECT_EQ(s.optimizer.beta1, 0.8);
  EXPECT_EQ(s.optimizer.beta2, 0.99);
  EXPECT_EQ(s.optimizer.eps, 1e-6);
  EXPECT_EQ(s.optimizer.dense_learning_rate, 0.05);
  EXPECT_EQ(s.invalid_ids, es::InvalidIdPolicy::clamp);

  // And it survives the round trip, overrides included.
  const es::WorkloadSpec back = es::parse_workload(es::to_json(s), "rt");
  expect_same(s, back);
}

TEST(SpecParse, PlannerChoosesWhenRanksAbsent) {
  json j = base_spec();
  j["sharding"] = json::parse(R"({"tables": {"t0": {"type": "table_wise"},
                                             "t1": {"type": "column_wise"}}})");
  const es::WorkloadSpec s = es::parse_workload(j, "t.json");
  EXPECT_TRUE(s.sharding.per_table.at("t0").ranks.empty());
  EXPECT_TRUE(s.sharding.per_table.at("t1").ranks.empty());
}

}  // namespace
