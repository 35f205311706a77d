#pragma once
// Decoding of CUPTI Activity API buffers into session records, with no device needed.
//
// A buffer is what CUPTI hands to the buffer-completed callback: activity records back to back,
// each the struct of its kind in this CUPTI's headers (CUpti_ActivityKernel10 for
// CONCURRENT_KERNEL, CUpti_ActivityMemcpy6, CUpti_ActivityMemset4, CUpti_ActivityMemory4 for
// MEMORY2, CUpti_ActivityAPI for RUNTIME, CUpti_ActivitySynchronization2), walked with
// cuptiActivityGetNextRecord. Timestamps are CUPTI's (cuptiGetTimestamp's clock, ns) and are
// mapped onto the run's host clock (RunClock ns) by a ClockCalibration.
//
// What becomes what:
//  - kernels (names demangled, as Nsight Systems shows them): GpuOp on lane gpu_compute
//    (category other), or gpu_comm (category comm) for NCCL
//    kernels (names starting "ncclDevKernel_" or "ncclKernel_") and for kernels of a stream
//    registered as a comm stream; joined with the runtime call that launched them by
//    correlation id (launch_api, launch_start_ns, launch_thread).
//  - memcpy / memset: GpuOp on lane gpu_copy, category memcpy, with their bytes.
//  - synchronization (cudaStreamSynchronize, cudaEventSynchronize, ...): GpuOp on lane kSyncLane
//    (`gpu_sync`, lane kind `sync`: the host thread waited; never compute: the analyses leave
//    lanes of kind `sync` out of compute, comm and the critical path), category other, on the
//    rank of its stream when the stream is mapped, else of its context's device.
//  - MEMORY2 (cudaMalloc / cudaFree and the async pool's): sessions::MemoryEvent `cupti_alloc` /
//    `cupti_free` (kMemoryAllocAction / kMemoryFreeAction: driver allocations as CUPTI saw them,
//    beside - never mixed with - the rank's own allocator's alloc / free), on the rank of the
//    stream (async pools) or of the device, with its stream.
//  - runtime calls (RUNTIME): kept by correlation id until the kernel, copy, memset or MEMORY2
//    record of that id arrives (then removed), at most max_launches of them (the oldest are
//    dropped and counted in DecodeStats::launches_dropped) and at most a minute older than the
//    newest activity.
//  - any other kind: counted in DecodeStats::unknown_kind, never thrown; a record CUPTI itself
//    cannot walk (invalid kind) ends the buffer, its remaining bytes counted.
// Ranks (several ranks may share one GPU): an op or MEMORY2 event on a stream mapped to a rank
// (map_stream) is that rank's; else the rank of the OS thread that made its runtime call
// (map_thread; the call's record, CUPTI_ACTIVITY_KIND_RUNTIME, carries the thread id and joins
// the activity by correlation id: a cudaMalloc, a cudaMemcpy / cudaMemset on the default
// stream, a cudaDeviceSynchronize); else, and only then, the device's rank - device d is rank d
// unless map_device() says otherwise (one rank per device: with several ranks on a device, the
// last mapped). Ops and events charged to the device's rank that way are counted
// (DecodeStats::device_rank_fallbacks).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <cupti_activity.h>

#include "embedscope/sessions/model/events.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::profiler {

/// The lane of a GPU rank's synchronization waits (CUPTI_ACTIVITY_KIND_SYNCHRONIZATION): lane
/// number 5, named `gpu_sync`, lane kind `sync` in the session (FORMAT.md, `lanes`).
inline constexpr sessions::Lane kSyncLane = static_cast<sessions::Lane>(5);
/// Memory event actions of MEMORY2 records (FORMAT.md, `memory_events`).
inline constexpr const char* kMemoryAllocAction = "cupti_alloc";
inline constexpr const char* kMemoryFreeAction = "cupti_free";
/// Default bound of the runtime-call table (CuptiDecoder): entries, ~40 bytes each.
inline constexpr size_t kDefaultMaxLaunches = 65536;

/// host_ns = gpu_ns + offset_ns. Sources: cuptiGetTimestamp() read between two RunClock reads
/// (the midpoint is taken as simultaneous), as Tracy and Kineto calibrate CUPTI clocks.
struct ClockCalibration {
  int64_t offset_ns = 0;
  /// host_before <= (the moment cuptiGetTimestamp returned gpu_ns) <= host_after, host ns.
  /// Throws std::invalid_argument when host_after < host_before.
  static ClockCalibration from_sample(int64_t host_before, uint64_t gpu_ns, int64_t host_after);
  int64_t to_host(uint64_t gpu_ns) const { return static_cast<int64_t>(gpu_ns) + offset_ns; }
};

