#pragma once
// The effect of each live rebalance of a session (tables `rebalances`, `steps`): the step time
// before and after it, for `embedscope stats` and the scenario notes.

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/sessions/model/events.h"

namespace embedscope::sessions {

class SessionReader;

/// One rebalance with the median step time of the steps before and after it. A step's time is
/// the slowest rank's (end_ns - start_ns over the ranks' `steps` rows, as RunResult's), so the
/// move itself, which runs between steps, is in neither; it is duration_ns. The steps are every
/// measured step the plan before the move ran (from the step after the previous rebalance, or
/// step 0) and every one the plan after it ran (to the step of the next rebalance, or the run's
/// last measured step) - not the policy's window, whose few steps after a move can be the run's
/// slowest (tester60b F1: 2 steps after read 93.99 ms and "got slower" where the 8 that followed
/// had a median of 36.59 ms). The median is the nearest-rank p50 of `stats`' step time
/// (docs/output.md): the lower of the two middle values of an even count.
struct RebalanceEffect {
  RebalanceRecord rebalance;
  int64_t step_p50_before_ns = -1;  ///< median over steps before_first..before_last; -1 none
  int64_t step_p50_after_ns = -1;   ///< median over steps after_first..after_last; -1 none
  int64_t before_first = 0, before_last = -1;  ///< the measured steps before it (none: last < first)
  int64_t after_first = 0, after_last = -1;    ///< the measured steps after it (none: last < first)
  /// duration_ns / (before - after): the steps until the move paid for itself; -1 when the
  /// steps did not get faster, either median is missing, or nothing moved (moves 0: no gain,
  /// or every move refused; or a move that failed) - then the steps before and after ran the
  /// same plan and their difference is step-time noise, not a gain to amortise.
  double amortised_after_steps = -1;
};

/// One move a rebalance wanted and could not make: the table it would have moved and why.
struct RefusedMoveText {
  std::string table;   ///< the table's name; "" when the text does not name one
  std::string reason;  ///< the whole refusal as the policy wrote it ("table \"t3\" (1.2 MiB) from rank 0 to rank 2: ...")
};

/// The refusals in RebalanceRecord::refused, one per move: the policy writes each as `table
/// "NAME" (BYTES) from rank F TO...: WHY` and joins them with "; " (every schema since 6; the
/// column is unchanged), so the text is cut before each "; table \"" and each piece's table is
/// the quoted name after its leading `table `. A text in another form (hand-written) is one
/// refusal with table "". "" -> {}.
/// Example: `table "h0" (15.6 KiB) from rank 3 to rank 0: exceeds ...; table "h1" (...) ...`
///   -> {{"h0", "table \"h0\" (15.6 KiB) from rank 3 to rank 0: exceeds ..."}, {"h1", ...}}.
std::vector<RefusedMoveText> refused_moves(const std::string& refused);

/// Median of the values (the lower of the two middle ones for an even count, as `stats` p50);
/// -1 when empty. {5, 1, 3} -> 3, {4, 1, 3, 2} -> 2.
int64_t median_ns(std::vector<int64_t> v);

/// The effects of the given rebalances over `steps` (any order; warm-up steps, step < 0, ignored).
/// Example: steps 0..3 of 10, 10, 4, 6 ns (one rank), a rebalance after step 1, duration 12,
/// moves 1: before steps 0..1 (10), after steps 2..3 (4), amortised after 12 / 6 = 2 steps
/// (moves 0: the same medians, amortised -1).
std::vector<RebalanceEffect> rebalance_effects(const std::vector<RebalanceRecord>& rebalances,
                                               const std::vector<StepMetric>& steps);
/// The same from a session's tables (empty for files without `rebalances`).
std::vector<RebalanceEffect> rebalance_effects(const SessionReader& session);

/// What the amortised column cannot say for a rebalance that made the step slower (tester42
/// F8: `stats` printed "amortised -"): "the measured step got slower after the rebalance
/// (156.81 -> 221.62 ms)" when tables moved (moves > 0, outcome complete) and the median step
/// after is above the one before (both measured); "" otherwise. Times as format_duration writes
/// them (sessions/model/units.h). Example (tested): before 10 ms, after 12.5 ms ->
/// "the measured step got slower after the rebalance (10.00 ms -> 12.50 ms)".
std::string rebalance_slowdown_text(const RebalanceEffect& e);

}  // namespace embedscope::sessions
