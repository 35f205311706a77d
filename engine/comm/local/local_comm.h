#pragma once
// The intra-device communicator: collectives between ranks that share one device (several ranks
// on one GPU, devices.ranks_per_gpu; or one emulated device of TrainerOptions::emulate_device), done
// as device-to-device copies (and a reduction for reduce-scatter / all-reduce) on each member's
// comm stream instead of NCCL (which cannot put one GPU in a communicator twice) or Gloo.
//
// Same contract as the Gloo ProcessGroup (comm/gloo_process_group.h) and NcclComm: the same
// sequence numbers (an all-to-all and a reduce-scatter are preceded by the split-size check,
// an all-gather of every member's 2n counts with its own sequence number, "<name>/split_check"),
// the same SplitMismatchError text, the same byte counters (collective_math.h), a collective
// record per collective (observer) and flight recorder entries (scheduled / started /
// completed), a timeout that throws CollectiveError naming the members that did not arrive, and
// close_connections() failing peers at once. Internal to the engine.
//
// How one collective runs (member i of n, all threads of one process):
//   1. stage: the host send buffer is copied to device memory of the member's own
//      (IntraDeviceOps::comm_alloc + comm_to_device) and the comm stream is synchronized;
//   2. arrive: the member publishes the staged pointer and its counts in the group's round for
//      that sequence number and waits (until the timeout) for every member to arrive;
//   3. move: it copies its blocks out of the peers' staged buffers (comm_copy, device to device
//      on its comm stream; comm_add sums the blocks in member order for the reductions), waits
//      for its stream and copies the result to the host buffer (comm_to_host);
//   4. depart: it waits (until the timeout) for every member to finish reading, so that no
//      staged buffer is freed while a peer reads it, and frees its own.
// all_to_all_v_device, reduce_scatter_device and all_gather_v_device (send and receive buffers
// in the device's memory): no staging; in step 1
// the comm stream is ordered after the compute stream and synchronized, the member publishes
// its send buffer itself, and in step 3 copies its blocks straight into its receive buffer (the
// reduce-scatter: zeroes it on the device and adds the blocks into it in member order).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "comm/collectives.h"
#include "embedscope/engine/comm/collective_math.h"

