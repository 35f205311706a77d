// Reduced-precision tables (data_type fp16 / bf16 / int8 / int4, optimizer_state_type fp16 /
// bf16, stochastic rounding) through the cuda executor's device path, with host memory standing
// in for the GPU (TrainerOptions::emulate_device: RankDevice::lookup_encoded / update_encoded
// on the CPU kernels, the shards' encoded rows and state uploaded, read back at the end):
//  - the run equals the cpu backend's bit for bit (forward outputs, tables, dense parameters,
//    losses, the stored rows' error): the device path stores, looks up and updates the rows
//    with the same rounding, the same stochastic-rounding keys (global rows and columns);
//  - and the reference (parity_check.h, storage_slack's tolerance).
// Sharding types: the ones each data type allows (int4 column shards need even widths: the
// parity spec's dims 6, 4, 5 (odd: t2 stays fp32), 16). The same code on a real GPU runs the
// CUDA kernels (apply_row_optimizer_encoded_cuda: GpuEncodedUpdate; tbe_forward /
// tbe_forward_quantized), bit-equal to these CPU kernels by construction (tested on the host:
// EncodedUpdateMath).

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "embedscope/engine/sharding/sharding.h"
#include "engine/parity_check.h"

namespace {

namespace es = embedscope::engine;
using namespace embedscope::engine::parity;

struct EdpCase {
  es::ShardingType type;
  es::OptimizerType opt;
  es::TableDataType data_type;
  es::OptimizerStateType state = es::OptimizerStateType::fp32;
  std::optional<bool> stochastic{};
};

// The parity spec on 2 ranks with t0, t1 and t3 stored as data_type (t2 has an odd dim: fp32).
es::WorkloadSpec edp_spec(const EdpCase& c) {
  es::WorkloadSpec s = parity_spec(c.type, 2, es::Pooling::mean, c.opt);
  for (auto& t : s.tables) {
    if (t.embedding_dim % 2 != 0) continue;
    t.data_type = c.data_type;
    t.stochastic_rounding = c.stochastic;
    t.optimizer_state_type = c.state;
  }
  return s;
}

es::RunResult edp_run(const es::WorkloadSpec& s, bool emulate) {
  es::TrainerOptions opt;
  opt.emulate_device = emulate;
  opt.keep_tables = true;
  opt.trace = false;
  return es::run_training(s, es::plan_sharding(s), opt);
}

class EncodedDevicePath : public ::testing::TestWithParam<EdpCase> {};

TEST_P(EncodedDevicePath, EqualsTheCpuBackendBitForBitAndTheReference) {
  const EdpCase c = GetParam();
  const es::WorkloadSpec s = edp_spec(c);
  const es::RunResult cpu = edp_run(s, false);
  ASSERT_EQ(cpu.ended, es::RunEnd::complete) << cpu.error;
  const es::RunResult dev = check_parity(s, {}, true);  // the device path against the reference
  ASSERT_EQ(dev.ended, es::RunEnd::complete) << dev.error;
  ASSERT_EQ(dev.tables.size(), cpu.tables.size());
  for (size_t t = 0; t < cpu.tables.size(); ++t) EXPECT_EQ(dev.tables[t], cpu.tables[t]) << "table " << s.tables[t].name;
  EXPECT_EQ(dev.dense_params, cpu.dense_params);
  EXPECT_EQ(dev.loss, cpu.loss);
  ASSERT_EQ(dev.table_storage.size(), cpu.table_storage.size());
  for (size_t t = 0; t < cpu.table_storage.size(); ++t) {
    const auto &d = dev.table_storage[t], &h = cpu.table_storage[t];
    EXPECT_EQ(d.weight_bytes, h.weight_bytes) << s.tables[t].name;
    EXPECT_EQ(d.optimizer_state_bytes, h.optimizer_state_bytes) << s.tables[t].name;
    EXPECT_EQ(d.max_abs_error, h.max_abs_error) << s.tables[t].name;
    if (s.tables[t].data_type != es::TableDataType::fp32 && s.tables[t].name == "t3") {
      EXPECT_GT(d.max_abs_error, 0.0) << "the stored rows' error is measured on the device path";
    }
  }
  // the stored bytes are the reduced ones: t3 (50 x 16) as data_type on its rank(s): a copy on
  // each rank (data_parallel), two column shards of 50 x 8 (column_wise: int8 / int4 rows carry
  // their scale and bias per shard row), else 50 rows of 16 in all
  int64_t t3_bytes = 0;
  for (int64_t b : dev.table_storage[3].weight_bytes) t3_bytes += b;
  const int64_t want = c.type == es::ShardingType::data_parallel ? 2 * 50 * es::row_bytes(c.data_type, 16)
                       : c.type == es::ShardingType::column_wise ? 2 * 50 * es::row_bytes(c.data_type, 8)
                                                                 : 50 * es::row_bytes(c.data_type, 16);
  EXPECT_EQ(t3_bytes, want);
}

INSTANTIATE_TEST_SUITE_P(
    Types, EncodedDevicePath,
    ::testing::Values(
        EdpCase{es::ShardingType::table_wise, es::OptimizerType::rowwise_adagrad, es::TableDataType::fp16},
        EdpCase{es::ShardingType::row_wise, es::OptimizerType::adam, es::TableDataType::bf16, es::OptimizerStateType::bf16},
        EdpCase{es::ShardingType::column_wise, es::OptimizerType::sgd, es::TableDataType::int8},
        EdpCase{es::ShardingType::data_parallel, es::OptimizerType::rowwise_adagrad, es::TableDataType::int8,
                es::OptimizerStateType::fp16, true},
        EdpCase{es::ShardingType::table_row_wise, es::OptimizerType::adam, es::TableDataType::int4},
        EdpCase{es::ShardingType::row_wise, es::OptimizerType::sgd, es::TableDataType::int4, es::OptimizerStateType::fp32,
                false},
        EdpCase{es::ShardingType::column_wise, es::OptimizerType::adam, es::TableDataType::fp16,
                es::OptimizerStateType::fp16, true},
        EdpCase{es::ShardingType::table_wise, es::OptimizerType::adam, es::TableDataType::fp32,
                es::OptimizerStateType::bf16}),
    [](const ::testing::TestParamInfo<EdpCase>& p) {
      const EdpCase& c = p.param;
      return fmt::format("{}_{}_{}_state_{}_{}", es::to_string(c.type), es::to_string(c.opt), es::enum_name(c.data_type),
                         es::enum_name(c.state),
                         c.stochastic ? (*c.stochastic ? "sr" : "nearest") : "default");
    });

// The planner's estimate of a cuda-backend spec counts the reduced sizes: per rank, its weights
// and optimizer state are what the device path allocated (the emulated run's measured bytes,
// each buffer rounded up to the allocator's 512-byte blocks as the estimate's replay rounds
// them; row_wise: one shard of each table a rank, adam: two equal state arrays), and int8 rows
// with fp16 state take less than the fp32 spec's.
int64_t edp_block(int64_t bytes) { return (bytes + 511) / 512 * 512; }

TEST(EncodedDevicePathEstimate, CudaEstimateCountsTheStoredBytes) {
  es::WorkloadSpec s = edp_spec({es::ShardingType::row_wise, es::OptimizerType::adam, es::TableDataType::int8,
                                 es::OptimizerStateType::fp16});
  s.devices.backend = es::Backend::cuda;
  const auto est = es::estimate_memory(s, es::plan_sharding(s));
  es::WorkloadSpec fp32 = parity_spec(es::ShardingType::row_wise, 2, es::Pooling::mean, es::OptimizerType::adam);
  fp32.devices.backend = es::Backend::cuda;
  const auto est32 = es::estimate_memory(fp32, es::plan_sharding(fp32));
  s.devices.backend = es::Backend::cpu;  // the emulated device path runs under the cpu backend's spec
  const es::RunResult run = edp_run(s, true);
  ASSERT_EQ(run.ended, es::RunEnd::complete) << run.error;
  ASSERT_EQ(est.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    int64_t w = 0, st = 0;
    for (const auto& ts : run.table_storage) {
      w += edp_block(ts.weight_bytes[static_cast<size_t>(r)]);
      st += 2 * edp_block(ts.optimizer_state_bytes[static_cast<size_t>(r)] / 2);
    }
    EXPECT_EQ(est[static_cast<size_t>(r)].weights, w) << "rank " << r;
    EXPECT_EQ(est[static_cast<size_t>(r)].optimizer_state, st) << "rank " << r;
    EXPECT_LT(est[static_cast<size_t>(r)].weights, est32[static_cast<size_t>(r)].weights) << "rank " << r;
    EXPECT_LT(est[static_cast<size_t>(r)].optimizer_state, est32[static_cast<size_t>(r)].optimizer_state) << "rank " << r;
  }
  // by hand, rank 0 of row_wise over 2: t3 rows 0-24 in int8, 25 x (16 + 8) = 600 bytes: two
  // blocks (fp32: 25 x 64 = 1600, four); t0 5 x 14, t1 1 x 12, t2 (fp32) 2 x 20: one block each
  EXPECT_EQ(est[0].weights, 512 * (2 + 1 + 1 + 1));
  EXPECT_EQ(est32[0].weights, 512 * (4 + 1 + 1 + 1));
}

}  // namespace
