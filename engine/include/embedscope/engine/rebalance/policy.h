#pragma once
// The rebalancing policy (issue 17): when to rebalance, and which table-wise shards to move
// where, from the lookups the engine observed (the ids of the session's load_counters), within
// each device's memory (the planner's estimate_memory). Pure functions of their arguments: every
// rank that has the same all-gathered counters computes the same proposal.
//
// Load is counted in ids looked up (load_counters.ids), the measure `embedscope stats` reports
// as "ids looked up max/mean". A table's load is assumed to stay with the table when it moves
// (the ids of a table come from the features, not from the rank holding it), so the load after
// a move is predicted by moving the table's observed ids with it. With the workload's
// rebalance.balance "lookup_time" the callers fill the same fields with the shards' measured
// lookup ns (load_counters.lookup_ns) instead of ids: every rule below applies unchanged, with
// "ids" read as "lookup ns" (the CLI's `rebalance --balance`, exec/threaded/rank_rebalance.cpp).
// Live, lookup_time adds the noise rule of rebalance/noise.h: the load is each shard's median
// step over the window, and a proposal's moves are made only if the predicted gain exceeds
// kNoiseMargin x the window's noise and kMinTimeGain of the slowest rank.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "embedscope/engine/rebalance/hot_rows.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::rebalance {

/// Ids looked up per table shard over a window of steps: ids[t][s] for shard s of table t
/// (the order of ShardingPlan::tables[t].shards, = load_counters.shard), summed over the steps.
struct ObservedLoad {
  std::vector<std::vector<int64_t>> ids;
  /// Optional, per table (empty, or one entry per table; an entry empty when unknown): how the
  /// table's ids fell over its rows - the session's id_histogram summed over ranks (buckets of
  /// rows, any window: only the shares are used). A table_wise table changed to row_wise has its
  /// ids predicted per row shard from these shares (row_wise_predicted_ids); without them, in
  /// proportion to the shards' rows (an even spread: optimistic for a skewed, hot table -
  /// tester48 F1: 3.72 -> 1.02 predicted, 1.79 observed).
  std::vector<std::vector<RowCount>> row_counts;
  /// A load of every shard of `plan` set to 0.
  static ObservedLoad zeros(const ShardingPlan& plan);
};

/// max/mean of `per_rank` (the imbalance of `embedscope stats`): 1.0 when every entry is 0 or
/// the vector is empty, otherwise max / (sum / size). {30, 10, 10, 10} -> 30 / 15 = 2.0.
double imbalance(const std::vector<int64_t>& per_rank);

/// Ids per rank: the sum of load.ids[t][s] over the shards that rank holds in `plan`.
/// Throws std::invalid_argument if load's shape differs from the plan's (tables, shards).
std::vector<int64_t> load_per_rank(const ShardingPlan& plan, const ObservedLoad& load);

/// What shard `shard` of `tp` adds to the balanced load from its counter's `value` (ids looked
/// up, or lookup ns with `by_time`): `value` as counted, except a column_wise shard's ids, which
/// count value x num_cols / embedding_dim (rounded down) - its lookups read num_cols of the
/// embedding_dim columns of every id, so that is the full rows' worth of work they do, what
/// column_wise_predicted_load (type_change.h) predicts - so a table split by columns weighs
/// what it weighed whole. 300 ids on a 4-column shard of a 16-column table: 75. Throws
/// std::out_of_range for a shard outside tp.shards.
int64_t balanced_load(const TablePlan& tp, size_t shard, int64_t embedding_dim, int64_t value, bool by_time);

/// Bytes that moving a whole table-wise shard of table `table` costs: the table as it is stored
/// (model/low_rank.h shard_weight_bytes + shard_optimizer_state_bytes over rows() x
/// embedding_dim): its weights in the table's data_type (hash_size rows when hashed; a low-rank
/// table's factors A and B) plus its optimizer state in its optimizer_state_type. E.g. 1000 rows
/// x 16 fp32 with rowwise_adagrad: 1000 * 64 + 1000 * 4 = 68000; the same with low_rank_dim 4:
/// A 1000 x 4 + B 4 x 16 floats = 16,256 B, state 1000 + 4 floats = 4,016 B: 20,272.
int64_t table_wise_move_bytes(const WorkloadSpec& spec, int table);

