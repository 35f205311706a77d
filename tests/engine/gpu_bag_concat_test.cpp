// concat_bags_cuda (kernels/cuda_bag_concat.h): the ids and offsets the sparse-gradient
// accumulation reads for a shard several local slots read, built on a GPU from the slots' ids
// and offsets (RankDevice::concat_bags), against the host reference bag_concat_core::concat,
// compared exactly: 1 to 20 parts (20: two launches of kBagConcatMaxParts), empty parts and
// bags, bags of more than one warp of ids; the parts read out of one buffer at their slots'
// places, as kjt_permute left them; no parts or no bags. Skips, with what cudaGetDeviceCount
// said, where no device is visible.

#include <gtest/gtest.h>
#include <cuda_runtime_api.h>

#include <random>
#include <span>
#include <vector>

#include "embedscope/engine/kernels/bag_concat_core.h"
#include "embedscope/engine/kernels/cuda_bag_concat.h"
#include "embedscope/engine/kernels/cuda_kernels.h"
#include "engine/gpu_test_support.h"

using namespace embedscope::engine;

TEST(GpuBagConcat, EqualsTheHostReferenceBitForBit) {
  REQUIRE_CUDA_DEVICE();
  std::mt19937_64 rng(57);
  for (const int64_t P : {1, 2, 5, 16, 20}) {
    for (const int64_t B : {1, 10, 300}) {
      SCOPED_TRACE(testing::Message() << "P " << P << " B " << B);
      // every part's ids and B + 1 offsets in one buffer each, as kjt_permute leaves the slots'
      std::vector<int64_t> ids, offsets;
      std::vector<int64_t> at, off_at, num;
      for (int64_t p = 0; p < P; ++p) {
        at.push_back(static_cast<int64_t>(ids.size()));
        off_at.push_back(static_cast<int64_t>(offsets.size()));
        offsets.push_back(0);
        for (int64_t b = 0; b < B; ++b) {
          const int64_t len = (p % 3 == 1 || b % 7 == 3) ? 0 : static_cast<int64_t>(rng() % 70);  // empty parts too
          for (int64_t j = 0; j < len; ++j) ids.push_back(static_cast<int64_t>(rng() >> 1));
          offsets.push_back(offsets.back() + len);
        }
        num.push_back(static_cast<int64_t>(ids.size()) - at.back());
      }
      std::vector<bag_concat_core::Part> host_parts, dev_parts;
      cuda::DeviceArray<int64_t> d_ids{std::span<const int64_t>(ids)}, d_offsets{std::span<const int64_t>(offsets)};
      for (int64_t p = 0; p < P; ++p) {
        const auto u = static_cast<size_t>(p);
        host_parts.push_back({ids.data() + at[u], offsets.data() + off_at[u], num[u]});
        dev_parts.push_back({d_ids.data() + at[u], d_offsets.data() + off_at[u], num[u]});
      }
      std::vector<int64_t> want_ids(ids.size()), want_off(static_cast<size_t>(P * B + 1));
      bag_concat_core::concat(host_parts, B, want_ids.data(), want_off.data());
      cuda::DeviceArray<int64_t> d_out(std::max<size_t>(ids.size(), 1)), d_off(want_off.size());
      cuda::concat_bags_cuda(dev_parts, B, d_out.data(), d_off.data(), nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      auto got_ids = d_out.download();
      got_ids.resize(ids.size());
      EXPECT_EQ(got_ids, want_ids);
      EXPECT_EQ(d_off.download(), want_off);
    }
  }
}

TEST(GpuBagConcat, NoPartsNoBagsAndErrors) {
  REQUIRE_CUDA_DEVICE();
  cuda::DeviceArray<int64_t> d_off(1);
  const std::vector<int64_t> minus_one{-1};
  d_off.upload(minus_one);
  cuda::concat_bags_cuda({}, 4, nullptr, d_off.data(), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(d_off.download(), std::vector<int64_t>{0});
  const std::vector<bag_concat_core::Part> empty{{nullptr, nullptr, 0}};
  d_off.upload(minus_one);
  cuda::concat_bags_cuda(empty, 0, nullptr, d_off.data(), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(d_off.download(), std::vector<int64_t>{0});
  const std::vector<bag_concat_core::Part> negative{{nullptr, nullptr, -1}};
  EXPECT_THROW(cuda::concat_bags_cuda(negative, 1, nullptr, d_off.data(), nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::concat_bags_cuda(empty, -1, nullptr, d_off.data(), nullptr), std::invalid_argument);
}
