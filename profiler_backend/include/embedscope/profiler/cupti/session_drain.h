#pragma once
// CUPTI's records into the session as the run goes: at every step end (once every rank has
// ended the step) the records so far are taken from the source, NCCL kernels joined with the
// collective records, each record placed in its step (StepDrain) and written; finish() writes
// the rest. The cuda executor's drain, with the device behind GpuRecordSource so that it is
// tested without a GPU (a CuptiDecoder fed hand-built buffers stands in for the CuptiTracer).

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "embedscope/profiler/cupti/cupti_decode.h"
#include "embedscope/profiler/cupti/step_drain.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::profiler {

/// Where a drain takes the GPU records from (CuptiTracer on a device). Each call may throw
/// (a failing CUPTI call: std::runtime_error).
class GpuRecordSource {
 public:
  virtual ~GpuRecordSource() = default;
  /// The GPU ops completed so far (CUPTI flushed; CuptiDecoder::take(false)).
  virtual std::vector<GpuOp> drain() = 0;
  /// Every op not yet taken; tracing ends (CuptiDecoder::take(true)).
  virtual std::vector<GpuOp> stop() = 0;
  /// The MEMORY2 events decoded so far.
  virtual std::vector<sessions::MemoryEvent> take_memory_events() = 0;
  /// CuptiDecoder::join_collectives.
  virtual int64_t join_collectives(std::vector<GpuOp>& ops, const std::vector<sessions::CollectiveRecord>& records) = 0;
};

class SessionDrain {
 public:
  /// The collective records that may hold kernels starting at or after `since_ns` (host ns):
  /// those ending at or after since_ns - 20 us (CuptiDecoder's join tolerance) suffice.
  using RecordsSince = std::function<std::vector<sessions::CollectiveRecord>(int64_t since_ns)>;
  /// When a due drain runs: on the thread of the rank that ended the step last (`inline`), or
  /// on a thread of the drain's own (`background`, the cuda executor's), so that no rank waits
  /// for CUPTI's flush, the decoding and the session write at a step end; finish() waits for it.
  enum class Mode { inline_drain, background };
  /// `session` may be null (nothing written; records still taken). `ranks`, `setup_step`: as
  /// StepDrain's.
  SessionDrain(GpuRecordSource& source, sessions::SessionWriter* session, std::vector<int32_t> ranks,
               int64_t setup_step, RecordsSince records, Mode mode = Mode::inline_drain);
  /// Stops the background thread (without the final drain: finish() does that).
  ~SessionDrain();
  SessionDrain(const SessionDrain&) = delete;
  SessionDrain& operator=(const SessionDrain&) = delete;

  /// Rank `rank` ended `step` (host window [start_ns, end_ns)); drains when that was the last
  /// rank to end it (Mode::background: wakes the drain's thread and returns at once; drains due
  /// while one runs are done as one). Any thread; never throws: a failing source is recorded in
  /// error() and the per-step drains stop (finish() still tries).
  void step_ended(int32_t rank, int64_t step, int64_t start_ns, int64_t end_ns);
  /// The last drain (source.stop()): every record left, after the background drain due, if any.
  /// `running`: per rank, the step it was in when it ended if that step did not end (a failed
  /// run), for the records after its last window. Idempotent; never throws (error()).
  void finish(const std::map<int32_t, RunningStep>& running = {});

  /// The first failure of the source ("" none), e.g. "CUPTI drain at a step end failed: ...".
  std::string error() const;
  /// Drains done (step ends plus the final one), ops and memory events written so far.
  int64_t drains() const;
  int64_t ops_written() const;
  int64_t events_written() const;

 private:
  // One drain: the source's records (under drain_mu_, so drains never interleave), placed and
  // written under mu_.
  void drain(bool final);
  void background_loop();
  void stop_background();

  GpuRecordSource& source_;
  sessions::SessionWriter* session_;
  RecordsSince records_;
  std::mutex drain_mu_;    // one drain at a time (taken before mu_)
  mutable std::mutex mu_;  // the placer's windows, the figures, the background's flags
  std::condition_variable wake_;
  StepDrain placer_;
  std::string error_;
  bool failed_ = false, finished_ = false;
  bool due_ = false, stopping_ = false;  // Mode::background: a drain is due; the thread ends
  int64_t drains_ = 0, ops_written_ = 0, events_written_ = 0;
  std::thread background_;
};

}  // namespace embedscope::profiler
