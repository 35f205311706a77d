// low_rank_project_cuda and low_rank_backward_cuda (kernels/cuda_low_rank.h) against the host
// kernels of kernels/low_rank.h, compared exactly: both sum in the same order with the products
// rounded before the additions (no FMA on either side). Skips, with what cudaGetDeviceCount
// said, where no device is visible.

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "embedscope/engine/kernels/cuda_kernels.h"
#include "embedscope/engine/kernels/cuda_low_rank.h"
#include "embedscope/engine/kernels/low_rank.h"
#include "engine/gpu_test_support.h"

using namespace embedscope::engine;

namespace {

TEST(GpuLowRank, ProjectAndBackwardEqualTheHostKernelsBitForBit) {
  REQUIRE_CUDA_DEVICE();
  const int64_t rows = 40, r = 5, dim = 37, n = 13;
  const std::vector<float> a = embedscope::test_support::uniform_floats(static_cast<size_t>(rows * r), 1),
                           b = embedscope::test_support::uniform_floats(static_cast<size_t>(r * dim), 2),
                           g = embedscope::test_support::uniform_floats(static_cast<size_t>(n * dim), 3);
  // project: the host kernel with one id a bag (p = A's row, exactly) against the device's p B
  std::vector<int64_t> ids(static_cast<size_t>(n)), off(static_cast<size_t>(n + 1));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = (i * 7) % rows;
  std::iota(off.begin(), off.end(), int64_t{0});
  std::vector<float> want(static_cast<size_t>(n * dim)), p(static_cast<size_t>(n * r));
  low_rank_pooled_lookup(a.data(), rows, r, b.data(), dim, ids.data(), off.data(), n, nullptr, want.data(), dim);
  for (int64_t i = 0; i < n; ++i)
    std::copy_n(a.data() + ids[static_cast<size_t>(i)] * r, r, p.data() + i * r);
  cuda::DeviceArray<float> dp{std::span<const float>(p)}, db{std::span<const float>(b)},
      dout{static_cast<size_t>(n * dim)};
  cuda::low_rank_project_cuda(n, r, dim, dp.data(), db.data(), dout.data());
  EXPECT_EQ(dout.download(), want);
  // backward: dA (n x r) and dB (r x dim) from the rows `ids` (distinct: 7 is prime to 40)
  SparseGrad grad;
  grad.dim = dim;
  grad.rows = ids;
  grad.values = g;
  const auto [ga, gb] = low_rank_backward(a.data(), r, b.data(), dim, grad);
  cuda::DeviceArray<float> da{std::span<const float>(a)}, dg{std::span<const float>(g)},
      dda{static_cast<size_t>(n * r)}, ddb{static_cast<size_t>(r * dim)};
  cuda::DeviceArray<int64_t> dids{std::span<const int64_t>(ids)};
  cuda::low_rank_backward_cuda(n, r, dim, da.data(), dids.data(), db.data(), dg.data(), dda.data(), ddb.data());
  EXPECT_EQ(dda.download(), ga.values);
  EXPECT_EQ(ddb.download(), gb.values);
  EXPECT_THROW(cuda::low_rank_project_cuda(-1, r, dim, dp.data(), db.data(), dout.data()), std::invalid_argument);
}

}  // namespace
