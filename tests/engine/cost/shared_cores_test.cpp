// A collective of cpu ranks under processor sharing of the node's cores (cost/shared_cores.h):
// the formula by hand, the simulator's calls timed by it, and calibrate recovering the link from
// sessions the cost model timed that way.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/calibration.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/cost/shared_cores.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"
#include "engine/cost/cost_sessions.h"
#include "support/collective_calls.h"

namespace es = embedscope::engine;
namespace fs = std::filesystem;

namespace {

fs::path shared_cores_dir() { return embedscope::test_support::cost_scratch_dir("shared_cores"); }

// The truth of these tests: round_numbers' GPU with a slow link (latency 100 us, 1 GB/s, like
// Gloo between this machine's rank threads), `cores` cores, `groups` other task groups.
constexpr double kScLatencyNs = 100000, kScBandwidth = 1e9;
nlohmann::json shared_cores_profile(int cores, double groups) {
  std::ifstream f(std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json");
  nlohmann::json j = nlohmann::json::parse(f);
  j["name"] = "shared_cores_round_numbers";
  j["cluster"] = {{"gpus_per_node", 8}, {"max_nodes", 1}};
  j["intra_node"] = {{"name", "slow link"}, {"bus_bandwidth_bytes_per_s", kScBandwidth}, {"latency_ns", static_cast<int64_t>(kScLatencyNs)}};
  j["inter_node"] = j["intra_node"];
  j["cpu"] = {{"cores", cores}, {"threads_per_rank", 1.0}, {"background_threads", 0.0}, {"other_groups", groups}};
  return j;
}

// criteo_kaggle on `ranks` simulated with that profile, relabelled measured (load: self 1, other `groups`).
std::string shared_cores_session(const std::string& name, int ranks, es::ShardingType type, int cores, double groups,
                                 int steps) {
  const std::string profile = (shared_cores_dir() / (name + ".json")).string();
  std::ofstream(profile) << shared_cores_profile(cores, groups).dump();
  return embedscope::test_support::criteo_as_measured(
      profile, (shared_cores_dir() / (name + ".db")).string(), ranks, type, steps,
      "INSERT OR REPLACE INTO metadata (key, value) VALUES ('cpu_cores', '" + std::to_string(cores) +
          "'), ('cpu_self_cores', '1.000'), ('cpu_other_cores', '" + std::to_string(groups) + "');");
}

using ScCall = embedscope::test_support::CollectiveCall;

}  // namespace

TEST(SharedCores, ProcessorSharingTimeByHand) {
  // {1, 1, 4} on 3 ranks, factor m / 2: 1 x 1.5 (all three) + 0 x 1 + 3 x 0.5 (the last alone) = 3
  EXPECT_DOUBLE_EQ(es::processor_sharing_time({4, 1, 1}, 3, [](int m) { return m / 2.0; }), 3.0);
  // a member of a subgroup: 2 members on a node of 4 ranks: phases at 4 and 3 runnable
  EXPECT_DOUBLE_EQ(es::processor_sharing_time({2, 6}, 4, [](int m) { return m / 2.0; }), 2 * 2.0 + 4 * 1.5);
  EXPECT_DOUBLE_EQ(es::processor_sharing_time({}, 4, [](int m) { return m / 2.0; }), 0.0);
  EXPECT_THROW(es::processor_sharing_time({1, 1, 1}, 2, [](int) { return 1.0; }), std::invalid_argument);

  es::HardwareProfile hw;  // 2 cores, 1 thread per rank, no other load: factor max(1, m / 2)
  hw.cpu.cores = 2;
  // imbalanced: 1000 x f(4) = 2000, then the 5000 ns member alone for 4000 x f(1) = 4000
  EXPECT_EQ(es::shared_cores_collective_ns({1000, 5000, 1000, 1000}, 4, hw), 6000);
  // balanced: the largest member's time x f(R), as the contention model without sharing phases
  EXPECT_EQ(es::shared_cores_collective_ns({3000, 3000, 3000, 3000}, 4, hw), 6000);
  // half of a node's 8 ranks busy elsewhere (other_groups 1: f(m) = m): {1000, 2000} on 8 ranks
  hw.cpu.other_groups = 1;
  EXPECT_EQ(es::shared_cores_collective_ns({2000, 1000}, 8, hw), 1000 * 8 + 1000 * 7);
  // GPUs (no cpu block): the largest member's time
  EXPECT_EQ(es::shared_cores_collective_ns({1000, 5000, 1000, 1000}, 4, es::HardwareProfile{}), 5000);
}

TEST(SharedCores, SimulatedCallsTakeTheirProcessorSharingPhases) {
  // 4 ranks table_wise on 2 cores, 0.5 other groups: f(m) = max(1, 0.75 m); every call's time is
  // the phases of its members' own times (latency + bytes / bandwidth, each rounded to ns)
  const std::string path = shared_cores_session("sim_tw4", 4, es::ShardingType::table_wise, 2, 0.5, 2);
  const std::vector<ScCall> calls = embedscope::test_support::collective_calls(path);
  ASSERT_GT(calls.size(), 10u);
  int imbalanced = 0;
  for (const ScCall& c : calls) {
    std::vector<double> w;
    for (int64_t b : c.bytes) w.push_back(kScLatencyNs + std::llround(static_cast<double>(b) / kScBandwidth * 1e9));
    std::sort(w.begin(), w.end());
    double expected = 0, prev = 0;
    for (size_t k = 0; k < w.size(); ++k) {
      expected += (w[k] - prev) * std::max(1.0, 0.75 * static_cast<double>(4 - k));
      prev = w[k];
    }
    EXPECT_NEAR(static_cast<double>(c.end - c.last), expected, 2.0);
    const double largest = w.back() * 3.0;  // the largest member at f(4) = 3
    if (expected < 0.9 * largest) ++imbalanced;
  }
  EXPECT_GT(imbalanced, 0);  // table_wise all-to-alls: members of unequal bytes
}

TEST(SharedCores, CalibrateRecoversTheLinkFromProcessorSharedCalls) {
  // sessions timed by the truth (processor-shared calls); calibrate fits the link on the calls'
  // effective bytes and gets the truth's latency and bandwidth back; a held-out 8-rank
  // table_wise run is predicted by the fitted profile
  const std::vector<std::string> sessions = {
      shared_cores_session("c_tw2", 2, es::ShardingType::table_wise, 2, 0.5, 3),
      shared_cores_session("c_rw2", 2, es::ShardingType::row_wise, 2, 0.5, 3),
      shared_cores_session("c_tw4", 4, es::ShardingType::table_wise, 2, 0.5, 3),
      shared_cores_session("c_rw4", 4, es::ShardingType::row_wise, 2, 0.5, 3)};
  const es::Calibration cal = es::calibrate(sessions);
  EXPECT_NEAR(static_cast<double>(cal.profile.intra_node.latency_ns) / kScLatencyNs, 1.0, 0.02);
  EXPECT_NEAR(cal.profile.intra_node.bus_bandwidth_bytes_per_s / kScBandwidth, 1.0, 0.02);
  EXPECT_NEAR(cal.step_scale, 1.0, 0.01);
  const std::string held = shared_cores_session("c_tw8", 8, es::ShardingType::table_wise, 2, 0.5, 3);
  const std::string profile = (shared_cores_dir() / "fitted.json").string();
  std::ofstream(profile) << es::to_json(cal.profile).dump();
  EXPECT_NEAR(es::check_calibration(held, profile).error_at_run_load(), 0.0, 0.02);
}
