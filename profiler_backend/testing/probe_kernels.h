#pragma once
// Small kernels with known behaviour, to check and measure the GPU collectors (the CUPTI test
// of the `gpu` label, bench_gpu_runtime). Built with EMBEDSCOPE_WITH_CUDA only.

#include <cstdint>

#include <cuda_runtime_api.h>

namespace embedscope::profiler {

/// Launches `embedscope_probe_scale` once on `stream`: x[i] = x[i] * a + 1 for i < n
/// (256 threads per block). Returns the launch's error (cudaGetLastError).
cudaError_t launch_probe_scale(float* x, int64_t n, float a, cudaStream_t stream);

/// Launches `embedscope_probe_spin` on `stream`: one thread spins until *flag != 0 (host-mapped
/// memory written by the host), then returns. Holds the stream to provoke a timeout.
cudaError_t launch_probe_spin(const volatile int* flag, cudaStream_t stream);

}  // namespace embedscope::profiler
