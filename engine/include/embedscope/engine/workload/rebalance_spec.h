#pragma once
// RebalanceSpec: the rebalancing policy of a workload ("rebalance" in the workload JSON, issue
// 17). Read by engine/workload/rebalance_reader.cpp; the policy itself (when to rebalance, which
// tables to move) is engine/rebalance/ (embedscope/engine/rebalance/policy.h).
//
// JSON forms (docs/configuration.md):
//   "rebalance": "off"                                          (the default)
//   "rebalance": { "every": N, ... }                            every N steps
//   "rebalance": { "when": { "imbalance_above": X, "window": W }, ... }
//       when the imbalance (max/mean over ranks of the ids looked up) over the last W steps
//       exceeds X
// with, in both object forms, "max_bytes_per_move" (bytes of weights and optimizer state one
// rebalance may move; absent = unlimited) and "cooldown_steps" (steps after a rebalance before
// the next may happen; default 0), and "row_wise_hot_tables" (true: a table_wise table whose
// load alone exceeds the mean rank load may be changed to row_wise, its rows split over every
// rank; default false: only whole tables move), "column_wise_hot_tables" (true: such a table may
// instead be changed to column_wise, a block of its columns on each of several ranks, each with
// its own per-row optimizer state), and "balance" (what load is balanced: "ids",
// the ids looked up per shard, the default; or "lookup_time", the measured ns of each shard's
// pooled lookup, load_counters.lookup_ns).

#include <cstdint>

namespace embedscope::engine {

/// When a rebalance is considered.
enum class RebalanceTrigger {
  off,    ///< never (the default)
  every,  ///< after every `every` steps
  when,   ///< when the ids' max/mean over ranks over the last `window` steps exceeds `imbalance_above`
};

/// What the policy balances (the load of rebalance/policy.h, per shard and step).
enum class RebalanceBalance {
  ids,          ///< ids looked up (load_counters.ids), deterministic for a seed (the default)
  lookup_time,  ///< measured ns of the shard's pooled lookup (load_counters.lookup_ns)
};

/// Largest cooldown_steps / every / window accepted (the steps limit of a workload, kMaxSteps).
/// Ranges (errors name the JSON pointer, exit 2):
///   /rebalance/every                  integer in [1, 1e9]
///   /rebalance/when/imbalance_above   number, 1 < X < devices.count (max/mean of W ranks is
///                                     at most W, reached when one rank does all the lookups)
///   /rebalance/when/window            integer in [1, 1e9]
///   /rebalance/max_bytes_per_move     integer in [1, 2^50] (bytes)
///   /rebalance/cooldown_steps         integer in [0, 1e9]
///   /rebalance/row_wise_hot_tables    boolean
///   /rebalance/column_wise_hot_tables boolean
///   /rebalance/balance                "ids" or "lookup_time"
///   /rebalance                        needs devices.count >= 2
struct RebalanceSpec {
  RebalanceTrigger trigger = RebalanceTrigger::off;
  int64_t every = 0;               ///< steps between rebalances (trigger every), >= 1
  double imbalance_above = 0.0;    ///< trigger when: threshold of max/mean ids over ranks, > 1
  int64_t window = 0;              ///< trigger when: steps the imbalance is measured over, >= 1
  int64_t max_bytes_per_move = 0;  ///< bytes one rebalance may move; 0 = unlimited
  int64_t cooldown_steps = 0;      ///< steps after a rebalance during which none happens, >= 0
  /// Whether the policy may change a hot table_wise table to row_wise (rebalance/policy.h propose)
  bool row_wise_hot_tables = false;
  /// Whether the policy may change a hot table_wise table to column_wise (rebalance/policy.h propose)
  bool column_wise_hot_tables = false;
  /// The load balanced and compared with imbalance_above: ids, or lookup ns (same max/mean rule)
  RebalanceBalance balance = RebalanceBalance::ids;
  bool enabled() const { return trigger != RebalanceTrigger::off; }
};

}  // namespace embedscope::engine
