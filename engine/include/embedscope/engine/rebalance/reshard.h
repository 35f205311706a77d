#pragma once
// Live resharding (issue 17): the pure pieces every rank computes the same way at a step
// boundary - how many steps of load the policy needs, the load over them from the ranks'
// all-gathered counters, and the floats each rank sends to and receives from each peer when the
// proposal's tables move. The executor's side (the collectives, the buffers) is
// exec/threaded/rank_rebalance.cpp.

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/engine/rebalance/policy.h"
#include "embedscope/sessions/model/events.h"

namespace embedscope::engine::rebalance {

/// Why `spec` cannot rebalance live, or "" when it can. Live resharding runs every pipeline
/// (base, sparse_dist, semi_sync: the batches started ahead are sent again under the new plan)
/// on the cpu backend (ranks as threads of one process or one rank per process), with fp32 rows
/// and fp32 optimizer state (what the all-to-all of rows moves). `where`: "cpu" (the only one
/// allowed), "cuda", "simulated", "an emulated device". The text names the JSON pointer:
/// "/devices/backend: live rebalancing runs on the cpu backend (...), not cuda".
std::string live_rebalance_unsupported(const WorkloadSpec& spec, const std::string& where);

/// The steps of load the policy looks at after measured step `step` (0-based) when the last
/// rebalance ran after `last_rebalance` (-1: none), or 0 when it cannot fire there (off, within
/// cooldown_steps, not an `every` step, fewer than `window` steps since the last one). The same
/// gating as should_rebalance, without the counters: ranks call it before all-gathering them.
///  - every N: min(N, step - last_rebalance) steps (the steps since the last move, at most N);
///  - when: `window` steps.
/// Example: every 4, cooldown 0, no rebalance yet: step 3 -> 4, step 4 -> 0, step 7 -> 4.
int64_t policy_window(const RebalanceSpec& policy, int64_t step, int64_t last_rebalance);

/// The load of a window from the ranks' counters. `gathered` is every rank's block, rank-major:
/// block r holds `steps` rows of `shards` ids (the ids rank r looked up in each (table, shard) of
/// `plan`, flattened in plan order, zero where it holds none), for steps step-steps+1..step.
struct WindowLoad {
  ObservedLoad load;                               ///< per (table, shard), summed over the window
  std::vector<std::vector<int64_t>> ids_per_step_rank;  ///< steps 0..step; rows before the window are 0
};
/// Throws std::invalid_argument when gathered.size() != world * steps * (shards of plan).
WindowLoad window_load(const ShardingPlan& plan, const std::vector<int64_t>& gathered, int world, int64_t steps,
                       int64_t step);

/// How much of the load went elsewhere between two windows of the same plan: the total
/// variation distance of the shares, sum over (table, shard) of |a_i / sum(a) - b_i / sum(b)| / 2,
/// in [0, 1] (0: every shard kept its share; 0.1: a tenth of the load now falls on other
/// shards). `a`, `b`: the load per (table, shard), as ObservedLoad::ids. 1 when the shapes differ or one window is all zeros and the other not; 0 when both are.
/// Example: {30, 10} vs {25, 15}: |0.75 - 0.625| / 2 + |0.25 - 0.375| / 2 = 0.125.
double load_shift(const std::vector<std::vector<int64_t>>& a, const std::vector<std::vector<int64_t>>& b);

/// The largest load_shift at which a firing of the policy is not proposed again after one that
/// moved nothing (every move refused, or no gain) on the same plan: the proposal is a function
/// of the plan and the load's shares, so it would say the same thing again
/// (Rank::after_step_rebalance; above it, it is proposed, and recorded only when it says
/// something new). 5%: the ids of the hot_table_straggler workload's windows shift by well under
/// 1%; tiny batches, or measured lookup ns (balance lookup_time), shift by more and are proposed
/// again more often.
inline constexpr double kReproposeShift = 0.05;

/// Shards of `plan`, all tables: the length of one row of window_load's blocks.
int64_t flat_shard_count(const ShardingPlan& plan);

/// The floats a moved table-wise table travels as: its rows (rows x embedding_dim), then
/// optimizer_state_floats' two buffers (sgd: 0, 0; rowwise_adagrad: rows, 0; adam: 2 x rows x dim).
struct MoveFloats {
  int64_t weights = 0, state1 = 0, state2 = 0;
  int64_t total() const { return weights + state1 + state2; }
};
MoveFloats move_floats(const WorkloadSpec& spec, int table);

/// Floats of one row of table `table`: embedding_dim weights, then optimizer_state_floats(type,
/// 1, dim)'s two (sgd: 0, 0; rowwise_adagrad: 1, 0; adam: dim, dim). move_floats / rows.
MoveFloats row_floats(const WorkloadSpec& spec, int table);

/// Floats of one row of a `cols`-wide shard of table `table`: cols weights, then
/// optimizer_state_floats(type, 1, cols)'s two (sgd: 0, 0; rowwise_adagrad: 1, 0 - one
/// accumulator a row in every column shard, as FBGEMM keeps it; adam: cols, cols).
MoveFloats block_floats(const WorkloadSpec& spec, int table, int64_t cols);

/// A block of consecutive rows (and columns) that a reshard copies from a shard of the old plan
/// to a shard of the new one (with their optimizer state), over the wire when the ranks differ.
/// On the wire: rows x cols weights, then rows x block_floats' state1, then state2. Per-column
/// state (adam) is cut like the weights; one value a row (rowwise_adagrad) travels whole and
/// lands as cols / (the new shard's width) of the new row's value, so a new shard's accumulator
/// is the column-weighted mean of the old shards' it overlaps: a copy when a table is split by
/// columns (table_wise -> column_wise), the mean of the blocks when blocks join.
struct RowTransfer {
  int table = 0;
  int from = 0, to = 0;              ///< ranks holding the old and the new shard
  int from_shard = 0, to_shard = 0;  ///< indexes into the table's shards in the old / new plan
  int64_t from_row = 0;              ///< first row, local to the old shard
  int64_t to_row = 0;                ///< first row, local to the new shard
  int64_t rows = 0;
  int64_t from_col = 0;              ///< first column, local to the old shard
  int64_t to_col = 0;                ///< first column, local to the new shard
  int64_t cols = 0;                  ///< columns of the block
};

/// The blocks that turn `from` into `to`: for every table whose plan differs (type or any
/// shard's rank / rows / columns), the overlap of each new shard's rows and columns with each
/// old shard's, in table order, then new shard order, then old shard order; unchanged tables
/// stay where they are. A table_wise move is one block of all rows; table_wise -> row_wise is
/// one block per rank (the block for the old rank itself is a local copy); table_wise ->
/// column_wise one block of all rows per column shard. Changed tables must be table_wise,
/// row_wise or column_wise in both plans. Throws std::invalid_argument for other types, or plans
/// of different tables or world sizes.
/// Example: 10 rows on rank 1 -> row_wise over 4: {1->0 rows 0-2, 1->1 rows 3-5 (local), 1->2
/// rows 6-7, 1->3 rows 8-9}.
std::vector<RowTransfer> row_transfers(const ShardingPlan& from, const ShardingPlan& to);

/// The all-to-all of a reshard seen from rank `me`: floats sent to / received from each rank,
/// the blocks of `transfers` concatenated in their order (rows x block_floats(cols) each);
/// nothing to itself (local blocks are copies).
/// Example: t0 (1000 x 16, rowwise_adagrad: 17 floats a row) moved 0 -> 1 on 4 ranks: rank 0
/// sends {0, 17000, 0, 0}, rank 1 receives {17000, 0, 0, 0}, ranks 2 and 3 nothing.
struct ReshardCounts {
  std::vector<int64_t> send, recv;
};
ReshardCounts reshard_counts(const WorkloadSpec& spec, const std::vector<RowTransfer>& transfers, int me, int world);

/// What a reshard from `from` to `to` holds on a rank besides the shards of `from` while it runs
/// (Rank::reshard allocates the new shards of the changed tables before it frees their old ones,
/// and both all-to-all buffers are live at once), bytes: the rank's new shards of the changed
/// tables (rows x block_floats(cols) x 4 each, local blocks included), the floats it sends and
/// those it receives (reshard_counts' sums x 4). Fp32 shards (live rebalancing moves no others).
/// Example: t0 (1000 x 16, rowwise_adagrad) moved 0 -> 1 on 2 ranks: rank 0 {0, 68000, 0},
/// rank 1 {68000, 0, 68000}.
struct MoveBytes {
  int64_t new_shards = 0, send = 0, recv = 0;
  int64_t total() const { return new_shards + send + recv; }
};
/// Per rank of `from` (world_size entries). Throws what row_transfers throws.
std::vector<MoveBytes> move_transient_bytes(const WorkloadSpec& spec, const ShardingPlan& from, const ShardingPlan& to);

/// Merges the ranks' records of the same rebalances (`per_rank[r][i]`: rank r's record of the
/// i-th): rank 0's, with start_ns the earliest rank's and duration_ns the slowest's. Then fills
/// imbalance_after / after_steps: the imbalance of the ids per rank summed over the steps
/// step + 1 .. step + window_steps, cut before the next rebalance's step + 1 and at the last step
/// in `ids_per_rank_step[r][s]` (ids rank r looked up in measured step s); -1 / 0 when no step
/// follows. Throws std::invalid_argument when the ranks hold different numbers of records.
/// Example: a rebalance after step 3 with window 2, ids {{5,5,5,5,5,5}, {1,1,1,1,3,3}} (2 ranks):
/// steps 4..5, per rank {10, 6}, imbalance 10 / 8 = 1.25. With `median` (balance lookup_time)
/// each rank's load is window_rank_load's median step x the steps (policy.h), the statistic the
/// trigger and the proposal's before / predicted use, so observed after is on the same basis
/// (tester60b F6: 1.90 observed summed where the robust measure was near the predicted 1.04).
std::vector<sessions::RebalanceRecord> merge_rebalances(const std::vector<std::vector<sessions::RebalanceRecord>>& per_rank,
                                                        const std::vector<std::vector<int64_t>>& ids_per_rank_step,
                                                        bool median = false);

/// Where one rank stood when the run ended during a live rebalance's move: `phase` as
/// Rank::MoveInProgress says it ("in the reshard all-to-all", ...), or "" when the rank had
/// finished its part of the move.
struct MovePhase {
  int rank = 0;
  std::string phase;
};
/// The `outcome` of a move the run ended in: "failed: the run ended during the move (rank 2:
/// allocating the new shards; ranks 0, 1: in the reshard all-to-all; rank 3: done); no shard of
/// it is kept: the tables stay where they were before it" - ranks grouped by phase, in the order
/// of their first rank. Throws std::invalid_argument when `phases` is empty.
std::string failed_move_outcome(const std::vector<MovePhase>& phases);

/// The `plan_changes` rows of proposal `p` applied after measured step `step` (each row's step
/// is step + 1): one per moved table (its one shard, every row and column, the move's bytes) and,
/// per type change, one per shard of the table in the new plan - bytes 0 for a block that stayed
/// on the change's `from` rank, else block_move_bytes of it (a change back to one shard carries
/// the change's bytes). Ordered by (table, shard_index).
std::vector<sessions::PlanChangeRecord> plan_change_records(const WorkloadSpec& spec, const Proposal& p, int64_t step);

}  // namespace embedscope::engine::rebalance
