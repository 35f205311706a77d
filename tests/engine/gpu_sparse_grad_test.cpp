// accumulate_sparse_grad_cuda (cuda_sparse_grad.h: CUB sort + one warp per distinct row) against
// the CPU code it replaces on the cuda executor's device path (accumulate_sparse_grad per part +
// merge_sparse_grads, kernels.h) and the shared arithmetic's host run
// (sparse_grad_core::accumulate_sorted), bit for bit: rows, values, the -1 / zero tail, the
// one-row offsets and the count. Skips without a GPU (label gpu); the argument checks run
// everywhere (they throw before any CUDA call). The same arithmetic is tested on the host by
// SparseGradCore.* (tests/engine/kernels/sparse_grad_core_test.cpp).

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "embedscope/engine/kernels/cuda_kernels.h"
#include "embedscope/engine/kernels/cuda_sparse_grad.h"
#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/kernels/sparse_grad_core.h"
#include "engine/gpu_test_support.h"

namespace {

namespace es = embedscope::engine;

std::vector<uint32_t> gsg_bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  if (!v.empty()) std::memcpy(b.data(), v.data(), v.size() * 4);
  return b;
}

es::GrowOnlyWorkspace gsg_workspace() {
  return es::GrowOnlyWorkspace([](size_t bytes) { return es::cuda::device_malloc(bytes); },
                               [](void* p) { es::cuda::device_free(p); });
}

void gsg_check(int64_t rows, int64_t dim, int64_t parts, int64_t bags_per_part, bool scaled, uint32_t seed) {
  SCOPED_TRACE("rows " + std::to_string(rows) + " dim " + std::to_string(dim) + " parts " + std::to_string(parts));
  std::mt19937_64 rng(seed);
  const int64_t bags = parts * bags_per_part, stride = dim + 3;
  std::uniform_int_distribution<int64_t> len(0, 9), row(-1, rows);  // -1 and rows: outside the table
  std::vector<int64_t> ids, off = {0};
  for (int64_t b = 0; b < bags; ++b) {
    for (int64_t n = len(rng); n > 0; --n) ids.push_back(b % 3 == 0 ? row(rng) % 4 : row(rng));
    off.push_back(static_cast<int64_t>(ids.size()));
  }
  std::vector<float> grad = embedscope::test_support::uniform_floats(static_cast<size_t>(bags * stride), seed);
  std::vector<float> scale(static_cast<size_t>(bags));
  for (int64_t b = 0; b < bags; ++b) scale[static_cast<size_t>(b)] = 1.0f / static_cast<float>(1 + b % 7);
  const float* sc = scaled ? scale.data() : nullptr;
  const auto n = static_cast<int64_t>(ids.size());

  // the CPU code (the valid ids only: accumulate_sparse_grad has no table bound)
  std::vector<int64_t> vids, voff = {0};
  for (int64_t b = 0; b < bags; ++b) {
    for (int64_t i = off[static_cast<size_t>(b)]; i < off[static_cast<size_t>(b + 1)]; ++i)
      if (ids[static_cast<size_t>(i)] >= 0 && ids[static_cast<size_t>(i)] < rows) vids.push_back(ids[static_cast<size_t>(i)]);
    voff.push_back(static_cast<int64_t>(vids.size()));
  }
  std::vector<es::SparseGrad> cpu_parts;
  for (int64_t p = 0; p < parts; ++p)
    cpu_parts.push_back(es::accumulate_sparse_grad(dim, vids.data(), voff.data() + p * bags_per_part, bags_per_part,
                                                   sc ? sc + p * bags_per_part : nullptr,
                                                   grad.data() + p * bags_per_part * stride, stride));
  const es::SparseGrad want = es::merge_sparse_grads(cpu_parts, dim);
  const auto host = es::sparse_grad_core::accumulate_sorted(rows, dim, ids.data(), off.data(), bags, bags_per_part, sc,
                                                            grad.data(), stride);
  ASSERT_EQ(host.rows, want.rows);
  ASSERT_EQ(gsg_bits(host.values), gsg_bits(want.values));

  es::cuda::DeviceArray<int64_t> d_ids{std::span<const int64_t>(ids)}, d_off{std::span<const int64_t>(off)};
  es::cuda::DeviceArray<float> d_grad{std::span<const float>(grad)}, d_scale{std::span<const float>(scale)};
  es::cuda::DeviceArray<int64_t> d_rows(static_cast<size_t>(n) + 1), d_uoff(static_cast<size_t>(n) + 2),
      d_count(1);
  es::cuda::DeviceArray<float> d_vals(static_cast<size_t>(n * dim) + 1);
  es::GrowOnlyWorkspace ws = gsg_workspace();
  for (int pass = 0; pass < 2; ++pass) {  // the second reuses the workspace: no growth
    es::cuda::accumulate_sparse_grad_cuda(rows, dim, d_ids.data(), d_off.data(), bags, bags_per_part, n,
                                          scaled ? d_scale.data() : nullptr, d_grad.data(), stride, d_rows.data(),
                                          d_uoff.data(), d_vals.data(), d_count.data(), ws, nullptr);
    es::cuda::synchronize();
    const auto u = static_cast<size_t>(want.rows.size());
    EXPECT_EQ(d_count.download()[0], static_cast<int64_t>(u));
    const std::vector<int64_t> got_rows = d_rows.download();
    const std::vector<float> got_vals = d_vals.download();
    const std::vector<int64_t> got_off = d_uoff.download();
    EXPECT_EQ(std::vector<int64_t>(got_rows.begin(), got_rows.begin() + static_cast<int64_t>(u)), want.rows);
    EXPECT_EQ(gsg_bits(std::vector<float>(got_vals.begin(), got_vals.begin() + static_cast<int64_t>(u) * dim)),
              gsg_bits(want.values));
    for (int64_t i = static_cast<int64_t>(u); i < n; ++i) {
      ASSERT_EQ(got_rows[static_cast<size_t>(i)], -1) << "u " << i;
      for (int64_t c = 0; c < dim; ++c) ASSERT_EQ(got_vals[static_cast<size_t>(i * dim + c)], 0.0f);
    }
    for (int64_t i = 0; i <= n; ++i) ASSERT_EQ(got_off[static_cast<size_t>(i)], i);
  }
  EXPECT_EQ(ws.allocs(), 1);
}

