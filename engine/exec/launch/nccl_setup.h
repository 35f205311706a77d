#pragma once
// The cuda backend with one rank per process (exec/cuda/process_cuda_executor.cpp), the parts
// that need no GPU and so are tested on the host: which GPU this process takes, and the NCCL
// unique ids that rank 0 creates and publishes through the run's own store (store.h) for the
// others to read. Internal to the engine; no CUDA header here (an id is 128 raw bytes in a
// std::string, NCCL_UNIQUE_ID_BYTES).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "store.h"

namespace embedscope::engine::launch {

/// NCCL_UNIQUE_ID_BYTES (nccl.h): the size of an ncclUniqueId.
constexpr size_t kNcclIdBytes = 128;

/// What decides this process's GPU (choose_process_gpu).
struct GpuChoiceInput {
  int rank = 0;                  ///< the global rank
  int local_rank = -1;           ///< its rank on its node (-1: no launcher said)
  std::string local_rank_from;   ///< where local_rank came from ("LOCAL_RANK", "embedscope launch", ...)
  int local_world_size = 0;      ///< ranks on its node (0: not said)
  std::string local_world_from;  ///< where local_world_size came from
  int visible_gpus = 0;          ///< cudaGetDeviceCount in this process
  int listed_visible = -1;       ///< entries of CUDA_VISIBLE_DEVICES (-1: unset)
};

/// The GPU of this process and how it was chosen.
struct GpuChoice {
  int gpu = 0;      ///< CUDA device index in this process
  std::string how;  ///< e.g. "local rank 1 (LOCAL_RANK) of 2 GPUs visible"
};

/// The GPU a process of one rank takes: (local rank) modulo (visible GPUs).
///  - CUDA_VISIBLE_DEVICES names exactly one device (listed_visible 1: the launcher bound one
///    GPU to each process, srun --gpus-per-task=1): GPU 0, whatever the local rank.
///  - no local rank known (a rank started by hand): rank modulo visible GPUs.
///  - a local rank known: that GPU; refused when the node runs more local ranks than this
///    process sees GPUs (local_world_size > visible_gpus, or local_rank >= visible_gpus):
///    NCCL cannot put one GPU in a communicator twice.
/// Throws SpecError naming the rank and the counts: no GPU visible ("rank 1: the cuda backend
/// needs a GPU, but this process sees none"), "rank 2: 3 local ranks (LOCAL_WORLD_SIZE) on this
/// node, but this process sees 2 GPUs ...", "rank 2 is local rank 2 (embedscope launch), but
/// this process sees 2 GPUs: 3 or more local ranks on a node of 2 GPUs ...".
GpuChoice choose_process_gpu(const GpuChoiceInput& in);

/// GpuChoiceInput's local rank and local world size from a launcher's variables in `env` (the
/// first set: OMPI_COMM_WORLD_LOCAL_RANK / OMPI_COMM_WORLD_LOCAL_SIZE, SLURM_LOCALID /
/// SLURM_NTASKS_PER_NODE, LOCAL_RANK / LOCAL_WORLD_SIZE) and CUDA_VISIBLE_DEVICES's entries;
/// `rank` and `visible_gpus` as given, local_rank -1 when none is set. Throws SpecError naming
/// a variable whose value is not a whole number >= 0.
GpuChoiceInput gpu_choice_from_environment(const std::map<std::string, std::string>& env, int rank, int visible_gpus);

/// This process's variables that gpu_choice_from_environment reads.
std::map<std::string, std::string> gpu_choice_environment();

/// Refuses two ranks on one GPU of one host (two processes given the same single-GPU
/// CUDA_VISIBLE_DEVICES, say), which NCCL would refuse with its own error: rank `rank` sets
/// "gpu/R" = {"host", "gpu" (the GPU's PCI bus id), "how" (GpuChoice::how)} in `store` and waits
/// (polling every 2 ms, at most `timeout`; `cancel` and "dead/R" end the wait as in
/// exchange_nccl_ids) for every rank's. Call after the handshake. Every rank reads the same keys,
/// so every rank throws the same SpecError, naming the lowest pair: "ranks 0 and 1 both run on
/// GPU 0000:3b:00.0 of host node7 (rank 0: ...; rank 1: ...): NCCL cannot put one GPU in a
/// communicator twice; ...". Throws std::runtime_error when a rank's key is missing at the
/// timeout (naming the ranks) or is not this format.
void check_distinct_gpus(RunStore& store, int rank, int world, const std::string& host, const std::string& gpu,
                         const std::string& how, std::chrono::milliseconds timeout,
                         const std::atomic<bool>* cancel = nullptr);

/// The NCCL unique id of each of `groups` (e.g. "world", "node0", "cross1"), the same bytes on
/// every rank: rank 0 calls `make_id` once per group (ncclGetUniqueId on a GPU; any
/// kNcclIdBytes bytes in a test) and sets "nccl_id/<group>" (hex) in `store`; the other ranks
/// poll (every 2 ms) until every group's key is set, at most `timeout`. Call after the
/// handshake (handshake.h: every rank has arrived, the run id's keys are this run's). Returns
/// group -> the id's kNcclIdBytes bytes. A rank waiting ends at once when
///  - `cancel` (may be null) is set: throws RendezvousCancelled;
///  - rank 0's make_id failed (rank 0 sets "nccl_id_error" to its error and rethrows): throws
///    std::runtime_error "... rank 0 could not create the NCCL unique id: <its error> (this is
///    rank R)";
///  - rank 0's launcher saw it die ("dead/0", report_dead_rank): throws std::runtime_error naming it.
/// Throws std::runtime_error when the ids are not all set within `timeout` (naming the groups,
/// the store and the run id) or a value is not 2 x kNcclIdBytes hex digits; std::logic_error
/// when make_id returns another size.
std::map<std::string, std::string> exchange_nccl_ids(RunStore& store, int rank, const std::vector<std::string>& groups,
                                                     const std::function<std::string()>& make_id,
                                                     std::chrono::milliseconds timeout,
                                                     const std::atomic<bool>* cancel = nullptr);

}  // namespace embedscope::engine::launch
