// tester50 F1: a simulated GPU step charged every split-size check ("<name>/split_check", the
// all-gather Embedscope runs before each all-to-all and reduce-scatter) a full NCCL call (15 us on
// h100_sxm, 31-37% of a step), a call TorchRec does not run. On a GPU profile the check now costs
// 0 ns (cost_model.h split_check_timed), still recorded (zero duration) under its own name; on cpu
// ranks (a calibrated profile, cpu.cores > 0), where Embedscope's Gloo group does run it, it is
// timed as before.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace fs = std::filesystem;
namespace s50 = embedscope::engine;

const std::string kSim50Profile = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";

// An all-gather check of 2 members: each sends its 2 x 2 int64 counts (32 B) to the other.
s50::CollectiveCall sim50_check(const std::string& name) {
  s50::CollectiveCall c;
  c.kind = s50::CollectiveKind::all_gather;
  c.name = name;
  c.group = "world";
  c.peers = {0, 1};
  c.group_rank = 0;
  c.elem_bytes = 8;
  c.dtype = "int64";
  c.send_elements = {4, 4};
  c.recv_elements = {4, 4};
  return c;
}

// round_numbers with a cpu section whose contention is 1 (2 ranks on 1000 cores) and no other cpu
// term: the same costs as the GPU profile except that split checks are timed.
std::string sim50_cpu_profile(const fs::path& dir) {
  std::ifstream in(kSim50Profile);
  nlohmann::json j = nlohmann::json::parse(in);
  j["name"] = "round_numbers_cpu";
  j["cpu"] = {{"cores", 1000}, {"threads_per_rank", 1}, {"background_threads", 0}};
  const fs::path p = dir / "round_numbers_cpu.json";
  std::ofstream(p) << j.dump(2);
  return p.string();
}

s50::WorkloadSpec sim50_spec(const std::string& hardware) {
  s50::WorkloadSpec s = s50::load_preset("tiny");
  s.devices.backend = s50::Backend::simulated;
  s.devices.hardware = hardware;
  s.devices.count = 2;
  s.steps = 3;
  s.warmup_steps = 1;
  return s50::with_resolved_backend(s, "test");
}
}  // namespace

// round_numbers: intra-node link 1e11 B/s, 1,000 ns a call, 2 GPUs a node.
TEST(Sim50SplitCheck, AGpuProfileCostsTheCheckNothingACpuProfileTimesIt) {
  s50::HardwareProfile gpu = s50::load_hardware_profile(kSim50Profile);
  ASSERT_EQ(gpu.cpu.cores, 0);
  EXPECT_FALSE(s50::split_check_timed(gpu));
  const s50::CollectiveCall check = sim50_check("output_dist/all_to_all/split_check");
  ASSERT_TRUE(s50::is_split_check(check));
  EXPECT_EQ(s50::collective_ns(check, 0, 2, gpu), 0);
  // the same all-gather under another name is a real call: 1,000 ns + 32 B / 1e11 B/s = 1,000.32 -> 1,000 ns
  const s50::CollectiveCall gather = sim50_check("grad_dist/all_gather");
  EXPECT_FALSE(s50::is_split_check(gather));
  EXPECT_EQ(s50::collective_ns(gather, 0, 2, gpu), 1000);
  EXPECT_FALSE(s50::is_split_check(sim50_check("split_check")));  // the suffix of a longer name only
  EXPECT_FALSE(s50::is_split_check(sim50_check("output_dist/split_checks")));
  s50::HardwareProfile cpu = gpu;
  cpu.cpu.cores = 2;
  EXPECT_TRUE(s50::split_check_timed(cpu));
  EXPECT_EQ(s50::collective_ns(check, 0, 2, cpu), 1000);
}

// tiny on 2 simulated GPUs (base pipeline): each step runs 5 checked calls (input_dist splits,
// lengths, ids; output_dist; grad_dist), every one on the step's serial chain. The GPU profile's
// step is the cpu-shaped profile's (checks timed: 1,000 ns each, see above) less 5 x 1,000 ns,
// and its checks are recorded with no duration, under their own names.
TEST(Sim50SplitCheck, SimulatedStepLosesExactlyTheChecksCost) {
  const fs::path dir = fs::temp_directory_path() / "embedscope_sim50_split_check";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const s50::WorkloadSpec gpu_spec = sim50_spec(kSim50Profile);
  const s50::WorkloadSpec cpu_spec = sim50_spec(sim50_cpu_profile(dir));
  const s50::ShardingPlan plan = s50::plan_sharding(gpu_spec);
  // the checks of rank 0's program, as the cpu-shaped profile times them (1,000 ns each)
  const s50::HardwareProfile cpu_hw = s50::load_hardware_profile(cpu_spec.devices.hardware);
  const s50::StepProgram p = s50::build_step_program(gpu_spec, plan, 0, 2);
  int checks = 0;
  int64_t checks_ns = 0;
  for (const auto& op : p.ops)
    for (const auto& c : op.collectives)
      if (s50::is_split_check(c)) ++checks, checks_ns += s50::collective_ns(c, 0, 2, cpu_hw);
  ASSERT_EQ(checks, 5);
  ASSERT_EQ(checks_ns, 5000);

  s50::TrainerOptions o;
  o.session_path = (dir / "gpu.db").string();
  const s50::RunResult g = s50::run_training(gpu_spec, plan, o);
  o.session_path = (dir / "cpu.db").string();
  const s50::RunResult c = s50::run_training(cpu_spec, plan, o);
  ASSERT_EQ(g.ended, s50::RunEnd::complete);
  ASSERT_EQ(c.ended, s50::RunEnd::complete);
  ASSERT_EQ(g.step_time_ns.size(), 3u);
  ASSERT_EQ(c.step_time_ns.size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(c.step_time_ns[k] - g.step_time_ns[k], 5000) << "step " << k;

  // the GPU session records each check, with no duration, under "<name>/split_check"; the call
  // it checks keeps its own time (1,000 ns latency + bytes / 1e11 B/s)
  const embedscope::sessions::SessionReader gs((dir / "gpu.db").string());
  std::map<std::string, int> check_records;
  for (const auto& r : gs.collectives()) {
    if (r.step < 0 || r.rank != 0) continue;
    const bool is_check = r.name.size() > 12 && r.name.substr(r.name.size() - 12) == "/split_check";
    if (is_check) {
      ++check_records[r.name];
      EXPECT_EQ(r.end_ns, r.start_ns) << r.name;
      EXPECT_EQ(r.op, "all_gather");
    } else if (r.op == "all_to_all") {
      EXPECT_GE(r.end_ns - r.start_ns, 1000) << r.name;
    }
  }
  EXPECT_EQ(check_records.size(), 5u);
  for (const auto& [name, n] : check_records) EXPECT_EQ(n, 3) << name;  // one a measured step
}
