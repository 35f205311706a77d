// dst += src on the GPU (cuda_reduce.h): the intra-device communicator's reduction.
#include "common.cuh"
#include "embedscope/engine/kernels/cuda_reduce.h"

namespace embedscope::engine::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) add_f32_kernel(int64_t n, float* __restrict__ dst,
                                                           const float* __restrict__ src) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = __fadd_rn(dst[i], src[i]);
}

}  // namespace

void add_f32_cuda(float* dst, const float* src, int64_t n, void* stream) {
  if (n <= 0) return;
  detail::launch("add_f32", "n=" + std::to_string(n), launch_1d(n, kThreads, kThreads), detail::as_stream(stream),
                 add_f32_kernel, n, dst, src);
}

}  // namespace embedscope::engine::cuda
