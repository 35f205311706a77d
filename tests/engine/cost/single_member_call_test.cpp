// A collective with one member costs nothing (tester44 F3): NCCL returns at once for nranks 1,
// so a 1-GPU simulation's step is its compute, not 15 us of link latency per call.
#include <gtest/gtest.h>

#include <string>

#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"

namespace es = embedscope::engine;

namespace {

const std::string kSingleMemberProfile = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";

es::CollectiveCall single_member_call(es::CollectiveKind kind, std::vector<int> peers, int group_rank) {
  es::CollectiveCall c;
  c.kind = kind;
  c.group = "world";
  c.peers = std::move(peers);
  c.group_rank = group_rank;
  c.elem_bytes = 4;
  c.count = 1000;
  c.send_elements.assign(c.peers.size(), 1000);
  c.recv_elements.assign(c.peers.size(), 1000);
  return c;
}

}  // namespace

// round_numbers: intra-node link 1e11 B/s and 1,000 ns a call, 2 GPUs a node.
TEST(SimulatedSingleMember, ACallOfOneMemberCostsNothing) {
  const es::HardwareProfile hw = es::load_hardware_profile(kSingleMemberProfile);
  ASSERT_EQ(hw.intra_node.latency_ns, 1000);
  EXPECT_EQ(es::collective_ns(single_member_call(es::CollectiveKind::all_to_all, {0}, 0), 0, 2, hw), 0);
  EXPECT_EQ(es::collective_ns(single_member_call(es::CollectiveKind::all_reduce, {0}, 0), 0, 2, hw), 0);
  EXPECT_EQ(es::collective_ns(single_member_call(es::CollectiveKind::all_gather, {1}, 0), 1, 2, hw), 0);
  // two members on one node: 1,000 ns + 4,000 B to the peer / 1e11 B/s = 1,040 ns
  EXPECT_EQ(es::collective_ns(single_member_call(es::CollectiveKind::all_to_all, {0, 1}, 0), 0, 2, hw), 1040);
}

// tiny on one simulated GPU: the step is the sum of its compute ops, no latency for its calls
TEST(SimulatedSingleMember, OneGpuStepIsItsCompute) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.backend = es::Backend::simulated;
  s.devices.hardware = kSingleMemberProfile;
  s.devices.count = 1;
  s.steps = 3;
  s.warmup_steps = 1;
  s = es::with_resolved_backend(s, "test");
  es::TrainerOptions o;
  const es::RunResult r = es::run_training(s, es::plan_sharding(s), o);
  ASSERT_EQ(r.ended, es::RunEnd::complete);
  const es::HardwareProfile hw = es::load_hardware_profile(kSingleMemberProfile);
  const es::StepProgram p = es::build_step_program(s, es::plan_sharding(s), 0, 1);
  int64_t compute = 0;
  int calls = 0;
  for (const auto& op : p.ops) {
    if (op.lane == embedscope::sessions::Lane::compute) compute += es::compute_ns(op, hw);
    calls += static_cast<int>(op.collectives.size());
  }
  ASSERT_GT(calls, 5);  // before: calls x 1,000 ns more a step
  ASSERT_EQ(r.step_time_ns.size(), 3u);
  for (int64_t t : r.step_time_ns) EXPECT_EQ(t, compute);
}
