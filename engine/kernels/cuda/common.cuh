#pragma once
// Internal helpers of the CUDA kernels: error checks, the checked launcher, stream-ordered
// scratch memory and the fp16 / bf16 conversions. Included by .cu files only.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "embedscope/engine/kernels/cuda_kernels.h"
#include "embedscope/engine/kernels/launch_config.h"

namespace embedscope::engine::cuda::detail {

/// Throws CudaError "<what>: <cudaGetErrorName>: <cudaGetErrorString>" unless e is cudaSuccess.
void check(cudaError_t e, const char* what);

/// The launch limits of the current device (queried once per device).
const LaunchLimits& device_limits();

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

/// The one launcher of every kernel: checks the configuration (check_launch: zero-size grids
/// are skipped, bad ones throw LaunchError naming `name` and `shapes`), launches, and turns a
/// launch error (cudaGetLastError) into a LaunchError with the same names.
template <class... KArgs, class... Args>
void launch(const char* name, const std::string& shapes, const LaunchConfig& cfg, cudaStream_t stream,
            void (*kernel)(KArgs...), Args&&... args) {
  if (!check_launch(name, shapes, cfg, device_limits())) return;
  if (cfg.shared_bytes > 48 * 1024)
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(cfg.shared_bytes)),
          name);
  const dim3 grid(static_cast<unsigned>(cfg.grid.x), static_cast<unsigned>(cfg.grid.y),
                  static_cast<unsigned>(cfg.grid.z));
  const dim3 block(static_cast<unsigned>(cfg.block.x), static_cast<unsigned>(cfg.block.y),
                   static_cast<unsigned>(cfg.block.z));
  kernel<<<grid, block, static_cast<size_t>(cfg.shared_bytes), stream>>>(std::forward<Args>(args)...);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw LaunchError(std::string(name) + " (" + shapes + "): launch failed: " + cudaGetErrorName(e) + ": " +
                      cudaGetErrorString(e));
}

/// Stream-ordered scratch memory (cudaMallocAsync / cudaFreeAsync on `stream`). The device's
/// default memory pool keeps freed memory (release threshold raised once per device), so
/// repeated steps do not return to the driver.
class Scratch {
 public:
  Scratch(size_t bytes, cudaStream_t stream);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(p_); }

 private:
  void* p_ = nullptr;
  cudaStream_t stream_;
};

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

}  // namespace embedscope::engine::cuda::detail
