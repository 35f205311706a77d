#pragma once
// The CUPTI collector: every kernel, copy, memset, allocation, runtime call and synchronization
// of the process's GPUs, through the CUPTI Activity API, on the run's host clock.
//
// CUPTI asks for empty buffers and returns full ones through two process-wide callbacks; a
// returned buffer is queued and a collector thread decodes it (CuptiDecoder) and gives the
// memory back to the pool. The collector also asks CUPTI every `flush_period` for the buffers
// whose records are complete. Records CUPTI had no buffer space for are counted
// (cuptiActivityGetNumDroppedRecords) and stored in the session like the CPU tracer's drops.
// The GPU clock is calibrated against the RunClock when tracing starts and when it stops; the
// difference of the two offsets is the drift.
//
// Kinds: CONCURRENT_KERNEL, MEMCPY, MEMSET, MEMORY2, RUNTIME, SYNCHRONIZATION. Thread ids in the
// records are the OS's (CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM: gettid()), so that map_thread can
// name the rank of a call's thread.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "embedscope/profiler/cupti/cupti_decode.h"
#include "embedscope/profiler/cupti/session_drain.h"
#include "embedscope/profiler/cpu/tracer.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::profiler {

/// The GpuRecordSource of a SessionDrain on a device.
class CuptiTracer final : public GpuRecordSource {
 public:
  struct Options {
    size_t buffer_bytes = size_t{8} << 20;               ///< bytes of each activity buffer
    std::chrono::milliseconds flush_period{100};         ///< collector's cuptiActivityFlushAll period
  };
  /// Starts tracing on every device of the process. One CuptiTracer at a time (CUPTI's buffer
  /// callbacks are process-wide): a second throws std::logic_error. A failing CUPTI call throws
  /// std::runtime_error naming the call and CUPTI's error string (e.g. CUPTI_ERROR_NOT_INITIALIZED
  /// without a driver).
  explicit CuptiTracer(const RunClock& clock, Options options);
  explicit CuptiTracer(const RunClock& clock) : CuptiTracer(clock, Options{}) {}
  /// Stops (as stop()) if still running, dropping what was not taken.
  ~CuptiTracer() override;
  CuptiTracer(const CuptiTracer&) = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  /// Activities of device `device` belong to rank `rank` (default: rank = device ordinal) when
  /// neither their stream (map_stream) nor the thread of their call (map_thread) names a rank.
  void map_device(int device, int rank);
  /// The CUDA calls of OS thread `thread` (current_thread_id() on that thread) are rank `rank`'s:
  /// a cudaMalloc, a copy or memset on a stream of no rank, a cudaDeviceSynchronize made there
  /// goes to that rank (CuptiDecoder::map_thread; several ranks on one GPU). Any thread.
  void map_thread(uint32_t thread, int rank);
  /// The calling thread's OS id (gettid()): what CUPTI's runtime records carry as threadId, the
  /// tracer having set CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM.
  static uint32_t current_thread_id();
  /// Kernels on `stream` (of the current device `device`) go to `lane` (gpu_comm for the comm
  /// stream; a gpu_comm stream's copies too), and with `rank` >= 0 every op of the stream is
  /// that rank's (CuptiDecoder::map_stream). Throws std::runtime_error if CUPTI does not know
  /// the stream.
  void map_stream(int device, cudaStream_t stream, sessions::Lane lane, int rank = -1);

  /// Delivers every completed record so far (synchronize the devices first to get all of them)
  /// and returns the GPU ops decoded (CuptiDecoder::take(false)).
  std::vector<GpuOp> drain() override;
  /// Forces out the remaining buffers, disables the activity kinds, calibrates the clock again
  /// and returns every op not yet taken. Idempotent.
  std::vector<GpuOp> stop() override;
  std::vector<sessions::MemoryEvent> take_memory_events() override;
  /// Joins NCCL kernels with collective records (CuptiDecoder::join_collectives).
  int64_t join_collectives(std::vector<GpuOp>& ops, const std::vector<sessions::CollectiveRecord>& records) override;

  /// Records CUPTI dropped for lack of buffer space, so far.
  int64_t dropped() const;
  DecodeStats stats() const;
  const ClockCalibration& start_clock() const { return start_clock_; }
  /// The calibration at stop() (equal to start_clock() before).
  const ClockCalibration& end_clock() const { return end_clock_; }
  int64_t drift_ns() const { return clock_drift_ns(start_clock_, end_clock_); }

  /// Session metadata (write_gpu_trace_metadata): dropped records, records decoded, clock
  /// offset and drift.
  void write_metadata(sessions::SessionWriter& w) const;

 private:
  static void on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void on_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size, size_t valid);
  ClockCalibration calibrate() const;
  void collector_loop();
  void decode_queued();
  void count_dropped();

  const RunClock& clock_;
  Options options_;
  ClockCalibration start_clock_, end_clock_;

  mutable std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<std::pair<uint8_t*, size_t>> completed_;  // buffer, valid bytes
  std::vector<uint8_t*> free_buffers_;
  bool stopping_ = false;

  mutable std::mutex decode_mu_;
  CuptiDecoder decoder_;
  int64_t dropped_ = 0;
  bool stopped_ = false;
  std::thread collector_;
};

}  // namespace embedscope::profiler
