// dp51 (tester50 F9): a data_parallel table's dense gradient (rows x dim fp32, TorchRec's DDP
// gradient) and its rows' touched flags are on every rank's device for the table's update, in
// the memory estimate (planner/memory_replay.cpp) as in the run (sharding/data_parallel.cpp).
#include <gtest/gtest.h>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/sharding/sharding.h"
#include "engine/planner/round_profile.h"

using namespace embedscope::engine;

// One data_parallel table of 4,000 int8 rows x 64 on 2 cpu ranks, the direct allocator (blocks
// rounded up to 512 B), batch 4, pooling factor 2, sgd. Its gradient is 4,000 x 64 x 4 =
// 1,024,000 B (2,000 blocks of 512 B), its flags 16,000 B (16,384 rounded), on top of the
// replica's 4,000 x (64 + 8) = 288,000 B of int8 rows: the largest block of the estimate is the
// gradient (the dense part and a batch's buffers of 4 samples are a few KiB; the sparse
// all-gathers it replaces held 2 x ~8 rows x 64 floats), and the measured peak holds at least
// the rows, the gradient and the flags together: 288,256 (rounded) + 1,024,000 + 16,384 =
// 1,328,640 B. The estimate stays within the matrix's bounds of that peak (-512 B, +2%).
TEST(Dp51Memory, DataParallelGradientIsInTheEstimateAndTheRun) {
  WorkloadSpec s = planner_testing::round_workload(2, {2.0});
  s.tables[0].num_embeddings = 4000;
  s.tables[0].embedding_dim = 64;
  s.tables[0].data_type = TableDataType::int8;
  s.sharding.default_type = ShardingType::data_parallel;
  s.sharding.per_table.clear();
  s.memory.allocator = AllocatorKind::direct;
  s.devices.backend = Backend::cpu;
  s.steps = 2;
  s.warmup_steps = 1;
  const ShardingPlan plan = plan_sharding(s);
  const auto est = estimate_memory(s, plan);
  ASSERT_EQ(est.size(), 2u);
  TrainerOptions opt;
  opt.trace = false;
  opt.held_out_batches = 0;
  const RunResult r = run_training(s, plan, opt);
  ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
  for (size_t k = 0; k < est.size(); ++k) {
    EXPECT_EQ(est[k].weights, 288256) << k;
    EXPECT_EQ(est[k].largest_block, 1024000) << k;
    const int64_t peak = r.ranks[k].memory_bytes;
    EXPECT_GE(peak, 288256 + 1024000 + 16384) << k;
    EXPECT_GE(est[k].total(), peak - 512) << k;
    EXPECT_LE(static_cast<double>(est[k].total()), 1.02 * static_cast<double>(peak)) << k;
  }
}
