// The host-memory check of a run (exec/host_memory_check.h).
#include "exec/host_memory_check.h"

#include <fmt/format.h>

#include "embedscope/sessions/model/units.h"

namespace embedscope::engine::detail {

int64_t host_bytes_of_rank(Backend backend, const DeviceMemoryEstimate& e) {
  switch (backend) {
    case Backend::cuda: return e.dense + e.buffers + e.host;
    case Backend::simulated: return 0;
    default: return e.total() + e.host;  // host tables are this process's memory too
  }
}

std::string host_memory_refusal(const WorkloadSpec& spec, const std::vector<DeviceMemoryEstimate>& est,
                                int process_rank, int64_t machine_bytes) {
  const Backend backend = spec.devices.backend;
  int64_t need = 0;
  for (const auto& e : est)
    if (process_rank < 0 || e.rank == process_rank) need += host_bytes_of_rank(backend, e);
  if (machine_bytes <= 0 || need <= machine_bytes * 9 / 10) return "";
  const std::string who =
      process_rank >= 0 ? fmt::format("rank {}", process_rank) : fmt::format("all {} ranks", spec.devices.count);
  const char* they = process_rank >= 0 ? "it needs" : "they need";
  if (backend == Backend::cuda)
    return fmt::format("/devices: the cuda backend keeps host copies of the dense part and the step's buffers of {} "
                       "in this process, {} {} in all, but this machine has {}; use fewer devices, a smaller batch "
                       "or a scaled preset",
                       who, they, sessions::format_bytes(need), sessions::format_bytes(machine_bytes));
  return fmt::format("/devices: the cpu backend runs {} in this process and {} {} in all, but this machine has {}; "
                     "use fewer devices, a smaller batch or a scaled preset",
                     who, they, sessions::format_bytes(need), sessions::format_bytes(machine_bytes));
}

}  // namespace embedscope::engine::detail
