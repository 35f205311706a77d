// Issue 14 (rwdist56): the row_wise and table_row_wise / grid_shard output and gradient dists on
// the device (sharding/row_wise.cpp, table_row_wise.cpp with RankContext::pooled_on_device), on
// the host stand-in (TrainerOptions::emulate_device). The looked-up partial sums are packed on
// the device, reduce-scattered on device buffers (Collectives::reduce_scatter_device: Gloo with
// one rank per emulated device, the intra-device communicator with 4 ranks on one, the
// hierarchical one with 2 on each of 2; table_row_wise's all-to-all across nodes with
// all_to_all_v_device), added into the pooled embeddings' device buffers with the mean scaling
// (RankDevice::add_scale_rows_2d), which the resident dense part reads there; backward the
// gradients are packed with 1 / W and the mean scale fused in (scale_copy_rows_2d), all-gathered
// on device buffers (all_gather_v_device) into slot_grad's device memory, which feeds the device
// sparse-gradient accumulation (a factorized table's slot_grad is copied back to the host).
// Evidence: the tables, losses and dense parameters equal the cpu backend's run bit for bit
// under row_wise, table_row_wise, grid_shard, a factorized row_wise table and the mixed plan, in
// the base, sparse_dist and semi_sync pipelines, and equal the same stand-in run with the dists
// staged through host memory (TrainerOptions::device_dist = false); the host<->device copies of a
// row_wise step drop by the hand-computed amount.

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <tuple>

#include "embedscope/engine/exec/run.h"
#include "engine/parity_check.h"
#include "support/device_dist_runs.h"
#include "embedscope/engine/kernels/dist_pack_core.h"
#include "exec/device/rank_device.h"

using namespace embedscope::engine;
using namespace embedscope::engine::parity;

