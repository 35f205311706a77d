// The trade-off of a proposal's bytes against its balance (rebalance/move_budget.h).
#include "embedscope/engine/rebalance/move_budget.h"

#include <algorithm>
#include <cmath>

namespace embedscope::engine::rebalance {

std::vector<int64_t> smaller_budgets(const Proposal& p, size_t max_budgets) {
  std::vector<int64_t> sizes;
  for (const TableMove& m : p.moves) sizes.push_back(m.bytes);
  for (const TypeChange& c : p.changes) sizes.push_back(c.bytes);
  if (sizes.size() < 2 || max_budgets == 0) return {};
  std::sort(sizes.begin(), sizes.end());
  std::vector<int64_t> sums;
  int64_t sum = 0;
  for (int64_t b : sizes) {
    sum += b;
    if (sum > 0 && sum < p.bytes_moved && (sums.empty() || sums.back() != sum)) sums.push_back(sum);
  }
  if (sums.size() <= max_budgets) return sums;
  std::vector<int64_t> out;  // evenly spaced by rank, the largest kept
  for (size_t k = 1; k <= max_budgets; ++k) {
    const size_t at = (k * sums.size() + max_budgets - 1) / max_budgets - 1;  // ceil(k n / m) - 1
    if (out.empty() || out.back() != sums[at]) out.push_back(sums[at]);
  }
  return out;
}

std::vector<BudgetOption> budget_trade_off(const Proposal& p, size_t max_budgets,
                                           const std::function<Proposal(int64_t)>& repropose) {
  std::vector<BudgetOption> out;
  for (int64_t budget : smaller_budgets(p, max_budgets)) {
    const Proposal q = repropose(budget);
    BudgetOption o{budget, q.imbalance_after, q.bytes_moved, static_cast<int64_t>(q.moves.size() + q.changes.size()),
                   q.worth_it()};
    if (!out.empty() && out.back().imbalance_after == o.imbalance_after && out.back().bytes_moved == o.bytes_moved) continue;
    // more bytes for a balance that reads the same as the row above's (2 decimals, as printed:
    // 1.0214 with 5.0 MiB, then 1.0211 with 26.7 MiB) is no trade-off to show
    if (!out.empty() && std::llround(out.back().imbalance_after * 100) == std::llround(o.imbalance_after * 100)) continue;
    out.push_back(o);
  }
  return out;
}

}  // namespace embedscope::engine::rebalance
