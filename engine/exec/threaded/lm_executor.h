#pragma once
// The threaded executor of an lm_embedding workload (exec/lm_run.h): every rank a compute
// thread with a comm worker (comm_worker.h), interpreting the rank's step program
// (program/lm_program.h, build_lm_step_program) op by op, as the DLRM ranks (rank.h) interpret
// theirs: compute ops on the compute thread, comm ops on the comm worker while the compute
// thread waits for them (the program says every op waits for the one before). The run's Tracer
// holds a span per compute op on the compute lane and a span per collective on the comm lane
// (named as the collective, split checks included, with its bytes and sequence number as
// correlation), so the comm lane shows each all-reduce, reduce-scatter and all-gather apart. What an op computes is the model's
// (model/lm_embedding.h, LmRank::run); nothing here names a sharding type.
//
// Each rank's buffers live in its own DeviceArena (caching allocator; capacity
// LmRunOptions::device_memory_bytes, default the host's memory), whose counters (per step),
// allocator history and block layout (when it changed, and at an OOM) go into the session, as
// the DLRM ranks record theirs. A rank's failure is classified as the DLRM ranks' are
// (rank_failure.h): OOM, hang (a collective timed out), write_failed (the session can no longer
// be written: the rank stops at the end of its step), crashed; it closes the rank's
// connections so that its peers fail fast, and the run's ending is the first failure that is
// not a consequence of another's. Before step 0 every rank waits for the others' setup (their
// shards' initial values) on a group of its own ("setup", recorded nowhere, timeout
// kSetupTimeoutMs: exec/setup_note.h), as the DLRM ranks do (rank.h wait_for_every_rank_set_up),
// so that a long setup is neither a hang under the collective timeout nor step 0's
// communication; a failed rank closes it too. LmRunOptions::cancel stops every rank after the same step;
// LmRunOptions::on_step hears of each of rank 0's steps.
// Internal to the engine.

#include <memory>
#include <mutex>
#include <vector>

#include "embedscope/engine/comm/gloo_process_group.h"
#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/profiler/cpu/tracer.h"
#include "embedscope/sessions/store/session.h"
#include "rank_failure.h"

namespace embedscope::engine::threaded {

class LmExecutor {
 public:
  /// `spec` (validated) and `options` must outlive the executor.
  LmExecutor(const LmWorkloadSpec& spec, const LmRunOptions& options);
  ~LmExecutor();
  /// The run's clock: every recorded time is ns since its start.
  const profiler::RunClock& clock() const { return tracer_.clock(); }
  /// Runs spec.steps steps of every rank, each on its own thread, writing into `session` (null:
  /// none) the ranks, lanes, op spans, collectives, steps, load counters, memory records and
  /// token histograms, and fills `result` (ended and error included: a rank's failure is
  /// recorded there, not thrown). The session's metadata and plan are the caller's.
  void run(sessions::SessionWriter* session, LmRunResult& result);

 private:
  struct RankRun;
  void run_rank(int rank, LmRunResult& result);

  const LmWorkloadSpec& spec_;
  const LmRunOptions& opt_;
  profiler::Tracer tracer_;
  std::shared_ptr<Rendezvous> rendezvous_ = Rendezvous::in_process();
  sessions::SessionWriter* session_ = nullptr;
  std::mutex mu_;  // the session writer's shared tables, result.collectives / ops, errors_
  std::vector<RankError> errors_;
  std::vector<std::unique_ptr<FlightRecorder>> flight_;  // per rank: its world group's last collectives
  /// Writes every rank's flight recorder into the session as dump `dump`, with `reason`.
  void dump_flight_recorders(int32_t dump, const std::string& reason);
  struct StepVote;
  std::unique_ptr<StepVote> vote_;  // every rank's decision to go on, taken together before each step
};

}  // namespace embedscope::engine::threaded
