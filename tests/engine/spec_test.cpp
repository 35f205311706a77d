// Tests of the workload spec: parsing, defaults, every class of error (exact messages),
// validate() after overrides, file errors, the presets and the JSON round trip.

#include "embedscope/engine/spec.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace es = embedscope::engine;
using nlohmann::json;

namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

/// A small valid spec: two tables of dim 4, two devices.
json base_spec() {
  return json::parse(R"({
    "tables": [
      {"name": "t0", "num_embeddings": 10, "embedding_dim": 4, "feature_names": ["f0"]},
      {"name": "t1", "num_embeddings": 20, "embedding_dim": 4, "feature_names": ["f1"]}
    ],
    "features": [{"name": "f0"}, {"name": "f1"}],
    "batch_size": 8,
    "devices": {"count": 2},
    "dense": {"num_dense_features": 3, "bottom_mlp": [4], "top_mlp": [8, 1]}
  })");
}

/// The SpecError message of parsing `j`, or "<no error>".
std::string parse_error(const json& j, const std::string& origin = "test.json") {
  try {
    es::parse_workload(j, origin);
  } catch (const es::SpecError& e) {
    return e.what();
  }
  return "<no error>";
}

std::string validate_error(const es::WorkloadSpec& s, const std::string& origin = "cli") {
  try {
    es::validate(s, origin);
  } catch (const es::SpecError& e) {
    return e.what();
  }
  return "<no error>";
}

std::string load_error(const std::string& path) {
  try {
    es::load_workload_file(path);
  } catch (const es::SpecError& e) {
    return e.what();
  }
  return "<no error>";
}

int64_t total_rows(const es::WorkloadSpec& s) {
  int64_t n = 0;
  for (const auto& t : s.tables) n += t.num_embeddings;
  return n;
}

double total_pooling(const es::WorkloadSpec& s) {
  double n = 0;
  for (const auto& f : s.features) n += f.pooling_factor.mean;
  return n;
}

/// A fresh empty directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            (std::string("embedscope_spec_test_") + info->name() + "_" +
             std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string write(const std::string& name, const std::string& text) const {
    const auto p = path_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  std::string path(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

/// Every field of two specs is equal (doubles exactly: the round trip must be lossless).
void expect_same(const es::WorkloadSpec& a, const es::WorkloadSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.description, b.description);
  EXPECT_EQ(a.source, b.source);
  ASSERT_EQ(a.tables.size(), b.tables.size());
  for (size_t t = 0; t < a.tables.size(); ++t) {
    EXPECT_EQ(a.tables[t].name, b.tables[t].name);
    EXPECT_EQ(a.tables[t].num_embeddings, b.tables[t].num_embeddings);
    EXPECT_EQ(a.tables[t].embedding_dim, b.tables[t].embedding_dim);
    EXPECT_EQ(a.tables[t].pooling, b.tables[t].pooling);
    EXPECT_EQ(a.tables[t].feature_names, b.tables[t].feature_names);
  }
  ASSERT_EQ(a.features.size(), b.features.size());
  for (size_t f = 0; f < a.features.size(); ++f) {
    const auto& x = a.features[f];
    const auto& y = b.features[f];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.pooling_factor.fixed, y.pooling_factor.fixed);
    EXPECT_EQ(x.pooling_factor.mean, y.pooling_factor.mean);
    EXPECT_EQ(x.pooling_factor.max, y.pooling_factor.max);
    EXPECT_EQ(x.ids.kind, y.ids.kind);
    EXPECT_EQ(x.ids.alpha, y.ids.alpha);
    EXPECT_EQ(x.ids.permute, y.ids.permute);
    EXPECT_EQ(x.ids.permute_seed, y.ids.permute_seed);
  }
  EXPECT_EQ(a.batch_size, b.batch_size);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.warmup_steps, b.warmup_steps);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.devices.count, b.devices.count);
  EXPECT_EQ(a.devices.backend, b.devices.backend);
  EXPECT_EQ(a.devices.memory_bytes, b.devices.memory_bytes);
  EXPECT_EQ(a.optimizer.type, b.optimizer.type);
  EXPECT_EQ(a.optimizer.learning_rate, b.optimizer.learning_rate);
  EXPECT_EQ(a.optimizer.eps, b.optimizer.eps);
  EXPECT_EQ(a.optimizer.beta1, b.optimizer.beta1);
  EXPECT_EQ(a.optimizer.beta2, b.optimizer.beta2);
  EXPECT_EQ(a.optimizer.dense_learning_rate, b.optimizer.dense_learning_rate);
  ASSERT_EQ(a.dense.has_value(), b.dense.has_value());
  if (a.dense) {
    EXPECT_EQ(a.dense->num_dense_features, b.dense->num_dense_features);
    EXPECT_EQ(a.dense->bottom_mlp, b.dense->bottom_mlp);
    EXPECT_EQ(a.dense->interaction, b.dense->interaction);
    EXPECT_EQ(a.dense->top_mlp, b.dense->top_mlp);
    if (a.dense->interaction == es::Interaction::dcn) {
      EXPECT_EQ(a.dense->dcn_num_layers, b.dense->dcn_num_layers);
      EXPECT_EQ(a.dense->dcn_low_rank_dim, b.dense->dcn_low_rank_dim);
    }
  }
  EXPECT_EQ(a.sharding.default_type, b.sharding.default_type);
  EXPECT_EQ(a.sharding.local_world_size, b.sharding.local_world_size);
  ASSERT_EQ(a.sharding.per_table.size(), b.sharding.per_table.size());
  for (const auto& [name, ts] : a.sharding.per_table) {
    ASSERT_TRUE(b.sharding.per_table.count(name)) << name;
    const auto& us = b.sharding.per_table.at(name);
    EXPECT_EQ(ts.type, us.type) << name;
    EXPECT_EQ(ts.ranks, us.ranks) << name;
    EXPECT_EQ(ts.node, us.node) << name;
  }
  EXPECT_EQ(a.invalid_ids, b.invalid_ids);
  EXPECT_EQ(a.collective_timeout_ms, b.collective_timeout_ms);
  EXPECT_EQ(a.pipeline, b.pipeline);
  EXPECT_EQ(a.qcomms.forward_precision, b.qcomms.forward_precision);
  EXPECT_EQ(a.qcomms.backward_precision, b.qcomms.backward_precision);
  EXPECT_EQ(a.network.intra_node.bandwidth_bytes_per_s, b.network.intra_node.bandwidth_bytes_per_s);
  EXPECT_EQ(a.network.intra_node.latency_ns, b.network.intra_node.latency_ns);
  EXPECT_EQ(a.network.inter_node.bandwidth_bytes_per_s, b.network.inter_node.bandwidth_bytes_per_s);
  EXPECT_EQ(a.network.inter_node.latency_ns, b.network.inter_node.latency_ns);
  EXPECT_EQ(a.dense.has_value(), b.dense.has_value());
  if (a.dense && b.dense) {
    EXPECT_EQ(a.dense->bucket_cap_bytes, b.dense->bucket_cap_bytes);
  }
}

