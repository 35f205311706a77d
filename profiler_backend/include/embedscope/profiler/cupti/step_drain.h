#pragma once
// What of the GPU records drained so far can go into the session now, and in which step.
//
// The cuda executor drains CUPTI at every step end (CuptiTracer::drain) so that a run killed at
// step k keeps the GPU lanes of the steps before it. A GPU op (or a MEMORY2 event) belongs to the
// step of its rank whose host window holds its start: the last window that started at or before
// it (before the rank's first window: `setup_step`, the work before the first step). That step
// is known for sure only when the op started before the end of the rank's last closed window
// (the next window starts after that end); an op that started later belongs to a step still
// running and is held back for a later call, or until the final one, which places it with the
// windows it has. No device needed: tested with hand-built ops (tests/profiler_backend).

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "embedscope/profiler/cupti/cupti_decode.h"
#include "embedscope/sessions/model/events.h"

namespace embedscope::profiler {

/// The step a rank was in when it ended without ending it (a failed run), and when that step
/// began on the run's clock (ns; -1: not known).
struct RunningStep {
  RunningStep(int64_t s = 0, int64_t start = -1) : step(s), start_ns(start) {}  // implicit: {rank, {step, start}} in a map
  int64_t step;
  int64_t start_ns;
};

class StepDrain {
 public:
  /// `ranks`: the ranks whose step ends close_step hears (the local ranks); `setup_step`: the
  /// step number of the work before the first window (the executors' -warmup_steps - 1).
  StepDrain(std::vector<int32_t> ranks, int64_t setup_step);

  /// Rank `rank` ended step `step`, host window [start_ns, end_ns) (ns, the run's clock; windows
  /// of one rank come in time order). Returns true when this makes every rank of the
  /// constructor's list have closed one more step than before: a drain is due (once per step of
  /// the slowest rank, not once per rank). A rank not in the list throws std::invalid_argument.
  bool close_step(int32_t rank, int64_t step, int64_t start_ns, int64_t end_ns);

  /// Rank `rank` ended (failed) inside `running.step`, which has no window: in the final
  /// placement its records after the end of its last window are that step's, not the last
  /// window's; with running.start_ns known, its records from then on are that step's also when
  /// the rank has no window at all (it failed in its first step), not set-up's.
  void set_running(int32_t rank, RunningStep running) { running_[rank] = running; }

  /// Gives each op its step (op.step) and returns the ops whose step is known, in the order
  /// given (held-back ops of earlier calls first); the others are held for a later call. With
  /// `final` every op is returned, placed with the windows there are (an op of a rank with no
  /// window: setup_step; one after the rank's last window: that window's step, or the step
  /// set_running names when it is later).
  std::vector<GpuOp> place(std::vector<GpuOp> ops, bool final);
  /// The same for memory events (their time_ns; step into MemoryEvent::step).
  std::vector<sessions::MemoryEvent> place(std::vector<sessions::MemoryEvent> events, bool final);

  /// Ops and memory events held back now.
  size_t held_ops() const { return held_ops_.size(); }
  size_t held_events() const { return held_events_.size(); }
  /// Steps every rank has closed (the drains close_step asked for).
  int64_t drains_due() const { return drains_; }

 private:
  struct Window {
    int64_t step, start_ns, end_ns;
  };
  // The step of a record of `rank` starting at `t`; false when not known yet (and not final).
  bool step_of(int32_t rank, int64_t t, bool final, int64_t& step) const;

  int64_t setup_step_;
  std::map<int32_t, RunningStep> running_;  // set_running
  std::map<int32_t, std::vector<Window>> windows_;  // per rank, in time order
  int64_t drains_ = 0;
  std::vector<GpuOp> held_ops_;
  std::vector<sessions::MemoryEvent> held_events_;
};

}  // namespace embedscope::profiler
