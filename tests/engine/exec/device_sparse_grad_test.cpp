// The embedding backward's sparse-gradient accumulation on the cuda executor's device path
// without a GPU (issue 14; TrainerOptions::emulate_device): the pooled-output gradients of each
// shard's slots go to the device in one copy and are accumulated and applied there
// (RankDevice::accumulate_update; the stand-in runs sparse_grad_core.h, the kernel's code). Under
// table_wise and row_wise and every optimizer, mean pooling (per-bag scales) and a table read by
// two features (two parts merged), the tables, losses and dense parameters equal the cpu
// backend's run bit for bit and the unsharded reference within the parity tolerance; the copies
// of the update per measured step are one per shard with gradients (before: three) and one read
// of the distinct-row counts per rank.

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <tuple>

#include "embedscope/engine/exec/run.h"
#include "engine/parity_check.h"
#include "exec/device/rank_device.h"

using namespace embedscope::engine;
using namespace embedscope::engine::parity;

namespace {

using DeviceSparseGradParam = std::tuple<ShardingType, OptimizerType>;
class DeviceSparseGrad : public ::testing::TestWithParam<DeviceSparseGradParam> {};

TEST_P(DeviceSparseGrad, EqualsTheCpuBackendBitForBitWithOneCopyPerShard) {
  const auto [type, opt] = GetParam();
  WorkloadSpec s = parity_spec(type, 2, Pooling::mean, opt);
  s.steps = 4;
  const ShardingPlan plan = plan_sharding(s);
  const detail::SparseGradCopyTotals before = detail::sparse_grad_copy_totals();
  const RunResult dev = check_parity(s, {}, true, &plan);
  const detail::SparseGradCopyTotals after = detail::sparse_grad_copy_totals();
  ASSERT_EQ(dev.ended, RunEnd::complete) << dev.error;
  TrainerOptions o;
  o.keep_tables = true;
  o.trace = false;
  const RunResult cpu = run_training(s, plan, o);
  ASSERT_EQ(cpu.ended, RunEnd::complete) << cpu.error;
  ASSERT_EQ(dev.tables.size(), cpu.tables.size());
  for (size_t t = 0; t < dev.tables.size(); ++t) EXPECT_EQ(dev.tables[t], cpu.tables[t]) << "table " << t;
  EXPECT_EQ(dev.loss, cpu.loss);
  EXPECT_EQ(dev.dense_params, cpu.dense_params);
  // table_wise: 4 shards, 2 a rank (every table has ids in every batch); row_wise over 2 ranks:
  // t0 5 + 5 rows, t1 1 + 0, t2 2 + 1, t3 25 + 25 - 8 shards, 7 with rows, each of those with ids
  // in every batch (this seed; rank 1's t1 shard gets none: nothing copied, its count 0 read with
  // the others). One copy per shard with ids per measured step (before: three), and one read of
  // the rank's shards' counts (8 bytes a shard) per rank and step.
  const int64_t shards = type == ShardingType::table_wise ? 4 : 7;
  const int64_t local_shards = type == ShardingType::table_wise ? 4 : 8;
  const int64_t h2d = after.host_to_device - before.host_to_device;
  const int64_t d2h = after.device_to_host - before.device_to_host;
  std::printf("sparse-gradient copies in %lld measured steps: %lld to the device (%lld B), %lld back (%lld B)\n",
              static_cast<long long>(s.steps), static_cast<long long>(h2d),
              static_cast<long long>(after.host_to_device_bytes - before.host_to_device_bytes), static_cast<long long>(d2h),
              static_cast<long long>(after.device_to_host_bytes - before.device_to_host_bytes));
  EXPECT_EQ(h2d, s.steps * shards);
  EXPECT_EQ(d2h, s.steps * 2);
  EXPECT_EQ(after.device_to_host_bytes - before.device_to_host_bytes, s.steps * local_shards * 8);
}

INSTANTIATE_TEST_SUITE_P(
    Types, DeviceSparseGrad,
    ::testing::Combine(::testing::Values(ShardingType::table_wise, ShardingType::row_wise),
                       ::testing::Values(OptimizerType::sgd, OptimizerType::rowwise_adagrad, OptimizerType::adam)),
    [](const ::testing::TestParamInfo<DeviceSparseGradParam>& p) {
      return fmt::format("{}_{}", to_string(std::get<0>(p.param)), to_string(std::get<1>(p.param)));
    });

}  // namespace