// ---- enums -----------------------------------------------------------------------------------

TEST(SpecEnums, ToStringSpellsEveryValue) {
  EXPECT_STREQ(es::to_string(es::Pooling::sum), "sum");
  EXPECT_STREQ(es::to_string(es::Pooling::mean), "mean");
  EXPECT_STREQ(es::to_string(es::ShardingType::data_parallel), "data_parallel");
  EXPECT_STREQ(es::to_string(es::ShardingType::table_wise), "table_wise");
  EXPECT_STREQ(es::to_string(es::ShardingType::row_wise), "row_wise");
  EXPECT_STREQ(es::to_string(es::ShardingType::column_wise), "column_wise");
  EXPECT_STREQ(es::to_string(es::ShardingType::table_row_wise), "table_row_wise");
  EXPECT_STREQ(es::to_string(es::OptimizerType::sgd), "sgd");
  EXPECT_STREQ(es::to_string(es::OptimizerType::rowwise_adagrad), "rowwise_adagrad");
  EXPECT_STREQ(es::to_string(es::OptimizerType::adam), "adam");
  EXPECT_STREQ(es::to_string(es::IdDistributionKind::uniform), "uniform");
  EXPECT_STREQ(es::to_string(es::IdDistributionKind::zipf), "zipf");
  EXPECT_STREQ(es::to_string(es::InvalidIdPolicy::error), "error");
  EXPECT_STREQ(es::to_string(es::InvalidIdPolicy::clamp), "clamp");
  EXPECT_STREQ(es::to_string(es::InvalidIdPolicy::drop), "drop");
  EXPECT_STREQ(es::to_string(es::Backend::cpu), "cpu");
  EXPECT_STREQ(es::to_string(es::Interaction::dot), "dot");
  EXPECT_STREQ(es::to_string(es::Interaction::cat), "cat");
  EXPECT_STREQ(es::to_string(es::Interaction::dcn), "dcn");
  EXPECT_STREQ(es::to_string(es::PipelineKind::base), "base");
  EXPECT_STREQ(es::to_string(es::PipelineKind::sparse_dist), "sparse_dist");
  EXPECT_STREQ(es::to_string(es::PipelineKind::semi_sync), "semi_sync");
  EXPECT_STREQ(es::to_string(es::CommPrecision::fp32), "fp32");
  EXPECT_STREQ(es::to_string(es::CommPrecision::fp16), "fp16");
  EXPECT_STREQ(es::to_string(es::CommPrecision::bf16), "bf16");
}

TEST(SpecEnums, ShardingTypeFromString) {
  for (auto t : {es::ShardingType::data_parallel, es::ShardingType::table_wise,
                 es::ShardingType::row_wise, es::ShardingType::column_wise,
                 es::ShardingType::table_row_wise}) {
    EXPECT_EQ(es::sharding_type_from_string(es::to_string(t), "--sharding"), t);
  }
  try {
    es::sharding_type_from_string("cw", "--sharding");
    FAIL() << "no error";
  } catch (const es::SpecError& e) {
    EXPECT_STREQ(e.what(),
                 "--sharding: must be one of data_parallel, table_wise, row_wise, column_wise, "
                 "table_row_wise, got \"cw\"");
  }
}

// ---- parsing and defaults ----------------------------------------------------------------------

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

// ---- errors: one case per class, exact message -------------------------------------------------

struct ErrorCase {
  const char* id;
  const char* patch;    ///< RFC 6902 JSON Patch applied to base_spec()
  const char* message;  ///< expected SpecError text
};

class SpecErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(SpecErrorTest, ExactMessage) {
  const ErrorCase& c = GetParam();
  const json j = base_spec().patch(json::parse(c.patch));
  EXPECT_EQ(parse_error(j), c.message);
}

