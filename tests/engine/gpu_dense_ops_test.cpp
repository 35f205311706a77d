// bce_with_logits_cuda and sgd_step_cuda (cuda_dense_ops.h) against the host functions
// bce_with_logits / sgd_step (dense.h), which run the same per-element code (dense_core.h) and
// are themselves checked against hand-computed values and a long-double reference
// (tests/engine/kernels/dense_core_test.cpp). The tests that need a device skip, with what
// cudaGetDeviceCount said, where none is visible.
//
// Tolerances: dlogits and the loss, relative 1e-5 (fp32); they differ from the host only by the
// device's exp / log1p (a few ulp of a double) and the loss's summation order, so in practice
// they agree to ~1e-15. The SGD step is bit-identical (no FMA on either side) and is compared
// exactly.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "embedscope/engine/kernels/cuda_dense_ops.h"
#include "embedscope/engine/kernels/cuda_kernels.h"
#include "embedscope/engine/model/dense.h"
#include "engine/gpu_test_support.h"

using namespace embedscope::engine;

namespace {

bool close_rel(double got, double want, double rel) { return std::fabs(got - want) <= rel * std::fabs(want) + 1e-30; }

void check_bce_on_device(int64_t B, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 5.0f);
  std::vector<float> z(static_cast<size_t>(B)), y(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) {
    z[static_cast<size_t>(i)] = i % 97 == 3 ? 60.0f : (i % 89 == 5 ? -60.0f : n(rng));
    y[static_cast<size_t>(i)] = static_cast<float>(rng() % 2);
  }
  std::vector<float> dz_host(static_cast<size_t>(B));
  const double loss_host = bce_with_logits(B, z.data(), y.data(), dz_host.data());
  cuda::DeviceArray<float> dzv{std::span<const float>(z)}, dyv{std::span<const float>(y)},
      ddz{static_cast<size_t>(std::max<int64_t>(B, 1))};
  cuda::DeviceArray<double> dloss(1);
  cuda::bce_with_logits_cuda(B, dzv.data(), dyv.data(), ddz.data(), dloss.data());
  const double loss_dev = dloss.download()[0];
  EXPECT_TRUE(close_rel(loss_dev, loss_host, 1e-5)) << "B=" << B << " device " << loss_dev << " host " << loss_host;
  if (B == 0) {
    EXPECT_EQ(loss_dev, 0.0);
    return;
  }
  EXPECT_GT(loss_dev, 0.0);
  const std::vector<float> dz_dev = ddz.download();
  for (int64_t i = 0; i < B; ++i)
    ASSERT_TRUE(close_rel(dz_dev[static_cast<size_t>(i)], dz_host[static_cast<size_t>(i)], 1e-5))
        << "B=" << B << " sample " << i << " logit " << z[static_cast<size_t>(i)] << ": device "
        << dz_dev[static_cast<size_t>(i)] << " host " << dz_host[static_cast<size_t>(i)];
}

}  // namespace

TEST(GpuDenseOps, BceWithLogitsMatchesTheHostFunction) {
  REQUIRE_CUDA_DEVICE();
  // one sample, less than a block, several strides of the block, an empty batch
  for (int64_t B : {int64_t{1}, int64_t{200}, int64_t{4096}, int64_t{70001}, int64_t{0}})
    check_bce_on_device(B, static_cast<uint32_t>(B + 1));
}

TEST(GpuDenseOps, SgdStepMatchesTheHostFunctionBitForBit) {
  REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(14);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (int64_t n : {int64_t{1}, int64_t{255}, int64_t{100003}}) {
    std::vector<float> p(static_cast<size_t>(n)), g(static_cast<size_t>(n));
    for (auto& v : p) v = u(rng);
    for (auto& v : g) v = u(rng);
    cuda::DeviceArray<float> dp{std::span<const float>(p)}, dg{std::span<const float>(g)};
    cuda::sgd_step_cuda(n, 0.037f, dg.data(), dp.data());
    const std::vector<float> got = dp.download();
    sgd_step(n, 0.037f, g.data(), p.data());
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[static_cast<size_t>(i)], p[static_cast<size_t>(i)]) << "n=" << n << " parameter " << i;
  }
}

// Runs here too: the sizes are checked before anything touches a device.
TEST(GpuDenseOps, BadSizesAreRefusedBeforeLaunch) {
  EXPECT_THROW(cuda::bce_with_logits_cuda(-1, nullptr, nullptr, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::bce_with_logits_cuda(int64_t{1} << 31, nullptr, nullptr, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::sgd_step_cuda(-5, 0.1f, nullptr, nullptr), std::invalid_argument);
  EXPECT_NO_THROW(cuda::sgd_step_cuda(0, 0.1f, nullptr, nullptr));  // nothing to launch
}

TEST(GpuDenseOps, DotInteractionMatchesTheHostFunctions) {
  REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(2614);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (const auto [B, F, d0] : {std::array<int64_t, 3>{300, 26, 16}, std::array<int64_t, 3>{1, 1, 3},
                                std::array<int64_t, 3>{77, 8, 64}, std::array<int64_t, 3>{5, 0, 4}}) {
    const int64_t in_w = (F + 1) * d0, out_w = d0 + (F + 1) * F / 2;
    std::vector<float> x0(static_cast<size_t>(B * in_w)), dr(static_cast<size_t>(B * out_w));
    for (auto& v : x0) v = n(rng);
    for (auto& v : dr) v = n(rng);
    std::vector<float> r(dr.size()), dx(x0.size());
    dot_interaction_forward(B, F, d0, x0.data(), r.data());
    dot_interaction_backward(B, F, d0, x0.data(), dr.data(), dx.data());
    cuda::DeviceArray<float> d_x0{std::span<const float>(x0)}, d_dr{std::span<const float>(dr)};
    cuda::DeviceArray<float> d_r{dr.size()}, d_dx{x0.size()};
    cuda::dot_interaction_forward_cuda(B, F, d0, d_x0.data(), d_r.data());
    cuda::dot_interaction_backward_cuda(B, F, d0, d_x0.data(), d_dr.data(), d_dx.data());
    const std::vector<float> gr = d_r.download(), gdx = d_dx.download();
    for (size_t i = 0; i < r.size(); ++i)
      ASSERT_TRUE(close_rel(gr[i], r[i], 1e-5)) << "F=" << F << " d0=" << d0 << " r[" << i << "] " << gr[i] << " vs " << r[i];
    for (size_t i = 0; i < dx.size(); ++i)
      ASSERT_TRUE(close_rel(gdx[i], dx[i], 1e-5)) << "F=" << F << " d0=" << d0 << " dx0[" << i << "] " << gdx[i] << " vs " << dx[i];
    // the same per-element code with every rounding explicit: expected bit for bit
    EXPECT_EQ(gr, r);
    EXPECT_EQ(gdx, dx);
  }
}

TEST(GpuDenseOps, DotInteractionRefusesBadSizesBeforeLaunch) {
  EXPECT_THROW(cuda::dot_interaction_forward_cuda(-1, 2, 4, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::dot_interaction_forward_cuda(2, 2, 0, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::dot_interaction_backward_cuda(2, -1, 4, nullptr, nullptr, nullptr), std::invalid_argument);
  EXPECT_NO_THROW(cuda::dot_interaction_forward_cuda(0, 3, 4, nullptr, nullptr));  // nothing to launch
}
