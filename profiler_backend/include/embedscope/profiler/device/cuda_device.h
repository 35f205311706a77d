#pragma once
// Which CUDA devices this process can use: the one query shared by the CUDA executor, the GPU
// tests (GTEST_SKIP with its reason) and the GPU benchmarks. Always compiled: a build without
// CUDA answers "built without CUDA".

#include <cstdint>
#include <string>
#include <vector>

namespace embedscope::profiler {

struct CudaDevices {
  /// Devices cudaGetDeviceCount reported (0 when it failed).
  int count = 0;
  /// Empty when cudaGetDeviceCount succeeded; else its exact error, e.g. "cudaGetDeviceCount
  /// failed: cudaErrorNoDevice (no CUDA-capable device is detected)", or "built without CUDA
  /// (EMBEDSCOPE_WITH_CUDA=OFF)".
  std::string error;
  /// cudaDeviceProp::name of each device, e.g. "NVIDIA H200".
  std::vector<std::string> names;
  /// cudaDeviceProp::totalGlobalMem of each device, bytes.
  std::vector<int64_t> total_bytes;
};

/// The answer of cudaGetDeviceCount (asked once per process; later calls return the same).
const CudaDevices& cuda_devices();

/// "" when at least `needed` devices are present (always for needed <= 0); else why not, naming what cudaGetDeviceCount
/// said: "needs 2 CUDA device(s), found 1" or "needs 1 CUDA device(s): cudaGetDeviceCount
/// failed: cudaErrorNoDevice (no CUDA-capable device is detected)".
std::string cuda_unavailable_reason(int needed = 1);

}  // namespace embedscope::profiler