namespace embedscope::engine::detail {

/// The device operations the intra-device communicator runs on: implemented by the engine's
/// RankDevice (exec/device/rank_device.h): host memory and memcpy / a CPU loop on the host
/// stand-in, cudaMalloc + cudaMemcpyAsync + a reduction kernel on the rank's comm stream on a
/// GPU (CudaRankDevice). Pointers of comm_copy / comm_add may belong to another member of the
/// group (the same device).
class IntraDeviceOps {
 public:
  virtual ~IntraDeviceOps() = default;
  /// Device memory for staging, `bytes` bytes (outside the rank's arena); nullptr for 0 bytes.
  virtual void* comm_alloc(int64_t bytes) const = 0;
  virtual void comm_free(void* p) const noexcept = 0;
  /// Host to device on the comm stream (asynchronous with respect to the host on a GPU).
  virtual void comm_to_device(void* dst, const void* src, int64_t bytes) const = 0;
  /// Device to host on the comm stream; returns when the bytes are there.
  virtual void comm_to_host(void* dst, const void* src, int64_t bytes) const = 0;
  /// Device to device (the same device) on the comm stream.
  virtual void comm_copy(void* dst, const void* src, int64_t bytes) const = 0;
  /// dst[i] += src[i] for i < n (fp32, device memory) on the comm stream.
  virtual void comm_add(float* dst, const float* src, int64_t n) const = 0;
  /// Returns when everything issued on the comm stream has finished.
  virtual void comm_sync() const = 0;
  /// dst[0, bytes) = 0 (device memory) on the comm stream: the reduce-scatter on device buffers
  /// (Collectives::reduce_scatter_device) sums from zero without staging zeros from the host.
  /// By default a comm_to_device of host zeros; the engine's devices override it (the stand-in:
  /// memset; a GPU: cudaMemsetAsync on the comm stream).
  virtual void comm_zero(void* dst, int64_t bytes) const {
    if (bytes <= 0) return;
    const std::vector<char> zeros(static_cast<size_t>(bytes), 0);
    comm_to_device(dst, zeros.data(), bytes);
  }
  /// Orders the comm stream after the work issued so far on the device's compute stream (on a
  /// GPU an event recorded there and cudaStreamWaitEvent; does not wait: a comm_sync after it
  /// returns once that work is done). The host stand-in: nothing (its work is done on return).
  /// Used before a collective reads device buffers that the compute stream wrote
  /// (Collectives::all_to_all_v_device).
  virtual void comm_wait_compute() const = 0;
};

/// Host memory standing in for a device: new[] / delete[], memcpy, a CPU loop.
std::unique_ptr<IntraDeviceOps> host_intra_device_ops();

/// The state the members of one intra-device group share (one per group, made once and handed
/// to every member's LocalComm): the rounds of the collectives in flight, by sequence number.
class LocalGroup {
 public:
  /// Group `name` ("world", "node0", ...) of global ranks `members` in group order; a
  /// collective not joined by every member within `timeout` throws CollectiveError.
  LocalGroup(std::string name, std::vector<int> members, std::chrono::milliseconds timeout);
  const std::string& name() const { return name_; }
  const std::vector<int>& members() const { return members_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  friend class LocalComm;
  struct Round {
    std::vector<const void*> staged;             // per member: its staged send buffer (device)
    std::vector<std::vector<int64_t>> counts;    // per member: the counts it published
    std::vector<bool> arrived, departed;
    int n_arrived = 0, n_departed = 0, n_left = 0;
  };
  std::string name_;
  std::vector<int> members_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Round> rounds_;
  int closed_by_ = -1;  // the global rank that closed its connections (-1: none)
};

/// One member's handle on a LocalGroup: the Collectives of the threaded executor's rank
/// (exec/threaded/rank.h) for a group whose members all share one device. Collectives are
/// blocking and run on the calling thread (the rank's comm worker), on `ops` (the rank's device).
class LocalComm final : public Collectives {
 public:
  /// This rank is member `group_rank` of `group`; `ops` must outlive the communicator.
  LocalComm(std::shared_ptr<LocalGroup> group, int group_rank, const IntraDeviceOps& ops);

  uint64_t next_sequence() const override { return seq_ + 1; }
  const CommCounters& counters() const override { return counters_; }
  void set_observer(const profiler::RunClock* clock, ProcessGroup::Observer observer) override {
    clock_ = clock;
    observer_ = std::move(observer);
  }
  void set_flight_recorder(FlightRecorder* recorder) override { flight_ = recorder; }
  /// As ProcessGroup::all_to_all_v: the split check (its own sequence number), then the blocks.
  void all_to_all_v(const char* op_name, const void* send, std::span<const int64_t> send_counts, void* recv,
                    std::span<const int64_t> recv_counts, size_t elem_size) override;
  /// As all_to_all_v on device memory of `ops` (no staging: the peers copy their blocks out of
  /// `send` itself; Collectives::all_to_all_v_device).
  void all_to_all_v_device(const char* op_name, const void* send, std::span<const int64_t> send_counts, void* recv,
                           std::span<const int64_t> recv_counts, size_t elem_size) override;
  void all_gather_v(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                    size_t elem_size) override;
  /// reduce_scatter_q (fp32) on device memory of `ops`: no staging; recv zeroed on the device
  /// (comm_zero) and the members' blocks added into it in member order (comm_add).
  void reduce_scatter_device(const char* op_name, const float* send, std::span<const int64_t> counts,
                             float* recv) override;
  /// all_gather_v on device memory of `ops`: no staging; the blocks copied straight into recv.
  void all_gather_v_device(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                           size_t elem_size) override;
  /// In place; the sum in member order (((b0 + b1) + b2) ...) on the device.
  void all_reduce_sum(const char* op_name, float* data, int64_t count) override;
  void all_to_all_q(const char* op_name, const float* send, std::span<const int64_t> send_counts, float* recv,
                    std::span<const int64_t> recv_counts, CommPrecision p, QuantError* err) override;
  /// fp32: the split check, then block rank() of every member summed on the device in member
  /// order from zero (bit-equal to the Gloo ProcessGroup's); fp16 / bf16 as the ProcessGroup
  /// (quantized blocks exchanged, summed on the host in fp32).
  void reduce_scatter_q(const char* op_name, const float* send, std::span<const int64_t> counts, float* recv,
                        CommPrecision p, QuantError* err) override;
  void all_gather_q(const char* op_name, const float* send, float* recv, std::span<const int64_t> counts,
                    CommPrecision p, QuantError* err) override;
  /// Peers waiting in (or later entering) a collective of the group fail at once with
  /// CollectiveError "... failed: rank <r> closed its connections after an error"; this
  /// rank's later collectives are not started. Throws nothing.
  void close_connections() noexcept override;
  /// Test hook (TrainerOptions::vanish), as ProcessGroup::vanish_at: from group sequence `seq`
  /// on this rank throws RankVanished instead of joining, so its peers time out on it.
  void vanish_at(uint64_t seq) { vanish_at_ = seq; }