/// A lower bound of one rank's memory estimate after a change of one table.
struct MemoryBound {
  int rank = 0;
  int64_t at_least = 0;  ///< bytes: the rank's estimate under the plan before + `added`
  int64_t added = 0;     ///< bytes of weights and optimizer state of the table's new shards there
};

/// The cheap memory check the proposal makes before a full estimate_memory of a candidate plan
/// (each replays every rank's buffers: ~5 ms on hot_table_straggler's 4 ranks, and a search asks
/// for one per candidate - 21, 90-130 ms, for a firing refused for memory). For every rank that
/// holds no shard of `table` in `plan` and some in `next` (the plans differ in that table only):
/// its estimate under `plan` (`plan_bytes[rank]`, estimate_memory's total) plus those shards'
/// weights and optimizer state (model/low_rank.h shard_weight_bytes,
/// shard_optimizer_state_bytes). A lower bound of estimate_memory(next) on that rank: the new
/// shards are allocated for the whole run, beside everything the rank held, and its lookups and
/// their buffers only grow. Empty for a table not in device memory (placement host or
/// host_cached: its rows are in host memory). propose refuses on it ("rank 0 would need at least
/// 74.5 MiB of 74.0 MiB (its estimate now 72.0 MiB + the table's new shards 2.5 MiB)", cause
/// "memory") without the full estimate. Throws std::out_of_range for a table outside the plans.
std::vector<MemoryBound> memory_lower_bound(const WorkloadSpec& spec, const ShardingPlan& plan,
                                            const std::vector<int64_t>& plan_bytes, const ShardingPlan& next, int table);

/// One table moved between ranks.
struct TableMove {
  int table = 0;        ///< index into WorkloadSpec::tables
  int from = 0;         ///< rank holding it before
  int to = 0;           ///< rank holding it after
  int64_t ids = 0;      ///< its observed load (ids over the window)
  int64_t bytes = 0;    ///< weights + optimizer state moved (table_wise_move_bytes)
};

/// One table changed from table_wise to row_wise (RebalanceSpec::row_wise_hot_tables): its rows
/// split over every rank as row_wise_table_plan (type_change.h) does, with their optimizer state;
/// or to column_wise (RebalanceSpec::column_wise_hot_tables): its columns in blocks on several
/// ranks as column_wise_table_plan does, each block with its own per-row state.
/// Or, back: a row_wise or column_wise table whose load has cooled changed to table_wise, whole
/// on rank `to` (from -1: it was on several ranks).
struct TypeChange {
  int table = 0;                                     ///< index into WorkloadSpec::tables
  int from = 0;                                      ///< the rank that held the whole table (-1: a change back)
  ShardingType from_type = ShardingType::table_wise;
  ShardingType to_type = ShardingType::row_wise;
  int64_t ids = 0;                                   ///< its observed load (ids over the window)
  int64_t bytes = 0;                                 ///< the blocks that leave `from` (back: that go to `to`), with their state (change_bytes)
  int to = -1;                                       ///< a change back to table_wise: the rank that holds the table; else -1
  /// A change to row_wise: whether its shards' ids were predicted from the observed ids per row
  /// (ObservedLoad::row_counts) rather than in proportion to their rows (an even spread).
  bool rows_observed = false;
};

/// A move the balancing wanted (to the least-loaded rank that could take it) and did not make.
struct RefusedMove {
  int table = 0;
  int from = 0;
  int to = 0;           ///< the target rank; -1 for a change to row_wise, -2 to column_wise (TypeChange)
  int64_t bytes = 0;
  /// Why, in words: "table \"t3\" (1.2 MiB) to rank 2: rank 2 would need 9.1 MiB of 8.0 MiB
  /// (weights ..., optimizer state ..., dense ..., buffers ...)" or "... exceeds
  /// max_bytes_per_move: 1.2 MiB already moved + 1.2 MiB > 2.0 MiB".
  std::string reason;
  /// The kind of reason, without the numbers: "max_bytes_per_move", "memory" (a device's
  /// estimate after the move), "memory during the move" (move_transient_bytes), "noise"
  /// (balance lookup_time: the gain within the measurements' noise, noise.h), or "hot_rows" (a
  /// cooled row_wise table not changed back to table_wise: its replicated hot_rows need a
  /// row-wise type). (table, from,
  /// cause) is what the live policy records once (exec/threaded/rank_rebalance.cpp).
  std::string cause;
};

