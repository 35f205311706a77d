#pragma once
// Which executor runs a workload (devices.backend, --backend): cpu, cuda, or auto.

#include <string>

#include "embedscope/engine/exec/gpu_placement.h"
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
/// More ranks than devices is not refused here: they share the GPUs (devices.ranks_per_gpu,
/// check_cuda_placement).
Backend resolve_backend(Backend requested, int ranks, const profiler::CudaDevices& devices, bool built_with_cuda);

/// The placement of `spec`'s ranks on the cuda backend's GPUs `devices` (gpu_placement.h: block
/// placement, devices.ranks_per_gpu or automatic), checked: throws SpecError when the ranks need
/// more GPUs than `devices` has (place_ranks), when the ranks on one GPU do not fit in its
/// memory (cudaDeviceProp::totalGlobalMem) together (check_placement_memory, the per-GPU
/// breakdown). Several ranks per GPU on several GPUs (8 ranks at 4 per GPU on 2) are not refused:
/// the cuda executor runs a group spread over GPUs on the hierarchical communicator (comm/hier/:
/// the intra-device communicator within a GPU, NCCL between one leader per GPU). A build without
/// CUDA never gets here (resolve_backend refuses cuda: "... built without CUDA ...").
GpuPlacement check_cuda_placement(const WorkloadSpec& spec, const profiler::CudaDevices& devices);

/// `spec` with devices.backend resolved on this machine (profiler::cuda_devices()) and the
/// result validated again (what the cuda backend does not run yet is refused then, naming the
/// field). Throws SpecError as resolve_backend, validate and (cuda) check_cuda_placement do, and
/// "/devices/ranks_per_gpu: 2 ranks per GPU need a GPU, but backend auto found none (...) and
/// picked cpu".
/// `one_rank_per_process` (run --rank, a launcher's environment): this process runs one rank on
/// one GPU of its own (exec/cuda/process_cuda_executor.cpp picks it from the local rank), so the
/// placement of every rank on this machine's GPUs is not checked here.
WorkloadSpec with_resolved_backend(const WorkloadSpec& spec, const std::string& origin,
                                   bool one_rank_per_process = false);

}  // namespace embedscope::engine