/// Drift between a calibration at the start and one at the end: end.offset - start.offset, ns
/// (positive: the GPU clock ran slower than the host clock).
inline int64_t clock_drift_ns(const ClockCalibration& start, const ClockCalibration& end) {
  return end.offset_ns - start.offset_ns;
}

/// Owns the names GpuOps point to (OpEvent::name needs stable storage): one copy per distinct
/// string, stable until the pool is destroyed.
class StringPool {
 public:
  const char* intern(const std::string& s) { return names_.insert(s).first->c_str(); }

 private:
  std::unordered_set<std::string> names_;  // nodes never move
};

/// One GPU activity on the host clock.
struct GpuOp {
  sessions::OpEvent op;          ///< rank, lane, category, name (pooled), start/end (host ns), bytes
  uint32_t device_id = 0;
  uint32_t context_id = 0;
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;   ///< CUPTI's correlation id (joins the runtime call)
  bool nccl = false;             ///< an NCCL kernel
  const char* launch_api = "";   ///< runtime function that launched it ("cudaLaunchKernel_v7000"); "" unknown
  int64_t launch_start_ns = -1;  ///< host ns when that call began; -1 unknown
  int64_t launch_end_ns = -1;
  uint32_t launch_thread = 0;    ///< OS thread id of the caller
};

/// Counts of what the decoder saw.
struct DecodeStats {
  int64_t records = 0;           ///< records walked
  int64_t kernels = 0, memcpys = 0, memsets = 0, runtime = 0, synchronizations = 0, memory = 0;
  int64_t unknown_kind = 0;      ///< records of kinds not decoded (counted, skipped)
  int64_t undecodable_bytes = 0; ///< bytes from a record CUPTI could not walk to the buffer end
  int64_t no_timestamp = 0;      ///< kernels / copies with start 0 (CUPTI had no timing; dropped)
  int64_t nccl_kernels = 0;
  int64_t nccl_joined = 0;       ///< NCCL kernels joined with a collective record
  /// Runtime calls forgotten before an activity of theirs arrived because the table was full
  /// (max_launches; the oldest go first): their kernels then have no launch (a loss, stored as
  /// cupti_launches_dropped).
  int64_t launches_dropped = 0;
  /// GPU ops and MEMORY2 events whose rank neither their stream nor the thread of their runtime
  /// call gave (no call seen, or a thread map_thread never named): charged to their device's
  /// rank (map_device), which is a guess when several ranks share the device.
  int64_t device_rank_fallbacks = 0;
};

/// True for NCCL's kernels: "ncclDevKernel_*" (NCCL >= 2.19) and "ncclKernel_*" (older), as
/// plain or mangled names (CUPTI reports "_Z21ncclDevKernel_Generic24ncclDevKernelArgs...").
bool is_nccl_kernel(const char* name);

/// Whether a CUDA runtime call (its CUPTI callback name, e.g. "cudaLaunchKernel_v7000") makes an
/// activity record that the decoder joins it with: kernel launches (graphs included), copies,
/// memsets, allocations and frees (MEMORY2), and the host waits that make a SYNCHRONIZATION
/// record (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize; their calling
/// thread names the rank of a device-wide wait). Other calls (cudaEventRecord,
/// cudaStreamWaitEvent, ...) are not kept.
bool makes_activity(const char* runtime_api);

/// The op category of a kernel of a compute stream, from its (demangled) name: Embedscope's own
/// kernels by their names (`tbe_forward`, `low_rank_project` lookup; other `tbe_` kernels,
/// `encoded_update`, `low_rank_d` (the factors' gradients) and `sgd` optimizer; `bucketize` /
/// `permute` input; `copy_rows` (host rows moved) memcpy; `bias_`, `relu`, `interaction`,
/// `dot_forward` / `dot_backward` (the dot interaction), `bce`, `loss` dense) and
/// cuBLAS's GEMMs (`gemm`, `gemv`, `cutlass`, `xmma`, `splitK`: dense). CUB's kernels (`cub::`)
/// are parts of whatever launched them (the TBE backward's sort, the bucketize's scan), so they
/// return `inherit`: the decoder gives them the category of the kernel before them on their stream.
/// Anything else: other. HTA classifies kernels by name the same way (communication / memory /
/// computation); this refines computation into the engine's op categories.
enum class KernelCategory { known, inherit };
KernelCategory kernel_category(const char* name, sessions::OpCategory& out);

