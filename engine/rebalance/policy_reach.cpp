#include "embedscope/engine/rebalance/policy_reach.h"

#include <fmt/format.h>

#include "embedscope/engine/rebalance/reshard.h"

namespace embedscope::engine::rebalance {

std::string rebalance_never_fires(const WorkloadSpec& spec) {
  const RebalanceSpec& r = spec.rebalance;
  if (!r.enabled()) return "";
  const bool every = r.trigger == RebalanceTrigger::every;
  const int64_t n = every ? r.every : r.window;
  const int64_t first = n - 1;  // the first step after which policy_window is > 0 (no rebalance yet)
  if (n < 1 || (first <= spec.steps - 2 && policy_window(r, first, -1) > 0)) return "";
  const char* key = every ? "every" : "window";
  return fmt::format("{}: {} with {} measured step{}: the policy first looks after step {} and never after the last one "
                     "(step {}), so it never fires; give {} <= {}, or more steps",
                     every ? "/rebalance/every" : "/rebalance/when/window", n, spec.steps, spec.steps == 1 ? "" : "s", first,
                     spec.steps - 1, key, spec.steps - 1);
}

}  // namespace embedscope::engine::rebalance
