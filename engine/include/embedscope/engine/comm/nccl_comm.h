#pragma once
// Collectives between GPU ranks over NCCL (built with EMBEDSCOPE_WITH_CUDA only).
//
// One NcclComm per rank: an NCCL communicator on one device, and a comm stream of its own,
// separate from the caller's compute stream. A collective is issued without blocking the host:
// the comm stream waits (cudaStreamWaitEvent) for the work enqueued on the compute stream so
// far, the collective runs on the comm stream, and an event marks its end; NcclWork::wait_on()
// makes a stream wait for it, NcclWork::synchronize() blocks the host: in cudaEventSynchronize on
// the end event (created with cudaEventBlockingSync: the thread sleeps in the driver until the
// collective completes; no sleep-polling), while the communicator's watchdog thread
// (comm/completion_watchdog.h) looks at ncclCommGetAsyncError every kWatchdogCheckNs and at the
// deadline; a collective not done within the communicator's timeout (counted from its issue),
// or an asynchronous error, aborts the communicator (ncclCommAbort, which makes the blocked wait
// return) and synchronize() throws the CPU path's
// CollectiveError (comm/gloo_process_group.h) naming the op and its sequence number, so a GPU run ends `hang` like
// a CPU one and never hangs silently.
//
// Two ways to set up ranks:
//  - one process per GPU: exchange_nccl_unique_id() through a Gloo FileStore on a shared file
//    system, then NcclComm::init_rank() (ncclCommInitRank) in every process;
//  - one process driving every local GPU: NcclComm::init_all() (ncclCommInitAll). A thread that
//    drives several ranks issues each collective for all of them inside one NcclGroup (NCCL's
//    group semantics); a thread per rank needs none.
//
// Every collective mirrors ProcessGroup's (comm/gloo_process_group.h): the same arguments, a sequence number per
// communicator, all-to-all split sizes cross-checked before data moves (SplitMismatchError),
// bytes counted with collective_math.h's definitions, and a sessions::CollectiveRecord per
// completed collective to the observer (start: host time of issue; end: host time its
// completion was seen by synchronize() - when the blocked thread woke - or done()).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "embedscope/engine/comm/gloo_process_group.h"

namespace embedscope::engine {

/// The linked NCCL's version, "2.28.9" (ncclGetVersion).
std::string nccl_version();

/// Rank 0 creates the id (ncclGetUniqueId) and writes it under `key` in a Gloo FileStore at
/// directory `store_dir` (created if missing; use a fresh one per run, as a stale id would be
/// read); the other ranks wait for it up to `timeout`. Throws CollectiveError
/// (timed out) naming the key and directory when rank 0 never published it, std::runtime_error
/// for an NCCL error.
ncclUniqueId exchange_nccl_unique_id(const std::string& store_dir, const std::string& key, int rank,
                                     std::chrono::milliseconds timeout);

class NcclComm;
class CompletionWatchdog;

/// How often a communicator's watchdog asks ncclCommGetAsyncError while a host waits on one
/// of its collectives (ns). The timeout itself is watched to the deadline, not to this step.
inline constexpr int64_t kWatchdogCheckNs = 2'000'000;

/// A collective in flight. Copyable handle; the collective's events live as long as a handle.
class NcclWork {
 public:
  struct State;
  NcclWork() = default;
  explicit NcclWork(std::shared_ptr<State> s) : s_(std::move(s)) {}
  /// `stream` (on the work's device) waits for the collective; the host does not block.
  void wait_on(cudaStream_t stream) const;
  /// True once the collective finished; throws like synchronize() on an error or a timeout.
  bool done();
  /// Blocks until the collective finished (see the file comment for errors).
  void synchronize();