/// Static name of a memcpy kind: "memcpy_htod", "memcpy_dtoh", "memcpy_dtod", "memcpy_htoh",
/// "memcpy_ptop", else "memcpy".
const char* memcpy_name(uint8_t copy_kind);

/// Stores the GPU tracer's counters in the session metadata (FORMAT.md), next to the CPU
/// tracer's `dropped_records`: cupti_dropped_records (`dropped`), cupti_records,
/// cupti_unknown_records, cupti_launches_dropped, cupti_device_rank_fallbacks,
/// gpu_clock_offset_ns (`start`'s offset),
/// gpu_clock_drift_ns (end - start offsets).
void write_gpu_trace_metadata(sessions::SessionWriter& w, int64_t dropped, const DecodeStats& stats,
                              const ClockCalibration& start, const ClockCalibration& end);

/// Turns CUPTI activity records into GpuOps and MemoryEvents on the host clock (see the file
/// comment). Not thread-safe: CuptiTracer calls it under one mutex.
class CuptiDecoder {
 public:
  /// `max_launches` (>= 1, else std::invalid_argument): the runtime calls kept for joining.
  explicit CuptiDecoder(ClockCalibration clock = {}, size_t max_launches = kDefaultMaxLaunches);
  /// Calibration used for records decoded from now on.
  void set_clock(ClockCalibration c) { clock_ = c; }
  const ClockCalibration& clock() const { return clock_; }
  /// Device `device` (CUPTI deviceId = CUDA ordinal) is rank `rank`.
  void map_device(uint32_t device, int32_t rank) { rank_of_device_[device] = rank; }
  /// Runtime calls made by OS thread `thread` (CUpti_ActivityAPI::threadId; the tracer sets
  /// CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM, so it is gettid()) are rank `rank`'s: the ops and
  /// MEMORY2 events they made go to that rank when their stream is not mapped to one
  /// (map_stream). The last call for a thread wins.
  void map_thread(uint32_t thread, int32_t rank) { rank_of_thread_[thread] = rank; }
  /// Kernels of (device, CUPTI stream id) go to `lane` (gpu_compute or gpu_comm); so do the
  /// copies of a stream mapped to gpu_comm (category comm: the collectives between ranks on
  /// one GPU are device-to-device copies). `rank` >= 0: every op of the stream is that rank's
  /// (several ranks on one GPU: the device alone does not say whose an op is), before
  /// map_device's answer.
  void map_stream(uint32_t device, uint32_t stream, sessions::Lane lane, int32_t rank = -1) {
    lane_of_stream_[{device, stream}] = lane;
    if (rank >= 0) rank_of_stream_[{device, stream}] = rank;
  }

  /// Decodes the `valid_size` bytes of a CUPTI activity buffer (see the file comment).
  void add_buffer(const uint8_t* buffer, size_t valid_size);
  /// Decodes one record.
  void add_record(const CUpti_Activity& record);

  /// Moves out the GPU ops decoded so far, sorted by (rank, lane, start). Kernels and
  /// synchronizations whose runtime call / context has not been seen yet stay for the next
  /// take (one: a launch CUPTI never reports - NCCL's kernels go through the driver API - must
  /// not keep its kernel from a per-step drain) and go out with the one after it without a
  /// launch (rank 0 for a synchronization of a context never seen), or at once when `final`.
  std::vector<GpuOp> take(bool final);
  /// Runtime calls waiting for their activity (bounded by max_launches).
  size_t launches_waiting() const { return launches_.size(); }
  /// Moves out the allocation events decoded so far (time order). An event whose stream has no
  /// rank waits for the runtime call that made it (cudaMalloc's MEMORY2 record is written inside
  /// the call, before the call's own record) when threads are mapped (map_thread): it goes out
  /// once the call is seen, else with the next take_memory_events() on its device's rank, or
  /// with the first one after take(true).
  std::vector<sessions::MemoryEvent> take_memory_events();
  const DecodeStats& stats() const { return stats_; }
  StringPool& names() { return names_; }

