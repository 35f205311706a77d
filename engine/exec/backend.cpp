#include "embedscope/engine/exec/backend.h"

#include <algorithm>

#include <fmt/format.h>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/exec/gpu_placement.h"

namespace embedscope::engine {

Backend resolve_backend(Backend requested, int ranks, const profiler::CudaDevices& devices, bool built_with_cuda) {
  if (requested == Backend::cpu || requested == Backend::simulated) return requested;
  if (requested == Backend::auto_ && (!built_with_cuda || devices.count < 1)) return Backend::cpu;
  if (!built_with_cuda)
    throw SpecError("/devices/backend: cuda: this embedscope was built without CUDA (EMBEDSCOPE_WITH_CUDA=OFF); use cpu or auto");
  // what to do instead (tester40 #8: with no NVIDIA driver at all the CUDA runtime says
  // cudaErrorInsufficientDriver, which reads as "upgrade the driver")
  const std::string remedy =
      std::string(devices.error.find("cudaErrorInsufficientDriver") != std::string::npos
                      ? "; the CUDA runtime says so when this machine has no NVIDIA driver at all, or one older than "
                        "the runtime needs"
                      : "") +
      "; without a GPU use backend cpu or auto, or plan and run for one on a modelled cluster with --simulate "
      "PROFILE (e.g. h200_sxm)";
  if (!devices.error.empty())
    throw SpecError(fmt::format("/devices/backend: cuda needs a CUDA device, but {}{}", devices.error, remedy));
  if (devices.count < 1)
    throw SpecError("/devices/backend: cuda needs a CUDA device, but cudaGetDeviceCount reported 0 devices" + remedy);
  (void)ranks;  // more ranks than GPUs share them (devices.ranks_per_gpu; with_resolved_backend places them)
  return Backend::cuda;
}

GpuPlacement check_cuda_placement(const WorkloadSpec& spec, const profiler::CudaDevices& devices) {
  const GpuPlacement p = place_ranks(spec.devices.count, spec.devices.ranks_per_gpu, devices.count, "GPU");
  check_placement_memory(p, spec.devices.memory_bytes, devices.total_bytes, devices.names, "GPU");
  return p;
}

WorkloadSpec with_resolved_backend(const WorkloadSpec& spec, const std::string& origin, bool one_rank_per_process) {
#if EMBEDSCOPE_WITH_CUDA
  constexpr bool kBuiltWithCuda = true;
#else
  constexpr bool kBuiltWithCuda = false;
#endif
  WorkloadSpec out = spec;
  const Backend b = spec.devices.backend;
  out.devices.backend = b == Backend::cpu || b == Backend::simulated
                            ? b
                            : resolve_backend(b, spec.devices.count, profiler::cuda_devices(), kBuiltWithCuda);
  if (b == Backend::auto_ && out.devices.backend == Backend::cpu && spec.devices.ranks_per_gpu > 0) {
    const auto& d = profiler::cuda_devices();
    throw SpecError(fmt::format("/devices/ranks_per_gpu: {} ranks per GPU need a GPU, but backend auto found none ({}) "
                                "and picked cpu",
                                spec.devices.ranks_per_gpu,
                                kBuiltWithCuda ? (d.error.empty() ? std::string("cudaGetDeviceCount reported 0 devices") : d.error)
                                               : std::string("built without CUDA")));
  }
  validate(out, origin);
  if (out.devices.backend == Backend::cuda && !one_rank_per_process) check_cuda_placement(out, profiler::cuda_devices());
  if (out.devices.backend == Backend::simulated) {  // the cluster's shape from the profile
    const HardwareProfile hw = load_hardware_profile(out.devices.hardware);
    const int count = out.devices.count;
    int& per_node = out.sharding.local_world_size;
    if (per_node == 0) {
      per_node = std::min(count, hw.gpus_per_node);
      if (count % per_node != 0)
        throw SpecError(fmt::format("/devices/count: {} ranks do not fill nodes of {} GPUs (hardware profile {}); give a "
                                    "multiple of {} or set sharding.local_world_size (--gpus-per-node)",
                                    count, per_node, hw.name, per_node));
    }
    if (per_node > hw.gpus_per_node)
      throw SpecError(fmt::format("/sharding/local_world_size: {} GPUs per node, but a node of hardware profile {} has {}",
                                  per_node, hw.name, hw.gpus_per_node));
    if (count / per_node > hw.max_nodes)
      throw SpecError(fmt::format("/devices/count: {} ranks need {} nodes of {} GPUs, but hardware profile {} describes "
                                  "clusters of at most {} nodes",
                                  count, count / per_node, per_node, hw.name, hw.max_nodes));
  }
  return out;
}

}  // namespace embedscope::engine
