// kjt_permute_cuda (kernels/cuda_kjt.h), the KJT input dist's regrouping per slot on a GPU (issue
// 14, kjt56: RankDevice::kjt_permute), against its CPU reference kjt_permute_core::permute
// (kernels/kjt_permute_core.h), compared exactly: worlds of 1, 3 and 4 sources, 1 to 5 slots,
// 1 to 300 bags, bags of more than one warp of ids and empty ones, a second call of the same
// size on the same workspace (no growth), and the degenerate shapes. Skips, with what
// cudaGetDeviceCount said, where no device is visible.

#include <gtest/gtest.h>
#include <cuda_runtime_api.h>

#include <random>
#include <span>
#include <vector>

#include "embedscope/engine/kernels/cuda_kernels.h"
#include "embedscope/engine/kernels/cuda_kjt.h"
#include "embedscope/engine/kernels/kjt_permute_core.h"
#include "engine/gpu_test_support.h"

using namespace embedscope::engine;

namespace {

GrowOnlyWorkspace kjt_workspace() {
  return GrowOnlyWorkspace([](size_t bytes) { return cuda::device_malloc(bytes); },
                           [](void* p) { cuda::device_free(p); });
}

TEST(GpuKjt56Permute, EqualsTheCpuReferenceBitForBit) {
  REQUIRE_CUDA_DEVICE();
  std::mt19937_64 rng(56);
  struct Shape {
    int64_t W, P, B;
  };
  for (const Shape sh : {Shape{1, 1, 1}, Shape{3, 2, 7}, Shape{4, 5, 300}, Shape{4, 1, 33}}) {
    SCOPED_TRACE(testing::Message() << "W " << sh.W << " P " << sh.P << " B " << sh.B);
    const int64_t N = sh.W * sh.P * sh.B;
    std::vector<int64_t> lengths(static_cast<size_t>(N)), ids;
    for (int64_t i = 0; i < N; ++i) {
      lengths[static_cast<size_t>(i)] = i % 5 == 3 ? 0 : static_cast<int64_t>(rng() % 70);  // some > 32 ids
      for (int64_t j = 0; j < lengths[static_cast<size_t>(i)]; ++j) ids.push_back(static_cast<int64_t>(rng() >> 1));
    }
    const auto n = static_cast<int64_t>(ids.size());
    std::vector<int64_t> want_ids(ids.size()), want_off(static_cast<size_t>(sh.P * (sh.W * sh.B + 1)));
    kjt_permute_core::permute(sh.W, sh.P, sh.B, lengths.data(), ids.data(), n, want_ids.data(), want_off.data());
    cuda::DeviceArray<int64_t> d_len{std::span<const int64_t>(lengths)}, d_ids{std::span<const int64_t>(ids)};
    cuda::DeviceArray<int64_t> d_out(ids.size()), d_off(want_off.size());
    GrowOnlyWorkspace ws = kjt_workspace();
    for (int pass = 0; pass < 2; ++pass) {  // the second reuses the workspace
      cuda::kjt_permute_cuda(sh.W, sh.P, sh.B, d_len.data(), d_ids.data(), n, d_out.data(), d_off.data(), ws, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(d_out.download(), want_ids) << "pass " << pass;
      EXPECT_EQ(d_off.download(), want_off) << "pass " << pass;
    }
    EXPECT_EQ(ws.allocs(), 1);
  }
}

TEST(GpuKjt56Permute, DegenerateShapesAndErrors) {
  REQUIRE_CUDA_DEVICE();
  GrowOnlyWorkspace ws = kjt_workspace();
  const std::vector<int64_t> sevens{7, 7, 7};
  cuda::DeviceArray<int64_t> d_off{std::span<const int64_t>(sevens)};
  cuda::kjt_permute_cuda(0, 3, 4, nullptr, nullptr, 0, nullptr, d_off.data(), ws, nullptr);  // no source
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(d_off.download(), (std::vector<int64_t>{0, 0, 0}));  // as permute()
  cuda::kjt_permute_cuda(2, 0, 4, nullptr, nullptr, 0, nullptr, nullptr, ws, nullptr);  // no slot: nothing
  EXPECT_THROW(cuda::kjt_permute_cuda(-1, 1, 1, nullptr, nullptr, 0, nullptr, nullptr, ws, nullptr),
               std::invalid_argument);
}

}  // namespace
