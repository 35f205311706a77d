// plan --auto's order of the plans that fit (search.h tie_break_order): by critical path, and a
// near-tie (kCriticalPathTie) to the plan with the least memory on its fullest device.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "embedscope/engine/planner/search.h"

namespace embedscope::engine {

std::vector<size_t> tie_break_order(const std::vector<ScoredPlan>& plans) {
  std::vector<size_t> order(plans.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return plans[a].critical_path_ns != plans[b].critical_path_ns ? plans[a].critical_path_ns < plans[b].critical_path_ns
                                                                  : plans[a].max_hbm_bytes < plans[b].max_hbm_bytes;
  });
  if (order.empty()) return order;
  // a tie (kCriticalPathTie): of the plans within it of the fastest, the one with the least
  // memory on its fullest device goes first, the others keep their order
  // in integers, (path - fastest) x 1000 <= fastest: exactly 0.1 % is a tie (fastest x 1.001 in
  // doubles reads 100,000 x 1.001 as 100,099.99999999999)
  const int64_t fastest = plans[order[0]].critical_path_ns;
  const int64_t per = std::llround(1.0 / kCriticalPathTie);
  const auto tied = [&](size_t i) { return (plans[order[i]].critical_path_ns - fastest) * per <= fastest; };
  size_t lean = 0;
  for (size_t i = 1; i < order.size() && tied(i); ++i)
    if (plans[order[i]].max_hbm_bytes < plans[order[lean]].max_hbm_bytes) lean = i;
  std::rotate(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(lean),
              order.begin() + static_cast<std::ptrdiff_t>(lean) + 1);
  return order;
}

}  // namespace embedscope::engine