/// Which memory a proposal's moves must fit (propose's `memory`).
enum class MoveMemory {
  live,       ///< a move made mid-run: the estimate after it and the memory held during it
  fresh_run,  ///< a plan a new run starts with (`run --plan`): the estimate after it alone
};

/// A proposed plan with its predicted gain and its cost.
struct Proposal {
  ShardingPlan plan;                   ///< the new plan (the current one when moves is empty)
  /// The net moves, in table order: each table whose rank in `plan` differs from the current
  /// plan's, once (a search may move a table twice; it is moved once, from where it was to
  /// where it ends), after the moves that do not pay were undone (propose).
  std::vector<TableMove> moves;
  /// Tables changed to row_wise, in table order (only with RebalanceSpec::row_wise_hot_tables).
  std::vector<TypeChange> changes;
  std::vector<RefusedMove> refused;
  std::vector<int64_t> load_before;    ///< ids per rank under the current plan
  std::vector<int64_t> load_after;     ///< predicted ids per rank under `plan`
  double imbalance_before = 1.0;       ///< imbalance(load_before), observed
  double imbalance_after = 1.0;        ///< imbalance(load_after), predicted
  int64_t bytes_moved = 0;             ///< sum of moves' and changes' bytes (what max_bytes_per_move bounds)
  /// Whether applying the plan is predicted to help: some move or change and a lower imbalance.
  /// A change back to table_wise is worth making at an equal imbalance too: the load is as
  /// balanced, and the split table's extra communication ends (row_wise: partial sums of every
  /// row reduce-scattered; column_wise: every id sent to every block).
  bool worth_it() const {
    if (moves.empty() && changes.empty()) return false;
    for (const TypeChange& c : changes)
      if (c.to_type == ShardingType::table_wise) return imbalance_after <= imbalance_before;
    return imbalance_after < imbalance_before;
  }
};

/// The share of the predicted maximum rank load that a whole-table move must gain to be kept
/// (propose, "Moves that do not pay"): 0.02, i.e. a move whose undoing raises the maximum by at
/// most 2% is undone. A judgment, not a measurement: predicted and observed ids max/mean differ
/// by more than that already (1.13 predicted, 1.22 observed for a row_wise hot table of
/// hot_table_straggler's variant with 128 ids a bag), the ids measure leaves out the dense work and the all-to-alls
/// every rank does alike, and the smallest gain LPT bought with a cold table in
/// hot_table_straggler's hot-table variant was 1/64 (1.6%) of the maximum.
inline constexpr double kPruneTolerance = 0.02;

/// How many noise standard errors a move must buy, with balance lookup_time, for the pruning and
/// the exchanges below to keep it (propose's `noise`): 2, the margin of noise.h's rule
/// (kNoiseMargin is this constant), so that a move kept is one whose own gain clears the noise.
inline constexpr double kPruneNoiseMargin = 2.0;

/// The predicted gain, in load units, below which propose undoes a move (or an exchange of ranks'
/// tables) on account of the measurements' noise: kPruneNoiseMargin x `noise` x the mean rank load
/// of `load_before` (noise in max/mean units, as noise.h's imbalance_noise: a rise of the maximum
/// by D raises max/mean by D / mean), rounded down; 0 when noise <= 0 (the ids measure: a count).
/// Example: loads {3000, 3000, 3000, 4800}, noise 0.1: 2 x 0.1 x 3450 = 690.
int64_t noise_allowance(const std::vector<int64_t>& load_before, double noise);

