// Reduced-precision tables on the cuda backend end to end (label gpu; skipped without a device):
// data_type fp16 / bf16 / int8 / int4, optimizer_state_type fp16 / bf16 and stochastic rounding
// through CudaRankDevice::lookup_encoded / update_encoded (tbe_forward with fp16 / bf16 plans,
// tbe_forward_quantized, apply_row_optimizer_encoded_cuda) against the unsharded reference with
// parity_check.h's tolerances (storage_slack: one stored unit, since the dense layers on cuBLAS
// differ from the CPU BLAS in summation order, so a gradient may differ in its last bits and a
// value near a rounding boundary land one unit apart). The kernels alone are bit-equal to the
// CPU ones (GpuEncodedUpdate); the emulated device path is bit-equal to the cpu backend
// (EncodedDevicePath). World size min(2, GPUs).
#include <gtest/gtest.h>

#include <algorithm>

#include "../engine/parity_check.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/profiler/device/cuda_device.h"

namespace {

namespace es = embedscope::engine;
using namespace embedscope::engine::parity;

struct CeCase {
  es::ShardingType type;
  es::OptimizerType opt;
  es::TableDataType data_type;
  es::OptimizerStateType state;
  bool stochastic;
};

TEST(CudaExecutor, ReducedPrecisionTablesEqualTheReference) {
  if (auto why = embedscope::profiler::cuda_unavailable_reason(1); !why.empty()) GTEST_SKIP() << why;
  const int world = std::min(2, embedscope::profiler::cuda_devices().count);
  const CeCase cases[] = {
      {es::ShardingType::table_wise, es::OptimizerType::rowwise_adagrad, es::TableDataType::fp16,
       es::OptimizerStateType::fp32, false},
      {es::ShardingType::row_wise, es::OptimizerType::adam, es::TableDataType::bf16, es::OptimizerStateType::bf16, false},
      {es::ShardingType::data_parallel, es::OptimizerType::rowwise_adagrad, es::TableDataType::int8,
       es::OptimizerStateType::fp16, true},
      {es::ShardingType::column_wise, es::OptimizerType::sgd, es::TableDataType::int8, es::OptimizerStateType::fp32, false},
      {es::ShardingType::table_row_wise, es::OptimizerType::adam, es::TableDataType::int4, es::OptimizerStateType::fp32,
       true},
  };
  for (const CeCase& c : cases) {
    SCOPED_TRACE(fmt::format("{} {} {} state {} {}", es::to_string(c.type), es::to_string(c.opt),
                             es::enum_name(c.data_type), es::enum_name(c.state), c.stochastic ? "sr" : "nearest"));
    es::WorkloadSpec s = parity_spec(c.type, world, es::Pooling::mean, c.opt);
    s.devices.backend = es::Backend::cuda;
    for (auto& t : s.tables) {
      if (t.embedding_dim % 2 != 0) continue;  // int4 needs even dims (t2 stays fp32)
      t.data_type = c.data_type;
      t.stochastic_rounding = c.stochastic;
      t.optimizer_state_type = c.state;
    }
    const es::RunResult run = check_parity(s);
    ASSERT_EQ(run.table_storage.size(), s.tables.size());
    EXPECT_GT(run.table_storage[3].max_abs_error, 0.0) << "the stored rows' error, measured on the GPU";
  }
}

}  // namespace