const ErrorCase kErrorCases[] = {
    // Shape: root, unknown keys, required keys, types.
    {"root_not_object", R"([{"op": "replace", "path": "", "value": [1]}])",
     "test.json: /: must be an object, got array"},
    {"unknown_top_key", R"([{"op": "add", "path": "/batchsize", "value": 1}])",
     "test.json: /batchsize: unknown key"},
    {"unknown_nested_key", R"([{"op": "add", "path": "/tables/0/num_embedings", "value": 1}])",
     "test.json: /tables/0/num_embedings: unknown key"},
    {"unknown_devices_key", R"([{"op": "add", "path": "/devices/gpus", "value": 1}])",
     "test.json: /devices/gpus: unknown key"},
    {"unknown_ids_key", R"([{"op": "add", "path": "/features/0/ids", "value": {"distribution": "zipf", "s": 1}}])",
     "test.json: /features/0/ids/s: unknown key"},
    {"missing_tables", R"([{"op": "remove", "path": "/tables"}])", "test.json: /tables: required"},
    {"missing_batch_size", R"([{"op": "remove", "path": "/batch_size"}])",
     "test.json: /batch_size: required"},
    {"missing_table_name", R"([{"op": "remove", "path": "/tables/1/name"}])",
     "test.json: /tables/1/name: required"},
    {"missing_num_embeddings", R"([{"op": "remove", "path": "/tables/0/num_embeddings"}])",
     "test.json: /tables/0/num_embeddings: required"},
    {"missing_feature_names", R"([{"op": "remove", "path": "/tables/0/feature_names"}])",
     "test.json: /tables/0/feature_names: required"},
    {"missing_feature_entry_name", R"([{"op": "remove", "path": "/features/1/name"}])",
     "test.json: /features/1/name: required"},
    {"missing_bottom_mlp", R"([{"op": "remove", "path": "/dense/bottom_mlp"}])",
     "test.json: /dense/bottom_mlp: required"},
    {"batch_size_string", R"([{"op": "replace", "path": "/batch_size", "value": "8"}])",
     "test.json: /batch_size: must be an integer, got string"},
    {"batch_size_bool", R"([{"op": "replace", "path": "/batch_size", "value": true}])",
     "test.json: /batch_size: must be an integer, got boolean"},
    {"batch_size_fraction", R"([{"op": "replace", "path": "/batch_size", "value": 8.5}])",
     "test.json: /batch_size: must be an integer, got 8.5"},
    {"batch_size_too_big_float", R"([{"op": "replace", "path": "/batch_size", "value": 1e19}])",
     "test.json: /batch_size: must be <= 9223372036854775807, got 1e+19"},
    {"batch_size_too_big_uint", R"([{"op": "replace", "path": "/batch_size", "value": 18446744073709551615}])",
     "test.json: /batch_size: must be <= 9223372036854775807, got 18446744073709551615"},
    {"tables_not_array", R"([{"op": "replace", "path": "/tables", "value": {}}])",
     "test.json: /tables: must be an array, got object"},
    {"tables_empty", R"([{"op": "replace", "path": "/tables", "value": []}])",
     "test.json: /tables: must not be empty"},
    {"table_not_object", R"([{"op": "replace", "path": "/tables/1", "value": "t1"}])",
     "test.json: /tables/1: must be an object, got string"},
    {"name_not_string", R"([{"op": "add", "path": "/name", "value": 3}])",
     "test.json: /name: must be a string, got number"},
    {"name_empty", R"([{"op": "add", "path": "/name", "value": ""}])",
     "test.json: /name: must not be empty"},
    {"learning_rate_string", R"([{"op": "add", "path": "/optimizer", "value": {"learning_rate": "fast"}}])",
     "test.json: /optimizer/learning_rate: must be a number, got string"},
    {"permute_not_bool", R"([{"op": "add", "path": "/features/0/ids", "value": {"distribution": "zipf", "permute": "yes"}}])",
     "test.json: /features/0/ids/permute: must be a boolean, got string"},
    {"features_not_array", R"([{"op": "replace", "path": "/features", "value": {"f0": {}}}])",
     "test.json: /features: must be an array, got object"},
    {"mlp_not_array", R"([{"op": "replace", "path": "/dense/top_mlp", "value": 1}])",
     "test.json: /dense/top_mlp: must be an array, got number"},
    {"dense_not_object", R"([{"op": "replace", "path": "/dense", "value": true}])",
     "test.json: /dense: must be an object, got boolean"},

    // Enumerations.
    {"pooling_none", R"([{"op": "add", "path": "/tables/0/pooling", "value": "none"}])",
     "test.json: /tables/0/pooling: must be one of sum, mean, got \"none\""},
    {"optimizer_type", R"([{"op": "add", "path": "/optimizer", "value": {"type": "adagrad"}}])",
     "test.json: /optimizer/type: must be one of sgd, rowwise_adagrad, adam, got \"adagrad\""},
    {"backend", R"([{"op": "add", "path": "/devices/backend", "value": "tpu"}])",
     "test.json: /devices/backend: must be one of cpu, cuda, auto, got \"tpu\""},
    // What the cuda backend does not run yet is refused at validation, naming the field.
    {"cuda_pipeline", R"([{"op": "add", "path": "/devices/backend", "value": "cuda"},
                          {"op": "add", "path": "/pipeline", "value": "sparse_dist"}])",
     "test.json: /pipeline: sparse_dist is not supported on the cuda backend yet (base only)"},
    {"cuda_qcomms", R"([{"op": "add", "path": "/devices/backend", "value": "cuda"},
                        {"op": "add", "path": "/qcomms", "value": {"backward_precision": "bf16"}}])",
     "test.json: /qcomms/backward_precision: bf16 is not supported on the cuda backend yet (fp32 only)"},
    {"cuda_network", R"([{"op": "add", "path": "/devices/backend", "value": "cuda"},
                         {"op": "add", "path": "/network", "value": {"inter_node": {"latency_ns": 5}}}])",
     "test.json: /network: network emulation is not supported on the cuda backend yet"},
    {"cuda_compaction", R"([{"op": "add", "path": "/devices/backend", "value": "cuda"},
                            {"op": "add", "path": "/memory", "value": {"compaction": 2}}])",
     "test.json: /memory/compaction: compaction is not supported on the cuda backend yet"},
    {"cuda_async_on_cpu", R"([{"op": "add", "path": "/memory", "value": {"allocator": "cuda_async"}}])",
     "test.json: /memory/allocator: cuda_async (cudaMallocAsync pools) needs devices.backend cuda, got cpu"},
    {"interaction", R"([{"op": "add", "path": "/dense/interaction", "value": "dotp"}])",
     "test.json: /dense/interaction: must be one of dot, cat, dcn, got \"dotp\""},
    {"invalid_ids", R"([{"op": "add", "path": "/invalid_ids", "value": "skip"}])",
     "test.json: /invalid_ids: must be one of error, clamp, drop, got \"skip\""},
    {"ids_distribution", R"([{"op": "add", "path": "/features/0/ids", "value": "gauss"}])",
     "test.json: /features/0/ids: must be one of uniform, zipf, got \"gauss\""},
    {"sharding_default", R"([{"op": "add", "path": "/sharding", "value": {"default": "rw"}}])",
     "test.json: /sharding/default: must be one of data_parallel, table_wise, row_wise, "
     "column_wise, table_row_wise, got \"rw\""},

    // Ranges.
    {"num_embeddings_zero", R"([{"op": "replace", "path": "/tables/1/num_embeddings", "value": 0}])",
     "test.json: /tables/1/num_embeddings: must be > 0, got 0"},
    {"embedding_dim_zero", R"([{"op": "replace", "path": "/tables/1/embedding_dim", "value": 0}])",
     "test.json: /tables/1/embedding_dim: must be > 0, got 0"},
    {"batch_size_zero", R"([{"op": "replace", "path": "/batch_size", "value": 0}])",
     "test.json: /batch_size: must be > 0, got 0"},
    {"steps_zero", R"([{"op": "add", "path": "/steps", "value": 0}])",
     "test.json: /steps: must be > 0, got 0"},
    {"warmup_negative", R"([{"op": "add", "path": "/warmup_steps", "value": -1}])",
     "test.json: /warmup_steps: must be >= 0, got -1"},
    {"seed_negative", R"([{"op": "add", "path": "/seed", "value": -1}])",
     "test.json: /seed: must be >= 0, got -1"},
    {"devices_zero", R"([{"op": "replace", "path": "/devices/count", "value": 0}])",
     "test.json: /devices/count: must be in [1, 64], got 0"},
    {"devices_65", R"([{"op": "replace", "path": "/devices/count", "value": 65}])",
     "test.json: /devices/count: must be in [1, 64], got 65"},
    {"devices_huge", R"([{"op": "replace", "path": "/devices/count", "value": 1e10}])",
     "test.json: /devices/count: must be in [1, 64], got 10000000000"},
    {"memory_zero", R"([{"op": "add", "path": "/devices/memory_bytes", "value": 0}])",
     "test.json: /devices/memory_bytes: must be > 0, got 0"},
    {"learning_rate_zero", R"([{"op": "add", "path": "/optimizer", "value": {"learning_rate": 0}}])",
     "test.json: /optimizer/learning_rate: must be > 0, got 0"},
    {"dense_learning_rate_negative", R"([{"op": "add", "path": "/optimizer", "value": {"dense_learning_rate": -0.5}}])",
     "test.json: /optimizer/dense_learning_rate: must be > 0, got -0.5"},
    {"eps_zero", R"([{"op": "add", "path": "/optimizer", "value": {"eps": 0}}])",
     "test.json: /optimizer/eps: must be > 0, got 0"},
    {"beta1_one", R"([{"op": "add", "path": "/optimizer", "value": {"beta1": 1}}])",
     "test.json: /optimizer/beta1: must be in [0, 1), got 1"},
    {"beta2_negative", R"([{"op": "add", "path": "/optimizer", "value": {"beta2": -0.1}}])",
     "test.json: /optimizer/beta2: must be in [0, 1), got -0.1"},
    {"timeout_zero", R"([{"op": "add", "path": "/collective_timeout_ms", "value": 0}])",
     "test.json: /collective_timeout_ms: must be in [100, 86400000], got 0"},
    {"pipeline_unknown", R"([{"op": "add", "path": "/pipeline", "value": "async"}])",
     "test.json: /pipeline: must be one of base, sparse_dist, semi_sync, got \"async\""},
    {"qcomms_unknown_key", R"([{"op": "add", "path": "/qcomms", "value": {"fwd": "bf16"}}])",
     "test.json: /qcomms/fwd: unknown key"},
    {"qcomms_precision", R"([{"op": "add", "path": "/qcomms", "value": {"backward_precision": "int8"}}])",
     "test.json: /qcomms/backward_precision: must be one of fp32, fp16, bf16, got \"int8\""},
    {"network_unknown_class", R"([{"op": "add", "path": "/network", "value": {"nvlink": {}}}])",
     "test.json: /network/nvlink: unknown key"},
    {"network_bandwidth_zero", R"([{"op": "add", "path": "/network", "value": {"intra_node": {"bandwidth_bytes_per_s": 0}}}])",
     "test.json: /network/intra_node/bandwidth_bytes_per_s: must be > 0, got 0"},
    {"network_latency_negative", R"([{"op": "add", "path": "/network", "value": {"inter_node": {"latency_ns": -1}}}])",
     "test.json: /network/inter_node/latency_ns: must be >= 0, got -1"},
    {"network_latency_huge", R"([{"op": "add", "path": "/network", "value": {"inter_node": {"latency_ns": 1e11}}}])",
     "test.json: /network/inter_node/latency_ns: must be <= 10000000000, got 100000000000"},
    {"network_not_object", R"([{"op": "add", "path": "/network", "value": {"inter_node": 5}}])",
     "test.json: /network/inter_node: must be an object, got number"},
    {"bucket_cap_zero", R"([{"op": "add", "path": "/dense/bucket_cap_bytes", "value": 0}])",
     "test.json: /dense/bucket_cap_bytes: must be > 0, got 0"},
    {"compaction_negative", R"([{"op": "add", "path": "/memory", "value": {"compaction": -1}}])",
     "test.json: /memory/compaction: must be >= 0, got -1"},
    {"max_split_small", R"([{"op": "add", "path": "/memory", "value": {"max_split_size": 1024}}])",
     "test.json: /memory/max_split_size: must be 0 (unlimited) or in [20971520, 1125899906842624], got 1024"},
    {"allocator_unknown", R"([{"op": "add", "path": "/memory", "value": {"allocator": "buddy"}}])",
     "test.json: /memory/allocator: must be one of caching, expandable, direct, cuda_async, got \"buddy\""},
    {"timeout_huge", R"([{"op": "add", "path": "/collective_timeout_ms", "value": 9223372036854775807}])",
     "test.json: /collective_timeout_ms: must be in [100, 86400000], got 9223372036854775807"},
    {"rows_huge", R"([{"op": "replace", "path": "/tables/0/num_embeddings", "value": 2305843009213693952}])",
     "test.json: /tables/0/num_embeddings: must be <= 1099511627776, got 2305843009213693952"},
    {"dim_huge", R"([{"op": "replace", "path": "/tables/0/embedding_dim", "value": 100000}])",
     "test.json: /tables/0/embedding_dim: must be <= 65536, got 100000"},
    {"batch_huge", R"([{"op": "replace", "path": "/batch_size", "value": 288230376151711744}])",
     "test.json: /batch_size: must be <= 16777216, got 288230376151711744"},
    {"steps_huge", R"([{"op": "add", "path": "/steps", "value": 9223372036854775807}])",
     "test.json: /steps: must be <= 1000000000, got 9223372036854775807"},
    {"pooling_factor_huge", R"([{"op": "add", "path": "/features", "value": [{"name": "f0", "pooling_factor": 9223372036854775807}]}])",
     "test.json: /features/0/pooling_factor: must be <= 1048576, got 9.223372036854776e+18"},
    {"lr_huge", R"([{"op": "add", "path": "/optimizer", "value": {"learning_rate": 1e300}}])",
     "test.json: /optimizer/learning_rate: must be <= 1e+30, got 1e+300"},
    {"num_dense_features_zero", R"([{"op": "replace", "path": "/dense/num_dense_features", "value": 0}])",
     "test.json: /dense/num_dense_features: must be > 0, got 0"},
    {"bottom_width_zero", R"([{"op": "replace", "path": "/dense/bottom_mlp", "value": [4, 0, 4]}])",
     "test.json: /dense/bottom_mlp/1: must be > 0, got 0"},
    {"bottom_width_huge", R"([{"op": "replace", "path": "/dense/bottom_mlp/0", "value": 3e9}])",
     "test.json: /dense/bottom_mlp/0: must be <= 2147483647, got 3000000000"},
    {"bottom_empty", R"([{"op": "replace", "path": "/dense/bottom_mlp", "value": []}])",
     "test.json: /dense/bottom_mlp: must not be empty"},
    {"top_empty", R"([{"op": "replace", "path": "/dense/top_mlp", "value": []}])",
     "test.json: /dense/top_mlp: must not be empty"},
    {"top_last_not_one", R"([{"op": "replace", "path": "/dense/top_mlp", "value": [8, 2]}])",
     "test.json: /dense/top_mlp/1: the last layer must have width 1 (one logit), got 2"},
    {"dcn_without_dcn_interaction",
     R"([{"op": "add", "path": "/dense/dcn", "value": {"num_layers": 3}}])",
     "test.json: /dense/dcn: only allowed when interaction is \"dcn\", not \"dot\""},
    {"dcn_layers_zero",
     R"([{"op": "add", "path": "/dense/interaction", "value": "dcn"},
         {"op": "add", "path": "/dense/dcn", "value": {"num_layers": 0}}])",
     "test.json: /dense/dcn/num_layers: must be >= 1, got 0"},
    {"dcn_rank_zero",
     R"([{"op": "add", "path": "/dense/interaction", "value": "dcn"},
         {"op": "add", "path": "/dense/dcn", "value": {"low_rank_dim": 0}}])",
     "test.json: /dense/dcn/low_rank_dim: must be >= 1, got 0"},
    {"dot_dim_mismatch", R"([{"op": "replace", "path": "/tables/1/embedding_dim", "value": 8}])",
     "test.json: /dense/interaction: dot needs every table's embedding_dim to equal the last "
     "bottom_mlp width (4); table \"t1\" has embedding_dim 8"},

    // Pooling factors and ids.
    {"pooling_factor_fraction", R"([{"op": "add", "path": "/features/0/pooling_factor", "value": 1.5}])",
     "test.json: /features/0/pooling_factor: a fixed pooling factor must be an integer (use "
     "{\"mean\": 1.5, \"max\": N} for bags of varying length), got 1.5"},
    {"pooling_factor_negative", R"([{"op": "add", "path": "/features/0/pooling_factor", "value": -1}])",
     "test.json: /features/0/pooling_factor: must be >= 0, got -1"},
    {"pooling_factor_string", R"([{"op": "add", "path": "/features/0/pooling_factor", "value": "3"}])",
     "test.json: /features/0/pooling_factor: must be a number or an object {\"mean\", \"max\"}, got string"},
    {"pooling_factor_mean_above_max",
     R"([{"op": "add", "path": "/features/0/pooling_factor", "value": {"mean": 3, "max": 2}}])",
     "test.json: /features/0/pooling_factor/mean: must be <= max (2), got 3"},
    {"pooling_factor_mean_negative",
     R"([{"op": "add", "path": "/features/0/pooling_factor", "value": {"mean": -1, "max": 2}}])",
     "test.json: /features/0/pooling_factor/mean: must be >= 0, got -1"},
    {"pooling_factor_max_fraction",
     R"([{"op": "add", "path": "/features/0/pooling_factor", "value": {"mean": 1, "max": 2.5}}])",
     "test.json: /features/0/pooling_factor/max: must be an integer, got 2.5"},
    {"pooling_factor_max_missing",
     R"([{"op": "add", "path": "/features/0/pooling_factor", "value": {"mean": 1}}])",
     "test.json: /features/0/pooling_factor/max: required"},
    {"pooling_factor_unknown_key",
     R"([{"op": "add", "path": "/features/0/pooling_factor", "value": {"mean": 1, "max": 2, "min": 0}}])",
     "test.json: /features/0/pooling_factor/min: unknown key"},
    {"ids_not_string_or_object", R"([{"op": "add", "path": "/features/0/ids", "value": 1.15}])",
     "test.json: /features/0/ids: must be a string or an object, got number"},
    {"ids_distribution_missing", R"([{"op": "add", "path": "/features/0/ids", "value": {"alpha": 1.2}}])",
     "test.json: /features/0/ids/distribution: required"},
    {"ids_alpha_zero",
     R"([{"op": "add", "path": "/features/1/ids", "value": {"distribution": "zipf", "alpha": 0}}])",
     "test.json: /features/1/ids/alpha: must be > 0, got 0"},
    {"ids_permute_seed_negative",
     R"([{"op": "add", "path": "/features/1/ids", "value": {"distribution": "zipf", "permute_seed": -3}}])",
     "test.json: /features/1/ids/permute_seed: must be >= 0, got -3"},

    // Names and cross references.
    {"table_name_empty", R"([{"op": "replace", "path": "/tables/0/name", "value": ""}])",
     "test.json: /tables/0/name: must not be empty"},
    {"duplicate_table", R"([{"op": "replace", "path": "/tables/1/name", "value": "t0"}])",
     "test.json: /tables/1/name: duplicate table name \"t0\""},
    {"feature_names_empty", R"([{"op": "replace", "path": "/tables/1/feature_names", "value": []},
                               {"op": "remove", "path": "/features/1"}])",
     "test.json: /tables/1/feature_names: must not be empty"},
    {"feature_name_empty_in_table", R"([{"op": "add", "path": "/tables/1/feature_names/-", "value": ""}])",
     "test.json: /tables/1/feature_names/1: must not be empty"},
    {"feature_entry_name_empty", R"([{"op": "add", "path": "/features/-", "value": {"name": ""}}])",
     "test.json: /features/2/name: must not be empty"},
    {"duplicate_feature", R"([{"op": "add", "path": "/features/-", "value": {"name": "f0"}}])",
     "test.json: /features/2/name: duplicate feature name \"f0\""},
    {"feature_used_by_two_tables", R"([{"op": "replace", "path": "/tables/1/feature_names", "value": ["f0"]},
                                     {"op": "remove", "path": "/features/1"}])",
     "test.json: /tables/1/feature_names/0: feature \"f0\" is already used by table \"t0\""},
    {"feature_listed_twice_in_table", R"([{"op": "add", "path": "/tables/0/feature_names/-", "value": "f0"}])",
     "test.json: /tables/0/feature_names/1: feature \"f0\" is already used by table \"t0\""},
    {"unused_feature", R"([{"op": "add", "path": "/features/1", "value": {"name": "orphan"}}])",
     "test.json: /features/1: feature \"orphan\" is not used by any table"},

    // Sharding.
    {"sharding_unknown_key", R"([{"op": "add", "path": "/sharding", "value": {"type": "row_wise"}}])",
     "test.json: /sharding/type: unknown key"},
    {"sharding_unknown_table", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"foo": {"type": "row_wise"}}}}])",
     "test.json: /sharding/tables/foo: no table named \"foo\""},
    {"sharding_unknown_table_escaped", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"a/b~c": {"type": "row_wise"}}}}])",
     "test.json: /sharding/tables/a~1b~0c: no table named \"a/b~c\""},
    {"sharding_tables_not_object", R"([{"op": "add", "path": "/sharding", "value": {"tables": ["t0"]}}])",
     "test.json: /sharding/tables: must be an object, got array"},
    {"sharding_type_missing", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"ranks": [0]}}}}])",
     "test.json: /sharding/tables/t0/type: required"},
    {"sharding_type_unknown", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "grid_shard"}}}}])",
     "test.json: /sharding/tables/t0/type: must be one of data_parallel, table_wise, row_wise, "
     "column_wise, table_row_wise, got \"grid_shard\""},
    {"table_wise_two_ranks", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "table_wise", "ranks": [0, 1]}}}}])",
     "test.json: /sharding/tables/t0/ranks: table_wise takes exactly 1 rank, got 2"},
    {"table_wise_no_ranks", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "table_wise", "ranks": []}}}}])",
     "test.json: /sharding/tables/t0/ranks: table_wise takes exactly 1 rank, got 0"},
    {"column_wise_too_many_ranks",
     R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t1": {"type": "column_wise", "ranks": [0, 1, 0, 1, 0]}}}}])",
     "test.json: /sharding/tables/t1/ranks: column_wise takes 1 to 4 ranks (the table's "
     "embedding_dim), got 5"},
    {"column_wise_no_ranks", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t1": {"type": "column_wise", "ranks": []}}}}])",
     "test.json: /sharding/tables/t1/ranks: column_wise takes at least 1 rank, got 0"},
    {"row_wise_ranks", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "row_wise", "ranks": [0]}}}}])",
     "test.json: /sharding/tables/t0/ranks: not allowed for row_wise"},
    {"data_parallel_ranks", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "data_parallel", "ranks": [0]}}}}])",
     "test.json: /sharding/tables/t0/ranks: not allowed for data_parallel"},
    {"table_row_wise_ranks", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "table_row_wise", "ranks": [0]}}}}])",
     "test.json: /sharding/tables/t0/ranks: not allowed for table_row_wise"},
    {"rank_out_of_range", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "table_wise", "ranks": [2]}}}}])",
     "test.json: /sharding/tables/t0/ranks/0: must be in [0, 2), got 2 (devices.count is 2)"},
    {"rank_negative", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t1": {"type": "column_wise", "ranks": [0, -1]}}}}])",
     "test.json: /sharding/tables/t1/ranks/1: must be >= 0, got -1"},
    {"node_not_twrw", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "row_wise", "node": 0}}}}])",
     "test.json: /sharding/tables/t0/node: only allowed for table_row_wise, not row_wise"},
    {"node_out_of_range",
     R"([{"op": "replace", "path": "/devices/count", "value": 4},
         {"op": "add", "path": "/sharding", "value": {"local_world_size": 2, "tables": {"t0": {"type": "table_row_wise", "node": 2}}}}])",
     "test.json: /sharding/tables/t0/node: must be in [0, 2), got 2 (2 node(s) of local_world_size 2)"},
    {"node_one_node", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "table_row_wise", "node": 1}}}}])",
     "test.json: /sharding/tables/t0/node: must be in [0, 1), got 1 (1 node(s) of local_world_size 2)"},
    {"node_negative", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "table_row_wise", "node": -1}}}}])",
     "test.json: /sharding/tables/t0/node: must be >= 0, got -1"},
    {"local_world_size_not_divisor",
     R"([{"op": "replace", "path": "/devices/count", "value": 4},
         {"op": "add", "path": "/sharding", "value": {"local_world_size": 3}}])",
     "test.json: /sharding/local_world_size: must divide devices.count (4), got 3"},
    {"local_world_size_negative", R"([{"op": "add", "path": "/sharding", "value": {"local_world_size": -2}}])",
     "test.json: /sharding/local_world_size: must be >= 0, got -2"},
};

