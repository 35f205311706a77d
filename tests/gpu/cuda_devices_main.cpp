// cuda_devices: prints what cudaGetDeviceCount says (profiler::cuda_devices()), one line per
// device; exit 0 with at least one device, 3 without (the reason on stdout). Used by
// tests/gpu/run_device_checks.sh.
#include <cstdio>

#include "embedscope/profiler/device/cuda_device.h"

int main() {
  const auto& d = embedscope::profiler::cuda_devices();
  if (d.count == 0) {
    std::printf("no CUDA device: %s\n", d.error.empty() ? "cudaGetDeviceCount returned 0" : d.error.c_str());
    return 3;
  }
  for (int i = 0; i < d.count; ++i) std::printf("device %d: %s\n", i, d.names[static_cast<size_t>(i)].c_str());
  return 0;
}
