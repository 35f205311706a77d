#pragma once
// Shared by the workload tests (tests/engine/workload/*_test.cpp): a small valid spec, the
// error text of a parse / validate / load, and a field-by-field comparison of two specs.

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"

namespace spec_testing {

namespace es = embedscope::engine;
using nlohmann::json;

constexpr int64_t kGiB = int64_t{1} << 30;

/// A small valid spec: two tables of dim 4, two devices.
inline json base_spec() {
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
inline std::string parse_error(const json& j, const std::string& origin = "test.json") {
  try {
    es::parse_workload(j, origin);
  } catch (const es::SpecError& e) {
    return e.what();
  }
  return "<no error>";
}

inline std::string validate_error(const es::WorkloadSpec& s, const std::string& origin = "cli") {
  try {
    es::validate(s, origin);
  } catch (const es::SpecError& e) {
    return e.what();
  }
  return "<no error>";
}

inline std::string load_error(const std::string& path) {
  try {
    es::load_workload_file(path);
  } catch (const es::SpecError& e) {
    return e.what();
  }
  return "<no error>";
}

inline int64_t total_rows(const es::WorkloadSpec& s) {
  int64_t n = 0;
  for (const auto& t : s.tables) n += t.num_embeddings;
  return n;
}

inline double total_pooling(const es::WorkloadSpec& s) {
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
inline void expect_same(const es::WorkloadSpec& a, const es::WorkloadSpec& b) {
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
    EXPECT_EQ(a.tables[t].data_type, b.tables[t].data_type);
    EXPECT_EQ(a.tables[t].hash_size, b.tables[t].hash_size);
    EXPECT_EQ(a.tables[t].optimizer_state_type, b.tables[t].optimizer_state_type);
    EXPECT_EQ(a.tables[t].stochastic_rounding, b.tables[t].stochastic_rounding);
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
    EXPECT_EQ(a.dense->precision, b.dense->precision);
  }
}

}  // namespace spec_testing
