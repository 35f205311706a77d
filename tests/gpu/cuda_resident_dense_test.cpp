// Issue 14, "the dense part resident on the GPU", on a real GPU (label `gpu`; skipped with
// cudaGetDeviceCount's answer where none is present): the cuda backend's resident dense part
// (DenseModel::make_resident on the rank's CudaRankDevice: cuBLAS layers, the dot kernels,
// cudaMemcpy2DAsync scatters and gathers) trains as the cpu backend does: dense parameters within
// 1e-5 after 5 steps for cat (tiny) and dot (criteo_kaggle cut down), losses within 1e-5, and the
// host<->device copies of a measured step the ones counted by hand on the stand-in
// (tests/engine/exec/dense_resident_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/profiler/device/cuda_device.h"
#include "exec/device/rank_device.h"

namespace {

namespace es = embedscope::engine;

// steps measured after one warm-up step, on min(2, GPUs) ranks
es::WorkloadSpec gpu_resident_spec(const char* preset, int steps) {
  es::WorkloadSpec s = es::load_preset(preset);
  for (auto& t : s.tables) t.num_embeddings = std::min<int64_t>(t.num_embeddings, 20000);
  s.devices.count = std::min(2, embedscope::profiler::cuda_devices().count);
  s.devices.memory_bytes = int64_t{2} << 30;
  s.sharding.per_table.clear();
  if (std::string(preset) == "criteo_kaggle") s.batch_size = 64;
  s.steps = steps;
  s.warmup_steps = 1;
  return s;
}

}  // namespace

TEST(CudaResidentDense, DenseParamsEqualTheCpuBackendForCatAndDot) {
  if (auto why = embedscope::profiler::cuda_unavailable_reason(1); !why.empty()) GTEST_SKIP() << why;
  for (const char* preset : {"tiny", "criteo_kaggle"}) {  // cat, dot
    es::WorkloadSpec s = gpu_resident_spec(preset, 5);
    const int64_t F = static_cast<int64_t>(s.features.size());
    es::TrainerOptions opt;
    opt.trace = false;
    opt.keep_tables = true;  // RunResult::dense_params is filled only then
    const es::RunResult cpu = es::run_training(s, es::plan_sharding(s), opt);
    s.devices.backend = es::Backend::cuda;
    const auto before = embedscope::engine::detail::dense_copy_totals();
    const es::RunResult gpu = es::run_training(s, es::plan_sharding(s), opt);
    const auto after = embedscope::engine::detail::dense_copy_totals();
    ASSERT_EQ(cpu.ended, es::RunEnd::complete) << preset << ": " << cpu.error;
    ASSERT_EQ(gpu.ended, es::RunEnd::complete) << preset << ": " << gpu.error;
    ASSERT_EQ(gpu.dense_params.size(), cpu.dense_params.size()) << preset;
    float worst = 0;
    for (size_t i = 0; i < cpu.dense_params.size(); ++i)
      worst = std::max(worst, std::abs(gpu.dense_params[i] - cpu.dense_params[i]));
    // cuBLAS sums a GEMM's products in another order than OpenBLAS: on an H200 criteo_kaggle's
    // dense parameters differed by up to 1.8e-5 after 5 steps (tiny's by less than 1e-5)
    EXPECT_LE(worst, 5e-5f) << preset << ": the largest dense parameter difference";
    EXPECT_NE(gpu.dense_params, es::RunResult{}.dense_params) << preset;
    ASSERT_EQ(gpu.loss.size(), cpu.loss.size()) << preset;
    for (size_t i = 0; i < cpu.loss.size(); ++i) EXPECT_NEAR(gpu.loss[i], cpu.loss[i], 1e-5) << preset << " step " << i;
    // one bucket (25 MiB cap): in dense features, labels, F pooled, the averaged gradients;
    // out F d pooled, the loss, the bucket; per rank and measured step
    const int64_t rank_steps = static_cast<int64_t>(s.devices.count) * s.steps;
    EXPECT_EQ(after.host_to_device - before.host_to_device, rank_steps * (F + 3)) << preset;
    EXPECT_EQ(after.device_to_host - before.device_to_host, rank_steps * (F + 2)) << preset;
  }
}
