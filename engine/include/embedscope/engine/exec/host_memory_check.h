#pragma once
// The host-memory check of run_training (exec/run.cpp): a run whose ranks need more of this
// machine's memory than it has is refused before anything runs (exit 2), for the cpu backend
// (every rank's device memory is host memory of this process) and for the cuda backend (what
// it keeps on the host: DeviceBuffer's host copies of the dense part and the step's buffers;
// the shard weights and optimizer state have none after setup, memory/memory.h). Public since
// fix46 so that `embedscope plan` gives a DLRM plan the verdict `run` would (tester46 F4); pure,
// so the texts are tested with a given machine size (tests/engine/exec/host_memory_check_test.cpp).

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/engine/planner/host_memory.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::detail {

/// The host bytes one rank of `backend` keeps in this process, from its memory estimate:
/// cpu: total() + host (its device is host memory; tables in host memory too); cuda:
/// dense + buffers + host (the host copies DeviceBuffer keeps; weights, optimizer state and
/// caches live on the GPU only); simulated: 0 (a simulation allocates none).
int64_t host_bytes_of_rank(Backend backend, const DeviceMemoryEstimate& e);

/// "" when the ranks this process runs fit in 90% of the memory available now
/// (`machine.available_bytes`, MemAvailable: planner/host_memory.h fits_host_memory; 0: unknown,
/// never refused), else the refusal (the text of SpecError, naming /devices, the bytes and the
/// machine's available and total memory). `process_rank` >= 0: one rank per process, only that
/// rank counts. Example (cuda, 2 ranks of 3.0 GiB dense + buffers each, 4 GiB available of 8):
/// "/devices: the cuda backend keeps host copies of the dense part and the step's buffers of all
/// 2 ranks in this process, they need 6.0 GiB in all, but this machine has 4.0 GiB available now
/// (of 8.0 GiB; a run is refused above 90% of what is available); use fewer devices, a smaller
/// batch or a scaled preset".
std::string host_memory_refusal(const WorkloadSpec& spec, const std::vector<DeviceMemoryEstimate>& est,
                                int process_rank, const HostMemory& machine);

}  // namespace embedscope::engine::detail
