// A collective call's wait for a core on an oversubscribed cpu node (hardware_profile.h
// CpuContention::call_wait_ns, shared_cores.h collective_call_ns, coll45): the share and the call
// time by hand, the profile field, and calibrate recovering latency, bandwidth and wait from
// sessions the cost model timed with them.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/calibration.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/cost/shared_cores.h"
#include "embedscope/engine/workload/spec_error.h"
#include "engine/cost/cost_sessions.h"

namespace es = embedscope::engine;

namespace {

// The truth of the calibration test: round_numbers' GPU, a link of 100 us and 1 GB/s, 2 cores, no
// other load, and a wait of 400 us per call when every core is busy.
constexpr double kCwLatencyNs = 100000, kCwBandwidth = 1e9, kCwWaitNs = 400000;
nlohmann::json call_wait_profile(int64_t wait_ns) {
  std::ifstream f(std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json");
  nlohmann::json j = nlohmann::json::parse(f);
  j["name"] = "call_wait_round_numbers";
  j["cluster"] = {{"gpus_per_node", 8}, {"max_nodes", 1}};
  j["intra_node"] = {{"name", "slow link"}, {"bus_bandwidth_bytes_per_s", kCwBandwidth}, {"latency_ns", static_cast<int64_t>(kCwLatencyNs)}};
  j["inter_node"] = j["intra_node"];
  j["cpu"] = {{"cores", 2}, {"threads_per_rank", 1.0}, {"background_threads", 0.0}, {"other_groups", 0.0},
              {"call_wait_ns", wait_ns}};
  return j;
}

std::string call_wait_session(const std::string& name, int ranks, es::ShardingType type) {
  const auto dir = embedscope::test_support::cost_scratch_dir("call_wait");
  const std::string profile = (dir / (name + ".json")).string();
  std::ofstream(profile) << call_wait_profile(static_cast<int64_t>(kCwWaitNs)).dump();
  return embedscope::test_support::criteo_as_measured(
      profile, (dir / (name + ".db")).string(), ranks, type, 3,
      "INSERT OR REPLACE INTO metadata (key, value) VALUES ('cpu_cores', '2'), ('cpu_self_cores', '1.000'), "
      "('cpu_other_cores', '0');");
}

std::string call_wait_profile_error(const nlohmann::json& j) {
  try {
    es::parse_hardware_profile(j.dump(), "p.json");
  } catch (const es::SpecError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(CallWait, OversubscribedShareAndCallTimeByHand) {
  es::HardwareProfile hw;  // 2 cores, 1 thread per rank, no other load: x = n / 2
  hw.cpu.cores = 2;
  EXPECT_DOUBLE_EQ(es::oversubscribed_share(hw, 2), 0.0);  // a core for each rank thread
  EXPECT_DOUBLE_EQ(es::oversubscribed_share(hw, 3), 0.5);
  EXPECT_DOUBLE_EQ(es::oversubscribed_share(hw, 4), 1.0);
  EXPECT_DOUBLE_EQ(es::oversubscribed_share(hw, 8), 1.0);  // saturates
  EXPECT_DOUBLE_EQ(es::oversubscribed_share(es::HardwareProfile{}, 8), 0.0);  // GPUs
  hw.cpu.call_wait_ns = 300;
  // 4 ranks on one node: processor sharing 1000 x f(4) + 4000 x f(1) = 6000, + 300 x 1
  EXPECT_EQ(es::collective_call_ns({{1000, 0, 4}, {5000, 0, 4}, {1000, 0, 4}, {1000, 0, 4}}, hw), 6300);
  // two nodes of 2 ranks: the largest member x f(2) = 5000, + 300 x 0 (a core each)
  EXPECT_EQ(es::collective_call_ns({{1000, 0, 2}, {5000, 0, 2}, {1000, 1, 2}, {1000, 1, 2}}, hw), 5000);
  // 3 ranks, balanced: 1000 x f(3) = 1500, + 300 x 0.5
  EXPECT_EQ(es::collective_call_ns({{1000, 0, 3}, {1000, 0, 3}, {1000, 0, 3}}, hw), 1650);
  // 8 ranks, two members: 2000 x f(8) = 8000, + 300
  EXPECT_EQ(es::collective_call_ns({{2000, 0, 8}, {2000, 0, 8}}, hw), 8300);
  // a call of one member (a group of one rank) waits for nothing: its own time only (0 from collective_ns)
  EXPECT_EQ(es::collective_call_ns({{0, 0, 4}}, hw), 0);
  // one other task group (x doubles): 2 ranks x = 2, share 1
  hw.cpu.other_groups = 1;
  EXPECT_DOUBLE_EQ(es::oversubscribed_share(hw, 2), 1.0);
  EXPECT_EQ(es::collective_call_ns({{1000, 0, 2}, {1000, 0, 2}}, hw), 1000 * 2 + 300);
  // GPUs: no cpu block, no wait, whatever the field says
  es::HardwareProfile gpu;
  gpu.cpu.call_wait_ns = 300;
  EXPECT_EQ(es::collective_call_ns({{1000, 0, 4}, {5000, 0, 4}}, gpu), 5000);
}

TEST(CallWait, ProfileFieldIsOptionalAndCheckedByJsonPointer) {
  const nlohmann::json valid = call_wait_profile(250000);
  EXPECT_EQ(call_wait_profile_error(valid), "");
  EXPECT_EQ(es::parse_hardware_profile(valid.dump(), "p.json").cpu.call_wait_ns, 250000);
  nlohmann::json j = valid;
  j["cpu"]["call_wait_ns"] = -1;
  EXPECT_NE(call_wait_profile_error(j).find("p.json: /cpu/call_wait_ns: must be in [0"), std::string::npos)
      << call_wait_profile_error(j);
  j["cpu"]["call_wait_ns"] = 1.5;
  EXPECT_NE(call_wait_profile_error(j).find("/cpu/call_wait_ns: must be an integer"), std::string::npos);
  j = valid;
  j["cpu"].erase("call_wait_ns");  // optional: 0, and not written back
  const es::HardwareProfile none = es::parse_hardware_profile(j.dump(), "p.json");
  EXPECT_EQ(none.cpu.call_wait_ns, 0);
  EXPECT_FALSE(es::to_json(none)["cpu"].contains("call_wait_ns"));
  EXPECT_EQ(es::to_json(es::parse_hardware_profile(valid.dump(), "p.json"))["cpu"]["call_wait_ns"], 250000);
}

TEST(CallWait, CalibrateRecoversLatencyBandwidthAndWait) {
  // 2 ranks on 2 cores (a core each: share 0) and 4 (every core busy: share 1), timed by the
  // truth: calibrate tells the wait from the latency by the two and gets all three back; a
  // held-out 8-rank run is predicted by the fitted profile
  const std::vector<std::string> sessions = {call_wait_session("tw2", 2, es::ShardingType::table_wise),
                                             call_wait_session("rw2", 2, es::ShardingType::row_wise),
                                             call_wait_session("tw4", 4, es::ShardingType::table_wise),
                                             call_wait_session("rw4", 4, es::ShardingType::row_wise)};
  const es::Calibration cal = es::calibrate(sessions);
  EXPECT_NEAR(static_cast<double>(cal.profile.intra_node.latency_ns) / kCwLatencyNs, 1.0, 0.02);
  EXPECT_NEAR(cal.profile.intra_node.bus_bandwidth_bytes_per_s / kCwBandwidth, 1.0, 0.02);
  EXPECT_NEAR(static_cast<double>(cal.profile.cpu.call_wait_ns) / kCwWaitNs, 1.0, 0.02);
  EXPECT_NE(cal.profile.sources.at("/cpu/call_wait_ns").find("fitted"), std::string::npos);
  const auto dir = embedscope::test_support::cost_scratch_dir("call_wait");
  const std::string profile = (dir / "fitted.json").string();
  std::ofstream(profile) << es::to_json(cal.profile).dump();
  const std::string held = call_wait_session("tw8", 8, es::ShardingType::table_wise);
  EXPECT_NEAR(es::check_calibration(held, profile).error_at_run_load(), 0.0, 0.02);

  // 4-rank sessions alone (every one at share 1): the wait is not told from the latency, left 0
  const es::Calibration four = es::calibrate({sessions[2], sessions[3]});
  EXPECT_EQ(four.profile.cpu.call_wait_ns, 0);
  EXPECT_NE(four.profile.sources.at("/cpu/call_wait_ns").find("not fitted"), std::string::npos);
}