INSTANTIATE_TEST_SUITE_P(AllClasses, SpecErrorTest, ::testing::ValuesIn(kErrorCases),
                         [](const ::testing::TestParamInfo<ErrorCase>& p) {
                           return std::string(p.param.id);
                         });

TEST(SpecErrors, BaseSpecIsValid) { EXPECT_EQ(parse_error(base_spec()), "<no error>"); }

TEST(SpecErrors, OriginPrefixesEveryMessage) {
  json j = base_spec();
  j["tables"][1]["embedding_dim"] = 0;
  EXPECT_EQ(parse_error(j, "preset criteo"),
            "preset criteo: /tables/1/embedding_dim: must be > 0, got 0");
}

// ---- validate() after command-line overrides ----------------------------------------------------

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
            "cli: /sharding/tables/t_c/node: only allowed for table_row_wise, not row_wise");
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

// ---- files ------------------------------------------------------------------------------------

TEST(SpecFile, MissingFile) {
  TempDir dir;
  const std::string p = dir.path("absent.json");
  EXPECT_EQ(load_error(p), p + ": cannot open: No such file or directory");
}

TEST(SpecFile, DirectoryIsNotAFile) {
  TempDir dir;
  const std::string p = dir.path("");
  const std::string err = load_error(p);
  // fopen of a directory fails (EISDIR) or succeeds and then reading fails, per libc.
  EXPECT_TRUE(err == p + ": cannot read: Is a directory" || err == p + ": cannot open: Is a directory")
      << err;
}

