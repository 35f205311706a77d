// add_scale_rows_2d_cuda and scale_copy_rows_2d_cuda (kernels/cuda_reduce.h), the unpacking and
// packing of the row_wise / table_row_wise dists on a GPU (issue 14, rwdist56:
// RankDevice::add_scale_rows_2d / scale_copy_rows_2d), against their CPU references in
// kernels/dist_pack_core.h, compared exactly: column blocks of odd widths into and out of wider
// rows (strides above the width), with and without per-row mean scales (1 / len, and 0 for an
// empty bag), accumulating or not, signed zeros and subnormals kept as the host rounds them, an
// empty block, and the size errors. Skips, with what cudaGetDeviceCount said, where no device is
// visible.

#include <gtest/gtest.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <span>
#include <stdexcept>
#include <vector>

#include "embedscope/engine/kernels/cuda_kernels.h"
#include "embedscope/engine/kernels/cuda_reduce.h"
#include "embedscope/engine/kernels/dist_pack_core.h"
#include "engine/gpu_test_support.h"

using namespace embedscope::engine;

namespace {

constexpr int64_t kRows = 257, kStride = 45;  // more than one block of threads

std::vector<float> source(uint32_t seed) {
  std::vector<float> src = embedscope::test_support::uniform_floats(static_cast<size_t>(kRows * kStride), seed);
  src[3] = -0.0f;
  src[50] = 1e-39f;  // subnormal
  src[51] = -3e-38f;
  return src;
}

// Per-row mean scales: 1 / len for len = 1 + r % 7, 0 (an empty bag) every 11th row.
std::vector<float> row_scales() {
  std::vector<float> sc(static_cast<size_t>(kRows));
  for (int64_t r = 0; r < kRows; ++r) sc[static_cast<size_t>(r)] = r % 11 == 0 ? 0.0f : 1.0f / static_cast<float>(1 + r % 7);
  return sc;
}

void expect_bit_equal(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)  // memcmp-equal: the sign of a zero too
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0) << "element " << i << ": " << got[i] << " vs " << want[i];
}

struct Block {
  int64_t col, width, narrow;  // columns [col, col + width) of the kStride-wide rows; narrow stride
};
constexpr Block kBlocks[] = {{0, 45, 45}, {3, 17, 17}, {40, 5, 7}, {1, 1, 1}};

TEST(GpuRwDist56, AddedScaledBlocksEqualTheCpuReferenceBitForBit) {
  REQUIRE_CUDA_DEVICE();
  const std::vector<float> src = source(56), base = source(57), sc = row_scales();
  cuda::DeviceArray<float> d_sc{std::span<const float>(sc)};
  for (const Block b : kBlocks)
    for (const bool scaled : {false, true})
      for (const bool accumulate : {false, true}) {
        SCOPED_TRACE(testing::Message() << "column " << b.col << " width " << b.width << " scaled " << scaled
                                        << " accumulate " << accumulate);
        // the narrow block (B x cols, stride `narrow`) into columns [col, col + width) of base
        std::vector<float> want = base;
        dist_pack_core::add_scale_rows_2d(kRows, b.width, src.data(), b.narrow, want.data() + b.col, kStride,
                                          scaled ? sc.data() : nullptr, accumulate);
        cuda::DeviceArray<float> d_src{std::span<const float>(src)}, d_dst{std::span<const float>(base)};
        cuda::add_scale_rows_2d_cuda(kRows, b.width, d_src.data(), b.narrow, d_dst.data() + b.col, kStride,
                                     scaled ? d_sc.data() : nullptr, accumulate, nullptr);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        expect_bit_equal(d_dst.download(), want);
      }
  cuda::add_scale_rows_2d_cuda(0, 5, nullptr, 5, nullptr, 5, nullptr, true, nullptr);  // nothing launched
  EXPECT_THROW(cuda::add_scale_rows_2d_cuda(2, 5, d_sc.data(), 4, d_sc.data(), 5, nullptr, false, nullptr),
               std::invalid_argument);
}

TEST(GpuRwDist56, TwiceScaledBlocksEqualTheCpuReferenceBitForBit) {
  REQUIRE_CUDA_DEVICE();
  const std::vector<float> src = source(58), sc = row_scales();
  cuda::DeviceArray<float> d_src{std::span<const float>(src)}, d_sc{std::span<const float>(sc)};
  for (const Block b : kBlocks)
    for (const float s : {1.0f, 1.0f / 3.0f, 0.25f})
      for (const bool scaled : {false, true}) {
        SCOPED_TRACE(testing::Message() << "column " << b.col << " width " << b.width << " s " << s << " scaled "
                                        << scaled);
        std::vector<float> want(static_cast<size_t>(kRows * b.narrow), 7.0f);
        dist_pack_core::scale_copy_rows_2d(kRows, b.width, src.data() + b.col, kStride, want.data(), b.narrow, s,
                                           scaled ? sc.data() : nullptr);
        cuda::DeviceArray<float> d_dst{std::span<const float>(std::vector<float>(want.size(), 7.0f))};
        cuda::scale_copy_rows_2d_cuda(kRows, b.width, d_src.data() + b.col, kStride, d_dst.data(), b.narrow, s,
                                      scaled ? d_sc.data() : nullptr, nullptr);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        expect_bit_equal(d_dst.download(), want);
      }
  cuda::scale_copy_rows_2d_cuda(0, 5, nullptr, 5, nullptr, 5, 1.0f, nullptr, nullptr);  // nothing launched
  EXPECT_THROW(cuda::scale_copy_rows_2d_cuda(-1, 5, d_src.data(), 5, d_src.data(), 5, 1.0f, nullptr, nullptr),
               std::invalid_argument);
}

}  // namespace
