#pragma once
// Which measured steps a session's counts cover: one rule for `stats` (RunStats::counted_steps,
// sessions/analysis/analysis.cpp), the workbench's Sharding plan and `embedscope rebalance`'s
// window (tester49 N2: rebalance counted sparse_dist's drain step, which looks up its batch, and
// semi_sync's second-last, while stats left both out). Two parts:
//   - the pipeline's drain steps (its last 1-2 planned steps start no next batch), left out only
//     where the run reached them (retest49 R2: a killed run's last steps are ordinary steps);
//   - ranks that hold different steps (a killed rank of a merged launch: tester49 F14): the
//     imbalance over the steps every rank holds (retest49 R1: rebalance too).

#include <cstdint>
#include <string_view>
#include <vector>

#include "embedscope/sessions/analysis/stats.h"
#include "embedscope/sessions/model/events.h"

namespace embedscope::sessions {

/// The pipeline drain steps left out of a session's figures: `drain` when there are more than
/// `drain` measured steps, else 0 (every step drains the pipeline, so all are counted:
/// steady_state_steps' all_drain). Examples: (6, 2) -> 2; (2, 2) -> 0; (5, 0) -> 0.
inline int64_t drain_steps_left_out(int64_t measured_steps, int64_t drain) {
  return drain > 0 && measured_steps > drain ? drain : 0;
}

/// How many of the pipeline's drain steps (pipeline_drain_steps: sparse_dist 1, semi_sync 2) a
/// session holds: the run reached its last planned iterations, which start no next batch.
/// The engine runs them only at the end of its planned steps: a run cancelled (Ctrl-C, SIGTERM:
/// the ranks stop after the step of their cancel vote, exec/threaded/rank.cpp), killed, crashed
/// or stopped by a full disk (write_failed) ends inside the steady state, and its last steps
/// are ordinary steps (retest49 R2). `ended`: the session's end state (SessionReader::status);
/// `planned_steps`: the measured steps its workload planned (workload_json "steps"; <= 0 when
/// unknown); `last_measured_step`: the last measured step it holds (-1: none).
/// Rule: a complete run drained: pipeline_drain_steps(pipeline) (its steps are the planned ones;
/// the rule of every session before retest49). Any other end: the steps it holds among the
/// planned last ones, last_measured_step - (planned_steps - drain) + 1 clamped to 0..drain (a run
/// cancelled in its drain holds some); 0 when planned_steps is unknown.
/// Examples (semi_sync): ("complete", 6, 5) -> 2; ("crashed", 3000, 336) -> 0; ("cancelled",
/// 3000, 2998) -> 1; ("cancelled", 3000, 2999) -> 2; ("crashed", 0, 336) -> 0; base -> 0.
inline int64_t drain_steps_run(std::string_view pipeline, std::string_view ended, int64_t planned_steps,
                               int64_t last_measured_step) {
  const int64_t drain = pipeline_drain_steps(pipeline);
  if (drain <= 0 || ended == "complete") return drain;
  if (planned_steps <= 0 || last_measured_step < 0) return 0;
  const int64_t reached = last_measured_step - (planned_steps - drain) + 1;
  return reached < 0 ? 0 : reached > drain ? drain : reached;
}

/// The measured steps every count of a session covers (ids looked up, bytes, load): steps
/// 0..last, the measured steps 0..last_measured_step without the drain steps the run reached
/// (drain_steps_run) that drain_steps_left_out leaves out. `pipeline`: the workload's JSON name;
/// `ended`, `planned_steps`: as drain_steps_run; `measured_steps`: the measured steps recorded,
/// numbered 0..last_measured_step.
/// Examples: ("semi_sync", "complete", 6, 6, 5) -> last 3, drain_left_out 2; ("semi_sync",
/// "complete", 2, 2, 1) -> last 1, drain_left_out 0; ("sparse_dist", "complete", 4, 4, 3) -> last 2;
/// ("semi_sync", "crashed", 3000, 337, 336) -> last 336, drain_left_out 0; ("base", .., 6, 5) -> last 5;
/// (.., 0, -1) -> last -1.
struct CountedStepRange {
  int64_t last = -1;           ///< the last counted step; -1 when none is measured
  int64_t drain_left_out = 0;  ///< the drain steps after `last`: recorded, not counted
};
inline CountedStepRange counted_step_range(std::string_view pipeline, std::string_view ended, int64_t planned_steps,
                                           int64_t measured_steps, int64_t last_measured_step) {
  CountedStepRange r;
  r.drain_left_out =
      drain_steps_left_out(measured_steps, drain_steps_run(pipeline, ended, planned_steps, last_measured_step));
  r.last = measured_steps > 0 ? last_measured_step - r.drain_left_out : -1;
  return r;
}

/// One rank's measured steps (held_steps).
struct RankStepCount {
  int32_t rank = 0;
  int64_t steps = 0;       ///< measured steps with a step row of the rank
  int64_t last_step = -1;  ///< its last one
};

/// The ranks' measured steps where they differ (tester49 F14, retest49 R1).
struct HeldSteps {
  /// Every rank's measured steps, rank order; empty when every rank holds the same steps (or one
  /// rank, or none, holds any).
  std::vector<RankStepCount> ranks;
  /// The last step every rank holds (the smallest last_step of `ranks`); -1 when `ranks` is empty.
  int64_t common_last_step = -1;
};

/// The ranks' measured steps of a session's step rows (rows with step < 0, the warm-up, are not
/// read): set where the ranks hold different steps - a merged launch whose rank was killed lost
/// the steps it had not committed while its peers went on - so that an imbalance is taken over
/// the steps every rank holds (through common_last_step), by `stats` and `rebalance` alike.
/// Example: rank 0 steps 0..4, rank 1 steps 0..2 -> ranks {0: 5 through 4, 1: 3 through 2},
/// common_last_step 2; both 0..4 -> empty, -1. Cost O(rows log ranks).
HeldSteps held_steps(const std::vector<StepMetric>& step_rows);

}  // namespace embedscope::sessions
