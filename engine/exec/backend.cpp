#include "embedscope/engine/exec/backend.h"

#include <fmt/format.h>

namespace embedscope::engine {

Backend resolve_backend(Backend requested, int ranks, const profiler::CudaDevices& devices, bool built_with_cuda) {
  if (requested == Backend::cpu) return Backend::cpu;
  if (requested == Backend::auto_ && (!built_with_cuda || devices.count < 1)) return Backend::cpu;
  if (!built_with_cuda)
    throw SpecError("/devices/backend: cuda: this embedscope was built without CUDA (EMBEDSCOPE_WITH_CUDA=OFF); use cpu or auto");
  if (!devices.error.empty()) throw SpecError(fmt::format("/devices/backend: cuda needs a CUDA device, but {}", devices.error));
  if (devices.count < 1)
    throw SpecError("/devices/backend: cuda needs a CUDA device, but cudaGetDeviceCount reported 0 devices");
  if (ranks > devices.count)
    throw SpecError(fmt::format(
        "/devices/count: {} ranks on the cuda backend need {} GPUs (one per rank), but cudaGetDeviceCount reported {}", ranks,
        ranks, devices.count));
  return Backend::cuda;
}

WorkloadSpec with_resolved_backend(const WorkloadSpec& spec, const std::string& origin) {
#if EMBEDSCOPE_WITH_CUDA
  constexpr bool kBuiltWithCuda = true;
#else
  constexpr bool kBuiltWithCuda = false;
#endif
  WorkloadSpec out = spec;
  out.devices.backend = spec.devices.backend == Backend::cpu
                            ? Backend::cpu
                            : resolve_backend(spec.devices.backend, spec.devices.count, profiler::cuda_devices(), kBuiltWithCuda);
  validate(out, origin);
  return out;
}

}  // namespace embedscope::engine
