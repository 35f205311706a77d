// dp51 (tester50 F9): data_parallel tables sync their replicas as TorchRec's DP sharding does, by
// DistributedDataParallel's all-reduce of the dense rows x dim fp32 gradient (and, to keep the
// reference's sparse update, an all-reduce of the rows' touched flags), not by all-gathers of
// each replica's touched rows. The step program's collectives, the measured cpu session's and
// the simulated session's records and times, against numbers by hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/sessions/store/session.h"
#include "engine/planner/round_profile.h"

namespace {
namespace fs = std::filesystem;
namespace dp51 = embedscope::engine;

// Two data_parallel tables of 1,000 rows x 64 (fp32, sum), one feature each (pooling factor 2),
// batch 4, on `ranks` ranks of backend `backend`, 2 steps after 1 warm-up step.
dp51::WorkloadSpec dp51_spec(int ranks, dp51::Backend backend) {
  dp51::WorkloadSpec s = planner_testing::round_workload(ranks, {2.0, 2.0});
  for (auto& t : s.tables) t.embedding_dim = 64;
  s.sharding.default_type = dp51::ShardingType::data_parallel;
  s.sharding.per_table.clear();
  s.devices.backend = backend;
  s.steps = 2;
  s.warmup_steps = 1;
  return s;
}

// Per (name, op, dtype, bytes sent, bytes received): the records of the measured steps.
using Dp51Key = std::tuple<std::string, std::string, std::string, int64_t, int64_t>;
std::map<Dp51Key, int> dp51_grad_records(const std::string& path) {
  const embedscope::sessions::SessionReader r(path);
  std::map<Dp51Key, int> out;
  for (const auto& c : r.collectives())
    if (c.step >= 0 && c.name.rfind("grad_dist/", 0) == 0) ++out[{c.name, c.op, c.dtype, c.bytes_sent, c.bytes_received}];
  return out;
}

fs::path dp51_dir(const char* name) {
  const fs::path d = fs::temp_directory_path() / (std::string("embedscope_dp51_") + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

// Each table's comm op holds two world all-reduces of fp32: the gradient, 1,000 x 64 = 64,000
// elements, 256,000 B a buffer, and the flags, 1,000 elements, 4,000 B. A ring moves 2 (n-1)/n of
// the buffer each way (collective_math.h all_reduce_bytes): on 2 ranks 256,000 and 4,000 B, on 4
// ranks 2 x 3/4 x 256,000 = 384,000 and 6,000 B. Before: all-gathers of each replica's 8 ids'
// distinct rows (counts, then rows and values).
TEST(Dp51DenseAllReduce, ProgramAllReducesTheDenseGradientAndTheFlags) {
  for (const int W : {2, 4}) {
    const dp51::WorkloadSpec s = dp51_spec(W, dp51::Backend::cpu);
    const dp51::ShardingPlan plan = dp51::plan_sharding(s);
    for (int r = 0; r < W; ++r) {
      const dp51::StepProgram p = dp51::build_step_program(s, plan, r, 0);
      int ops = 0;
      for (const auto& op : p.ops) {
        for (const auto& c : op.collectives)
          EXPECT_EQ(c.name.find("data_parallel_all_gather"), std::string::npos) << c.name;
        if (op.name != "grad_dist/data_parallel_all_reduce") continue;
        ++ops;
        ASSERT_EQ(op.collectives.size(), 2u);
        const dp51::CollectiveCall& g = op.collectives[0];
        const dp51::CollectiveCall& f = op.collectives[1];
        EXPECT_EQ(g.name, "grad_dist/data_parallel_all_reduce");
        EXPECT_EQ(g.kind, dp51::CollectiveKind::all_reduce);
        EXPECT_EQ(g.count, 64000);
        EXPECT_EQ(g.dtype, "float32");
        EXPECT_EQ(g.peers.size(), static_cast<size_t>(W));
        EXPECT_EQ(f.name, "grad_dist/data_parallel_touched");
        EXPECT_EQ(f.count, 1000);
        EXPECT_EQ(g.bytes_sent(), W == 2 ? 256000 : 384000);
        EXPECT_EQ(g.bytes_received(), g.bytes_sent());
        EXPECT_EQ(f.bytes_sent(), W == 2 ? 4000 : 6000);
      }
      EXPECT_EQ(ops, 2) << "one a table, rank " << r;
    }
  }
}

// The measured cpu run (Gloo) records what the program says, per rank and measured step: two
// gradient all-reduces of 256,000 B each way (one per table) and two flag all-reduces of 4,000 B;
// no other gradient collective (every table replicated: no grad dist all-to-all).
TEST(Dp51DenseAllReduce, MeasuredCpuSessionRecordsTheAllReduces) {
  const fs::path dir = dp51_dir("cpu");
  const dp51::WorkloadSpec s = dp51::with_resolved_backend(dp51_spec(2, dp51::Backend::cpu), "test");
  dp51::TrainerOptions o;
  o.session_path = (dir / "cpu.db").string();
  o.held_out_batches = 0;
  const dp51::RunResult r = dp51::run_training(s, dp51::plan_sharding(s), o);
  ASSERT_EQ(r.ended, dp51::RunEnd::complete) << r.error;
  // 2 ranks x 2 steps x 2 tables = 8 records of each
  const std::map<Dp51Key, int> want = {
      {{"grad_dist/data_parallel_all_reduce", "all_reduce", "float32", 256000, 256000}, 8},
      {{"grad_dist/data_parallel_touched", "all_reduce", "float32", 4000, 4000}, 8}};
  EXPECT_EQ(dp51_grad_records(o.session_path), want);
}

// The simulated run (round_numbers: intra-node 1e11 B/s, 1,000 ns a call, 2 GPUs a node) records
// the same calls, each timed by the cost model's all-reduce (cost_model.h collective_ns: latency
// + max(sent, received) / bus bandwidth): the gradient 1,000 + 256,000 / 1e11 s = 1,000 + 2,560
// = 3,560 ns, the flags 1,000 + 40 = 1,040 ns; the two ranks run the same program, so no call
// waits for a peer and each record lasts exactly that.
TEST(Dp51DenseAllReduce, SimulatedSessionTimesTheAllReducesByTheCostModel) {
  const std::string profile = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";
  const dp51::HardwareProfile hw = dp51::load_hardware_profile(profile);
  dp51::WorkloadSpec s = dp51_spec(2, dp51::Backend::simulated);
  s.devices.hardware = profile;
  s = dp51::with_resolved_backend(s, "test");
  const dp51::ShardingPlan plan = dp51::plan_sharding(s);
  const dp51::StepProgram p = dp51::build_step_program(s, plan, 0, 1);
  for (const auto& op : p.ops)
    if (op.name == "grad_dist/data_parallel_all_reduce") {
      EXPECT_EQ(dp51::collective_ns(op.collectives[0], 0, 2, hw), 3560);
      EXPECT_EQ(dp51::collective_ns(op.collectives[1], 0, 2, hw), 1040);
    }
  const fs::path dir = dp51_dir("sim");
  dp51::TrainerOptions o;
  o.session_path = (dir / "sim.db").string();
  const dp51::RunResult r = dp51::run_training(s, plan, o);
  ASSERT_EQ(r.ended, dp51::RunEnd::complete) << r.error;
  const std::map<Dp51Key, int> want = {
      {{"grad_dist/data_parallel_all_reduce", "all_reduce", "float32", 256000, 256000}, 8},
      {{"grad_dist/data_parallel_touched", "all_reduce", "float32", 4000, 4000}, 8}};
  EXPECT_EQ(dp51_grad_records(o.session_path), want);
  const embedscope::sessions::SessionReader reader(o.session_path);
  int timed = 0;
  for (const auto& c : reader.collectives()) {
    if (c.step < 0) continue;
    if (c.name == "grad_dist/data_parallel_all_reduce") {
      EXPECT_EQ(c.end_ns - c.start_ns, 3560);
      ++timed;
    }
    if (c.name == "grad_dist/data_parallel_touched") {
      EXPECT_EQ(c.end_ns - c.start_ns, 1040);
      ++timed;
    }
  }
  EXPECT_EQ(timed, 16);
}
