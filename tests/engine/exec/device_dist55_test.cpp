// Issue 14 (devdist55): the table_wise / column_wise output and gradient dists on the device
// (sharding/pooled_all_to_all.cpp with RankContext::dist_on_device), on the host stand-in
// (TrainerOptions::emulate_device). The looked-up rows are packed on the device, the all-to-all
// runs on device buffers (Collectives::all_to_all_v_device: Gloo with one rank per emulated
// device, the intra-device communicator with 4 ranks on one, the hierarchical one with 2 on each
// of 2), the pooled embeddings are unpacked into their device buffers and read there by the
// resident dense part (cat interaction), and the gradient dist packs their gradients (x 1 / W)
// on the device into slot_grad's device memory, which feeds the device sparse-gradient
// accumulation. Evidence: the tables, losses and dense parameters equal the cpu backend's run bit
// for bit under table_wise, column_wise and the mixed plan (every sharding type; only the
// pooled all-to-all's features move on the device), in the base, sparse_dist and semi_sync
// pipelines, and equal the same stand-in run with the dists staged through host memory
// (TrainerOptions::device_dist = false); the host<->device copies of a table_wise step drop by
// the hand-computed amount.

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

namespace {

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

enum class Plan { table_wise, column_wise, mixed };
using DistParam = std::tuple<Plan, PipelineKind>;
class DeviceDist55 : public ::testing::TestWithParam<DistParam> {};

// Bit for bit the host-staged dists' training on every placement of the 4 ranks: one per
// emulated device (Gloo; there also bit for bit the cpu backend's), all on one (the intra-device
// communicator), 2 on each of 2 (the hierarchical communicator; bit for bit the one device's). On
// a shared device the dense all-reduce sums in member order, not in Gloo's ring order, so the
// dense parameters differ from the cpu backend's by rounding there (README "GPU path"): that is
// the staged run's difference too, and each placement is compared with its own staged run.
// The device path is really taken: fewer copies both ways.
TEST_P(DeviceDist55, EqualsTheHostStagedDistsBitForBitOnEveryPlacement) {
  const auto [which, pipeline] = GetParam();
  WorkloadSpec s = which == Plan::mixed ? mixed_spec(OptimizerType::rowwise_adagrad)
                                        : dist_spec(which == Plan::table_wise ? ShardingType::table_wise
                                                                              : ShardingType::column_wise,
                                                    OptimizerType::rowwise_adagrad);
  if (which == Plan::mixed) s.dense = dist_spec(ShardingType::table_wise, OptimizerType::sgd).dense;
  s.pipeline = pipeline;
  const ShardingPlan plan = plan_sharding(s);
  const DistRun cpu = run_dist(s, plan, false, 0, true);
  ASSERT_EQ(cpu.result.ended, RunEnd::complete) << cpu.result.error;
  EXPECT_EQ(cpu.copies.host_to_device + cpu.copies.device_to_host, 0);  // no device
  std::vector<RunResult> shared;  // the device dists' runs on 1 and on 2 emulated devices
  for (int devices : {0, 1, 2}) {
    const std::string what = fmt::format("{} emulated device(s)", devices == 0 ? 4 : devices);
    const DistRun dev = run_dist(s, plan, true, devices, true);
    const DistRun staged = run_dist(s, plan, true, devices, false);
    expect_same_training(dev.result, staged.result, what + ": dists on the device against dists staged through the host");
    if (devices == 0) expect_same_training(dev.result, cpu.result, what + ": against the cpu backend");
    else shared.push_back(dev.result);
    // the device dists drop copies both ways (the looked-up rows back, the pooled embeddings in,
    // their gradients out, and, on a shared device, the communicator's staging)
    EXPECT_LT(dev.copies.host_to_device_bytes, staged.copies.host_to_device_bytes) << what;
    EXPECT_LT(dev.copies.device_to_host, staged.copies.device_to_host) << what;
    EXPECT_LT(dev.copies.device_to_host_bytes, staged.copies.device_to_host_bytes) << what;
  }
  ASSERT_EQ(shared.size(), 2u);
  expect_same_training(shared[1], shared[0], "2 emulated devices against 1");
}

INSTANTIATE_TEST_SUITE_P(
    Plans, DeviceDist55,
    ::testing::Combine(::testing::Values(Plan::table_wise, Plan::column_wise, Plan::mixed),
                       ::testing::Values(PipelineKind::base, PipelineKind::sparse_dist, PipelineKind::semi_sync)),
    [](const ::testing::TestParamInfo<DistParam>& p) {
      const Plan w = std::get<0>(p.param);
      return fmt::format("{}_{}", w == Plan::table_wise ? "table_wise" : w == Plan::column_wise ? "column_wise" : "mixed",
                         to_string(std::get<1>(p.param)));
    });

}  // namespace