TEST(SpecFile, SyntaxErrorNamesLineAndColumn) {
  TempDir dir;
  const std::string p = dir.write("bad.json", "{\n  \"batch_size\": 8,\n  \"tables\": [ x ]\n}\n");
  EXPECT_EQ(load_error(p),
            p + ": line 3, column 15: syntax error while parsing value - invalid literal; last read: "
                "'\"tables\": [ x'");
}

TEST(SpecFile, TrailingCommaNamesLineAndColumn) {
  TempDir dir;
  const std::string p = dir.write("comma.json", "{\n  \"batch_size\": 8,\n}\n");
  EXPECT_EQ(load_error(p),
            p + ": line 3, column 1: syntax error while parsing object key - unexpected '}'; "
                "expected string literal");
}

TEST(SpecFile, TruncatedFile) {
  TempDir dir;
  const std::string p = dir.write("cut.json", "{\"batch_size\": 8,\n \"tables\": [");
  EXPECT_EQ(load_error(p),
            p + ": line 2, column 13: syntax error while parsing value - unexpected end of input; "
                "expected '[', '{', or a literal");
}

TEST(SpecFile, EmptyFile) {
  TempDir dir;
  const std::string p = dir.write("empty.json", "");
  EXPECT_EQ(load_error(p),
            p + ": line 1, column 1: syntax error while parsing value - unexpected end of input; "
                "expected '[', '{', or a literal");
}