// a namespace of its own: the unity build compiles this file with device_dist55_test.cpp, whose
// helpers have the same names
namespace rwdist56_test {

using test_support::expect_same_training;
using DistRun = test_support::CountedRun;

WorkloadSpec dist_spec(ShardingType type, OptimizerType opt, int world = 4) {
  return test_support::resident_cat_spec(type, opt, world);
}

DistRun run_dist(const WorkloadSpec& s, const ShardingPlan& plan, bool emulate, int devices, bool device_dist) {
  TrainerOptions o = test_support::emulated_options(emulate, devices);
  o.device_dist = device_dist;
  o.device_input_dist = false;  // the output dists only (the input dist on the device: device_kjt56_test.cpp)
  return test_support::run_counting_copies(s, plan, o);
}

enum class Plan { row_wise, row_wise_low_rank, table_row_wise, grid_shard, mixed };
using DistParam = std::tuple<Plan, PipelineKind>;
class RwDeviceDist56 : public ::testing::TestWithParam<DistParam> {};

WorkloadSpec plan_spec(Plan which) {
  switch (which) {
    case Plan::row_wise: return dist_spec(ShardingType::row_wise, OptimizerType::rowwise_adagrad);
    case Plan::row_wise_low_rank: {  // t3 factorized: its slot_grad goes back to the host
      WorkloadSpec s = dist_spec(ShardingType::row_wise, OptimizerType::sgd);
      s.tables[3].low_rank_dim = 4;
      return s;
    }
    case Plan::table_row_wise: return dist_spec(ShardingType::table_row_wise, OptimizerType::rowwise_adagrad);
    case Plan::grid_shard: return dist_spec(ShardingType::grid_shard, OptimizerType::rowwise_adagrad);
    case Plan::mixed: {
      WorkloadSpec s = mixed_spec(OptimizerType::rowwise_adagrad);
      s.dense = dist_spec(ShardingType::row_wise, OptimizerType::sgd).dense;
      return s;
    }
  }
  return {};
}

// Bit for bit the host-staged dists' training on every placement of the 4 ranks: one per
// emulated device (Gloo; there also bit for bit the cpu backend's), all on one (the intra-device
// communicator), 2 on each of 2 (the hierarchical communicator; bit for bit the one device's).
// On a shared device the dense all-reduce sums in member order, not in Gloo's ring order, so each
// placement is compared with its own staged run. The device path is really taken: fewer copies
// out (the looked-up rows, the pooled embeddings' gradients, the communicators' staging) and
// fewer bytes in.
TEST_P(RwDeviceDist56, EqualsTheHostStagedDistsBitForBitOnEveryPlacement) {
  const auto [which, pipeline] = GetParam();
  WorkloadSpec s = plan_spec(which);
  s.pipeline = pipeline;
  const ShardingPlan plan = plan_sharding(s);
  const DistRun cpu = run_dist(s, plan, false, 0, true);
  ASSERT_EQ(cpu.result.ended, RunEnd::complete) << cpu.result.error;
  std::vector<RunResult> shared;  // the device dists' runs on 1 and on 2 emulated devices
  for (int devices : {0, 1, 2}) {
    const std::string what = fmt::format("{} emulated device(s)", devices == 0 ? 4 : devices);
    const DistRun dev = run_dist(s, plan, true, devices, true);
    const DistRun staged = run_dist(s, plan, true, devices, false);
    expect_same_training(dev.result, staged.result, what + ": dists on the device against dists staged through the host");
    if (devices == 0) expect_same_training(dev.result, cpu.result, what + ": against the cpu backend");
    else shared.push_back(dev.result);
    EXPECT_LT(dev.copies.host_to_device_bytes, staged.copies.host_to_device_bytes) << what;
    EXPECT_LT(dev.copies.device_to_host, staged.copies.device_to_host) << what;
    EXPECT_LT(dev.copies.device_to_host_bytes, staged.copies.device_to_host_bytes) << what;
  }
  ASSERT_EQ(shared.size(), 2u);
  expect_same_training(shared[1], shared[0], "2 emulated devices against 1");
}

// Three ranks: 1 / W = 1 / 3 is not a power of two, so the gradient packing's two roundings
// ((g x 1 / 3) x 1 / len) differ from one product of the scales; the device dists still equal
// the cpu backend bit for bit with one rank per emulated device (Gloo), and the host-staged dists
// with all three on one (the intra-device communicator). row_wise and table_row_wise (nodes of
// one rank: the reduce-scatter in the node is a copy, the all-to-all across nodes carries it).
TEST(RwDeviceDist56Ranks, ThreeRanksEqualTheCpuBackendAndTheHostStagedDists) {
  for (const ShardingType type : {ShardingType::row_wise, ShardingType::table_row_wise}) {
    const WorkloadSpec s = dist_spec(type, OptimizerType::rowwise_adagrad, 3);
    const ShardingPlan plan = plan_sharding(s);
    const std::string what = to_string(type);
    const DistRun cpu = run_dist(s, plan, false, 0, true);
    ASSERT_EQ(cpu.result.ended, RunEnd::complete) << what << ": " << cpu.result.error;
    for (int devices : {0, 1}) {
      const DistRun dev = run_dist(s, plan, true, devices, true);
      const DistRun staged = run_dist(s, plan, true, devices, false);
      expect_same_training(dev.result, staged.result, what + fmt::format(" on {} device(s)", devices == 0 ? 3 : 1));
      if (devices == 0) expect_same_training(dev.result, cpu.result, what + ": against the cpu backend");
      EXPECT_LT(dev.copies.device_to_host_bytes, staged.copies.device_to_host_bytes) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Plans, RwDeviceDist56,
    ::testing::Combine(::testing::Values(Plan::row_wise, Plan::row_wise_low_rank, Plan::table_row_wise,
                                         Plan::grid_shard, Plan::mixed),
                       ::testing::Values(PipelineKind::base, PipelineKind::sparse_dist, PipelineKind::semi_sync)),
    [](const ::testing::TestParamInfo<DistParam>& p) {
      const Plan w = std::get<0>(p.param);
      const char* name = w == Plan::row_wise            ? "row_wise"
                         : w == Plan::row_wise_low_rank ? "row_wise_low_rank"
                         : w == Plan::table_row_wise    ? "table_row_wise"
                         : w == Plan::grid_shard        ? "grid_shard"
                                                        : "mixed";
      return fmt::format("{}_{}", name, to_string(std::get<1>(p.param)));
    });

// The row-split dists' unpacking and packing (kernels/dist_pack_core.h), which the stand-in runs
// and the CUDA kernels call per element, by hand. Forward: a 2 x 2 block added into columns 1-2 of
// a 2 x 4 pooled output, then times the rows' mean scales {0.5, 0 (an empty bag)}; without
// accumulating, the output is not read (0 + x: a -0.0f block element becomes +0.0f, as the host's
// += into a zeroed buffer); the sum is rounded before the scaling ((1 + 2^-24) * 3 = 3, where
// 1 * 3 + 2^-24 * 3 would round up). Backward: columns 1-2 of a 2 x 3 block times 1 / 4, then
// times the row's scale {0.5, 0}: -8 becomes -0.0f, as the host's dpooled *= 1 / W then
// scale_rows_mean, each product rounded in that order (1.5 x 1 / 3 x 1 / 3). Bad sizes throw.
TEST(RwDeviceDist56PackCore, AddedAndTwiceScaledRowsByHand) {
  std::vector<float> out{1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> block{10, 20, 30, 40}, scales{0.5f, 0.0f};
  dist_pack_core::add_scale_rows_2d(2, 2, block.data(), 2, out.data() + 1, 4, scales.data(), true);
  EXPECT_EQ(out, (std::vector<float>{1, 6, 11.5f, 4, 5, 0, 0, 8}));
  std::vector<float> fresh{1, 9, 9, 4, 5, 9, 9, 8};
  const std::vector<float> signed_block{10, -0.0f, 30, 40};
  dist_pack_core::add_scale_rows_2d(2, 2, signed_block.data(), 2, fresh.data() + 1, 4, nullptr, false);
  EXPECT_EQ(fresh, (std::vector<float>{1, 10, 0, 4, 5, 30, 40, 8}));
  EXPECT_FALSE(std::signbit(fresh[2]));
  float one = 1.0f;
  const float tiny = 1.0f / 16777216.0f, three = 3.0f;  // 2^-24
  dist_pack_core::add_scale_rows_2d(1, 1, &tiny, 1, &one, 1, &three, true);
  EXPECT_EQ(one, 3.0f);

  const std::vector<float> g{1, 8, 12, 1, -8, 4};
  std::vector<float> packed(4, 7.0f);
  dist_pack_core::scale_copy_rows_2d(2, 2, g.data() + 1, 3, packed.data(), 2, 0.25f, scales.data());
  EXPECT_EQ(packed, (std::vector<float>{1.0f, 1.5f, -0.0f, 0.0f}));
  EXPECT_TRUE(std::signbit(packed[2]));
  dist_pack_core::scale_copy_rows_2d(2, 2, g.data() + 1, 3, packed.data(), 2, 0.25f, nullptr);
  EXPECT_EQ(packed, (std::vector<float>{2.0f, 3.0f, -2.0f, 1.0f}));
  // W = 3: 1.5 x 1 / 3 rounded, then x 1 / 3 rounded (1.5 x (1 / 3 x 1 / 3) gives 0x1.555558p-3)
  const float x = 1.5f, third = 1.0f / 3.0f;
  float cell = -1.0f;
  dist_pack_core::scale_copy_rows_2d(1, 1, &x, 1, &cell, 1, third, &third);
  EXPECT_EQ(cell, 0x1.555556p-3f);
  dist_pack_core::add_scale_rows_2d(0, 3, nullptr, 0, nullptr, 0, nullptr, true);  // nothing to do
  EXPECT_THROW(dist_pack_core::add_scale_rows_2d(2, 3, block.data(), 2, out.data(), 4, nullptr, true),
               std::invalid_argument);
  EXPECT_THROW(dist_pack_core::scale_copy_rows_2d(2, -1, g.data(), 3, packed.data(), 2, 1.0f, nullptr),
               std::invalid_argument);
}

// The host<->device copies of a row_wise step (detail::step_copy_totals: every copy of the
// ranks' devices in measured steps), by hand. dist_spec with every table row_wise on 2 ranks
// sharing one emulated device (the intra-device communicator, whose staging of host buffers the
// stand-in counts), base pipeline, 3 measured steps, B = 5 samples a rank, W = 2, mean pooling.
// Each rank has a slot of every feature (f0: 6 columns, f1: 4, f2a: 5, f2b: 5, f3: 16; 36 in all)
// with W B = 10 bags; t1's one row is rank 0's (rank 1's shard of it is empty). Per step, summed
// over both ranks, the host-staged dists made, and the device dists do not make:
//   to the device: the reduce-scatter's staged send buffer (W B x 36 floats a rank: 2,880 B) and
//     its zeros (B x 36: 1,440 B), the pooled embeddings into the dense part (one 2-D copy per
//     rank and feature: 10 copies, 2 x B x 36 x 4 = 1,440 B), the all-gather's staged send
//     buffer (B x 36 a rank: 1,440 B), and the gradients inside the embedding update's one packed
//     copy per shard (its copies stay; 10 bags x 36 columns on rank 0, x 32 on rank 1, whose t1
//     shard has no update: 2,720 B): 16 copies, 9,920 B;
//   to the host: the looked-up partial sums of each slot (10 copies, 2 x 10 x 36 x 4 = 2,880 B),
//     the reduce-scatter's result (B x 36 a rank: 1,440 B), the pooled embeddings' gradients out
//     of the dense part (10 copies, 1,440 B), the all-gather's result (W B x 36 a rank: 2,880 B):
//     24 copies, 8,640 B.
// The device dists add the mean scales (B floats of each of the 5 features, 100 B a rank), copied
// in once for the output dist and once for the gradient dist: 4 copies, 400 B. So per step 12
// fewer copies in (9,520 B fewer) and 24 fewer out (8,640 B fewer).
TEST(RwDeviceDist56Copies, RowWiseStepDropsTheDistsCopiesByHand) {
  WorkloadSpec s = dist_spec(ShardingType::row_wise, OptimizerType::sgd, 2);
  const ShardingPlan plan = plan_sharding(s);
  const DistRun staged = run_dist(s, plan, true, 1, false);
  const DistRun dev = run_dist(s, plan, true, 1, true);
  expect_same_training(dev.result, staged.result, "device dists against host-staged dists");
  const int64_t steps = s.steps;
  ASSERT_EQ(steps, 3);
  std::printf("copies of %lld measured row_wise steps, 2 ranks on one emulated device: dists staged through the "
              "host %s; on the device %s\n",
              static_cast<long long>(steps), test_support::copies_text(staged.copies).c_str(), test_support::copies_text(dev.copies).c_str());
  EXPECT_EQ(staged.copies.host_to_device - dev.copies.host_to_device, steps * (16 - 4));
  EXPECT_EQ(staged.copies.host_to_device_bytes - dev.copies.host_to_device_bytes, steps * (9'920 - 400));
  EXPECT_EQ(staged.copies.device_to_host - dev.copies.device_to_host, steps * 24);
  EXPECT_EQ(staged.copies.device_to_host_bytes - dev.copies.device_to_host_bytes, steps * 8'640);
}

// The same count for table_row_wise on 2 ranks sharing one emulated device, in nodes of one rank
// (each table's rows all on one rank; the reduce-scatter and all-gather inside a node have one
// member, the all-to-all across nodes both ranks). Per step, summed over both ranks, the
// host-staged dists made, and the device dists do not make:
//   to the device: the node reduce-scatter's staged send buffer and its zeros (nodes x B x the
//     node's width a rank: 1,440 B each over both ranks), the cross-node all-to-all's staged send
//     buffer (1,440 B), the pooled embeddings into the dense part (10 copies, 1,440 B), backward
//     the cross-node all-to-all's staged send buffer (B x 36 a rank: 1,440 B) and the node
//     all-gather's (1,440 B), and the gradients inside the embedding update's packed copies (every
//     slot W B x its columns: 1,440 B): 20 copies, 10,080 B;
//   to the host: the looked-up rows of each slot (5 copies, 1,440 B), the node reduce-scatter's
//     result (1,440 B), the all-to-all's receive buffer (B x 36 a rank: 1,440 B), the pooled
//     embeddings' gradients (10 copies, 1,440 B), backward the all-to-all's receive buffer
//     (1,440 B) and the all-gather's result (1,440 B): 23 copies, 8,640 B.
// The device dists add the mean scales (5 features x B floats a rank), in once a dist: 4 copies,
// 400 B. So per step 16 fewer copies in (9,680 B fewer) and 23 fewer out (8,640 B fewer).
TEST(RwDeviceDist56Copies, TableRowWiseStepDropsTheDistsCopiesByHand) {
  WorkloadSpec s = dist_spec(ShardingType::table_row_wise, OptimizerType::sgd, 2);
  ASSERT_EQ(s.sharding.local_world_size, 1);
  const ShardingPlan plan = plan_sharding(s);
  const DistRun staged = run_dist(s, plan, true, 1, false);
  const DistRun dev = run_dist(s, plan, true, 1, true);
  expect_same_training(dev.result, staged.result, "device dists against host-staged dists");
  const int64_t steps = s.steps;
  std::printf("copies of %lld measured table_row_wise steps, 2 ranks on one emulated device: dists staged through the "
              "host %s; on the device %s\n",
              static_cast<long long>(steps), test_support::copies_text(staged.copies).c_str(), test_support::copies_text(dev.copies).c_str());
  EXPECT_EQ(staged.copies.host_to_device - dev.copies.host_to_device, steps * (20 - 4));
  EXPECT_EQ(staged.copies.host_to_device_bytes - dev.copies.host_to_device_bytes, steps * (10'080 - 400));
  EXPECT_EQ(staged.copies.device_to_host - dev.copies.device_to_host, steps * 23);
  EXPECT_EQ(staged.copies.device_to_host_bytes - dev.copies.device_to_host_bytes, steps * 8'640);
}

}  // namespace rwdist56_test
