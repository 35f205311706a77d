#pragma once
// The trade-off between a rebalancing proposal's bytes and its balance (tester55 F6): the same
// proposal re-run under smaller byte budgets (max_bytes_per_move), so that a user sees that, e.g.,
// 4% of the bytes give almost all of the gain (3 cold tables of 3.2 MiB and 3 hot ones of
// 132.8 KiB on 4 ranks: 6.7 MiB of moves for ids max/mean 1.25, 265.6 KiB for 1.33) and can
// pick a budget.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "embedscope/engine/rebalance/policy.h"

namespace embedscope::engine::rebalance {

/// One smaller budget and what the proposal re-run under it reaches.
struct BudgetOption {
  int64_t max_bytes_per_move = 0;  ///< the budget given to the re-run, bytes (> 0)
  double imbalance_after = 1.0;    ///< the re-run's Proposal::imbalance_after (predicted)
  int64_t bytes_moved = 0;         ///< the re-run's Proposal::bytes_moved
  int64_t tables = 0;              ///< the re-run's moves + changes
  bool worth_it = false;           ///< the re-run's Proposal::worth_it()
};

/// The budgets below `p`'s bytes that each admit a prefix of its moves: the bytes of p.moves and
/// p.changes sorted ascending, their running sums, those below p.bytes_moved, each once, ascending
/// (a budget bounds the moves' total, so the k-th sum is the least budget under which the k
/// smallest of them fit). When there are more than `max_budgets`, `max_budgets` of them evenly
/// spaced by rank, the largest kept. Empty when p has fewer than two moves and changes together,
/// or max_budgets is 0. Example: moves of 136,000, 136,000, 3,400,000 and 3,400,000 bytes
/// (p.bytes_moved 7,072,000): {136,000, 272,000, 3,672,000}. O(n log n).
std::vector<int64_t> smaller_budgets(const Proposal& p, size_t max_budgets);

/// For each budget of smaller_budgets(p, max_budgets), `repropose(budget)` (the same proposal
/// with that max_bytes_per_move: propose on the same plan and load, plus the noise rule where the
/// caller applies one) summarised; a budget whose result equals the previous row's (imbalance and
/// bytes), or whose imbalance rounds to the previous row's at 2 decimals as printed (more bytes, the same balance), is left out. Throws what `repropose` throws.
std::vector<BudgetOption> budget_trade_off(const Proposal& p, size_t max_budgets,
                                           const std::function<Proposal(int64_t)>& repropose);

}  // namespace embedscope::engine::rebalance