/// Proposes a plan that balances the observed load by moving whole table-wise shards between
/// ranks. Two searches run from the current plan and the one with the lower predicted maximum
/// rank load wins (on a tie, the fewer bytes moved; then LPT):
///  - LPT (Graham's longest-processing-time rule for makespan scheduling): every table-wise
///    table, heaviest observed load first (ties: lower table index), goes to the rank with the
///    least load placed so far (ties: the rank it is on, then the lower rank);
///  - descent: while the most-loaded rank (ties: the lower rank) holds a table that can go to a
///    rank whose load stays below that rank's, make the move with the lowest resulting maximum of
///    the two ranks (ties: fewer bytes, lower table, lower rank). Fewer moves than LPT when
///    one rank is the straggler.
/// The load of every other shard (row_wise, column_wise, table_row_wise, data_parallel) stays
/// where it is, as the base load of its rank. A move is made only if
///  - the net bytes of the plan with the move (tables away from their current rank, each
///    counted once) stay within `max_bytes_per_move` (0 = unlimited), and
///  - every device's estimate_memory of the plan with the move fits devices.memory_bytes (a
///    rank the move adds shards to is first checked with memory_lower_bound: over the memory on
///    that bound, it is refused without the full estimate);
/// otherwise it is listed in `refused` with the reason (once per table and target) and the
/// search tries its next candidate (LPT: the next rank in load order, up to the table's own rank,
/// where it stays: the plan before the move was checked, so staying always fits).
/// With spec.rebalance.row_wise_hot_tables a third candidate runs: every table_wise table whose
/// observed ids alone exceed the mean rank load (ids x world > all ids; heaviest first) is
/// changed to row_wise over every rank (moving it whole cannot bring its rank below the mean),
/// its ids predicted to spread over the shards in proportion to their rows
/// (row_wise_predicted_ids), within the same byte budget and memory checks (refused:
/// "table \"t0\" (...) from rank 0 to row_wise over 4 ranks: ..."); LPT and descent then run on
/// the other tables, and this candidate wins if its (maximum, bytes) is lower than the others'.
/// With spec.rebalance.column_wise_hot_tables another candidate does the same with column_wise
/// (column_wise_table_plan: block 0 stays on the table's rank, the others go to the other ranks,
/// least loaded first; its load predicted per block in proportion to its columns,
/// column_wise_predicted_load; refused: "... to column_wise over 4 ranks: ..."; a table of fewer
/// than 8 columns is not split). Of the candidates the lowest (maximum, bytes) wins; ties go to
/// whole-table moves, then row_wise - except that a row_wise candidate whose prediction assumed
/// an even spread (a split table without load.row_counts) loses a tie of the maximum to
/// column_wise, whatever the bytes: column_wise's prediction holds however the ids fall over the
/// rows, row_wise's even spread does not for a skewed table (tester48 F1: both predicted 1.02,
/// row_wise was chosen and gave 1.79, column_wise 1.02).
/// Moves that do not pay (issue 17: the gain against the cost of the move): LPT places every
/// table again, so beside the moves the balance needs it also moves tables that change no
/// rank's maximum, or lower it by a load far below what the ids measure predicts of a step
/// (the hot-table variant of hot_table_straggler moved two 62.9 MiB cold tables, one id a
/// sample each, to lower the straggler's 65,536 ids by 1,024). So once the candidate is chosen,
/// its whole-table moves are undone one at a time, largest bytes first (ties: lower table):
/// a table goes back to its rank in the current plan when the predicted maximum rank load with
/// it back stays at most the chosen candidate's maximum x (1 + kPruneTolerance) (the bound is
/// the chosen maximum, so the undone moves together cost at most that much; floor of the
/// product), and that rank's memory still fits it. Only the moves the balance needs remain;
/// the proposal's bytes, moves and load_after are those after this. Splits to row_wise /
/// column_wise and changes back are not undone (their own rules above decide them). With
/// every move undone the proposal has no moves and is not worth_it().
/// Source and reasoning: the move's cost is its bytes (an all-to-all of rows and optimizer
/// state, a pause of every rank), its gain the lower maximum in every later step; the policy
/// has no byte-to-ids exchange rate (the planner's time model is not used here), so it keeps
/// the moves without which the maximum would rise beyond the tolerance, and drops the rest
/// without asking the user for a byte budget (max_bytes_per_move still bounds what remains).
/// Changes back (with the same flags): before any candidate, every row_wise (column_wise) table
/// that has cooled - its observed load alone at most the mean rank load (load x world <= all
/// load) - lightest first, goes back to table_wise whole on the rank whose load without it is
/// lowest (ties: the lower rank), if that does not raise the maximum rank load and fits the
/// byte budget (change_bytes of its shards not on that rank) and memory; such a table is not
/// moved again in this proposal (TypeChange with from -1 and `to`). Every row_wise or
/// column_wise table of the plan counts, whoever split it.
/// Exchanges that do not pay: LPT and descent place tables by load alone, so they can end with
/// two ranks' tables swapped against the current plan (LPT placing the hot tables first, then the
/// cold ones on whichever rank came out lightest: hot_table_straggler's lookup_time runs moved two
/// or three 62.9 MiB cold tables in a circle, or a cold table to the hot tables' rank while a hot
/// table took its place, for the same balance as 3 hot-table moves of 7.6 MiB). Undoing one move
/// of such a swap raises the maximum, so the pruning keeps it; after the pruning, for each pair of
/// ranks (a, b), a < b, repeated until none is taken, the movable tables on a and those on b
/// exchange ranks when that lowers the net bytes, keeps the predicted maximum within the same
/// limit as the pruning, and fits memory; the pruning then runs again. An exact tie (identical
/// tables) is always exchanged back; so no move is made whose predicted gain is below the limit.
/// The limit: the chosen maximum + max(floor(maximum x kPruneTolerance), noise_allowance(load
/// before, `noise`)). `noise` (max/mean units) is 0 for the ids measure and the window's
/// imbalance_noise (noise.h) for lookup_time, so a move or exchange whose predicted gain is within
/// 2 sigma of the measured noise is undone before the whole proposal meets noise.h's rule.
/// Deterministic in its arguments. When the result is not worth_it(), callers keep the current
/// plan. Throws std::invalid_argument if `load` does not match `current`'s shape.
/// Example (tests/engine/rebalance/policy_test.cpp): 4 ranks, tables t0..t7 of ids
/// {400,300,50,50,50,50,50,50}, t0 and t1 on rank 0, two others on each of ranks 1..3: loads
/// {700,100,100,100} (imbalance 2.8). LPT reaches {400,300,150,150} with 5 moves, descent
/// {400,400,100,100} with one (t1 to rank 1); both have the maximum 400 (imbalance 1.6), and
/// descent moves fewer bytes, so the proposal is the one move.
/// `memory` says which memory the moves must fit: MoveMemory::live (the live policy) checks every
/// device's estimate after the move and the memory a rank holds during it (move_transient_bytes:
/// old and new shards and both all-to-all buffers, refused with cause "memory during the move");
/// MoveMemory::fresh_run (`embedscope rebalance --plan-out`: a plan that `run --plan` starts
/// fresh, never holding old and new shards together) checks the estimate alone.
Proposal propose(const WorkloadSpec& spec, const ShardingPlan& current, const ObservedLoad& load,
                 int64_t max_bytes_per_move, double noise = 0, MoveMemory memory = MoveMemory::live);

