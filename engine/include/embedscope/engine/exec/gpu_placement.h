#pragma once
// Where the ranks of a cuda run (or of the host stand-in, TrainerOptions::emulate_device) run
// when there are more ranks than devices: devices.ranks_per_gpu ranks on each device, each with
// its own capacity-limited arena of devices.memory_bytes carved from that device's memory.
//
// Block placement: rank r runs on device r / ranks_per_gpu, so the ranks sharing a device are a
// block of consecutive ranks. That is the order every other grouping of the engine uses: the
// nodes of table_row_wise / the hierarchical groups are blocks of sharding.local_world_size
// consecutive ranks (sharding/layout.h), so with ranks_per_gpu dividing local_world_size the
// ranks of one GPU are all in one node (their node-group collectives stay on the GPU) and a
// node's GPUs are consecutive, as torchrun's LOCAL_RANK -> cuda:LOCAL_RANK mapping is.
// Round-robin (r % gpus) would split every node over every GPU instead.

#include <cstdint>
#include <string>
#include <vector>

namespace embedscope::engine {

struct GpuPlacement {
  int ranks_per_gpu = 1;       ///< the ranks on each device (the last may hold fewer)
  int devices = 0;             ///< devices visible (GPUs, or emulated devices)
  std::vector<int> gpu_of_rank;  ///< per rank: its device, r / ranks_per_gpu
  /// Devices holding at least one rank: ceil(ranks / ranks_per_gpu).
  int devices_used() const { return gpu_of_rank.empty() ? 0 : gpu_of_rank.back() + 1; }
  /// The ranks on `device`, ascending (empty for a device that holds none).
  std::vector<int> ranks_on(int device) const;
  /// Some device holds more than one rank.
  bool shared() const { return ranks_per_gpu > 1 && gpu_of_rank.size() > 1; }
};

/// Places `ranks` ranks (devices.count, >= 1) on `devices` visible devices: `ranks_per_gpu`
/// each (devices.ranks_per_gpu; 0 = automatic: ceil(ranks / devices)), rank r on device
/// r / ranks_per_gpu. `what` names the devices in errors ("GPU" or "emulated device").
/// Throws SpecError (bad input) when the ranks need more devices than are visible:
///   "/devices/ranks_per_gpu: 4 ranks at 1 per GPU need 4 GPUs, but 2 are visible"
/// and when devices < 1:
///   "/devices/ranks_per_gpu: 4 ranks need a GPU, but none is visible".
GpuPlacement place_ranks(int ranks, int ranks_per_gpu, int devices, const std::string& what = "GPU");

/// Refuses a placement whose ranks do not fit in their device's memory together: the ranks on
/// device d need memory_bytes (devices.memory_bytes, per rank, bytes) each, device d has
/// device_bytes[d] bytes (0 or a missing entry: unlimited). Throws SpecError naming every
/// device in use, e.g.
///   "/devices/memory_bytes: the ranks on one GPU do not fit in its memory together
///    (memory_bytes 3.0 GiB per rank): GPU 0 (NVIDIA H200): ranks 0-3 need 12.0 GiB of 10.0 GiB
///    (does not fit); GPU 1 (NVIDIA H200): ranks 4-5 need 6.0 GiB of 10.0 GiB"
/// (device_names[d] in parentheses where given). Nothing when every device's ranks fit.
void check_placement_memory(const GpuPlacement& placement, int64_t memory_bytes, const std::vector<int64_t>& device_bytes,
                            const std::vector<std::string>& device_names, const std::string& what = "GPU");

/// One line per device in use, for `plan` and the session: "GPU 0 (NVIDIA H200): ranks 0-3"
/// ("rank 4" for one rank), joined with "; ". `device_names` may be shorter (no parentheses).
std::string describe_placement(const GpuPlacement& placement, const std::vector<std::string>& device_names,
                               const std::string& what = "GPU");

}  // namespace embedscope::engine