TEST(SpecFile, NewlineInStringIsReportedOnItsOwnLine) {
  // nlohmann counts a newline as column 0 of the next line; we report the line it ends.
  TempDir dir;
  const std::string p = dir.write("nl.json", "{\"a\": \"b\nc\"}");
  EXPECT_EQ(load_error(p),
            p + ": line 1, column 9: syntax error while parsing value - invalid string: control "
                "character U+000A (LF) must be escaped to \\u000A or \\n; last read: '\"b<U+000A>'");
}

TEST(SpecFile, SemanticErrorUsesPathAsOrigin) {
  TempDir dir;
  json j = base_spec();
  j["tables"][0]["embedding_dim"] = 0;
  const std::string p = dir.write("dim.json", j.dump(2));
  EXPECT_EQ(load_error(p), p + ": /tables/0/embedding_dim: must be > 0, got 0");
}

TEST(SpecFile, NameDefaultsToFileStem) {
  TempDir dir;
  const std::string p = dir.write("my_workload.json", base_spec().dump());
  EXPECT_EQ(es::load_workload_file(p).name, "my_workload");
  json named = base_spec();
  named["name"] = "explicit";
  const std::string q = dir.write("other.json", named.dump());
  EXPECT_EQ(es::load_workload_file(q).name, "explicit");
}

TEST(SpecFile, SavedPresetLoadsBack) {
  TempDir dir;
  const es::WorkloadSpec tiny = es::load_preset("tiny");
  const std::string p = dir.write("saved.json", es::to_json(tiny).dump(2));
  expect_same(es::load_workload_file(p), tiny);
}

// ---- presets --------------------------------------------------------------------------------

TEST(SpecPresets, Names) {
  EXPECT_EQ(es::preset_names(),
            (std::vector<std::string>{"criteo_kaggle", "criteo_terabyte_10m", "mlperf_dlrm_dcnv2",
                                      "mlperf_dlrm_dcnv2_scaled", "tiny"}));
}

TEST(SpecPresets, UnknownPreset) {
  try {
    es::preset_json("criteo");
    FAIL() << "no error";
  } catch (const es::SpecError& e) {
    EXPECT_STREQ(e.what(),
                 "unknown preset \"criteo\"; known presets: criteo_kaggle, criteo_terabyte_10m, "
                 "mlperf_dlrm_dcnv2, mlperf_dlrm_dcnv2_scaled, tiny");
  }
  EXPECT_THROW(es::load_preset("nope"), es::SpecError);
}

TEST(SpecPresets, EveryPresetCitesItsSourceAndIsNamedAfterItsFile) {
  for (const auto& name : es::preset_names()) {
    const es::WorkloadSpec s = es::load_preset(name);
    EXPECT_EQ(s.name, name);
    EXPECT_FALSE(s.source.empty()) << name;
    EXPECT_FALSE(s.description.empty()) << name;
    EXPECT_EQ(s.features.size(), [&] {
      size_t n = 0;
      for (const auto& t : s.tables) n += t.feature_names.size();
      return n;
    }()) << name;
  }
}

