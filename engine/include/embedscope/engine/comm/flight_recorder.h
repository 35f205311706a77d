#pragma once
// The collective flight recorder of one rank: a ring buffer of its last N collectives, with the
// state each reached, for finding out after a hang which rank did not reach which collective.
//
// Modelled on PyTorch's NCCL flight recorder (torch/csrc/distributed/c10d/FlightRecorder.hpp:
// a ring of entries with record_id, process group, collective_seq_id, profiling name, sizes,
// state scheduled / started / completed and their times; dumped on a watchdog timeout or on
// request). Here a ProcessGroup (comm/gloo_process_group.h) records each collective it runs:
//   scheduled  the rank entered the collective and took its sequence number,
//   started    it marked its arrival in the store and its transfer began,
//   completed  the collective returned on this rank (a collective that threw keeps its state,
//              scheduled or started, with the time it threw in time_completed_ns: failed());
// an NcclComm (comm/nccl_comm.h) each collective it issues: scheduled at the host's call,
// started once enqueued on the comm stream, completed when its end event is seen.
// The threaded executor dumps every local rank's ring into the session (table
// `flight_recorder`) when a run ends by a failure and when asked by a signal
// (TrainerOptions::flight_dump); sessions/analysis/flight_recorder.h reads the dumps.
//
// Thread-safe: a rank's collectives run on its comm worker while a dump may be taken on another
// thread. Each call takes one mutex for a few stores; no allocation once the ring is full
// except the entry's strings.

#include <cstdint>
#include <exception>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "embedscope/profiler/cpu/tracer.h"
#include "embedscope/sessions/model/flight_record.h"

namespace embedscope::engine {

/// The most entries EMBEDSCOPE_FR_BUFFER_SIZE may ask for: 100,000 (50 times PyTorch's default;
/// at about 400 bytes an entry, allocated up front, 40 MB a rank, 640 MB for 16 threaded ranks,
/// and every entry is written into the session at each dump).
inline constexpr size_t kMaxFlightRecorderCapacity = 100000;

/// Entries a ring keeps by default: EMBEDSCOPE_FR_BUFFER_SIZE when set (0 turns recording off),
/// else 2,000 (PyTorch's TORCH_FR_BUFFER_SIZE default). Read once per process. Throws SpecError
/// naming the variable and the range for a value that is not a whole number 0 ..
/// kMaxFlightRecorderCapacity (run_training and run_lm call it before anything runs).
size_t flight_recorder_default_capacity();

class FlightRecorder {
 public:
  /// A ring of `capacity` entries (0: records nothing, dumps are empty) for global rank `rank`,
  /// times from `clock` (the run's clock, ns; null: steady_clock ns since the recorder was made).
  FlightRecorder(int rank, size_t capacity, const profiler::RunClock* clock = nullptr);

  /// The entry a collective is recorded under (pass it to started() / completed()); -1 when the
  /// recorder keeps nothing.
  using Id = int64_t;

  /// Records that this rank entered collective `sequence` of group `group` (global ranks
  /// `members` in group order): state scheduled, time created now. `input_elements` and
  /// `output_elements` are the elements this rank sends and receives in total. Overwrites the
  /// oldest entry when the ring is full (counted in dropped()).
  Id scheduled(const std::string& group, std::span<const int> members, uint64_t sequence, const char* op,
               const char* name, const char* dtype, int64_t input_elements, int64_t output_elements,
               int64_t timeout_ms);
  /// The entry's state becomes started (time started now). No-op when the entry has left the ring.
  void started(Id id);
  /// The entry's state becomes completed (time completed now). No-op when it has left the ring.
  void completed(Id id);
  /// The collective threw on this rank: the entry keeps its state (scheduled or started) and its
  /// time_completed_ns becomes now, the time it failed (an entry whose state is not completed and
  /// whose time_completed_ns is >= 0 failed then). No-op for a completed entry, or one that has
  /// left the ring. Never throws.
  void failed(Id id) noexcept;
  /// The training step later entries are recorded under (the rank sets it as it goes).
  void set_step(int64_t step);

  /// The entries still in the ring, oldest first, as rows of dump number `dump` (the caller
  /// numbers its dumps), with `reason` and the dump time filled in. Safe while collectives run.
  std::vector<sessions::FlightRecord> dump(int32_t dump, const std::string& reason) const;
  /// Entries overwritten so far.
  int64_t dropped() const;
  /// Entries recorded so far (kept or dropped).
  int64_t recorded() const;
  size_t capacity() const { return ring_.size(); }

 private:
  int64_t now_ns() const;
  sessions::FlightRecord* find(Id id);  // caller holds mu_

  int rank_;
  const profiler::RunClock* clock_;
  int64_t origin_ns_ = 0;  // steady_clock at construction (no clock)
  mutable std::mutex mu_;
  std::vector<sessions::FlightRecord> ring_;
  int64_t next_id_ = 0;  // record_id of the next entry
  int64_t step_ = 0;
};

/// Marks a collective's entry failed (FlightRecorder::failed) when it is destroyed while an
/// exception thrown after its construction unwinds the stack: a collective constructs one right
/// after scheduled(), and any way it throws from then on records the time it failed. `recorder`
/// null: does nothing.
class FlightFailMark {
 public:
  FlightFailMark(FlightRecorder* recorder, FlightRecorder::Id id)
      : recorder_(recorder), id_(id), uncaught_(std::uncaught_exceptions()) {}
  ~FlightFailMark() {
    if (recorder_ && std::uncaught_exceptions() > uncaught_) recorder_->failed(id_);
  }
  FlightFailMark(const FlightFailMark&) = delete;
  FlightFailMark& operator=(const FlightFailMark&) = delete;

 private:
  FlightRecorder* recorder_;
  FlightRecorder::Id id_;
  int uncaught_;
};

}  // namespace embedscope::engine
