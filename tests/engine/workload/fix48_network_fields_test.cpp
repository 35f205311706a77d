// tester48 F14 items 1, 4, 8: the network link fields follow one rule with one message whatever
// the JSON number's type; a latency a collective's timeout cannot cover is refused at validation,
// naming both fields; `plan` prints a small bandwidth in MB/s, not "0.001 GB/s".
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/spec.h"
#include "embedscope/engine/workload/spec_error.h"
#include "support/cli_run.h"

namespace {
namespace fix48w = embedscope::engine;

std::string fix48_network_error(const std::string& network, int64_t timeout_ms = 30000) {
  nlohmann::json j = nlohmann::json::parse(R"({
    "tables": [{"name": "t0", "num_embeddings": 10, "embedding_dim": 4, "feature_names": ["f0"]}],
    "features": [{"name": "f0"}], "batch_size": 8, "devices": {"count": 2},
    "dense": {"num_dense_features": 3, "bottom_mlp": [4], "top_mlp": [8, 1]}})");
  j["network"] = nlohmann::json::parse(network);
  j["collective_timeout_ms"] = timeout_ms;
  try {
    fix48w::parse_workload(j, "n.json");
  } catch (const fix48w::SpecError& e) {
    return e.what();
  }
  return "<no error>";
}
}  // namespace

TEST(Fix48NetworkFields, OneRuleWhateverTheNumbersType) {
  const std::string bw = "n.json: /network/intra_node/bandwidth_bytes_per_s: ";
  // 2^60 as an integer and 1e30 as a float: the same bound (2^50), was "<= 9223372036854775807, got 1e+30"
  EXPECT_EQ(fix48_network_error(R"({"intra_node": {"bandwidth_bytes_per_s": 1152921504606846976}})"),
            bw + "must be <= 1125899906842624, got 1152921504606846976");
  EXPECT_EQ(fix48_network_error(R"({"intra_node": {"bandwidth_bytes_per_s": 1e30}})"),
            bw + "must be <= 1125899906842624, got 1e+30");
  EXPECT_EQ(fix48_network_error(R"({"intra_node": {"bandwidth_bytes_per_s": 2e15}})"),
            bw + "must be <= 1125899906842624, got 2000000000000000");
  EXPECT_EQ(fix48_network_error(R"({"intra_node": {"bandwidth_bytes_per_s": 0.0}})"), bw + "must be > 0, got 0");
  EXPECT_EQ(fix48_network_error(R"({"intra_node": {"bandwidth_bytes_per_s": 1.25e9}})"), "<no error>");
  EXPECT_EQ(fix48_network_error(R"({"intra_node": {"bandwidth_bytes_per_s": 1.5}})"), bw + "must be an integer, got 1.5");
  EXPECT_EQ(fix48_network_error(R"({"intra_node": {"bandwidth_bytes_per_s": "1e9"}})"),
            bw + "must be a number (an integer; 1e9 is accepted), got string");
  EXPECT_EQ(fix48_network_error(R"({"inter_node": {"latency_ns": 1e30}})"),
            "n.json: /network/inter_node/latency_ns: must be <= 10000000000, got 1e+30");
  EXPECT_EQ(fix48_network_error(R"({"inter_node": {"latency_ns": -1e3}})"),
            "n.json: /network/inter_node/latency_ns: must be >= 0, got -1000");
}

// A 2 s latency under a 1 s timeout: every collective over the link would time out.
TEST(Fix48NetworkFields, ALatencyTheTimeoutCannotCoverIsRefused) {
  EXPECT_EQ(fix48_network_error(R"({"inter_node": {"latency_ns": 2000000000}})", 1000),
            "n.json: /network/inter_node/latency_ns: must be below /collective_timeout_ms (1000 ms = 1000000000 ns): "
            "every collective over this link would time out, got 2000000000");
  EXPECT_EQ(fix48_network_error(R"({"inter_node": {"latency_ns": 999999999}})", 1000), "<no error>");
}

TEST(Fix48NetworkFields, PlanPrintsASmallBandwidthInMegabytes) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_fix48_net_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "plan --preset tiny --network-bandwidth 1e6", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("network      intra_node 1 MB/s, 0 ns latency; inter_node 1 MB/s, 0 ns latency"), std::string::npos)
      << r.out;
  const auto k = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "plan --preset tiny --network-bandwidth 2500", dir);
  EXPECT_NE(k.out.find("intra_node 2.5 kB/s"), std::string::npos) << k.out;
  std::filesystem::remove_all(dir);
}
