// The host-memory check of a run (exec/host_memory_check.h).
#include "embedscope/engine/exec/host_memory_check.h"

#include <fmt/format.h>

#include "embedscope/sessions/model/units.h"

namespace embedscope::engine::detail {

int64_t host_bytes_of_rank(Backend backend, const DeviceMemoryEstimate& e) {
  switch (backend) {
    case Backend::cuda: return add_bytes_saturating(add_bytes_saturating(e.dense, e.buffers), e.host);
    case Backend::simulated: return 0;
    default: return add_bytes_saturating(e.total(), e.host);  // host tables are this process's memory too
  }
}

std::string host_memory_refusal(const WorkloadSpec& spec, const std::vector<DeviceMemoryEstimate>& est,
                                int process_rank, const HostMemory& machine) {
  const Backend backend = spec.devices.backend;
  int64_t need = 0;
  for (const auto& e : est)
    if (process_rank < 0 || e.rank == process_rank) need = add_bytes_saturating(need, host_bytes_of_rank(backend, e));
  if (fits_host_memory(need, machine)) return "";
  const std::string who =
      process_rank >= 0 ? fmt::format("rank {}", process_rank) : fmt::format("all {} ranks", spec.devices.count);
  const char* they = process_rank >= 0 ? "it needs" : "they need";
  if (backend == Backend::cuda)
    return fmt::format("/devices: the cuda backend keeps host copies of the dense part and the step's buffers of {} "
                       "in this process, {} {} in all, but this machine has {}; use fewer devices, a smaller batch "
                       "or a scaled preset",
                       who, they, sessions::format_bytes(need), host_memory_text(machine));
  return fmt::format("/devices: the cpu backend runs {} in this process and {} {} in all, but this machine has {}; "
                     "use fewer devices, a smaller batch or a scaled preset",
                     who, they, sessions::format_bytes(need), host_memory_text(machine));
}

}  // namespace embedscope::engine::detail
