#pragma once
// The effect of each live rebalance of a session (tables `rebalances`, `steps`): the step time
// before and after it, for `embedscope stats` and the scenario notes.

#include <cstdint>
#include <vector>

#include "embedscope/sessions/model/events.h"

namespace embedscope::sessions {

class SessionReader;

/// One rebalance with the median step time of the steps before and after it. A step's time is
/// the slowest rank's (end_ns - start_ns over the ranks' `steps` rows, as RunResult's), so the
/// move itself, which runs between steps, is in neither; it is duration_ns.
struct RebalanceEffect {
  RebalanceRecord rebalance;
  int64_t step_p50_before_ns = -1;  ///< median over steps step-window_steps+1..step; -1 none
  int64_t step_p50_after_ns = -1;   ///< median over steps step+1..step+after_steps; -1 none
  /// duration_ns / (before - after): the steps until the move paid for itself; -1 when the
  /// steps did not get faster (or either median is missing).
  double amortised_after_steps = -1;
};

/// Median of the values (the lower of the two middle ones for an even count, as `stats` p50);
/// -1 when empty. {5, 1, 3} -> 3, {4, 1, 3, 2} -> 2.
int64_t median_ns(std::vector<int64_t> v);

/// The effects of the given rebalances over `steps` (any order; warm-up steps, step < 0, ignored).
/// Example: steps 0..3 of 10, 10, 4, 6 ns (one rank), a rebalance after step 1 with window 2,
/// after_steps 2, duration 12: before 10, after 4, amortised after 12 / 6 = 2 steps.
std::vector<RebalanceEffect> rebalance_effects(const std::vector<RebalanceRecord>& rebalances,
                                               const std::vector<StepMetric>& steps);
/// The same from a session's tables (empty for files without `rebalances`).
std::vector<RebalanceEffect> rebalance_effects(const SessionReader& session);

}  // namespace embedscope::sessions
