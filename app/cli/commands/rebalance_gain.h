#pragma once
// What `embedscope rebalance` says a proposal gains (app/cli/commands/rebalance.cpp): the
// embedding work a step that moves with the shards (lookups and their backward and fused
// optimizer update, engine/rebalance/shard_work.h) before and after the proposal, and the `why`
// line of a table whose load alone bounds every whole-table move.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "embedscope/engine/rebalance/comm_cost.h"
#include "embedscope/engine/rebalance/policy.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/model/events.h"

namespace embedscope::sessions {
class SessionReader;
}

namespace embedscope::cli {

/// The embedding work per rank over a window of steps, in ns (window sums).
struct RebalanceWork {
  std::vector<int64_t> lookup_ns;  ///< per rank: load_counters.lookup_ns summed (every shard, hot-row replicas too)
  std::vector<int64_t> update_ns;  ///< per rank: its `backward_fused_optimizer` ops' durations summed
  std::vector<int64_t> before;     ///< per rank: lookup + update under the plan in force
  std::vector<int64_t> after;      ///< per rank: the same predicted under the proposal (shard_work.h work_per_rank)
  int slowest = 0;                 ///< the rank of the largest `before` (ties: the lower rank)
  bool update_recorded = false;    ///< some backward_fused_optimizer op in the window (else: lookup only)
  /// (max before - max after) / steps: the ns a step the slowest rank's embedding work falls by.
  double saved_ns_per_step = 0;
};

/// The work of steps first..last (`steps` = last - first + 1) of `session` under `plan` and the
/// proposal `p` of it: each shard's lookup ns (`counters`, the session's load counters) plus its
/// share by ids of its rank's backward_fused_optimizer ops of those steps (shard_work_ns); a
/// hot-row replica's lookups (shard kHotRowReplicaShard) stay on their rank. `row_counts`: how
/// the tables' ids fell over their rows (ObservedLoad::row_counts) for a table split row_wise.
/// Example (tests/engine/rebalance/gain60_test.cpp): ranks 0..2 one cold table each (32 ids,
/// 320 ns lookup, 1000 ns update a step), rank 3 four hot ones (768 ids, 7680 ns, 76,800 ns):
/// before 1320 / 84,480 ns a step; three hot tables moved to ranks 0..2: at most 22,440; saves
/// 62,040 ns a step. Throws SpecError naming `file` for a counter outside the plan.
RebalanceWork rebalance_work(const sessions::SessionReader& session, const std::string& file,
                             const engine::ShardingPlan& plan, const engine::rebalance::Proposal& p,
                             const std::vector<sessions::LoadCounter>& counters, int64_t first, int64_t last,
                             const std::vector<std::vector<engine::rebalance::RowCount>>& row_counts);

/// What a proposal's communication costs against the work it saves (rebalance/comm_cost.h).
struct RebalanceComm {
  /// The planner model's communication of the plan in force and of the proposal; nullopt when the
  /// proposal moves nothing or the model could not time it (`note` says why).
  std::optional<engine::rebalance::CommChange> change;
  /// The model's communication time applies to the session's links (comm_time_applies): an
  /// emulated network or a named hardware profile. Else only the bytes are said.
  bool timed = false;
  /// Predicted change of the step, ns (negative: faster): the communication added (when timed)
  /// minus the embedding work saved a step.
  double step_change_ns = 0;
  /// The proposal is predicted to make the step slower or no faster: step_change_ns >= 0 with
  /// some move (a balance that saves no work is no faster, with or without communication).
  bool slower = false;
  std::string note;  ///< why the time is not predicted (no emulated network, the model failed), or ""
};

/// The communication of `plan` and of the proposal `p` (comm_change) and the predicted step
/// change against `saved_ns_per_step` (RebalanceWork::saved_ns_per_step or the lookup gain).
/// Never throws: a plan the model cannot time leaves `change` empty with the reason in `note`.
RebalanceComm rebalance_comm(const engine::WorkloadSpec& spec, const engine::ShardingPlan& plan,
                             const engine::rebalance::Proposal& p, double saved_ns_per_step);

/// The `comm` line's text (after "comm         "): bytes sent a step before -> after, and with
/// `timed` the model's communication time a step and the predicted step change. "" when
/// c.change is empty and there is no note.
std::string comm_text(const engine::WorkloadSpec& spec, const RebalanceComm& c);

/// Why no whole-table move balances better: the heaviest table_wise table whose load alone
/// exceeds the mean rank load (load x world > all load) and that `p` leaves whole. Not worth it:
/// moved whole it only moves the straggler (tester48 F2); worth it: it bounds what the moves reach
/// (tester60b F4: 1.19 on the first session, where a split reaches 1.04). Names the options that
/// split it, and with `split_reach` (the predicted max/mean with every split the workload does
/// not already allow; nullopt: not computed) what they reach when that is lower. "" when no table
/// is that hot. `unit` names the load ("ids", "column-weighted ids", "lookup ns").
std::string why_not_text(const engine::WorkloadSpec& spec, const engine::ShardingPlan& plan,
                         const engine::rebalance::ObservedLoad& load, const engine::rebalance::Proposal& p,
                         const std::function<std::optional<double>()>& split_reach, const std::string& unit);

}  // namespace embedscope::cli
