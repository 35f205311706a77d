#pragma once
// What the files of engine_gpu_test share: the skip where no CUDA device is visible, and
// reproducible random inputs.

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "embedscope/engine/kernels/cuda_kernels.h"

/// Skips the calling test, saying what cudaGetDeviceCount returned, where no CUDA device is
/// visible (asked once per test function).
#define REQUIRE_CUDA_DEVICE()                                                                          \
  do {                                                                                                 \
    static const embedscope::engine::cuda::DeviceCount dc = embedscope::engine::cuda::device_count(); \
    if (dc.count == 0)                                                                                 \
      GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount returned " << dc.status << " with count 0"; \
  } while (0)

namespace embedscope::test_support {

/// n floats uniform in [-1, 1) drawn from std::mt19937(seed): the same values on every run.
inline std::vector<float> uniform_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

}  // namespace embedscope::test_support
