#pragma once
// Cross-thread hand-offs of a measured cpu rank (issue 15, calib15e): a cpu rank runs its
// compute ops on one thread and its collectives on another (exec/threaded/executor.cpp); an op
// whose last dependency was an op of the other thread starts once its own thread has been woken
// and scheduled. On this 2-core machine under load that wake-up was ~8 ms of a 140 ms step
// (criteo_kaggle, 4 ranks table_wise, other load G 1.33: 0.4-3.3 ms before each of the six
// compute <-> comm hand-offs of a base step, none between ops of one thread), time that is in
// no op's span. The profile's cpu.handoff_ns (hardware_profile.h CpuContention) models it;
// calibrate fits it from these gaps (calibration.h).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "embedscope/engine/program/step_program.h"

namespace embedscope::engine {

/// One measured op span of a rank's step: its name and [start_ns, end_ns), ns on the session's clock.
struct MeasuredSpan {
  std::string name;
  int64_t start_ns = 0, end_ns = 0;
};

/// One hand-off: the program op (ProgramOp::id) that waited for the other thread, and its gap
/// in ns: its start - the end of that dependency, >= 0.
struct HandoffGap {
  int op = 0;
  int64_t gap_ns = 0;
};

/// The hand-off gaps of one rank's step. `compute` and `comm`: the step's measured spans of each
/// lane in time order, paired in order with program.lane(compute) / lane(comm) by name. For each
/// program op of those two lanes whose latest-ending dependency (ProgramOp::waits_for) is an op
/// of the other lane, ending strictly after every dependency of its own lane and after
/// `lane_start_ns` (when its thread became free for the step: the step's start), one gap:
/// start - that dependency's end (0 if it started earlier, clock skew). Ops with no dependency
/// on the other lane, or whose own lane was the later, give none (their thread was not asleep).
/// Returns std::nullopt when the spans do not pair with the program (counts or names differ:
/// a reshard, a different program), as calibrate skips such (rank, step)s.
std::optional<std::vector<HandoffGap>> handoff_gaps(const StepProgram& program,
                                                     const std::vector<MeasuredSpan>& compute,
                                                     const std::vector<MeasuredSpan>& comm, int64_t lane_start_ns);

}  // namespace embedscope::engine
