#pragma once
// The CPU tracer: the engine's op spans, per rank and lane, on one steady clock.
//
// Each (rank, lane) has its own buffer and lock (only that lane's thread and the drainer
// touch it, so the lock is uncontended). When tracing is off, record() is one branch. Buffers
// are drained with take() (at step boundaries) into the session writer; a lane holding
// `max_pending` undrained spans drops further spans and counts them. The tracer measures its
// own cost: the time spent in record() plus two clock reads per span (calibrated at start).

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "embedscope/profiler/cpu/nvtx.h"
#include "embedscope/sessions/model/events.h"

namespace embedscope::profiler {

/// Nanoseconds on std::chrono::steady_clock since the run's start (the anchor).
class RunClock {
 public:
  RunClock();
  int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - anchor_).count();
  }
  /// Unix time (ns, system_clock) of the anchor, to place the run on the wall clock. Read inside
  /// the tightest of 8 steady-clock brackets (a preemption between two reads moves one bracket,
  /// not all 8), at the bracket's middle.
  int64_t wall_anchor_ns() const { return wall_anchor_ns_; }
  /// Half that bracket's width (ns): how far wall_anchor_ns() can be from the steady zero's wall time.
  int64_t wall_anchor_uncertainty_ns() const { return wall_anchor_uncertainty_ns_; }

 private:
  std::chrono::steady_clock::time_point anchor_;
  int64_t wall_anchor_ns_ = 0;
  int64_t wall_anchor_uncertainty_ns_ = 0;
};

class Tracer {
 public:
  /// world_size ranks, each with the lanes of sessions::Lane.
  Tracer(int world_size, bool enabled, size_t max_pending = size_t{1} << 22);
  bool enabled() const { return enabled_; }
  const RunClock& clock() const { return clock_; }
  int64_t now_ns() const { return clock_.now_ns(); }
  /// Appends a span (called from the thread that owns ev.rank / ev.lane). ev.lane is a host
  /// lane (compute or comm); GPU lanes come from the CUPTI collector (cupti_tracer.h).
  void record(const sessions::OpEvent& ev);
  /// Moves out the spans recorded so far on every lane of `rank` (lane order, then time).
  std::vector<sessions::OpEvent> take(int rank);
  /// Spans dropped because a lane was full, over all lanes.
  int64_t dropped() const;
  /// Estimated tracing cost in ns, over all lanes.
  int64_t overhead_ns() const;
  int64_t recorded() const;

  static constexpr int kLanes = 2;

 private:
  struct LaneBuffer {
    std::mutex mu;
    std::vector<sessions::OpEvent> events;
    int64_t dropped = 0;
    int64_t recorded = 0;
    int64_t overhead_ns = 0;
  };
  int64_t sum(int64_t LaneBuffer::*field) const;
  bool enabled_;
  size_t max_pending_;
  int64_t clock_read_ns_ = 0;
  RunClock clock_;
  std::vector<std::unique_ptr<LaneBuffer>> lanes_;
};

/// RAII span: records [construction, destruction) on destruction, and marks the same interval
/// as an NVTX range of that name (nvtx.h), so Nsight Systems shows the engine's phases. Spans
/// nest per thread (innermost()), traced or not.
class ScopedSpan {
 public:
  ScopedSpan(Tracer& t, int rank, sessions::Lane lane, sessions::OpCategory cat, const char* name, int64_t step)
      : t_(t), nvtx_(name), ev_{rank, lane, cat, name, step, t.enabled() ? t.now_ns() : 0, 0, 0, 0}, outer_(innermost_) {
    innermost_ = this;
  }
  ~ScopedSpan() {
    innermost_ = outer_;
    if (t_.enabled()) {
      ev_.end_ns = t_.now_ns();
      t_.record(ev_);
    }
  }
  /// The innermost span open on the calling thread (nullptr: none): the op this thread is in,
  /// for what it records meanwhile (a device allocation's op and step, DeviceArena).
  static const ScopedSpan* innermost() { return innermost_; }
  /// The span's op name (a string that outlives the run's spans) and training step (warm-up
  /// steps negative).
  const char* name() const { return ev_.name; }
  int64_t step() const { return ev_.step; }
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;
  void set_bytes(int64_t b) { ev_.bytes = b; }
  void set_correlation(uint64_t c) { ev_.correlation = c; }
  int64_t start_ns() const { return ev_.start_ns; }

 private:
  Tracer& t_;
  NvtxRange nvtx_;
  sessions::OpEvent ev_;
  const ScopedSpan* outer_;
  static inline thread_local const ScopedSpan* innermost_ = nullptr;
};

}  // namespace embedscope::profiler
