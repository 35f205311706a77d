// copy_rows_cuda (kernels/cuda_row_copy.h), the batched row moves of host / host_cached tables
// (issue 16 / 14), against the CPU reference copy_rows (kernels/row_copy.h), compared exactly:
// rows read through the mapped pointer of pinned host memory (cudaHostRegister mapped, as
// RankDevice::pin_host pins the host rows) and from device memory in one gather (FBGEMM's
// forward: cache slot or host row per row), and scattered back to both. Skips, with what
// cudaGetDeviceCount said, where no device is visible.

#include <gtest/gtest.h>
#include <cuda_runtime_api.h>

#include <random>
#include <span>
#include <vector>

#include "embedscope/engine/kernels/cuda_kernels.h"
#include "embedscope/engine/kernels/cuda_row_copy.h"
#include "embedscope/engine/kernels/row_copy.h"
#include "engine/gpu_test_support.h"

using namespace embedscope::engine;

namespace {

TEST(GpuRowCopy, GatherAndScatterThroughPinnedHostRowsEqualTheCpuReference) {
  REQUIRE_CUDA_DEVICE();
  const int64_t host_rows = 300, slots = 40, dim = 37, n = 64;  // dim not a multiple of 32: a partial warp
  std::vector<float> host = embedscope::test_support::uniform_floats(static_cast<size_t>(host_rows * dim), 1);
  const std::vector<float> cache = embedscope::test_support::uniform_floats(static_cast<size_t>(slots * dim), 2);
  ASSERT_EQ(cudaHostRegister(host.data(), host.size() * 4, cudaHostRegisterMapped), cudaSuccess);
  float* host_dev = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(reinterpret_cast<void**>(&host_dev), host.data(), 0), cudaSuccess);
  // gather: row i from slot (i * 7) % slots for even i, else host row (i * 13) % host_rows
  std::vector<int64_t> src(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) src[static_cast<size_t>(i)] = i % 2 == 0 ? (i * 7) % slots : -1 - (i * 13) % host_rows;
  std::vector<float> want(static_cast<size_t>(n * dim));
  copy_rows(n, dim, cache.data(), host.data(), src.data(), want.data(), nullptr, nullptr);
  cuda::DeviceArray<float> d_cache{std::span<const float>(cache)}, d_out{static_cast<size_t>(n * dim)};
  cuda::DeviceArray<int64_t> d_src{std::span<const int64_t>(src)};
  cuda::copy_rows_cuda(n, dim, d_cache.data(), host_dev, d_src.data(), d_out.data(), nullptr, nullptr);
  EXPECT_EQ(d_out.download(), want);
  // scatter: the gathered rows, changed, back to distinct destinations: the first 20 into slots
  // 0..19 (device), the rest into host rows 100, 103, ... (through the mapped pointer)
  std::vector<float> changed = want;
  for (auto& x : changed) x = x * 2.0f + 1.0f;
  std::vector<int64_t> dst(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) dst[static_cast<size_t>(i)] = i < 20 ? i : -1 - (100 + 3 * (i - 20));
  std::vector<float> want_cache = cache, want_host = host;
  copy_rows(n, dim, changed.data(), nullptr, nullptr, want_cache.data(), want_host.data(), dst.data());
  cuda::DeviceArray<float> d_changed{std::span<const float>(changed)};
  cuda::DeviceArray<int64_t> d_dst{std::span<const int64_t>(dst)};
  cuda::copy_rows_cuda(n, dim, d_changed.data(), nullptr, nullptr, d_cache.data(), host_dev, d_dst.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(d_cache.download(), want_cache);
  EXPECT_EQ(host, want_host);  // written in place by the kernel
  EXPECT_NE(want_host, embedscope::test_support::uniform_floats(static_cast<size_t>(host_rows * dim), 1));  // the scatter changed rows
  EXPECT_EQ(cudaHostUnregister(host.data()), cudaSuccess);
  EXPECT_THROW(cuda::copy_rows_cuda(-1, dim, d_cache.data(), nullptr, nullptr, d_out.data(), nullptr, nullptr),
               std::invalid_argument);
}

}  // namespace
