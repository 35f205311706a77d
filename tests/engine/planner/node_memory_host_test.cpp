// plan45: under a cpu profile the ranks of a node share the host's RAM (tester44 F12), and so
// do their tables in host memory (placement host / host_cached: DeviceMemoryEstimate::host), which
// check_node_memory_fits now adds to the node's sum; and plan_search's refusal names the node, its
// ranks and their sum against the host's memory when the node is what overflows (it said "over on
// its fullest rank" for a node's excess).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec_error.h"
#include <fmt/format.h>
#include "engine/planner/round_profile.h"

using namespace embedscope::engine;

namespace {

constexpr int64_t kHostGiB = int64_t{1} << 30;

HardwareProfile host_ram_profile(int64_t bytes) {
  HardwareProfile hw = planner_testing::round_profile("host_ram");
  hw.gpu.memory_bytes = bytes;
  hw.cpu.cores = 2;
  return hw;
}

// tiny on 4 ranks, every table fixed table_wise (t_small, t_a, t_b on rank 0, t_c on rank
// `c_rank`), direct allocator (tiny's bytes are under one caching segment), the devices' memory
// the host's
WorkloadSpec host_ram_spec(int c_rank) {
  WorkloadSpec s = load_preset("tiny");
  s.devices.count = 4;
  s.memory.allocator = AllocatorKind::direct;
  for (const char* t : {"t_small", "t_a", "t_b"}) s.sharding.per_table[t] = {ShardingType::table_wise, {0}};
  s.sharding.per_table["t_c"] = {ShardingType::table_wise, {c_rank}};
  return s;
}

}  // namespace

// Hand-made estimates: 4 ranks of weights 1 GiB + dense 1 GiB, rank 2 also 2 GiB of tables in host
// memory: the node needs 4 x 2 + 2 = 10 GiB. A 9 GiB host refuses it (without the host bytes,
// 8 GiB, it fitted); a 10 GiB host holds it exactly.
TEST(PlannerNodeHostMemory, HostBytesCountInTheNodeSum) {
  std::vector<DeviceMemoryEstimate> est(4);
  for (int r = 0; r < 4; ++r) {
    est[static_cast<size_t>(r)].rank = r;
    est[static_cast<size_t>(r)].weights = kHostGiB;
    est[static_cast<size_t>(r)].dense = kHostGiB;
  }
  est[2].host = 2 * kHostGiB;
  try {
    check_node_memory_fits(est, 4, host_ram_profile(9 * kHostGiB));
    FAIL() << "10 GiB on a 9 GiB host was accepted";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "\n  node 0 (ranks 0-3) needs 10.0 GiB together (of which 2.0 GiB for tables in host memory) > "
                  "9.0 GiB; its fullest rank 2: 4.0 GiB (weights 1.0 GiB, optimizer state 0 B, dense 1.0 GiB, "
                  "buffers 0 B, tables in host memory 2.0 GiB)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(check_node_memory_fits(est, 4, host_ram_profile(10 * kHostGiB)));
}

// A real host-placed table through plan_stats: tiny's t_c (1,000 rows x 12 fp32, sgd: no state)
// placed in host memory on rank 3 keeps 1,000 x 12 x 4 = 48,000 B there; host_cached (lru) adds
// its row -> slot index, 8 B a row: 56,000 B. The node's sum is the ranks' device totals plus
// those bytes: a host of one byte less refuses the plan, a host of exactly that holds it.
TEST(PlannerNodeHostMemory, PlanStatsAddsTheHostPlacedTable) {
  for (const TablePlacement placement : {TablePlacement::host, TablePlacement::host_cached}) {
    WorkloadSpec spec = host_ram_spec(3);
    for (TableSpec& t : spec.tables)
      if (t.name == "t_c") t.placement = placement;
    const int64_t host_bytes = placement == TablePlacement::host ? 48000 : 56000;
    const ShardingPlan plan = plan_sharding(spec);
    int64_t device = 0;
    for (const auto& e : estimate_memory(spec, plan)) {
      EXPECT_EQ(e.host, e.rank == 3 ? host_bytes : 0) << e.rank;
      device += e.total();
    }
    spec.devices.memory_bytes = device + host_bytes - 1;
    HardwareProfile hw = host_ram_profile(device + host_bytes - 1);
    const PlanStats st = plan_stats(spec, plan, hw);
    EXPECT_FALSE(st.fits) << "the host-placed table's bytes were left out of the node's sum";
    // one byte apart, so in bytes
    EXPECT_NE(st.does_not_fit.find(fmt::format("node 0 (ranks 0-3) needs {} B together (of which {} for tables in host "
                                               "memory) > {} B; its fullest rank 3:",
                                               device + host_bytes, format_bytes(host_bytes), device + host_bytes - 1)),
              std::string::npos)
        << st.does_not_fit;
    hw.gpu.memory_bytes = spec.devices.memory_bytes = device + host_bytes;
    EXPECT_TRUE(plan_stats(spec, plan, hw).fits) << plan_stats(spec, plan, hw).does_not_fit;
  }
}

// plan_search on a cpu profile, 2 emulated nodes of 2 ranks, where every rank fits the host's
// memory but the 4 together do not: the refusal names the nodes, their ranks, their sum and the
// host's memory, 1,024 B over (it said "1.0 KiB over on its fullest rank"). The nodes are the one
// host (tester46 F1): since plan47 the world's ranks count together, not each node alone.
TEST(PlannerNodeHostMemory, NoPlanFitsNamesTheNodeThatOverflows) {
  WorkloadSpec spec = host_ram_spec(3);
  spec.sharding.local_world_size = 2;
  const ShardingPlan plan = plan_sharding(spec);
  const auto est = estimate_memory(spec, plan);
  int64_t world = 0;
  for (const auto& e : est) world += e.total();
  const int64_t ram = world - 1024;
  for (const auto& e : est) ASSERT_LE(e.total(), ram) << e.rank;  // no rank overflows alone
  ASSERT_GE(ram, est[2].total() + est[3].total());                 // nor either node alone
  spec.devices.memory_bytes = ram;
  try {
    (void)plan_search(spec, host_ram_profile(ram));
    FAIL() << "the 4 ranks need " << world << " B on a host of " << ram << " B";
  } catch (const NoPlanFits& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.overflow_bytes, 1024);
    EXPECT_TRUE(m.starts_with(fmt::format("/devices/memory_bytes: no plan fits the devices; the nearest candidate "
                                          "(greedy, 1.0 KiB over in bytes on nodes 0-1 (ranks 0-3 need {} together > {}, the "
                                          "host's memory)): the ranks of a node share its memory",
                                          format_bytes(world), format_bytes(ram))))
        << m;
    EXPECT_NE(m.find(fmt::format("\n  nodes 0-1 (ranks 0-3) need {} together > {}", format_bytes(world),
                                 format_bytes(ram))),
              std::string::npos)
        << m;
  }
  // one byte over: the figures, which round to the same KiB, are given in bytes
  spec.devices.memory_bytes = world - 1;
  try {
    (void)plan_search(spec, host_ram_profile(world - 1));
    FAIL() << "the ranks are one byte over";
  } catch (const NoPlanFits& e) {
    EXPECT_EQ(e.overflow_bytes, 1);
    const std::string both = fmt::format("{} B together > {} B", world, world - 1);
    EXPECT_NE(std::string(e.what()).find("(greedy, 1 B over in bytes on nodes 0-1 (ranks 0-3 need " + both + ", the host's memory)): "),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\n  nodes 0-1 (ranks 0-3) need " + both + "; their fullest rank 3"),
              std::string::npos) << e.what();
  }
}
