#pragma once
// The machine load of a run of several processes (one per rank: `embedscope launch`, an MPI
// `run`), from each process's own measurement, for the merged session (merge/merge.cpp).
//
// Each process p measured, over its own run [a_p, b_p]: self_p, the cores it kept busy
// ((user + system CPU time) / wall time, getrusage), and other_p, the cores the rest of its host
// kept busy (/proc/stat's busy time of all cores / wall time, less self_p) - which counts the
// sibling rank processes of the same run as "other" load. Likewise its runnable threads: own_p
// (its threads in state R) and other_p (procs_running less own_p), sampled every 20 ms. For the
// run as one program on each host h (the processes the ranks table puts on h):
//   self_h  = sum over p on h of self_p
//   other_h = max(0, mean over p on h of (self_p + other_p) - self_h)
// (self_p + other_p is the host's busy cores as process p saw them: exact when the processes'
// windows coincide, which launch's rendezvous makes nearly so), and the run's figures are the
// sums over its hosts; the same rule for the runnable threads. Then other / self is the other
// programs' load in task groups, as for a one-process run (engine cost/calibration.h).

#include <optional>
#include <string>
#include <vector>

namespace embedscope::sessions {

/// One process's measured load (metadata cpu_self_cores, cpu_other_cores, cpu_own_runnable,
/// cpu_other_runnable) and the host it ran on (its ranks' host).
struct ProcessLoad {
  std::string host;
  double self_cores = 0, other_cores = 0;                   ///< cores, >= 0
  std::optional<double> own_runnable, other_runnable;       ///< threads, both or neither
};

/// The run's load from its processes' (the rule above).
struct MergedLoad {
  double self_cores = 0, other_cores = 0;             ///< cores
  std::optional<double> own_runnable, other_runnable; ///< threads; only when every process has both
  int processes = 0, hosts = 0;
};

/// The run's load over `processes` (at least one). Throws std::invalid_argument for none or a
/// negative figure. Example: 4 processes on one host, each self 0.25 and other 1.75 cores (the
/// host's 2 cores busy): self 1.0, other 2.0 - 1.0 = 1.0 (the tester's launch session rw4.db:
/// 0.238 / 1.756 each, G 7.38 as one process's, G ~1.1 as the run's).
MergedLoad merge_process_load(const std::vector<ProcessLoad>& processes);

}  // namespace embedscope::sessions
