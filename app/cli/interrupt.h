#pragma once
// Ctrl-C as a request to stop cleanly: the first SIGINT sets a flag the command polls (a run
// stops after its current step, a scenario before its next run) and says so on stderr; a second
// SIGINT ends the process at once (the default action). The commands that write one staged output
// (import, merge, export) cancel at once instead: cancel_at_once_with, commands/cancel_writes.h.
//
// For runs, signals also ask for the collective flight recorders (engine/comm/flight_recorder.h):
// SIGUSR1 dumps them into the session and the run goes on; SIGINT and SIGTERM (what mpirun,
// srun and a scheduler's time limit send) dump them and cancel as Ctrl-C does.

#include <atomic>
#include <functional>

#include "embedscope/engine/exec/run.h"

namespace embedscope::cli {

/// Two copies of one signal number that come less than this apart are one request to stop
/// (on_stop, interrupt.cpp): coreutils `timeout` sends its SIGTERM to the process and then to its
/// process group, which holds the process, so a run got two in a row and "stopped at once"
/// (exit 130) at random (tester50 F2). Machine-made copies come microseconds apart; the window
/// also covers their handlers being a few scheduler time slices apart on a loaded machine
/// (tens of ms). A person's deliberate second Ctrl-C, after the first one's line ("cancelling
/// after the current step (Ctrl-C again stops at once)") appears, takes longer than half a second
/// (reading the line); a faster double press is the same request, and one more press stops at once.
inline constexpr int kOneStopRequestMs = 500;

/// What a run's first SIGINT or SIGTERM prints (cancel_on_sigint's `said` for `run`).
inline constexpr const char* kRunCancelling = "\ncancelling after the current step (Ctrl-C again stops at once)\n";

/// For `run`, from the first code of its own the process runs (main.cpp calls it from the
/// executable's .preinit_array: after the dynamic loader has mapped and relocated the shared
/// libraries, before their initialisers and main): SIGINT and SIGTERM get the handler
/// cancel_on_sigint installs, printing `said` (a string literal). A signal from then on is
/// taken, not lost where the process inherited it ignored (a non-interactive shell's `&` job
/// starts with SIGINT ignored): before, the handler came with the command, about 60-100 ms in
/// (most of it the shared libraries' loading and initialisers), and a SIGINT before it was
/// discarded (the run went on to its end) or killed the process (exit 130). The command then
/// sees the flag set and says it was cancelled before the run started. Async-signal-safe
/// enough for that moment: it touches only constant-initialised atomics and calls sigaction.
void take_stop_signals_early(const char* said);

/// Installs the SIGINT handler and returns the flag it sets. `said` (a string literal: the
/// handler writes it with write(2), which is async-signal-safe) is printed on the first Ctrl-C.
/// A second SIGINT less than kOneStopRequestMs after the first is the same request (nothing
/// more happens); a later one ends the process at once (the default action, or stop_at_once_with).
std::atomic<bool>& cancel_on_sigint(const char* said);

/// cancel_on_sigint, and SIGTERM (what Slurm, Kubernetes and CI time limits send) sets the same
/// flag with the same message: for the commands that run one run after another without a flight
/// recorder (`scenario`, `scaling`: crit42 / tester42 F22, SIGTERM left a half-written session).
/// A second SIGINT or SIGTERM ends the process at once.
std::atomic<bool>& cancel_on_sigint_or_sigterm(const char* said);

/// For a command that writes one output under a staged name (`import`, `merge`, `export`;
/// commands/cancel_writes.h): the first SIGINT or SIGTERM prints `said` (a string literal,
/// written with write(2)) and wakes a thread of its own, started here, that runs `at_cancel`
/// (it removes the staged output and ends the process: cancelled at once, whatever the command
/// is doing, even inside a library call that polls nothing). Signals that come while it runs do
/// nothing more. If `at_cancel` returns (too late: the output is already in place), later signals
/// end the process by their default action. cancel_requested() is true from the first signal on.
/// Call once, and not with cancel_on_sigint.
void cancel_at_once_with(const char* said, std::function<void()> at_cancel);

/// Whether a SIGINT or SIGTERM arrived since cancel_at_once_with was called.
bool cancel_requested();

/// For a run: SIGTERM cancels as SIGINT does (cancel_on_sigint must have been called), and
/// SIGUSR1, SIGINT and SIGTERM each request a flight recorder dump through the returned request
/// (TrainerOptions::flight_dump, LmRunOptions::flight_dump).
const engine::FlightDumpRequest& flight_dump_on_signals();

/// For a run: a second SIGINT or SIGTERM (after the first asked to cancel) still stops at once
/// (exit 130), but first `at_stop` runs, on a thread of its own started here (the handler only
/// wakes it: sem_post is async-signal-safe), so it may print the last line and record the stop
/// in the session (tester41 #21: the session read "crashed", nothing named it). A third signal
/// while `at_stop` runs ends the process at once. Without this call a second signal ends the
/// process at once (the default action). Call once, before cancel_on_sigint (retest47 R2: the
/// first signal's line promises "Ctrl-C again stops at once" from the moment the handler is in);
/// a SIGINT / SIGTERM that came before this call still gets its second one handled here.
void stop_at_once_with(std::function<void()> at_stop);

/// For a rank process that `embedscope launch` started (EMBEDSCOPE_LAUNCHER_PID=PID in its
/// environment, set by launch): a thread watches the pipe this process's stderr is, which the
/// launcher reads. When the launcher goes away (SIGKILL, the OOM killer, a batch system's hard
/// kill) the pipe has no reader any more (poll reports POLLERR): stdout and stderr are pointed
/// at /dev/null, so that no later write fails with EPIPE (tester46 F5: the ranks ended "crashed:
/// cannot write to file: Broken pipe"), and `cancel` is set: the run stops after its current
/// step, as on SIGTERM (the ranks' cancel vote agrees on the step). Returns the launcher's pid,
/// or 0 (nothing watched) when the variable is absent or malformed. Call once.
long watch_launcher(std::atomic<bool>& cancel);

/// Whether the launcher watch_launcher watches went away: its pipe was seen closed, or this
/// process's parent is no longer that pid (re-parented when it died). False without a watch.
bool launcher_gone();

}  // namespace embedscope::cli
