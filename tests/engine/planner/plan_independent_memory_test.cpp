// What no sharding plan or storage option changes (tester46 F10): criteo_kaggle at 16,777,216
// samples a rank needs 408 GiB of dense part and pooled embeddings on an 80 GiB device, and
// `plan --auto` searched for 6-112 s, then listed every rank with the same line. The planner now
// refuses at once with one line, and folds the lines of ranks it lists (planner/rank_lines.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec_error.h"
#include "planner/memory_replay.h"
#include "planner/rank_lines.h"

using namespace embedscope::engine;

namespace {

// tiny at 4,096 samples a rank (every block a multiple of 512 B but the parameters'):
// features' dims 4, 8, 6, 6, 12 (sum 36); bottom 4 -> 8 (40 parameters), cat: 8 + 36 = 44 in
// and out, top 44 -> 16 -> 1 (720 + 17): 777 parameters, 2 x 777 x 4 = 6,216 B -> 6,656 B (13 x
// 512); activations 2 x (2 x 44 + 44 + 8 + 16 + 1) = 314 floats a sample: 4,096 x 314 x 4 =
// 5,144,576 B; pooled and their gradients 2 x 4,096 x 36 x 4 = 1,179,648 B; total 6,330,880 B;
// (314 + 72) x 4 = 1,544 B a sample.
WorkloadSpec tiny_at_4096() {
  WorkloadSpec spec = load_preset("tiny");
  spec.batch_size = 4096;
  return spec;
}

}  // namespace

TEST(PlanIndependentMemory, TinyByHand) {
  const WorkloadSpec spec = tiny_at_4096();
  const detail::PlanIndependentMemory m = detail::plan_independent_memory(spec);
  EXPECT_EQ(m.dense_params, 6656);
  EXPECT_EQ(m.activations, 5144576);
  EXPECT_EQ(m.pooled, 1179648);
  EXPECT_EQ(m.total(), 6330880);
  EXPECT_EQ(m.bytes_per_sample, 1544);
  // a lower bound of every plan's estimate, whatever the sharding type and allocator
  for (AllocatorKind a : {AllocatorKind::caching, AllocatorKind::direct, AllocatorKind::expandable})
    for (ShardingType t : {ShardingType::table_wise, ShardingType::row_wise, ShardingType::column_wise,
                           ShardingType::data_parallel}) {
      WorkloadSpec s = spec;
      s.memory.allocator = a;
      s.sharding.default_type = t;
      for (const auto& e : estimate_memory(s, plan_sharding(s)))
        EXPECT_GE(e.total(), m.total()) << to_string(t) << " " << to_string(a) << " rank " << e.rank;
    }
}

// 5 MiB a device: the 6.0 MiB no plan changes do not fit; plan_search refuses before searching
// (a SpecError, not NoPlanFits: no candidate and no storage option is tried), with the batch this
// part allows: (5,242,880 - 6,656) / 1,544 = 3,391 samples; check_memory_fits says the same
// instead of a line a rank.
TEST(PlanIndependentMemory, RefusedAtOnceWithWhatToLower) {
  WorkloadSpec spec = tiny_at_4096();
  spec.devices.memory_bytes = int64_t{5} << 20;
  const std::string want =
      "/devices/memory_bytes: what every rank holds under any sharding plan or storage option does not fit a device: "
      "the dense part 4.9 MiB (parameters and gradients 6.5 KiB, activations 4.9 MiB) and the pooled embeddings with "
      "their gradients 1.1 MiB need 6.0 MiB > 5.0 MiB; no sharding type or storage option can fit it: lower the batch "
      "size (--batch-size, /batch_size; now 4096 samples a rank): this part allows at most 3391 samples a rank, and the "
      "shards and their buffers need more";
  try {
    (void)plan_search(spec, planning_profile(spec));
    FAIL() << "6.0 MiB on a 5 MiB device was searched";
  } catch (const NoPlanFits& e) {
    FAIL() << "searched before refusing: " << e.what();
  } catch (const SpecError& e) {
    EXPECT_EQ(std::string(e.what()), want);
  }
  try {
    check_memory_fits(spec, estimate_memory(spec, plan_sharding(spec)));
    FAIL() << "6.0 MiB on a 5 MiB device fitted";
  } catch (const SpecError& e) {
    EXPECT_EQ(std::string(e.what()), want);
  }
  // 6,330,880 B exactly: this part fits, the check passes it on
  spec.devices.memory_bytes = 6330880;
  EXPECT_NO_THROW(detail::check_plan_independent_memory(spec));
  // parameters and gradients alone over the device (direct: no 2 MiB segment floor): no batch helps
  spec.devices.memory_bytes = 4096;
  spec.memory.allocator = AllocatorKind::direct;
  try {
    detail::check_plan_independent_memory(spec);
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("fit it: the dense parameters and their gradients alone need 6.5 KiB: a "
                                         "smaller dense part (dense.bottom_mlp, dense.top_mlp) or devices with more "
                                         "memory"),
              std::string::npos)
        << e.what();
  }
}