// The host<->device copies of a table_wise step (detail::step_copy_totals: every copy of the
// ranks' devices in measured steps), by hand. dist_spec on 2 ranks sharing one emulated device
// (the intra-device communicator, whose staging of host buffers the stand-in counts), base
// pipeline, 3 measured steps, B = 5 samples a rank, W = 2. The 5 slots (f0: 6 columns, f1: 4,
// f2a: 5, f2b: 5, f3: 16; 36 in all, every table on one rank) hold W B = 10 bags each. Per step,
// summed over both ranks, the host-staged dists made, and the device dists do not make:
//   to the device: the output dist's staged send buffer (one per rank, W B x its columns: 1,440
//     B in all), the pooled embeddings into the dense part (one 2-D copy per rank and feature:
//     10 copies, 2 x B x 36 x 4 = 1,440 B), the gradient dist's staged send buffer (one per rank,
//     B x 36 floats each: 1,440 B), and the gradients inside the embedding update's one packed
//     copy per shard (its copies stay, 10 x cols floats a slot less: 1,440 B): 14 copies, 5,760 B;
//   to the host: the looked-up rows of each slot (5 copies, 10 x 36 x 4 = 1,440 B), the output
//     dist's staged receive buffer (one per rank: 1,440 B), the pooled embeddings' gradients out
//     of the dense part (10 copies, 1,440 B), the gradient dist's receive buffer (one per rank:
//     1,440 B): 19 copies, 5,760 B.
TEST(DeviceDist55Copies, TableWiseStepDropsTheDistsCopiesByHand) {
  WorkloadSpec s = dist_spec(ShardingType::table_wise, OptimizerType::sgd, 2);
  const ShardingPlan plan = plan_sharding(s);
  for (const auto& tp : plan.tables) ASSERT_EQ(tp.shards.size(), 1u);  // whole tables
  const DistRun staged = run_dist(s, plan, true, 1, false);
  const DistRun dev = run_dist(s, plan, true, 1, true);
  expect_same_training(dev.result, staged.result, "device dists against host-staged dists");
  const int64_t steps = s.steps;
  ASSERT_EQ(steps, 3);
  std::printf("copies of %lld measured table_wise steps, 2 ranks on one emulated device: dists staged through the "
              "host %s; on the device %s\n",
              static_cast<long long>(steps), test_support::copies_text(staged.copies).c_str(), test_support::copies_text(dev.copies).c_str());
  EXPECT_EQ(staged.copies.host_to_device - dev.copies.host_to_device, steps * 14);
  EXPECT_EQ(staged.copies.host_to_device_bytes - dev.copies.host_to_device_bytes, steps * 5'760);
  EXPECT_EQ(staged.copies.device_to_host - dev.copies.device_to_host, steps * 19);
  EXPECT_EQ(staged.copies.device_to_host_bytes - dev.copies.device_to_host_bytes, steps * 5'760);
}

// on_pooled (a hook that reads the pooled embeddings on the host) keeps the dists on the host:
// every pooled embedding the hook sees is the reference's, and training equals the cpu backend's.
// (Were the dists on the device, the hook would read the zeros of the pooled buffers' host copies.)
TEST(DeviceDist55Copies, AnOnPooledHookKeepsTheHostDists) {
  const RunResult dev = check_parity(dist_spec(ShardingType::table_wise, OptimizerType::sgd, 2), {}, true, nullptr, 1);
  EXPECT_EQ(dev.ended, RunEnd::complete) << dev.error;
}

// The gradient dist's packing (kernels/dist_pack_core.h), which the stand-in runs and the CUDA
// kernel calls per element, by hand: a 3 x 2 block at column 1 of a 3 x 4 source, times 1 / 4,
// into a contiguous 3 x 2 buffer; -0.0f stays -0.0f (as the cpu backend's x *= 1 / W); bad sizes.
TEST(DeviceDist55PackCore, ScaledCopyOfAColumnBlockByHand) {
  const std::vector<float> src{0, 1, 2, 3,  //
                               4, -0.0f, 6, 7,  //
                               8, 9, 10, 1e-38f};
  std::vector<float> dst(6, -1.0f);
  dist_pack_core::scale_copy_2d(3, 2, src.data() + 1, 4, dst.data(), 2, 0.25f);
  EXPECT_EQ(dst, (std::vector<float>{0.25f, 0.5f, -0.0f, 1.5f, 2.25f, 2.5f}));
  EXPECT_TRUE(std::signbit(dst[2]));
  float tiny = 0;
  dist_pack_core::scale_copy_2d(1, 1, src.data() + 11, 1, &tiny, 1, 1.0f / 3.0f);
  EXPECT_EQ(tiny, 1e-38f * (1.0f / 3.0f));  // one rounding, as the host's
  dist_pack_core::scale_copy_2d(0, 5, nullptr, 0, nullptr, 0, 2.0f);  // nothing to do
  EXPECT_THROW(dist_pack_core::scale_copy_2d(2, 3, src.data(), 2, dst.data(), 3, 1.0f), std::invalid_argument);
  EXPECT_THROW(dist_pack_core::scale_copy_2d(-1, 3, src.data(), 3, dst.data(), 3, 1.0f), std::invalid_argument);
}
