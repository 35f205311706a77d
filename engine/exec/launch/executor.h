#pragma once
// One rank per process: the threaded executor's interpreter running only this process's rank
// (TrainerOptions::process), whose collectives reach the other processes' ranks through Gloo
// over TCP, rendezvous through the run's store (store.h) after the handshake (handshake.h).
// A rank that failed sets its failure key ("failed/R": "1" when a collective failed, else its
// own error, e.g. an OOM, which the peers then name as "(rank R failed: ...)"; peer_failure.h
// words what a rank knew of its peers). A rank whose
// collective failed (the transport broke or it timed out: a peer process may have died) closes its connections (so that a live peer blocked
// on a transfer from it fails now rather than at its own timeout) and waits for the other ranks'
// for at most the collective timeout + 1 s, and names the ranks that never set one: a process
// that is gone sets none; a rank whose launcher wrote its death key ("dead/R",
// report_dead_rank) is named at once, as the launcher saw it end. A run with a dead rank so ends within about twice the collective
// timeout. The cuda backend's process executor (exec/cuda/process_cuda_executor.cpp) derives from
// it: its GPU before the rendezvous, NCCL communicators after it (nccl_setup.h). Internal to the engine.

#include <atomic>
#include <memory>
#include <set>

#include "exec/threaded/executor.h"
#include "handshake.h"
#include "store.h"

namespace embedscope::engine::launch {

class ProcessExecutor : public threaded::ThreadedExecutor {
 public:
  ProcessExecutor(const WorkloadSpec& spec, const ShardingPlan& plan, const TrainerOptions& options);
  ~ProcessExecutor() override;
  /// Calls before_rendezvous(), opens the store, makes the Gloo device on the host's address,
  /// runs the handshake, then after_rendezvous(); throws SpecError (handshake.h, store.h; a
  /// --host that cannot be bound, naming it) and what the hooks throw.
  void prepare() override;
  /// Writes the process metadata (process_rank, rendezvous, run id, clock offset, gloo_device,
  /// launch_node), then runs.
  void run(sessions::SessionWriter* session, RunResult& result) override;

 protected:
  std::string explain_peer_failure(int rank, const CollectiveError& e) override;
  void on_rank_failed(int rank) override;
  /// The device backends' steps of prepare(): before the store is opened (a refusal here
  /// happens before this rank claims, so its peers learn it at once: report_refused_rank), and
  /// after the handshake (every rank arrived with the same workload: the NCCL ids and
  /// communicators, exec/cuda/process_cuda_executor.cpp). Nothing by default.
  virtual void before_rendezvous() {}
  virtual void after_rendezvous() {}
  /// The run's store (set by prepare() before after_rendezvous()).
  RunStore& run_store() { return *store_; }

 private:
  std::unique_ptr<RunStore> store_;
  HandshakeResult hs_;
  std::string device_;  // the Gloo device's address (Rendezvous::device_address)
  std::atomic<bool> failed_set_{false};
  /// the peers whose failure key was in the store when this rank's own failure was set
  /// (on_rank_failed; read by explain_peer_failure, on the same rank thread, after it)
  std::set<int> failed_before_;
  /// After a complete run, the store's keys of this run (files, or Redis keys) are removed once
  /// every rank is done ("done/R", then each rank removes the keys it set and sets "gone/R";
  /// rank 0 then removes the done and gone keys), each wait at most min(collective timeout, 5 s);
  /// a rank that does not report leaves the keys.
  void remove_run_keys();
};

}  // namespace embedscope::engine::launch
