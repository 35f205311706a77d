// A cpu profile's emulated nodes share one machine's cores (cost/shared_cores.h core_group): the
// rule by hand, the simulator's calls and step times of the "2 nodes x 2" and "1 node x 4" shapes
// of one run, the planner's statistics, and calibrate's check of a run recorded as 2 nodes.
#include <gtest/gtest.h>

#include <sqlite3.h>

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
#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/workload/presets.h"
#include "engine/cost/cost_sessions.h"
#include "support/collective_calls.h"

namespace es = embedscope::engine;
namespace fs = std::filesystem;

namespace {

fs::path machine_dir() { return embedscope::test_support::cost_scratch_dir("machine_cores"); }

// round_numbers' GPU with a slow link (100 us, 1 GB/s) on 2 cores beside 0.5 other task groups:
// f(m) = max(1, m x 1 x 1.5 / 2) = max(1, 0.75 m); up to 4 emulated nodes of the machine
constexpr double kLatencyNs = 100000, kBandwidth = 1e9;
std::string machine_profile() {
  std::ifstream f(std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json");
  nlohmann::json j = nlohmann::json::parse(f);
  j["name"] = "machine_cores_round_numbers";
  j["cluster"] = {{"gpus_per_node", 8}, {"max_nodes", 4}};
  j["intra_node"] = {{"name", "slow link"}, {"bus_bandwidth_bytes_per_s", kBandwidth}, {"latency_ns", static_cast<int64_t>(kLatencyNs)}};
  j["inter_node"] = j["intra_node"];
  j["cpu"] = {{"cores", 2}, {"threads_per_rank", 1.0}, {"background_threads", 0.0}, {"other_groups", 0.5}};
  const std::string path = (machine_dir() / "machine.json").string();
  std::ofstream(path) << j.dump();
  return path;
}

es::WorkloadSpec criteo(int ranks, int local_world_size) {
  es::WorkloadSpec s = es::load_preset("criteo_kaggle");
  s.devices.backend = es::Backend::simulated;
  s.devices.hardware = machine_profile();
  s.devices.count = ranks;
  s.devices.memory_bytes = int64_t{8} << 30;
  s.sharding.default_type = es::ShardingType::table_wise;
  s.sharding.local_world_size = local_world_size;
  s.batch_size = 4096;
  s.steps = 2;
  s.warmup_steps = 1;
  return es::with_resolved_backend(s, "test");
}

// criteo_kaggle table_wise on 4 ranks of `local_world_size` per node, simulated into `name`.db
es::RunResult simulate(const std::string& name, int local_world_size, std::string* path = nullptr) {
  const es::WorkloadSpec s = criteo(4, local_world_size);
  es::TrainerOptions o;
  o.session_path = (machine_dir() / (name + ".db")).string();
  o.session_overwrite = true;
  if (path) *path = o.session_path;
  es::RunResult r = es::run_training(s, es::plan_sharding(s), o);
  EXPECT_EQ(r.ended, es::RunEnd::complete) << r.error;
  return r;
}

using Call = embedscope::test_support::CollectiveCall;

}  // namespace

TEST(MachineCores, CoreGroupByHand) {
  es::HardwareProfile cpu;  // a cpu profile: one machine
  cpu.cpu.cores = 2;
  const es::HardwareProfile gpu;  // cpu.cores 0: the nodes' own GPUs
  // 8 ranks as 2 nodes x 4: on the cpu profile all 8 share the machine (as 1 node x 8)
  EXPECT_EQ(es::core_group(cpu, 5, 8, 4).id, 0);
  EXPECT_EQ(es::core_group(cpu, 5, 8, 4).ranks, 8);
  EXPECT_EQ(es::core_group(cpu, 5, 8, 8).ranks, 8);
  EXPECT_EQ(es::core_group(gpu, 5, 8, 4).id, 1);
  EXPECT_EQ(es::core_group(gpu, 5, 8, 4).ranks, 4);
  // a last node of fewer ranks (6 ranks, 4 a node): rank 5 is one of node 1's 2
  EXPECT_EQ(es::core_group(gpu, 5, 6, 4).id, 1);
  EXPECT_EQ(es::core_group(gpu, 5, 6, 4).ranks, 2);
  EXPECT_EQ(es::core_group(cpu, 5, 6, 4).ranks, 6);
  EXPECT_THROW(es::core_group(cpu, 8, 8, 4), std::invalid_argument);
  EXPECT_THROW(es::core_group(cpu, 0, 8, 0), std::invalid_argument);
  // a call of members from both emulated nodes shares the one machine: 2 cores, no other load,
  // {1000, 5000, 1000, 1000} ns on 4 ranks: 1000 x f(4) = 2000, then 4000 x f(1) = 4000
  std::vector<es::CallMember> ms;
  for (int r = 0; r < 4; ++r) {
    const es::CoreGroup g = es::core_group(cpu, r, 4, 2);
    ms.push_back({r == 1 ? 5000 : 1000, g.id, g.ranks});
  }
  EXPECT_EQ(es::collective_call_ns(ms, cpu), 6000);
}

TEST(MachineCores, TwoEmulatedNodesSimulateAsOneMachine) {
  std::string two_nodes;
  const es::RunResult a = simulate("tw4_2x2", 2, &two_nodes);
  const es::RunResult b = simulate("tw4_1x4", 4);
  // the same run: the node shape does not change the machine's cores (nor, on one link, the calls)
  ASSERT_FALSE(a.step_time_ns.empty());
  EXPECT_EQ(a.step_time_ns, b.step_time_ns);
  // every call of the 2 x 2 shape takes the processor-sharing phases of 4 ranks on the 2 cores:
  // members' own times w (100 us + bytes / 1 GB/s) sorted, sum (w_k - w_(k-1)) x max(1, 0.75 (4 - k))
  const std::vector<Call> calls = embedscope::test_support::collective_calls(two_nodes);
  ASSERT_GT(calls.size(), 10u);
  for (const Call& c : calls) {
    std::vector<double> w;
    for (int64_t bytes : c.bytes) w.push_back(kLatencyNs + std::llround(static_cast<double>(bytes) / kBandwidth * 1e9));
    std::sort(w.begin(), w.end());
    double expected = 0, prev = 0;
    for (size_t k = 0; k < w.size(); ++k) {
      expected += (w[k] - prev) * std::max(1.0, 0.75 * static_cast<double>(4 - k));
      prev = w[k];
    }
    EXPECT_NEAR(static_cast<double>(c.end - c.last), expected, 2.0);
  }
}

TEST(MachineCores, PlannerStatisticsShareTheMachine) {
  const es::HardwareProfile hw = es::load_hardware_profile(machine_profile());
  const es::WorkloadSpec two = criteo(4, 2), one = criteo(4, 4);
  const es::PlanStats a = es::plan_stats(two, es::plan_sharding(two), hw);
  const es::PlanStats b = es::plan_stats(one, es::plan_sharding(one), hw);
  ASSERT_EQ(a.ranks.size(), 4u);
  for (size_t r = 0; r < 4; ++r) {
    EXPECT_EQ(a.ranks[r].fwd_compute_ns, b.ranks[r].fwd_compute_ns) << "rank " << r;
    EXPECT_EQ(a.ranks[r].bwd_compute_ns, b.ranks[r].bwd_compute_ns) << "rank " << r;
    EXPECT_EQ(a.ranks[r].fwd_comms_ns, b.ranks[r].fwd_comms_ns) << "rank " << r;
  }
}

TEST(MachineCores, CalibrateChecksARunRecordedAsTwoNodesOnItsMachine) {
  // a 4-rank run on the 2 cores (the truth: 1 node x 4), recorded with local_world_size 2 (the
  // shape a user planning 2 hosts x 2 records): the truth profile simulates it as measured
  const std::string profile = machine_profile();
  const std::string held = embedscope::test_support::criteo_as_measured(
      profile, (machine_dir() / "held_2x2.db").string(), 4, es::ShardingType::table_wise, 3,
      "INSERT OR REPLACE INTO metadata (key, value) VALUES ('cpu_cores', '2'), ('cpu_self_cores', '1.000'), "
      "('cpu_other_cores', '0.500');"
      "UPDATE metadata SET value = json_set(value, '$.sharding.local_world_size', 2) WHERE key = 'workload_json';"
      "UPDATE metadata SET value = json_set(value, '$.local_world_size', 2) WHERE key = 'sharding_plan_json';");
  const es::CalibrationCheck c = es::check_calibration(held, profile);
  EXPECT_NEAR(c.error(), 0.0, 0.01);
  EXPECT_NEAR(c.error_at_run_load(), 0.0, 0.01);
}

TEST(MachineCores, CalibrateRefusesAMergedSessionWithOneProcesssLoad) {
  // a launch run's merged session written before the merge summed the run's load: its load keys
  // are rank 0's process's (the 3 sibling processes in its other load); refused, naming the re-merge
  const std::string profile = machine_profile();
  const std::string old_merge = embedscope::test_support::criteo_as_measured(
      profile, (machine_dir() / "old_merge.db").string(), 4, es::ShardingType::table_wise, 3,
      "INSERT OR REPLACE INTO metadata (key, value) VALUES ('cpu_cores', '2'), ('cpu_self_cores', '0.238'), "
      "('cpu_other_cores', '1.756'), ('merged_from_json', '[{\"file\":\"x.rank0.db\",\"ranks\":[0,1]},"
      "{\"file\":\"x.rank1.db\",\"ranks\":[2,3]}]');");
  try {
    es::check_calibration(old_merge, profile);
    FAIL() << "checked with one process's load";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(old_merge + ": a merged session of 2 processes whose measured load (cpu_self_cores 0.238, "
                                    "cpu_other_cores 1.756) is one process's"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("embedscope merge x.rank0.db x.rank1.db -o NEW.db"), std::string::npos) << what;
  }
  EXPECT_THROW(es::calibrate({old_merge}), std::exception);
  // merged by this version (cpu_load_merged says how): its load is the run's, checked as any other
  const std::string new_merge = embedscope::test_support::criteo_as_measured(
      profile, (machine_dir() / "new_merge.db").string(), 4, es::ShardingType::table_wise, 3,
      "INSERT OR REPLACE INTO metadata (key, value) VALUES ('cpu_cores', '2'), ('cpu_self_cores', '1.000'), "
      "('cpu_other_cores', '0.500'), ('merged_from_json', '[{\"file\":\"x.rank0.db\",\"ranks\":[0,1]},"
      "{\"file\":\"x.rank1.db\",\"ranks\":[2,3]}]'), ('cpu_load_merged', '{\"processes\":2,\"hosts\":1}');");
  EXPECT_NEAR(es::check_calibration(new_merge, profile).error_at_run_load(), 0.0, 0.01);
}
