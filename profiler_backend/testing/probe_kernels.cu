#include "probe_kernels.h"

namespace embedscope::profiler {

__global__ void embedscope_probe_scale(float* x, int64_t n, float a) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + 1.0f;
}

__global__ void embedscope_probe_spin(const volatile int* flag) {
  while (*flag == 0) __nanosleep(1000);
}

cudaError_t launch_probe_scale(float* x, int64_t n, float a, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;  // nothing to launch
  const int64_t blocks = (n + 255) / 256;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  embedscope_probe_scale<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(x, n, a);
  return cudaGetLastError();
}

cudaError_t launch_probe_spin(const volatile int* flag, cudaStream_t stream) {
  embedscope_probe_spin<<<1, 1, 0, stream>>>(flag);
  return cudaGetLastError();
}

}  // namespace embedscope::profiler