TEST(PlanIndependentMemory, RankLinesFoldRunsAndCapTheRest) {
  detail::RankLines a;
  a.add(0, "x", 1);
  a.add(1, "x", 1);
  a.add(2, "x", 1);
  a.add(3, "y", 2);
  a.add(5, "y", 2);  // not consecutive: a line of its own
  EXPECT_EQ(a.str(), "\n  ranks 0-2: x each\n  rank 3: y\n  rank 5: y");
  // 10 ranks of different texts, at most 4 lines: 3 kept, the fullest (rank 7, 9 KiB), the rest
  // summed: ranks 3-6, 8, 9 (6 ranks, 6 lines), 1.0 KiB to 2.0 KiB
  detail::RankLines b(4);
  for (int r = 0; r < 10; ++r) b.add(r, "t" + std::to_string(r), r == 7 ? 9 * 1024 : 1024 + r * 100);
  EXPECT_EQ(b.str(), "\n  rank 0: t0\n  rank 1: t1\n  rank 2: t2\n  rank 7 (the fullest): t7"
                     "\n  and 6 more ranks (6 lines left out), 1.3 KiB to 1.9 KiB each");
}

// The run path's refusal (check_memory_fits) on ranks whose lines all differ (tester46 F10: dcnv2
// row_wise on 1,024 ranks printed 104 lines of 314.1 GiB): 10 ranks of 5 MiB of weights and r x
// 100 KiB of buffers, rank 7 3 MiB, on 4 MiB devices: ranks 0-4, the fullest (7) and the rest
// summed (5, 6, 8, 9: 5 MiB + 500 KiB = 5.5 MiB to 5 MiB + 900 KiB = 5.9 MiB).
TEST(PlanIndependentMemory, RunRefusalListsAFewRanksAndTheFullest) {
  WorkloadSpec spec = load_preset("tiny");
  spec.devices.count = 10;
  spec.devices.memory_bytes = int64_t{4} << 20;
  std::vector<DeviceMemoryEstimate> est;
  for (int r = 0; r < 10; ++r) {
    DeviceMemoryEstimate e;
    e.rank = r;
    e.weights = int64_t{5} << 20;
    e.buffers = r == 7 ? int64_t{3} << 20 : r * int64_t{100} * 1024;
    est.push_back(e);
  }
  try {
    check_memory_fits(spec, est);
    FAIL();
  } catch (const SpecError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("\n  rank 4: needs 5.4 MiB (weights 5.0 MiB, optimizer state 0 B, dense 0 B, buffers 400.0 KiB) > "
                     "4.0 MiB\n  rank 7 (the fullest): needs 8.0 MiB (weights 5.0 MiB, optimizer state 0 B, dense 0 B, "
                     "buffers 3.0 MiB) > 4.0 MiB\n  and 4 more ranks (4 lines left out), 5.5 MiB to 5.9 MiB each"),
              std::string::npos)
        << m;
    EXPECT_EQ(m.find("rank 5:"), std::string::npos) << m;
    // a line each for ranks 0-4, the fullest and the rest, then one of what to try
    EXPECT_NE(m.find("\n  to try: `plan --auto`"), std::string::npos) << m;
    EXPECT_EQ(std::count(m.begin(), m.end(), '\n'), 8) << m;
  }
}