TEST(GpuSparseGrad, MatchesTheCpuAccumulationBitForBit) {
  REQUIRE_CUDA_DEVICE();
  gsg_check(50, 16, 1, 40, true, 3);     // one part, mean-pooling scales
  gsg_check(50, 16, 3, 40, true, 4);     // three slots of one table merged
  gsg_check(1000, 300, 2, 64, false, 5); // wider than a warp's 32 columns x 8
  gsg_check(3, 1, 2, 10, true, 6);       // many duplicates
}

TEST(GpuSparseGrad, NoIdsWritesACountOfZero) {
  REQUIRE_CUDA_DEVICE();
  const std::vector<int64_t> off = {0, 0, 0};
  es::cuda::DeviceArray<int64_t> d_off{std::span<const int64_t>(off)}, d_count(1), d_uoff(1);
  const std::vector<int64_t> seven = {7};
  d_count.upload(seven);
  es::GrowOnlyWorkspace ws = gsg_workspace();
  es::cuda::accumulate_sparse_grad_cuda(10, 4, nullptr, d_off.data(), 2, 1, 0, nullptr, nullptr, 4, nullptr,
                                        d_uoff.data(), nullptr, d_count.data(), ws, nullptr);
  EXPECT_EQ(d_count.download()[0], 0);
  EXPECT_EQ(ws.allocs(), 0);
}

TEST(GpuSparseGrad, BadArgumentsThrowBeforeAnyCudaCall) {
  es::GrowOnlyWorkspace ws([](size_t) -> void* { throw std::logic_error("no allocation expected"); }, [](void*) {});
  auto call = [&](int64_t bags, int64_t per_part, int64_t stride, int64_t n) {
    es::cuda::accumulate_sparse_grad_cuda(10, 4, nullptr, nullptr, bags, per_part, n, nullptr, nullptr, stride, nullptr,
                                          nullptr, nullptr, nullptr, ws, nullptr);
  };
  EXPECT_THROW(call(4, 3, 4, 1), std::invalid_argument);
  EXPECT_THROW(call(4, 0, 4, 1), std::invalid_argument);
  EXPECT_THROW(call(4, 2, 3, 1), std::invalid_argument);
  EXPECT_THROW(call(4, 2, 4, -1), std::invalid_argument);
  EXPECT_THROW(call(4, 2, 4, int64_t{1} << 31), std::invalid_argument);
}

}  // namespace
