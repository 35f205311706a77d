// scale_copy_2d_cuda (kernels/cuda_reduce.h), the packing of the table_wise / column_wise
// gradient dist on a GPU (issue 14, devdist55: RankDevice::scale_copy_2d), against its CPU
// reference dist_pack_core::scale_copy_2d (kernels/dist_pack_core.h), compared exactly: column
// blocks of odd widths out of wider rows (strides above the width), scaled by 1 / W for W = 1, 3,
// 4, signed zeros and subnormals kept as the host rounds them, an empty block, and the size
// errors. Skips, with what cudaGetDeviceCount said, where no device is visible.

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

TEST(GpuDistPack, ScaledColumnBlocksEqualTheCpuReferenceBitForBit) {
  REQUIRE_CUDA_DEVICE();
  const int64_t rows = 257, stride = 45;  // 257 x 45 source rows: more than one block of threads
  std::vector<float> src = embedscope::test_support::uniform_floats(static_cast<size_t>(rows * stride), 55);
  src[3] = -0.0f;
  src[50] = 1e-39f;  // subnormal
  src[51] = -3e-38f;
  cuda::DeviceArray<float> d_src{std::span<const float>(src)};
  struct Block {
    int64_t col, width, dst_stride;
    float scale;
  };
  for (const Block b : {Block{0, 45, 45, 1.0f}, Block{3, 17, 17, 1.0f / 3.0f}, Block{40, 5, 7, 0.25f}, Block{1, 1, 1, 1.0f / 3.0f}}) {
    SCOPED_TRACE(testing::Message() << "column " << b.col << " width " << b.width << " scale " << b.scale);
    std::vector<float> want(static_cast<size_t>(rows * b.dst_stride), 7.0f);
    dist_pack_core::scale_copy_2d(rows, b.width, src.data() + b.col, stride, want.data(), b.dst_stride, b.scale);
    cuda::DeviceArray<float> d_dst{std::span<const float>(std::vector<float>(want.size(), 7.0f))};
    cuda::scale_copy_2d_cuda(rows, b.width, d_src.data() + b.col, stride, d_dst.data(), b.dst_stride, b.scale, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> got = d_dst.download();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)  // bit for bit (memcmp-equal: the sign of a zero too)
      ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0) << "element " << i << ": " << got[i] << " vs " << want[i];
  }
  cuda::scale_copy_2d_cuda(0, 5, nullptr, 5, nullptr, 5, 1.0f, nullptr);  // nothing launched
  EXPECT_THROW(cuda::scale_copy_2d_cuda(2, 5, d_src.data(), 4, d_src.data(), 5, 1.0f, nullptr), std::invalid_argument);
}

}  // namespace