  /// Joins NCCL kernels (lane gpu_comm) with the collective records of the same rank: both in
  /// start order, the k-th kernel joins the first record not yet joined that contains it
  /// (record.start_ns - tolerance <= kernel start, kernel end <= record.end_ns + tolerance); a
  /// record that ended before the kernel began launched none and is passed over. A joined op
  /// takes the record's name, bytes (sent + received), its sequence number as correlation and
  /// category comm. Returns the number joined (also added to stats().nccl_joined).
  /// The intra-device communicator's work (ranks sharing a GPU: copies and add_f32 kernels on the
  /// rank's gpu_comm lane, category comm, not NCCL) is joined too, several ops to one record: each
  /// such op inside a record of its rank (same tolerance) takes the record's name, sequence number
  /// as correlation and step, and keeps its own bytes (not counted in the return value).
  int64_t join_collectives(std::vector<GpuOp>& ops, const std::vector<sessions::CollectiveRecord>& records,
                           int64_t tolerance_ns = 20000);

 private:
  struct Launch {
    const char* api;
    int64_t start_ns, end_ns;
    uint32_t thread;
  };
  // The kernel / copy's runtime call, attached and removed from the table when it is there.
  bool attach_launch(GpuOp& g);
  void add_launch(uint32_t correlation, Launch l);
  int32_t rank_of(uint32_t device) const;
  int32_t rank_of(uint32_t device, uint32_t stream) const;  // the stream's rank, else rank_of(device)
  // The stream's rank, else the rank of `thread` (the calling OS thread; -1 unknown), else the
  // device's (counted in stats_.device_rank_fallbacks).
  int32_t charge(uint32_t device, uint32_t stream, int64_t thread);
  bool stream_has_rank(uint32_t device, uint32_t stream) const { return rank_of_stream_.count({device, stream}) > 0; }
  // A runtime call whose activity is already out: not kept when it comes (bounded, oldest first).
  void forget_call(uint32_t correlation);
  bool resolve(GpuOp& g, bool final);
  // A memcpy or memset record (CUpti_ActivityMemcpy6 / CUpti_ActivityMemset4) as a gpu_copy op.
  template <class CopyRecord>
  void add_copy(const CopyRecord& m, const char* name);
  const char* runtime_name(uint32_t cbid);
  const char* kernel_name(const char* raw);  // demangled (abi::__cxa_demangle), pooled

  ClockCalibration clock_;
  StringPool names_;
  DecodeStats stats_;
  std::map<uint32_t, int32_t> rank_of_device_;
  std::map<std::pair<uint32_t, uint32_t>, sessions::Lane> lane_of_stream_;
  // the category of the last kernel of each (device, stream) that had one of its own (kernel_category)
  std::map<std::pair<uint32_t, uint32_t>, sessions::OpCategory> last_category_of_stream_;
  std::map<std::pair<uint32_t, uint32_t>, int32_t> rank_of_stream_;
  size_t max_launches_;
  std::unordered_map<uint32_t, Launch> launches_;        // correlation id -> runtime call
  std::deque<uint32_t> launch_order_;                    // ids in arrival order (some already removed)
  // ids of MEMORY2 records that came before their runtime call (cudaMalloc's record is written
  // inside the call): the call, when it comes, has nothing left to join and is not kept; at most
  // max_launches_ of them (oldest forgotten first)
  std::unordered_set<uint32_t> joined_early_;
  std::deque<uint32_t> joined_early_order_;
  std::unordered_map<uint32_t, uint32_t> device_of_context_;
  std::unordered_map<std::string, const char*> demangled_;  // CUPTI's (mangled) name -> pooled
  std::vector<GpuOp> pending_;                           // waiting for their launch / context
  std::vector<GpuOp> overdue_;                           // waited one take already: out with the next
  std::vector<sessions::MemoryEvent> memory_;
  std::map<uint32_t, int32_t> rank_of_thread_;           // OS thread id -> rank (map_thread)
  // MEMORY2 events waiting for their runtime call's thread: correlation id -> events
  struct WaitingMemory {
    sessions::MemoryEvent event;
    uint32_t device, stream;
    bool waited = false;  // a take_memory_events() passed: out with the next one
  };
  std::multimap<uint32_t, WaitingMemory> memory_waiting_;
};

}  // namespace embedscope::profiler
