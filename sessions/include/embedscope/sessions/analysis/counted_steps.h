#pragma once
// Which measured steps a session's counts cover: one rule for `stats` (RunStats::counted_steps,
// sessions/analysis/analysis.cpp), the workbench's Sharding plan and `embedscope rebalance`'s
// window (tester49 N2: rebalance counted sparse_dist's drain step, which looks up its batch, and
// semi_sync's second-last, while stats left both out).

#include <cstdint>
#include <string_view>

#include "embedscope/sessions/analysis/stats.h"

namespace embedscope::sessions {

/// The pipeline drain steps left out of a session's figures: `drain` when there are more than
/// `drain` measured steps, else 0 (every step drains the pipeline, so all are counted:
/// steady_state_steps' all_drain). Examples: (6, 2) -> 2; (2, 2) -> 0; (5, 0) -> 0.
inline int64_t drain_steps_left_out(int64_t measured_steps, int64_t drain) {
  return drain > 0 && measured_steps > drain ? drain : 0;
}

/// The measured steps every count of a session covers (ids looked up, bytes, load): steps
/// 0..last, the measured steps 0..last_measured_step without the pipeline's drain steps that
/// drain_steps_left_out leaves out. `pipeline`: the workload's JSON name (pipeline_drain_steps);
/// `measured_steps`: the measured steps recorded, numbered 0..last_measured_step.
/// Examples: ("semi_sync", 6, 5) -> last 3, drain_left_out 2; ("semi_sync", 2, 1) -> last 1,
/// drain_left_out 0; ("sparse_dist", 4, 3) -> last 2; ("base", 6, 5) -> last 5; (.., 0, -1) -> last -1.
struct CountedStepRange {
  int64_t last = -1;           ///< the last counted step; -1 when none is measured
  int64_t drain_left_out = 0;  ///< the drain steps after `last`: recorded, not counted
};
inline CountedStepRange counted_step_range(std::string_view pipeline, int64_t measured_steps, int64_t last_measured_step) {
  CountedStepRange r;
  r.drain_left_out = drain_steps_left_out(measured_steps, pipeline_drain_steps(pipeline));
  r.last = measured_steps > 0 ? last_measured_step - r.drain_left_out : -1;
  return r;
}

}  // namespace embedscope::sessions
