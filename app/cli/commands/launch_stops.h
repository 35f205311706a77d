#pragma once
// What launch does with a rank process that is stopped (SIGSTOP, job control, a debugger) when
// the user asks the run to end: tell it apart (process_stopped) and continue it (SIGCONT) so that
// it takes the forwarded Ctrl-C or SIGTERM with the others, as coreutils' timeout(1) does after
// its signal and bash's `kill %JOB` does for a stopped job. A stopped rank never arrives at the
// collective its peers wait in, so without this a first Ctrl-C ended the peers only through
// their collective timeout (31 s; tester62c F3).

#include <sys/types.h>

#include <string>

namespace embedscope::cli {

/// Whether process `pid` is stopped: state T ("stopped by a signal") or t ("tracing stop") in
/// /proc/PID/stat (proc(5)); false when it cannot be read (it has ended).
bool process_stopped(pid_t pid);

/// When process `pid` (rank `rank`) is stopped: sends it SIGCONT and says so on stderr
/// ("embedscope launch: rank 1 (pid 4242) is stopped: continued (SIGCONT) so that it takes the
/// Ctrl-C with the others"; `what` names the signal forwarded: "Ctrl-C", "SIGTERM"). Returns
/// whether it was stopped. A process in a debugger's tracing stop stays stopped (SIGCONT does
/// not end a ptrace stop); the caller checks again later.
bool continue_if_stopped(int rank, pid_t pid, const char* what);

/// When process `pid` (rank `rank`) is still stopped (process_stopped) after continue_if_stopped
/// (a debugger's stop): says so on stderr, sets its death in the run's store (`store_url`,
/// `run_id`; report_dead_rank: the other ranks, blocked in a collective or a store wait for it,
/// end at once naming it) and kills it (SIGKILL). Returns whether it did.
bool kill_if_still_stopped(int rank, pid_t pid, const std::string& store_url, const std::string& run_id);

}  // namespace embedscope::cli