TEST(SpecPresets, CriteoKaggle) {
  const es::WorkloadSpec s = es::load_preset("criteo_kaggle");
  ASSERT_EQ(s.tables.size(), 26u);
  ASSERT_EQ(s.features.size(), 26u);
  EXPECT_EQ(total_rows(s), 33762577);
  // 2.01 GiB of fp32 weights at dim 16.
  EXPECT_NEAR(static_cast<double>(total_rows(s)) * 16 * 4 / kGiB, 2.01, 0.005);
  EXPECT_EQ(s.tables[0].name, "t_cat_0");
  EXPECT_EQ(s.tables[0].num_embeddings, 1460);
  EXPECT_EQ(s.tables[2].num_embeddings, 10131227);
  EXPECT_EQ(s.tables[8].num_embeddings, 3);
  EXPECT_EQ(s.tables[25].name, "t_cat_25");
  EXPECT_EQ(s.tables[25].num_embeddings, 142572);
  for (size_t i = 0; i < 26; ++i) {
    const auto& t = s.tables[i];
    EXPECT_EQ(t.embedding_dim, 16);
    EXPECT_EQ(t.pooling, es::Pooling::sum);
    EXPECT_EQ(t.feature_names, std::vector<std::string>{"cat_" + std::to_string(i)});
    const auto& f = s.features[i];
    EXPECT_EQ(f.name, "cat_" + std::to_string(i));
    EXPECT_EQ(s.table_of_feature(i), static_cast<int>(i));
    EXPECT_TRUE(f.pooling_factor.fixed);
    EXPECT_EQ(f.pooling_factor.max, 1);
    EXPECT_EQ(f.ids.kind, es::IdDistributionKind::zipf);
    EXPECT_EQ(f.ids.alpha, 1.15);
    EXPECT_TRUE(f.ids.permute);
  }
  EXPECT_EQ(s.batch_size, 512);
  EXPECT_EQ(s.steps, 20);
  EXPECT_EQ(s.warmup_steps, 2);
  EXPECT_EQ(s.seed, 1u);
  EXPECT_EQ(s.devices.count, 4);
  EXPECT_EQ(s.devices.memory_bytes, 4 * kGiB);
  EXPECT_EQ(s.optimizer.type, es::OptimizerType::sgd);
  EXPECT_EQ(s.optimizer.learning_rate, 0.1);
  EXPECT_EQ(s.optimizer.dense_learning_rate, 0.1);
  ASSERT_TRUE(s.dense.has_value());
  EXPECT_EQ(s.dense->num_dense_features, 13);
  EXPECT_EQ(s.dense->bottom_mlp, (std::vector<int>{512, 256, 64, 16}));
  EXPECT_EQ(s.dense->interaction, es::Interaction::dot);
  EXPECT_EQ(s.dense->top_mlp, (std::vector<int>{512, 256, 1}));
  EXPECT_EQ(s.sharding.default_type, es::ShardingType::table_wise);
  EXPECT_TRUE(s.sharding.per_table.empty());
  EXPECT_NE(s.source.find("facebookresearch/dlrm"), std::string::npos);
}

TEST(SpecPresets, CriteoTerabyte10M) {
  const es::WorkloadSpec s = es::load_preset("criteo_terabyte_10m");
  ASSERT_EQ(s.tables.size(), 26u);
  EXPECT_EQ(total_rows(s), 49126297);
  // 11.7 GiB of fp32 weights at dim 64.
  EXPECT_NEAR(static_cast<double>(total_rows(s)) * 64 * 4 / kGiB, 11.7, 0.05);
  for (const auto& t : s.tables) {
    EXPECT_EQ(t.embedding_dim, 64);
    EXPECT_LE(t.num_embeddings, 10000000);
  }
  EXPECT_EQ(s.tables[0].num_embeddings, 9980333);
  EXPECT_EQ(s.tables[25].num_embeddings, 36);
  EXPECT_EQ(s.batch_size, 512);
  EXPECT_EQ(s.steps, 20);
  EXPECT_EQ(s.devices.count, 4);
  EXPECT_EQ(s.devices.memory_bytes, 16 * kGiB);
  EXPECT_EQ(s.optimizer.type, es::OptimizerType::sgd);
  EXPECT_EQ(s.optimizer.learning_rate, 0.1);
  EXPECT_EQ(s.features[7].ids.kind, es::IdDistributionKind::zipf);
  EXPECT_EQ(s.features[7].ids.alpha, 1.15);
  ASSERT_TRUE(s.dense.has_value());
  EXPECT_EQ(s.dense->bottom_mlp, (std::vector<int>{512, 256, 64}));
  EXPECT_EQ(s.dense->top_mlp, (std::vector<int>{512, 512, 256, 1}));
  EXPECT_EQ(s.dense->interaction, es::Interaction::dot);
  EXPECT_EQ(s.sharding.default_type, es::ShardingType::table_wise);
  EXPECT_NE(s.source.find("facebookresearch/dlrm"), std::string::npos);
}

const std::vector<int64_t> kMlperfRows = {
    40000000, 39060, 17295, 7424, 20265, 3,        7122,     1543,     63,     40000000, 3067956, 405282, 10,
    2209,     11938, 155,   4,    976,   14,       40000000, 40000000, 40000000, 590152, 12973,   108,    36};
const std::vector<int64_t> kMlperfHot = {3, 2, 1,  2, 6, 1, 1, 1,   1,  7,  3, 8, 1,
                                         6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1};

TEST(SpecPresets, MlperfDlrmDcnv2) {
  const es::WorkloadSpec s = es::load_preset("mlperf_dlrm_dcnv2");
  ASSERT_EQ(s.tables.size(), 26u);
  EXPECT_EQ(total_rows(s), 204184588);
  // 97.4 GiB of fp32 weights at dim 128.
  EXPECT_NEAR(static_cast<double>(total_rows(s)) * 128 * 4 / kGiB, 97.4, 0.05);
  EXPECT_EQ(total_pooling(s), 214.0);  // lookups per sample
  for (size_t i = 0; i < 26; ++i) {
    EXPECT_EQ(s.tables[i].num_embeddings, kMlperfRows[i]) << i;
    EXPECT_EQ(s.tables[i].embedding_dim, 128);
    EXPECT_TRUE(s.features[i].pooling_factor.fixed);
    EXPECT_EQ(s.features[i].pooling_factor.max, kMlperfHot[i]) << i;
  }
  EXPECT_EQ(s.optimizer.type, es::OptimizerType::rowwise_adagrad);
  EXPECT_EQ(s.optimizer.learning_rate, 0.005);
  EXPECT_EQ(s.batch_size, 8192);
  EXPECT_EQ(s.devices.count, 8);
  EXPECT_EQ(s.batch_size * s.devices.count, 65536);  // the global batch
  EXPECT_EQ(s.devices.memory_bytes, 80 * kGiB);
  ASSERT_TRUE(s.dense.has_value());
  EXPECT_EQ(s.dense->interaction, es::Interaction::dcn);
  EXPECT_EQ(s.dense->dcn_num_layers, 3);
  EXPECT_EQ(s.dense->dcn_low_rank_dim, 512);
  EXPECT_EQ(s.dense->bottom_mlp, (std::vector<int>{512, 256, 128}));
  EXPECT_EQ(s.dense->top_mlp, (std::vector<int>{1024, 1024, 512, 256, 1}));
  EXPECT_EQ(s.sharding.default_type, es::ShardingType::row_wise);
  EXPECT_NE(s.source.find("mlcommons/training"), std::string::npos);
  EXPECT_NE(s.description.find("97.4 GiB"), std::string::npos);
}

