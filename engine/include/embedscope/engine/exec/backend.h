#pragma once
// Which executor runs a workload (devices.backend, --backend): cpu, cuda, or auto.

#include <string>

#include "embedscope/engine/workload/spec.h"
#include "embedscope/profiler/device/cuda_device.h"

namespace embedscope::engine {

/// The backend that runs `requested` with `ranks` ranks (devices.count) on a machine whose
/// cudaGetDeviceCount answered `devices`, in a build with or without CUDA: cpu or cuda.
/// auto: cuda when the build has CUDA and at least one device is present, else cpu.
/// Throws SpecError (bad input, exit code 2):
///  - "/devices/backend: cuda: this embedscope was built without CUDA (EMBEDSCOPE_WITH_CUDA=OFF); use cpu or auto"
///  - "/devices/backend: cuda needs a CUDA device, but cudaGetDeviceCount failed: cudaErrorNoDevice (...)"
///    (devices.error), or "... but cudaGetDeviceCount reported 0 devices"
///  - "/devices/count: 4 ranks on the cuda backend need 4 GPUs (one per rank), but cudaGetDeviceCount
///    reported 2" (also for auto when it picked cuda).
Backend resolve_backend(Backend requested, int ranks, const profiler::CudaDevices& devices, bool built_with_cuda);

/// `spec` with devices.backend resolved on this machine (profiler::cuda_devices()) and the
/// result validated again (what the cuda backend does not run yet is refused then, naming the
/// field). Throws SpecError as resolve_backend and validate do.
WorkloadSpec with_resolved_backend(const WorkloadSpec& spec, const std::string& origin);

}  // namespace embedscope::engine
