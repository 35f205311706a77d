#pragma once
// The communication a rebalance proposal adds or removes, as the planner's own cost model gives
// it (planner/stats.h plan_stats, the model `plan --auto` ranks plans with, floored by the
// session's emulated network, cost/network_floor.h): a split table's reduce-scatter and
// all-gather, a table moved across the slow inter-node link. `embedscope rebalance` weighs it
// against the embedding work the moves save; the live policy refuses a proposal the model
// predicts makes the step slower (cause "slower").

#include <cstdint>
#include <string>

#include "embedscope/engine/rebalance/policy.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::rebalance {

/// The communication of one plan a step, by the planner's model.
struct PlanComm {
  /// TorchRec's sum of maxima over the communication phases (plan_stats): the largest rank's
  /// forward comms (input and output dist) + the largest rank's backward comms (gradient dist), ns.
  int64_t comm_ns = 0;
  int64_t fwd_comms_ns = 0, bwd_comms_ns = 0;  ///< the two maxima comm_ns sums, ns
  /// Bytes every rank sends to other ranks in the steady step, summed over the ranks (the
  /// step programs' collectives, CollectiveCall::bytes_sent; the dense all-reduce, the same under
  /// every plan, included).
  int64_t bytes_sent = 0;
  /// The ranks' embedding compute a step by the same model (fwd + bwd compute, ns), summed over the ranks.
  int64_t compute_ns = 0;
  /// Expected rows looked up a step over every rank (plan_stats' lookups), for compute_ns per id.
  double lookups = 0;
};

/// `plan` under `spec` (its network included), timed with planning_profile(spec). Throws what plan_stats and build_step_program throw for a plan that does not fit spec.
PlanComm plan_comm(const WorkloadSpec& spec, const ShardingPlan& plan);

/// A proposal's communication against the current plan's.
struct CommChange {
  PlanComm before, after;
  std::string profile;          ///< the hardware profile that timed it (planning_profile)
  bool network_emulated = false;  ///< spec.network limits a link (the floors are the session's link)
  int64_t added_ns() const { return after.comm_ns - before.comm_ns; }        ///< may be negative
  int64_t added_bytes() const { return after.bytes_sent - before.bytes_sent; }  ///< may be negative
};

/// The communication `current` and `proposed` need a step under `spec`. Example
/// (tests/engine/rebalance/comm_cost63_test.cpp): the hot-table workload (hot 5,000 x 16, 4 x 64
/// x 4 ids a step, t0..t5 one id a sample) on 4 ranks at 200 kB/s and 1 ms a collective: hot
/// table_wise on rank 0 -> row_wise over the 4 ranks adds the pooled output's reduce-scatter and
/// the gradient's all-gather, 3/4 of 256 x 16 x 4 B = 12,288 B each a rank: about 2 x (1 +
/// 61.44) ms = +124.88 ms before the larger lengths all-to-all (model: 297.08 -> 421.72 ms, +77.3 KiB). Throws as plan_comm.
CommChange comm_change(const WorkloadSpec& spec, const ShardingPlan& current, const ShardingPlan& proposed);

/// Whether the model's communication times apply to the session's links: its network is
/// emulated (spec.network, a cpu run's --network-bandwidth / --network-latency: the model's
/// floors are that link) or it names its hardware profile (devices.hardware). A cpu run on an
/// unlimited link times nothing the model knows (its default profile is h100_sxm's NVLink), so
/// there only the bytes are said and the live policy does not apply apply_comm_rule.
inline bool comm_time_applies(const WorkloadSpec& spec) {
  return spec.network.limited() || !spec.devices.hardware.empty();
}

/// The predicted change of the step (ns, negative = faster): the communication added minus the
/// embedding work the slowest rank saves a step (`saved_ns_per_step`, >= 0 for a balancing move).
inline double predicted_step_change_ns(const CommChange& c, double saved_ns_per_step) {
  return static_cast<double>(c.added_ns()) - saved_ns_per_step;
}

/// The live policy's rule: a proposal (worth_it) whose communication, by comm_change, outweighs
/// the work its balance saves is not made. The work saved a step is predicted by the same model:
/// the fall of the largest rank's load a step (load_before / load_after over `window_steps`) x
/// the model's compute ns per looked-up row (the current plan's compute_ns / lookups); balance lookup_time: the fall itself, already in ns. When the step is not
/// predicted faster, the proposal's moves and changes are dropped (it is then not worth_it) and a
/// RefusedMove of cause "slower" says why: "table \"hot\" (234.4 KiB) from rank 0 to row_wise over 4 ranks and 1 other move(s):
/// the moves (max/mean 1.60 -> 1.18) add 124.64 ms of communication a step (+77.3 KiB sent, planner cost model, profile
/// h100_sxm, the session's emulated network) against 0.01 ms of embedding work saved: predicted 124.63 ms a step slower; not made".
/// Returns whether it dropped them; false (nothing done) where !comm_time_applies(spec). Throws as
/// comm_change.
bool apply_comm_rule(Proposal& p, const WorkloadSpec& spec, const ShardingPlan& current, int64_t window_steps,
                     bool by_time);

}  // namespace embedscope::engine::rebalance