TEST(SpecPresets, MlperfDlrmDcnv2Scaled) {
  const es::WorkloadSpec full = es::load_preset("mlperf_dlrm_dcnv2");
  const es::WorkloadSpec s = es::load_preset("mlperf_dlrm_dcnv2_scaled");
  ASSERT_EQ(s.tables.size(), full.tables.size());
  for (size_t i = 0; i < s.tables.size(); ++i) {
    const int64_t n = full.tables[i].num_embeddings;
    const int64_t want = n > 1000 ? (n + 99) / 100 : n;
    EXPECT_EQ(s.tables[i].num_embeddings, want) << s.tables[i].name;
    EXPECT_EQ(s.tables[i].embedding_dim, 128);
    EXPECT_EQ(s.features[i].pooling_factor.max, full.features[i].pooling_factor.max);
  }
  EXPECT_EQ(s.tables[0].num_embeddings, 400000);
  EXPECT_EQ(s.tables[7].num_embeddings, 16);  // ceil(1543 / 100)
  EXPECT_EQ(s.tables[17].num_embeddings, 976);
  EXPECT_EQ(total_rows(s), 2043207);
  EXPECT_EQ(s.batch_size, 256);
  EXPECT_EQ(s.devices.count, 4);
  EXPECT_EQ(s.devices.memory_bytes, 4 * kGiB);
  EXPECT_EQ(s.steps, 20);
  EXPECT_EQ(s.optimizer.type, es::OptimizerType::rowwise_adagrad);
  EXPECT_EQ(s.dense->interaction, es::Interaction::dcn);
  EXPECT_NE(s.description.find("1/100"), std::string::npos);
}

TEST(SpecPresets, Tiny) {
  const es::WorkloadSpec s = es::load_preset("tiny");
  ASSERT_EQ(s.tables.size(), 4u);
  EXPECT_EQ(s.tables[0].name, "t_small");
  EXPECT_EQ(s.tables[0].num_embeddings, 1);
  EXPECT_EQ(s.tables[0].embedding_dim, 4);
  EXPECT_EQ(s.tables[1].name, "t_a");
  EXPECT_EQ(s.tables[1].num_embeddings, 10);
  EXPECT_EQ(s.tables[1].embedding_dim, 8);
  EXPECT_EQ(s.tables[1].pooling, es::Pooling::mean);
  EXPECT_EQ(s.tables[2].name, "t_b");
  EXPECT_EQ(s.tables[2].num_embeddings, 100);
  EXPECT_EQ(s.tables[2].embedding_dim, 6);
  EXPECT_EQ(s.tables[2].feature_names, (std::vector<std::string>{"f_b0", "f_b1"}));
  EXPECT_EQ(s.tables[3].name, "t_c");
  EXPECT_EQ(s.tables[3].num_embeddings, 1000);
  EXPECT_EQ(s.tables[3].embedding_dim, 12);
  ASSERT_EQ(s.features.size(), 5u);
  const int b1 = s.feature_index("f_b1");
  ASSERT_GE(b1, 0);
  EXPECT_EQ(s.table_of_feature(static_cast<size_t>(b1)), 2);
  EXPECT_FALSE(s.features[b1].pooling_factor.fixed);  // Poisson lengths: empty bags happen
  EXPECT_EQ(s.features[b1].pooling_factor.mean, 3.0);
  EXPECT_EQ(s.features[b1].pooling_factor.max, 6);
  const auto& fc = s.features[s.feature_index("f_c")];
  EXPECT_EQ(fc.ids.kind, es::IdDistributionKind::zipf);
  EXPECT_EQ(fc.ids.alpha, 1.1);
  ASSERT_TRUE(s.dense.has_value());
  EXPECT_EQ(s.dense->num_dense_features, 4);
  EXPECT_EQ(s.dense->bottom_mlp, std::vector<int>{8});
  EXPECT_EQ(s.dense->interaction, es::Interaction::cat);
  EXPECT_EQ(s.dense->top_mlp, (std::vector<int>{16, 1}));
  EXPECT_EQ(s.batch_size, 8);
  EXPECT_EQ(s.steps, 30);
  EXPECT_EQ(s.warmup_steps, 0);
  EXPECT_EQ(s.devices.count, 2);
  EXPECT_EQ(s.devices.memory_bytes, int64_t{64} << 20);
  EXPECT_EQ(s.optimizer.type, es::OptimizerType::sgd);
  EXPECT_EQ(s.optimizer.learning_rate, 0.1);
  EXPECT_EQ(s.sharding.default_type, es::ShardingType::table_wise);
}

// ---- round trip ---------------------------------------------------------------------------

TEST(SpecRoundTrip, EveryPreset) {
  for (const auto& name : es::preset_names()) {
    SCOPED_TRACE(name);
    const es::WorkloadSpec s = es::load_preset(name);
    const json j = es::to_json(s);
    // Through the typed spec and through text.
    const es::WorkloadSpec back = es::parse_workload(j, "roundtrip");
    expect_same(s, back);
    EXPECT_EQ(es::to_json(back), j);
    const es::WorkloadSpec from_text = es::parse_workload(json::parse(j.dump()), "roundtrip");
    expect_same(s, from_text);
  }
}

TEST(SpecRoundTrip, NullDenseAndVariablePooling) {
  json j = base_spec();
  j["dense"] = nullptr;
  j["features"][1]["pooling_factor"] = json::parse(R"({"mean": 0.25, "max": 3})");
  j["seed"] = 18446744073709551615ull;
  const es::WorkloadSpec s = es::parse_workload(j, "t.json");
  const json out = es::to_json(s);
  EXPECT_TRUE(out.at("dense").is_null());
  EXPECT_EQ(out.at("features").at(1).at("pooling_factor"), json::parse(R"({"mean": 0.25, "max": 3})"));
  expect_same(es::parse_workload(json::parse(out.dump()), "rt"), s);
}

}  // namespace

namespace embedscope::engine::detail {
nlohmann::json parse_json_text(const std::string& text, const std::string& origin);  // spec.cpp
}

TEST(SpecFile, DuplicateKeysAreRefused) {
  try {
    es::detail::parse_json_text(R"({"batch_size": 4, "memory": {"allocator": "caching", "allocator": "direct"}})", "dup.json");
    FAIL() << "duplicate accepted";
  } catch (const es::SpecError& e) {
    EXPECT_STREQ(e.what(), "dup.json: key \"allocator\" appears twice in the same object (in \"memory\")");
  }
  // the same key in different objects is fine
  EXPECT_NO_THROW(es::detail::parse_json_text(R"({"a": {"name": 1}, "b": {"name": 2}})", "ok.json"));
}
