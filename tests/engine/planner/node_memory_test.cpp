// Ranks of a cpu profile share their host's memory (tester44 F12): a calibrated this_machine
// gave each of 8 simulated ranks the whole machine's 23.5 GiB, and dcnv2 "fitted" with 125 GiB.
#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>
#include <vector>

#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec_error.h"
#include "engine/planner/round_profile.h"

using namespace embedscope::engine;

namespace {

constexpr int64_t kNodeGiB = int64_t{1} << 30;

// rank r: weights w[r] GiB, dense 1 GiB, buffers 0
std::vector<DeviceMemoryEstimate> node_memory_ranks(const std::vector<int64_t>& w) {
  std::vector<DeviceMemoryEstimate> est;
  for (size_t r = 0; r < w.size(); ++r) {
    DeviceMemoryEstimate e;
    e.rank = static_cast<int>(r);
    e.weights = w[r] * kNodeGiB;
    e.dense = kNodeGiB;
    est.push_back(e);
  }
  return est;
}

HardwareProfile node_memory_cpu_profile(int64_t gib) {
  HardwareProfile hw = planner_testing::round_profile("host10");
  hw.gpu.memory_bytes = gib * kNodeGiB;
  hw.cpu.cores = 2;
  return hw;
}

}  // namespace

// 4 ranks of 2 + 1, 2 + 1, 3 + 1, 1 + 1 GiB = 12 GiB on a 10 GiB host: refused, naming the node,
// its ranks, the sum, the host's memory and the fullest rank (2) by term. A GPU profile: each rank
// its own device.
TEST(PlannerNodeMemory, CpuRanksOfOneNodeShareItsMemory) {
  const auto est = node_memory_ranks({2, 2, 3, 1});
  const HardwareProfile cpu = node_memory_cpu_profile(10);
  try {
    check_node_memory_fits(est, 4, cpu);
    FAIL() << "12 GiB on a 10 GiB host was accepted";
  } catch (const SpecError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(m.starts_with("/devices/memory_bytes: the ranks of a node share its memory (cpu profile host10")) << m;
    EXPECT_NE(m.find("node 0 (ranks 0-3) needs 12.0 GiB together > 10.0 GiB; its fullest rank 2: 4.0 GiB "
                     "(weights 3.0 GiB, optimizer state 0 B, dense 1.0 GiB, buffers 0 B)"), std::string::npos) << m;
  }
  HardwareProfile gpu = cpu;
  gpu.cpu.cores = 0;
  EXPECT_NO_THROW(check_node_memory_fits(est, 4, gpu));
}

// The planner's statistics honour it: tiny on 4 cpu ranks of one node whose host holds less than
// the 4 ranks together (but more than any one of them) does not fit.
TEST(PlannerNodeMemory, PlanStatsRefusesWhatTheRanksNeedTogether) {
  WorkloadSpec spec = load_preset("tiny");
  spec.devices.count = 4;
  spec.memory.allocator = AllocatorKind::direct;  // tiny's 147 KiB is under one caching segment
  const ShardingPlan plan = plan_sharding(spec);
  int64_t sum = 0, fullest = 0;
  for (const auto& e : estimate_memory(spec, plan)) sum += e.total(), fullest = std::max(fullest, e.total());
  HardwareProfile hw = planner_testing::round_profile("host_small");
  hw.cpu.cores = 2;
  hw.gpu.memory_bytes = sum - 1;
  spec.devices.memory_bytes = sum - 1;
  ASSERT_GT(sum - 1, fullest);
  const PlanStats st = plan_stats(spec, plan, hw);
  EXPECT_FALSE(st.fits);
  EXPECT_NE(st.does_not_fit.find("node 0 (ranks 0-3) needs"), std::string::npos) << st.does_not_fit;
  hw.gpu.memory_bytes = spec.devices.memory_bytes = sum;
  EXPECT_TRUE(plan_stats(spec, plan, hw).fits);
}

// tester46 F1: the nodes of a cpu profile are emulated nodes of the one host, so splitting the
// ranks into nodes changes nothing: the 4 ranks above (12 GiB) in 2 nodes of 2 (6 + 6 GiB) or 4
// nodes of 1 (each <= 4 GiB) are refused as one node of 4 is, naming the nodes; a 12 GiB host
// holds them. Before, each node was checked alone and every split "fitted" the 10 GiB host.
TEST(PlannerNodeMemory, EmulatedNodesOfACpuProfileShareOneHost) {
  const auto est = node_memory_ranks({2, 2, 3, 1});
  for (const int local : {2, 1}) {
    const int nodes = 4 / local;
    try {
      check_node_memory_fits(est, local, node_memory_cpu_profile(10));
      FAIL() << "12 GiB in " << nodes << " emulated nodes of a 10 GiB host was accepted";
    } catch (const SpecError& e) {
      EXPECT_EQ(std::string(e.what()),
                fmt::format("/devices/memory_bytes: the ranks of a node share its memory (cpu profile host10: its ranks "
                            "are threads of one host, and 10.0 GiB is that host's memory; its {} emulated nodes are "
                            "that same host), and the workload does not fit under this sharding plan:\n  nodes 0-{} "
                            "(ranks 0-3) need 12.0 GiB together > 10.0 GiB; their fullest rank 2: 4.0 GiB (weights 3.0 "
                            "GiB, optimizer state 0 B, dense 1.0 GiB, buffers 0 B)",
                            nodes, nodes - 1));
    }
    EXPECT_NO_THROW(check_node_memory_fits(est, local, node_memory_cpu_profile(12)));
  }
  // the search's measure of the excess: 12 - 10 = 2 GiB over, on the world's ranks
  PlanStats st;
  for (const auto& e : est) {
    RankStats r;
    r.rank = e.rank;
    r.hbm_bytes = e.total();
    st.ranks.push_back(r);
  }
  const NodeExcess x = node_excess(st, 1, node_memory_cpu_profile(10));
  EXPECT_EQ(x.bytes, 2 * kNodeGiB);
  EXPECT_EQ(x.where, "on nodes 0-3 (ranks 0-3 need 12.0 GiB together > 10.0 GiB, the host's memory)");
  EXPECT_EQ(node_excess(st, 4, node_memory_cpu_profile(10)).where,
            "on node 0 (ranks 0-3 need 12.0 GiB together > 10.0 GiB, the host's memory)");
}