 private:
  /// Marks it finished: flight recorder completed, the record (end: now) to the observer.
  static void finish(State& s);
  std::shared_ptr<State> s_;
};

class NcclComm {
 public:
  /// One process per GPU: this process's rank `rank` of `nranks` on CUDA device `device`.
  /// `members` are the global ranks of the group in group order (default 0..nranks-1).
  /// Throws std::runtime_error naming the NCCL / CUDA call and its error.
  static std::unique_ptr<NcclComm> init_rank(const ncclUniqueId& id, int nranks, int rank, int device,
                                             std::string group, std::chrono::milliseconds timeout,
                                             std::vector<int> members = {});
  /// One process, every GPU in `devices` (group rank i on devices[i]); `members` as for
  /// init_rank (default 0..n-1). Throws std::invalid_argument when members has another size.
  static std::vector<std::unique_ptr<NcclComm>> init_all(const std::vector<int>& devices, std::string group,
                                                          std::chrono::milliseconds timeout,
                                                          std::vector<int> members = {});
  /// ncclCommDestroy (or nothing after an abort); destroys the comm stream.
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(members_.size()); }
  int device() const { return device_; }
  const std::string& name() const { return group_; }
  const std::vector<int>& members() const { return members_; }
  cudaStream_t stream() const { return stream_; }
  ncclComm_t handle() const { return comm_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  bool aborted() const { return aborted_.load(); }
  /// ncclCommAbort (idempotent). A collective that fails or times out aborts its own
  /// communicator; when one thread drives several ranks, abort the others of the group too
  /// before destroying them (ncclCommDestroy would wait for their stuck kernels). NCCL's abort
  /// synchronizes the comm stream, so it returns once the kernels queued there have exited.
  /// Thread safe (the watchdog thread calls it).
  void abort();
  /// The text of the asynchronous error the watchdog saw ("" if none), kept because the
  /// communicator cannot be asked after its abort.
  std::string async_error_text() const;
  /// The watchdog of this communicator's host waits (started at the first wait).
  CompletionWatchdog& watchdog() { return *watchdog_; }
  /// Sequence number of the last collective issued (0 before any).
  uint64_t sequence() const { return seq_; }
  const CommCounters& counters() const { return counters_; }
  void set_observer(const profiler::RunClock* clock, ProcessGroup::Observer observer) {
    clock_ = clock;
    observer_ = std::move(observer);
  }
  /// Records every collective in `recorder` (comm/flight_recorder.h; null: none), which must
  /// outlive them: scheduled when the host issues it (its split check, outside an NcclGroup, is
  /// a collective of its own), started once it is enqueued on the comm stream (ncclGroupEnd
  /// returned; NCCL says nothing of when its kernel begins), completed when done() or
  /// synchronize() sees its end event.
  void set_flight_recorder(FlightRecorder* recorder) { flight_ = recorder; }
  FlightRecorder* flight_recorder() const { return flight_; }

  // Collectives. Buffers are device memory on device() (send and recv must not overlap, except
  // in place as noted); counts are elements of elem_size bytes. `compute` is the stream whose
  // prior work produces the inputs, a stream of device() (nullptr: its legacy default stream).
  /// all-to-all(v) as grouped ncclSend / ncclRecv (the own block is a device copy). Outside an
  /// NcclGroup the split sizes are first all-gathered ("<op_name>/split_check", its own
  /// sequence number, the host waits for it) and checked; inside one, NcclGroup::end() checks
  /// them on the host. Throws SplitMismatchError naming the pair.
  NcclWork all_to_all_v(const char* op_name, cudaStream_t compute, const void* send,
                        std::span<const int64_t> send_counts, void* recv, std::span<const int64_t> recv_counts,
                        size_t elem_size);
  /// reduce-scatter (sum, fp32): send holds size() blocks of counts[j] floats, recv receives
  /// the sum of block rank(). ncclReduceScatter when all counts are equal, else one grouped
  /// ncclReduce per block (root j).
  NcclWork reduce_scatter(const char* op_name, cudaStream_t compute, const float* send,
                          std::span<const int64_t> counts, float* recv);
  /// all-gather(v): ncclAllGather when all counts are equal, else one grouped ncclBroadcast
  /// per rank's block.
  NcclWork all_gather_v(const char* op_name, cudaStream_t compute, const void* send, void* recv,
                        std::span<const int64_t> counts, size_t elem_size);
  /// all-reduce (sum, fp32), in place.
  NcclWork all_reduce_sum(const char* op_name, cudaStream_t compute, float* data, int64_t count);

  struct Op;  // one rank's part of a collective (nccl_comm.cpp)

 private:
  NcclComm(ncclComm_t comm, int rank, int device, std::string group, std::vector<int> members,
           std::chrono::milliseconds timeout);
  NcclWork submit(std::unique_ptr<Op> op);
  friend class NcclGroup;
  friend class NcclWork;

  ncclComm_t comm_ = nullptr;
  int rank_;
  int device_;
  std::string group_;
  std::vector<int> members_;
  std::chrono::milliseconds timeout_;
  cudaStream_t stream_ = nullptr;
  uint64_t seq_ = 0;
  std::atomic<bool> aborted_{false};
  mutable std::mutex async_error_mutex_;
  std::string async_error_;  // under async_error_mutex_
  std::unique_ptr<CompletionWatchdog> watchdog_;
  CommCounters counters_;
  const profiler::RunClock* clock_ = nullptr;
  ProcessGroup::Observer observer_;
  FlightRecorder* flight_ = nullptr;
};

/// Collects, on this thread, the collectives issued for several ranks until it ends, then
/// cross-checks all-to-all splits between the ranks it holds (every rank of a group: no
/// communication needed) and the block counts of each reduce-scatter / all-gather, and issues
/// them in one ncclGroupStart / ncclGroupEnd. Required when one
/// thread drives several ranks (init_all). The NcclWork handles become usable after end().
/// Throws SplitMismatchError (nothing issued) on disagreeing splits.
class NcclGroup {
 public:
  NcclGroup();
  /// Ends the group if end() was not called (errors are then swallowed: call end()).
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  void end();

 private:
  friend class NcclComm;
  std::vector<std::unique_ptr<NcclComm::Op>> ops_;
  bool ended_ = false;
};

}  // namespace embedscope::engine
