#pragma once
// The CPU tracer: the engine's op spans, per rank and lane, on one steady clock.
//
// Each (rank, lane) has its own buffer written by exactly one thread (the rank's compute
// worker or its comm worker), so recording takes no lock. When tracing is off, record() is a
// single branch. Buffers are read after the threads that write them have been joined.

#include <chrono>
#include <cstdint>
#include <vector>

#include "embedscope/sessions/events.h"

namespace embedscope::profiler {

/// Nanoseconds on std::chrono::steady_clock since `anchor` (the run's start).
class RunClock {
 public:
  RunClock() : anchor_(std::chrono::steady_clock::now()),
               wall_anchor_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::system_clock::now().time_since_epoch()).count()) {}
  int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - anchor_)
        .count();
  }
  /// Unix time (ns) of the anchor, to place the run on the wall clock.
  int64_t wall_anchor_ns() const { return wall_anchor_ns_; }

 private:
  std::chrono::steady_clock::time_point anchor_;
  int64_t wall_anchor_ns_;
};

class Tracer {
 public:
  /// world_size ranks, each with the lanes of sessions::Lane.
  Tracer(int world_size, bool enabled);
  bool enabled() const { return enabled_; }
  const RunClock& clock() const { return clock_; }
  int64_t now_ns() const { return clock_.now_ns(); }
  /// Appends a span (called only from the thread that owns ev.rank / ev.lane).
  void record(const sessions::OpEvent& ev) {
    if (enabled_) buffers_[static_cast<size_t>(ev.rank * kLanes + static_cast<int>(ev.lane))].push_back(ev);
  }
  /// All spans of all ranks and lanes, sorted by (start, rank, lane).
  std::vector<sessions::OpEvent> events() const;
  const std::vector<sessions::OpEvent>& lane_events(int rank, sessions::Lane lane) const {
    return buffers_[static_cast<size_t>(rank * kLanes + static_cast<int>(lane))];
  }

  static constexpr int kLanes = 2;

 private:
  bool enabled_;
  RunClock clock_;
  std::vector<std::vector<sessions::OpEvent>> buffers_;
};

/// RAII span: records [construction, destruction) on destruction.
class ScopedSpan {
 public:
  ScopedSpan(Tracer& t, int rank, sessions::Lane lane, sessions::OpCategory cat, const char* name,
             int64_t step)
      : t_(t), ev_{rank, lane, cat, name, step, t.enabled() ? t.now_ns() : 0, 0, 0, 0} {}
  ~ScopedSpan() {
    if (t_.enabled()) {
      ev_.end_ns = t_.now_ns();
      t_.record(ev_);
    }
  }
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;
  void set_bytes(int64_t b) { ev_.bytes = b; }
  void set_correlation(uint64_t c) { ev_.correlation = c; }

 private:
  Tracer& t_;
  sessions::OpEvent ev_;
};

}  // namespace embedscope::profiler