 private:
  struct Meta {
    std::vector<int64_t> send, recv;  // the record's per-peer elements (empty: none)
    size_t elem_size = 4;
    const char* dtype = nullptr;
    int64_t elements = 0;   // flight recorder sizes where send / recv are empty
    CollectiveBytes bytes;  // counted on success
  };
  /// Steps 1-4 above for one collective `kind` / `op_name`: `send` (send_bytes, host) is
  /// staged and published with `counts`; `move(staged, counts)` runs between arrival and
  /// departure with every member's staged buffer and counts. `on_device`: `send` is device
  /// memory of ops_, published as it is (after comm_wait_compute + comm_sync), not staged.
  using Move = std::function<void(const std::vector<const void*>& staged, const std::vector<std::vector<int64_t>>& counts)>;
  void run(const char* kind, const char* op_name, Meta meta, const void* send, int64_t send_bytes,
           std::vector<int64_t> counts, const Move& move, bool on_device = false);
  /// Waits (lock held) until `done` or the deadline or a closed group; throws CollectiveError.
  void wait(std::unique_lock<std::mutex>& lock, LocalGroup::Round& round, bool arrival, const char* kind,
            const char* op_name, uint64_t seq, std::chrono::steady_clock::time_point deadline);
  /// The split-size check of an all-to-all: all-gather of the members' send and receive counts,
  /// then find_split_mismatch; throws SplitMismatchError (the Gloo text) on every member.
  void split_check(const char* kind, const char* op_name, std::span<const int64_t> send_counts,
                   std::span<const int64_t> recv_counts);
  /// `on_device`: send and recv are device memory of ops_ (all_to_all_v_device).
  void all_to_all_impl(const char* kind, const char* op_name, const void* send, std::span<const int64_t> send_counts,
                       void* recv, std::span<const int64_t> recv_counts, size_t elem_size, const char* dtype,
                       bool on_device = false);
  /// `on_device`: send and recv are device memory of ops_ (all_gather_v_device).
  void all_gather_impl(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                       size_t elem_size, const char* dtype, bool record_split_check, bool on_device = false);
  int size() const { return static_cast<int>(group_->members().size()); }

  std::shared_ptr<LocalGroup> group_;
  int group_rank_;
  const IntraDeviceOps& ops_;
  uint64_t seq_ = 0;
  uint64_t vanish_at_ = 0;
  std::atomic<bool> closed_{false};  // close_connections() was called (any thread)
  CommCounters counters_;
  const profiler::RunClock* clock_ = nullptr;
  ProcessGroup::Observer observer_;
  FlightRecorder* flight_ = nullptr;
};

}  // namespace embedscope::engine::detail
