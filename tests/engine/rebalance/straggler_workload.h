#pragma once
// The hot-table straggler the rebalance CLI tests run (rebalance_cli_test, balance_time_test).

#include <string>

#include <nlohmann/json.hpp>

namespace embedscope::test_support {

/// 4 ranks; c0..c2 (4000 rows, 1 id a bag) are the biggest, so the greedy plan puts one on each
/// of ranks 0..2 and the four small hot tables h0..h3 (500 rows, 6 ids a bag) on rank 3:
/// per step rank 3 looks up 4 x 6 x 8 x 4 = 768 ids, ranks 0..2 32 each. Batch 8, 3 steps, seed 3.
inline nlohmann::json straggler_workload(const std::string& name) {
  using nlohmann::json;
  json j = {{"name", name},
            {"batch_size", 8},
            {"steps", 3},
            {"seed", 3},
            {"devices", {{"count", 4}, {"memory_bytes", 64 << 20}}},
            {"dense", {{"num_dense_features", 4}, {"bottom_mlp", {8}}, {"interaction", "cat"}, {"top_mlp", {8, 1}}}},
            {"tables", json::array()},
            {"features", json::array()}};
  for (int t = 0; t < 3; ++t) {
    j["tables"].push_back({{"name", "c" + std::to_string(t)}, {"num_embeddings", 4000}, {"embedding_dim", 8},
                           {"feature_names", {"fc" + std::to_string(t)}}});
    j["features"].push_back({{"name", "fc" + std::to_string(t)}, {"pooling_factor", 1}});
  }
  for (int t = 0; t < 4; ++t) {
    j["tables"].push_back({{"name", "h" + std::to_string(t)}, {"num_embeddings", 500}, {"embedding_dim", 8},
                           {"feature_names", {"fh" + std::to_string(t)}}});
    j["features"].push_back({{"name", "fh" + std::to_string(t)}, {"pooling_factor", 6}});
  }
  return j;
}

}  // namespace embedscope::test_support