/// The load per rank of a window (`per_step_rank[s][r]`: rank r's load in the window's step s):
/// the sum over the steps, or with `median` (balance lookup_time: a measured load) each rank's
/// median step x the steps - the median of an odd count its middle value, of an even count the
/// mean of the middle two (noise.h median_of), rounded to the nearest unit; with 1-2 steps the sum
/// (as median_window_load). Example: steps {513, 69, 72} of one rank -> 72 x 3 = 216 (sum 654).
/// Throws std::invalid_argument when the rows differ in length.
std::vector<int64_t> window_rank_load(const std::vector<std::vector<int64_t>>& per_step_rank, bool median);

/// Whether the policy asks for a rebalance after measured step `step` (0-based), and why.
/// `ids_per_step_rank[s][r]` are the ids rank r looked up in step s, for steps 0..step (at least
/// step + 1 rows); `last_rebalance` is the step after which the last rebalance ran (-1: none).
///  - never within cooldown_steps after the last rebalance (step - last_rebalance <= cooldown);
///  - every: after steps every-1, 2*every-1, ...: "every N steps";
///  - when: if at least `window` steps ran since the last rebalance and the imbalance of the
///    ids summed over the steps step-window+1..step exceeds imbalance_above:
///    "imbalance 2.80 > 1.50 over steps 3..4". With balance lookup_time the load is measured, and
///    each rank's is its median step over the window (noise.h median_of: the mean of the middle
///    two for an even count; with 1-2 steps the mean) x the window's steps, the robust statistic
///    the proposal balances, so one slow step does not fire the policy (tester60b F6: steps 513,
///    69, 72 us of the straggler summed to 1.90 > 1.50 and fired a proposal that found 1.17):
///    "imbalance 1.15 > 1.10 over steps 3..5 (each rank's median step)".
/// nullopt when off or when nothing fires. Throws std::invalid_argument if fewer rows are given.
std::optional<std::string> should_rebalance(const RebalanceSpec& policy, int64_t step, int64_t last_rebalance,
                                            const std::vector<std::vector<int64_t>>& ids_per_step_rank);

}  // namespace embedscope::engine::rebalance
