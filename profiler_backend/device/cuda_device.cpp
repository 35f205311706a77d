#include "embedscope/profiler/device/cuda_device.h"

#if EMBEDSCOPE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace embedscope::profiler {

namespace {
CudaDevices query() {
  CudaDevices d;
#if EMBEDSCOPE_WITH_CUDA
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    d.error = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(rc) + " (" + cudaGetErrorString(rc) + ")";
    return d;
  }
  d.count = n;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    const bool ok = cudaGetDeviceProperties(&p, i) == cudaSuccess;
    d.names.push_back(ok ? std::string(p.name) : "unknown");
    d.total_bytes.push_back(ok ? static_cast<int64_t>(p.totalGlobalMem) : 0);
  }
#else
  d.error = "built without CUDA (EMBEDSCOPE_WITH_CUDA=OFF)";
#endif
  return d;
}
}  // namespace

const CudaDevices& cuda_devices() {
  static const CudaDevices d = query();
  return d;
}

std::string cuda_unavailable_reason(int needed) {
  if (needed <= 0) return "";
  const CudaDevices& d = cuda_devices();
  const std::string head = "needs " + std::to_string(needed) + " CUDA device(s)";
  if (!d.error.empty()) return head + ": " + d.error;
  if (d.count < needed) return head + ", found " + std::to_string(d.count);
  return "";
}

}  // namespace embedscope::profiler
