#pragma once
// Rank and world size from the environment a launcher sets, for `embedscope run` started by
// mpirun, srun or torchrun without --rank / --world-size. A pure function of the variables.

#include <map>
#include <optional>
#include <string>

namespace embedscope::engine::launch {

/// What a launcher said about this process. -1 / 0 where it said nothing.
struct LaunchEnv {
  std::string launcher;      ///< "Open MPI", "Slurm" or "torchrun"
  int rank = -1;             ///< global rank
  int world_size = 0;
  int local_rank = -1;       ///< rank among the processes of this node
  int local_world_size = 0;  ///< processes on this node
  int node = -1;             ///< node index (SLURM_NODEID, torchrun's GROUP_RANK)
  std::string run_id;        ///< the launcher's job id where it has one ("" otherwise)
};

/// Reads, in this order:
///  - Open MPI: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE (both needed), OMPI_COMM_WORLD_LOCAL_RANK,
///    OMPI_COMM_WORLD_LOCAL_SIZE; run id OMPI_MCA_ess_base_jobid;
///  - Slurm: SLURM_PROCID, SLURM_NTASKS (both needed), SLURM_LOCALID, SLURM_NTASKS_PER_NODE (set
///    by srun --ntasks-per-node), SLURM_NODEID; run id
///    SLURM_JOB_ID.SLURM_STEP_ID (or SLURM_JOB_ID);
///  - torchrun: RANK, WORLD_SIZE (both needed), LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (the
///    node); run id
///    TORCHELASTIC_RUN_ID.
/// Returns the first launcher whose rank variable is set, nullopt when none is. Throws
/// SpecError naming the variables: a value that is not a whole number >= 0 (world size >= 1),
/// a rank without its world size, a rank not below the world size, and two launchers whose
/// rank or world size disagree ("OMPI_COMM_WORLD_RANK=1 but SLURM_PROCID=2"). Example: {RANK=3,
/// WORLD_SIZE=4, LOCAL_RANK=1, LOCAL_WORLD_SIZE=2} -> torchrun, rank 3 of 4, local 1 of 2.
std::optional<LaunchEnv> launch_from_environment(const std::map<std::string, std::string>& env);

/// The variables of this process's environment that launch_from_environment reads.
std::map<std::string, std::string> launcher_environment();

/// For a launcher (embedscope launch) that saw the process of `rank` end (`how`, e.g. "was
/// killed by signal 9 (Killed)"): sets the key "dead/<rank>" in the run's store (url and run id
/// as the ranks were given), so that the ranks whose collectives broke name it at once instead
/// of waiting out the collective timeout for its failure key. Throws SpecError when the store
/// cannot be opened (TrainerOptions::ProcessRank).
void report_dead_rank(const std::string& url, const std::string& run_id, int rank, const std::string& how);

/// For a rank (embedscope run --rank, a launcher's environment) that refused its input before
/// it claimed its rank in the store (a flag, the workload, the plan, its placement): sets the
/// key "refused/<rank>" to {"reason": `reason`, "wall_ns"} in the run's store, so that the
/// ranks waiting in the rendezvous end at once naming it and the reason (exit 2) instead of
/// waiting out the collective timeout. Does nothing when "claim/<rank>" is set (another process
/// holds the rank, or the refusal came from the handshake, which the peers see themselves).
/// Throws SpecError when the store cannot be opened.
void report_refused_rank(const std::string& url, const std::string& run_id, int rank, const std::string& reason);

}  // namespace embedscope::engine::launch
