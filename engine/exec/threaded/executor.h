#pragma once
// The threaded executor: one Rank (rank.h) per device, each on its own thread, over Shared run
// state. The cuda executor (exec/cuda/) derives from it and adds the devices' set-up and what
// the devices recorded. Internal to the engine.

#include "exec/executor.h"
#include "rank.h"

namespace embedscope::engine::threaded {

class ThreadedExecutor : public exec::Executor {
 public:
  /// Runs every rank of the plan's world, each on a thread of this process.
  ThreadedExecutor(const WorkloadSpec& spec, const ShardingPlan& plan, const TrainerOptions& options);
  /// Runs only `local_ranks` (ascending, each in [0, world)) here; the others run elsewhere
  /// (other processes: exec/launch/), reached through sh_.rv, which the caller sets before
  /// run(). RunResult then holds the local ranks only: their summaries, step times (the slowest
  /// local rank's), the first local rank's losses (all-reduced, so every rank's), and with
  /// keep_tables each table with the local ranks' shards filled in and zeros elsewhere
  /// (replicated tables from rank 0 only), so that the tables of all processes add up to the
  /// full ones.
  ThreadedExecutor(const WorkloadSpec& spec, const ShardingPlan& plan, const TrainerOptions& options,
                   std::vector<int> local_ranks);
  ~ThreadedExecutor() override;
  void run(sessions::SessionWriter* session, RunResult& result) override;
  const profiler::RunClock& clock() const override { return sh_.tracer.clock(); }

 protected:
  /// After every rank's thread has ended, before the tracer's spans go into the session: what
  /// the devices recorded (the cuda executor's GPU ops and metadata). Nothing by default.
  virtual void after_ranks(sessions::SessionWriter* /*session*/) {}
  /// The test hook EMBEDSCOPE_INJECT_DEVICE_FAULT (exec/device/fault_injection.h) on sh_.gpus,
  /// once they exist (the constructor for the host stand-in and the cpu backend, the cuda
  /// executor's prepare() for its GPUs). Throws std::invalid_argument for a bad value, or when set on a run without
  /// devices (the cpu backend).
  void apply_device_fault_hook();

  Shared sh_;
  std::vector<int> local_ranks_;            // the ranks run here, ascending
  std::vector<std::unique_ptr<Rank>> ranks_;  // one per local rank, in that order
  /// A collective of a local rank failed (a broken transport or a timeout), which a peer may
  /// have caused: text that names the peer, appended to the rank's error. "" by default
  /// (threads of one process fail together).
  virtual std::string explain_peer_failure(int /*rank*/, const CollectiveError& /*e*/) { return ""; }
  /// Called on a local rank's thread when it fails (before its sockets close). Nothing by default.
  virtual void on_rank_failed(int /*rank*/) {}
};

}  // namespace embedscope::engine::threaded
