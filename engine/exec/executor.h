#pragma once
// What runs the ranks of one run: the Executor interface the run facade (run.cpp) drives.
//   threaded/  every rank a compute thread with a comm worker, interpreting its step programs on
//              the host (Gloo collectives, host memory; TrainerOptions::emulate_device runs the
//              device path over the host stand-in of RankDevice)
//   cuda/      the same interpreter with rank r on GPU r (CudaRankDevice), NCCL communicators
//              and CUPTI tracing
//   simulated/ every rank's program timed by the cost model of a hardware profile, nothing
//              computed (a cluster of up to 1,024 GPUs on this machine)
// A new executor (a simulated cluster, ranks as processes) is a new folder implementing this and
// a case in make_executor; nothing else in the engine changes. Internal to the engine.

#include <memory>
#include <string>

#include "embedscope/engine/exec/run.h"
#include "embedscope/profiler/cpu/tracer.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::engine::exec {

class Executor {
 public:
  virtual ~Executor() = default;

  /// Sets up what the run needs before its session exists (devices, communicators, tracing),
  /// so that a failure here (throws std::runtime_error naming the device or library) leaves no
  /// session behind.
  virtual void prepare() {}

  /// The run's clock: every recorded time is ns since its start; its wall anchor dates the
  /// session.
  virtual const profiler::RunClock& clock() const = 0;

  /// Runs every step of every rank, writing their records into `session` (null: none) and the
  /// executor's metadata (device names, library versions), and fills `result`: how the run
  /// ended (a rank's failure is recorded there, not thrown), per-rank summaries, step times,
  /// losses, kept events, and the tables when TrainerOptions::keep_tables. Throws only when the
  /// ranks cannot be set up (e.g. a device allocator), before the first step.
  virtual void run(sessions::SessionWriter* session, RunResult& result) = 0;
};

/// The executor of spec's (resolved) backend: cuda -> cuda/, cpu -> threaded/, simulated ->
/// simulated/; with options.process.rank >= 0 (this process runs that rank only) cpu -> launch/
/// and cuda -> cuda/process_cuda_executor.cpp (launch/'s store and handshake, NCCL through it). `spec`, `plan`
/// and `options` must outlive it. Throws std::logic_error for cuda in a build without CUDA
/// (with_resolved_backend refuses that earlier, with a SpecError).
std::unique_ptr<Executor> make_executor(const WorkloadSpec& spec, const ShardingPlan& plan, const TrainerOptions& options);

/// Closes a run's `session` with `ended` and `error` (SessionWriter::close), the same for every
/// run (run_training, run_lm, simulate_lm). Where a write of the run failed (a full disk, an I/O
/// error: SessionWriter::write_failure) it sets `ended` to RunEnd::write_failed and `error` to
/// the failure and what the session kept, e.g. "PATH: database or disk is full (No space left on
/// device); the session keeps 12 steps (through step 11), every commit before the failure, whole,
/// and ends write_failed" ("...; the session keeps no step, and ends write_failed" without a step
/// row; "...; nothing was recorded, and the half-created file was removed" when no commit
/// succeeded) (tester49 F3). Returns false when nothing was recorded (the file is gone: the run
/// has no session), true otherwise. Throws sessions::SessionError for a failure of close that
/// is not a failed write of the run.
bool close_run_session(sessions::SessionWriter& session, RunEnd& ended, std::string& error);

/// `name` as a string that lives as long as the process, for sessions::OpEvent::name (a const
/// char* read by the session writer and in RunResult::events after the executor is gone). The
/// executors that name ops at run time (simulated, the LM runs) intern through it; each distinct
/// name is stored once. Thread-safe.
const char* intern_op_name(const std::string& name);

}  // namespace embedscope::engine::exec
