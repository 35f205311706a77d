#pragma once
// The noise rule of `rebalance.balance: lookup_time` (issue 17): measured lookup ns vary from step
// to step (a preempted thread, a cache miss, another process on the cores), so a move whose
// predicted gain is within that variation is a move made on noise. The live policy
// (exec/threaded/rank_rebalance.cpp) balances a robust load (the median step of each shard over
// the window) and moves only when the predicted gain clears the measured noise by a margin and a
// minimum gain:
//
//   window of m steps s, W ranks, x[s][r] = lookup ns rank r measured in step s (its shards'
//   sum), T[s] = sum_r x[s][r] (steps with T[s] = 0 are left out);
//   share of the mean:   q[s][r] = W * x[s][r] / T[s]              (1.0 = rank r did the mean)
//   rank noise:          sigma_r = 1.4826 * MAD_s(q[s][r]) / sqrt(m)
//                        (MAD = the median of |q - median(q)|; 1.4826 MAD estimates a standard
//                        deviation and, unlike it, ignores one step in three that was preempted;
//                        / sqrt(m): the standard error of the window's mean share)
//   noise:               sigma = max_r sigma_r                   (0 when m < 2: not measurable)
//   gain:                G = imbalance_before - imbalance_after  (predicted, max/mean units)
//   move only if         G > kNoiseMargin * sigma  and  G >= kMinTimeGain * imbalance_before
//
// imbalance = max / mean of the ranks' loads, and the total is conserved by a move, so
// G / imbalance_before is the predicted fall of the slowest rank's lookup time (0.05 = 5%).
// The ids measure (balance "ids") is a count, not a measurement, and keeps its rules (policy.h).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "embedscope/engine/rebalance/policy.h"

namespace embedscope::engine::rebalance {

/// How many noise standard errors the predicted gain must exceed (the rule above): 2, i.e. a gain
/// that a window of pure noise reaches about once in 40 (one-sided normal tail beyond 2 sigma).
inline constexpr double kNoiseMargin = kPruneNoiseMargin;

/// The smallest predicted fall of the slowest rank's lookup time a move must buy, as a share of
/// it (0.05 = 5%), even in a quiet window: the gain must pay for the move's pause, and the
/// measure leaves out the dense work and the all-to-alls every rank does alike. 2.5x
/// kPruneTolerance (policy.h); a tester saw moves made for a 0.6% predicted gain without it.
inline constexpr double kMinTimeGain = 0.05;

/// 1.4826: the MAD of normally distributed values times this estimates their standard deviation.
inline constexpr double kMadToSigma = 1.4826;

/// The median of `v` (the mean of the middle two for an even count); 0 for an empty vector.
/// {3, 1, 2} -> 2; {4, 1, 3, 2} -> 2.5.
double median_of(std::vector<double> v);

/// The noise sigma of the rule above from `per_step_rank[s][r]` (the window's steps, each row one
/// load per rank, in any unit: ns or ids). 0 with fewer than 2 steps of non-zero load.
/// Example: 2 ranks, steps {10, 10}, {13, 7}, {7, 13}: shares {1, 1}, {1.3, 0.7}, {0.7, 1.3};
/// rank 0: median 1.0, deviations {0, 0.3, 0.3}, MAD 0.3, sigma_0 = 1.4826 x 0.3 / sqrt(3) =
/// 0.2568 (rank 1 the same): 0.2568.
/// Throws std::invalid_argument when the rows differ in length.
double imbalance_noise(const std::vector<std::vector<int64_t>>& per_step_rank);

/// The verdict of the rule on a predicted gain.
struct GainCheck {
  double gain = 0;           ///< imbalance_before - imbalance_after (max/mean units)
  double relative_gain = 0;  ///< gain / imbalance_before (the slowest rank's predicted fall)
  double noise = 0;          ///< sigma (imbalance_noise)
  bool enough = false;       ///< gain > kNoiseMargin x noise and relative_gain >= kMinTimeGain
  /// When not enough, why, in words: "the predicted gain, max/mean 1.52 -> 1.51 (0.7%), is
  /// within the noise of the measured lookup ns: it needs > 2 x 0.034 (1.4826 MAD / sqrt(2) of
  /// the ranks' shares over 2 steps) and >= 5% of 1.52"; "" when enough.
  std::string why;
};

/// Applies the rule to a predicted imbalance_before -> imbalance_after with noise `noise`
/// measured over `steps` steps. Example: 1.2 -> 1.0 with noise 0.2568 (3 steps): gain 0.2 <=
/// 0.5136, not enough; 1.5 -> 1.0 with noise 0.0428: enough.
GainCheck check_gain(double imbalance_before, double imbalance_after, double noise, int64_t steps);

/// The load of a window for balance lookup_time: per (table, shard), steps x the median over the
/// window's steps of the shard's ns (summed over the ranks: one rank holds a shard) - the sum of
/// a window whose every step read like its middle one, so one preempted step out of three does
/// not decide where tables go. With 1 or 2 steps: the sum. `gathered` as window_load's (rank-major
/// blocks of `steps` rows of flat_shard_count(plan) values).
/// Throws std::invalid_argument when gathered.size() != world x steps x (shards of plan).
ObservedLoad median_window_load(const ShardingPlan& plan, const std::vector<int64_t>& gathered, int world,
                                int64_t steps);

/// Turns proposal `p` of plan `current` into "nothing moved" when `check` is not enough: every
/// move and change it wanted becomes a RefusedMove (cause "noise") whose reason is the move's
/// ("table \"h0\" (15.6 KiB) from rank 3 to rank 0: " + check.why; a change: "... to row_wise: "),
/// listed before the proposal's other refusals; plan = current, load_after = load_before,
/// imbalance_after = imbalance_before, bytes_moved 0. Unchanged when check.enough.
void hold_within_noise(Proposal& p, const WorkloadSpec& spec, const ShardingPlan& current, const GainCheck& check);

/// The rule on a proposal, as the live policy (exec/threaded/rank_rebalance.cpp) and `embedscope
/// rebalance --balance lookup_time` (app/cli/commands/rebalance.cpp) both apply it: when `p` is
/// worth_it(), check_gain(p.imbalance_before, p.imbalance_after, imbalance_noise(per_step_rank),
/// steps = per_step_rank.size()) and hold_within_noise with that verdict; returns the verdict.
/// nullopt, `p` unchanged, when `p` was not worth_it() (nothing to hold). `per_step_rank[s][r]`:
/// rank r's balanced load (lookup ns) in the window's step s; `p` must be propose()'s on the
/// median_window_load of the same window. Throws std::invalid_argument as imbalance_noise.
std::optional<GainCheck> apply_noise_rule(Proposal& p, const WorkloadSpec& spec, const ShardingPlan& current,
                                          const std::vector<std::vector<int64_t>>& per_step_rank);

}  // namespace embedscope::engine::rebalance
