#pragma once
// Whether a workload's live rebalancing policy can fire at all within its run (tester42 F7:
// `"rebalance": {"every": 50}` on a 10-step run was accepted and never fired, without a word).

#include <string>

#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::rebalance {

/// A warning when `spec`'s rebalance policy cannot fire in its `steps` measured steps, else "".
/// The policy looks after measured step s (0-based) when policy_window (reshard.h) is > 0 there,
/// and never after the last step (no step would run the new plan): the first chance is after
/// step every - 1 (trigger every) or window - 1 (trigger when), so it never fires when that is
/// past step steps - 2. The text names the JSON pointer. Examples (tested):
///   every 50, steps 10 -> "/rebalance/every: 50 with 10 measured steps: the policy first looks
///     after step 49 and never after the last one (step 9), so it never fires; give every <= 9,
///     or more steps"
///   when window 10, steps 10 -> the same with "/rebalance/when/window: 10" and "window <= 9";
///   every 9, steps 10, or rebalance "off" -> "".
std::string rebalance_never_fires(const WorkloadSpec& spec);

}  // namespace embedscope::engine::rebalance
