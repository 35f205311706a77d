#pragma once
// A collective of cpu ranks on one node's shared cores (calib39): processor sharing of the
// members' own work.
//
// Cpu ranks are threads of one process on a node's cores (hardware_profile.h CpuContention);
// Gloo moves a collective's bytes over loopback TCP, i.e. by copies that run on those same
// cores (the sender's thread writes, the device thread reads: Gloo gloo/transport/tcp/pair.cc,
// github.com/facebookincubator/gloo). Each member i has its own work w_i (collective_ns with the
// node to itself: latency + its own bytes / bandwidth). Under fair sharing of the cores
// (egalitarian processor sharing, L. Kleinrock, "Time-shared systems: a theoretical
// treatment", J. ACM 14(2), 1967; Linux's CFS gives runnable threads equal shares), every
// member still copying progresses at 1 / f(m) of a core, f = contention_factor (cost_model.h)
// with m ranks runnable on the node. Members that finished wait (block) for the last, so with
// the w sorted ascending, w_(0) = 0, R ranks on the node:
//   T = sum_{k=1..n} (w_(k) - w_(k-1)) x f(R - (k - 1))
// the call's time (its last member's end after the last arrival). A balanced call (all w_i
// equal) gives f(R) x w, the contention model before calib39; an imbalanced one less, as its
// small members stop competing once done (table_wise all-to-alls: the largest member's bytes
// 1.7-6x the mean at 2-8 ranks, calib39).

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "embedscope/engine/cost/hardware_profile.h"

namespace embedscope::engine {

/// The ranks whose threads share one set of cores with a rank: THE rule of which ranks compete
/// for cores in every time estimate (the simulated executor, the planner's statistics and the LM
/// simulation; calibrate's check and `scaling` simulate with the executor).
///  - cpu ranks (hw.cpu.cores > 0): a cpu profile describes one machine (calibrate's this_machine),
///    whose nodes (sharding.local_world_size) are emulated nodes of that machine: every rank of
///    the run shares its cores, as the measured ranks did (threads of one process, or one process
///    per rank from `launch`, on one host), whatever the node shape. {0, world}.
///  - GPUs (hw.cpu.cores 0): a node's ranks, {rank / ranks_per_node, min(ranks_per_node, world -
///    node x ranks_per_node)} (contention_factor is 1 for them: the group only names the node).
/// Throws std::invalid_argument when world < 1, ranks_per_node < 1 or rank is not in [0, world).
/// Example: 8 ranks as 2 nodes x 4: a cpu profile of 2 cores gives rank 5 {0, 8} (8 ranks on the
/// machine's 2 cores, as 1 node x 8); h100_sxm gives {1, 4}.
struct CoreGroup {
  int id = 0;     ///< which set of cores (0 for a cpu profile's machine, else the node)
  int ranks = 1;  ///< the ranks that share those cores (the `ranks_on_node` of the rules below)
};
CoreGroup core_group(const HardwareProfile& hw, int rank, int world, int ranks_per_node);

/// Processor-sharing completion time of the last of `work` (each member's own work, any unit,
/// any order, each >= 0; negative counted as 0) on a node of `ranks_on_node` ranks:
///   sum_{k=1..n} (w_(k) - w_(k-1)) x factor(ranks_on_node - (k - 1)), w sorted ascending,
/// with factor(m) the slowdown with m ranks runnable (m >= ranks_on_node - n + 1 >= 1 is asked).
/// Throws std::invalid_argument when work.size() > ranks_on_node. 0 for empty `work`.
/// Example: work {1, 1, 4}, 3 ranks, factor(m) = m / 2 (2 cores): 1 x 1.5 + 0 x 1 + 3 x 0.5 = 3.0.
double processor_sharing_time(std::vector<double> work, int ranks_on_node, const std::function<double(int)>& factor);

/// A collective's duration in ns on cpu ranks of one node (hw.cpu.cores > 0): `member_ns` the
/// members' own times with the node to itself (collective_ns of each member), ranks_on_node the
/// node's ranks; processor_sharing_time with factor(m) = contention_factor(hw, m), rounded.
/// With hw.cpu.cores == 0 (GPUs) contention_factor is 1 and this is the largest member's time.
/// Example: 2 cores, 1 thread per rank, no other load, 4 ranks, members {1000, 1000, 1000, 5000}
/// ns: 1000 x 2 + 0 + 0 + 4000 x 1 = 6,000 ns (the max-member model: 5000 x 2 = 10,000 ns).
int64_t shared_cores_collective_ns(const std::vector<int64_t>& member_ns, int ranks_on_node, const HardwareProfile& hw);

/// `ns` (a compute op's or a member's time with the node to itself) on a cpu node of
/// `ranks_on_node` ranks: round(ns x contention_factor(hw, ranks_on_node)); `ns` itself when the
/// factor is 1 (GPUs: hw.cpu.cores 0). The static form of the cores' sharing: every rank of the
/// node computing all the time. The planner's statistics (planner/stats.h) and the LM simulation
/// (program/lm_program.h) scale compute this way (estimates without a timeline); the simulated
/// executor shares the cores among the compute ops that really run at once (ComputeSharing
/// below, conc46) and keeps this only for a DDP bucket's launch point inside its dense op and the
/// hand-off's wake-up. Example: 2 cores, 1 thread per rank, 4 ranks (factor 2): 1,000 -> 2,000 ns.
int64_t contended_ns(int64_t ns, const HardwareProfile& hw, int ranks_on_node);

/// Processor sharing of a cpu node's cores among the compute ops running on it (conc46, issue 15):
/// cpu ranks are threads of one process on the node's cores (hardware_profile.h CpuContention);
/// while k compute ops run, each progresses at 1 / contention_factor(hw, k) of its own speed
/// (cost_model.h: k x threads_per_rank x (1 + other_groups) + background_threads runnable threads
/// on `cores`, at least 1, and the oversubscription penalty), k counting only the ops running at
/// that moment (ranks blocked in a collective or idle do not compete). An op's work is its
/// time with the node to itself (cost_model.h compute_ns), ns; it ends once that work is done.
/// The ops are an event-driven timeline: start() registers an op (its start may lie in the
/// future), next_completion() gives the earliest end if nothing else starts, complete_next()
/// advances the node to it. The caller must only complete an op once no op it has not yet
/// registered can start before that op's end (exec/simulated/: the earliest end over all nodes,
/// after every rank has advanced as far as it can). With one op at a time it is compute_ns x
/// factor(1) (= compute_ns when the node has cores for it); with every rank always computing,
/// contended_ns. Example: 2 cores, 1 thread per rank, no other load, 3 ops of 1, 1 and 4 ms
/// starting at 0: factor(3) = 1.5 until the two 1 ms ops end at 1.5 ms (the 4 ms op has done
/// 1 ms), then factor(1) = 1: the third ends at 4.5 ms.
class ComputeSharing {
 public:
  /// A node of `hw`'s cores (hw.cpu.cores > 0 expected; with 0 every factor is 1: no sharing).
  explicit ComputeSharing(const HardwareProfile& hw);
  /// Registers op `key` (any caller's id, unique among the running ops) starting at `start_ns`
  /// with `work_ns` (>= 0; negative counted as 0) to do. A start before the node's clock (the last
  /// completion) is taken as the clock.
  void start(int64_t key, int64_t start_ns, double work_ns);
  /// Whether no op is registered.
  bool empty() const { return jobs_.empty(); }
  /// The earliest end (ns, not rounded) and its op's key, if no other op starts; nullopt when empty.
  std::optional<std::pair<double, int64_t>> next_completion() const;
  /// Advances the node to the earliest end and removes that op: (round(end) ns, key). Throws
  /// std::logic_error when empty.
  std::pair<int64_t, int64_t> complete_next();
  /// The ops running at `t_ns` (>= the last completion) if no other op starts: started by then
  /// and not done (a scheduling lag's competitors at a collective's arrival, exec/simulated/).
  /// Example: the three ops of 1, 1, 4 ms above: 3 at 1 ms, 1 at 2 ms, 0 at 5 ms.
  int running_at(int64_t t_ns) const;

 private:
  struct Job {
    int64_t key;
    double start, remaining;
  };
  // The one stepping loop of the node (next_completion, complete_next, running_at): runs the
  // timeline from the clock, from event to event (an op's start, the first end among the running
  // ops, each at 1 / contention_factor(running)), with `rem` (the ops' work left, refilled and
  // updated), to the first end when `to_first_end` (t: that end, ended: its index in jobs_), else
  // to `until` (ended: jobs_.size(); active: the ops started and not done then).
  struct Reached {
    double t = 0;
    size_t ended = 0;
    int active = 0;
  };
  Reached advance(std::vector<double>& rem, double until, bool to_first_end) const;
  mutable std::vector<double> factor_;  // factor_[k]: contention_factor(hw, k), grown as needed
  HardwareProfile hw_;
  std::vector<Job> jobs_;
  double clock_ = 0;
};

/// How a measured op ran beside others (calibrate, conc46). The compute spans of a node, each [start, end) in ns: per span the time (ns) it spent with k
/// spans open at once, itself included: result[span][k], k >= 1 (index 0 unused, size the most
/// open at once + 1). A span of length <= 0 gets only zeros. Example: spans a [0, 4), b [1, 3):
/// a is alone in [0, 1) and [3, 4), with b in [1, 3): a {0, 2, 2}, b {0, 0, 2}.
std::vector<std::vector<double>> compute_concurrency(const std::vector<std::pair<int64_t, int64_t>>& spans);

/// An op's contention factor from its measured concurrency (shares summing to 1: calibrate's Sample::busy):
/// 1 / sum_k busy[k] / f[k], f[k] a session's contention_factor with k ops running (f.size()
/// > the largest k with a share; a larger k takes the last f): the op's time over the work it did
/// under processor sharing (cost/shared_cores.h ComputeSharing), >= 1 when every f >= 1; 0 when
/// busy is empty.
double op_dilation(const std::vector<double>& busy, const std::vector<double>& f);

/// The share of a cpu node's cores that are all busy: clamp(x - 1, 0, 1) with x = sync_lag_factor(hw,
/// ranks_on_node) (cost_model.h: runnable threads per core); 0 when hw.cpu.cores is 0 (GPUs).
/// What a collective call's wait for a core (hardware_profile.h CpuContention::call_wait_ns) is
/// multiplied by. Example: 2 cores, 1 thread per rank, no other load: 2 ranks 0, 3 ranks 0.5,
/// 4 and 8 ranks 1.
double oversubscribed_share(const HardwareProfile& hw, int ranks_on_node);

/// One member of a collective call, as collective_call_ns times it.
struct CallMember {
  int64_t own_ns = 0;     ///< collective_ns of the member's CollectiveCall (cost_model.h), node to itself, ns
  int node = 0;           ///< the member's core group (core_group(...).id: the machine for cpu ranks, else its node)
  int ranks_on_node = 1;  ///< the ranks sharing those cores (core_group(...).ranks)
};

/// The duration in ns of one collective call (the last member's end after the last arrival),
/// the same for every member: THE rule of every time estimate of a call (calib40, issue 15) - the
/// simulated executor (exec/simulated/, before its emulated-network floor), the planner's
/// statistics (planner/stats.h plan_stats) and the LM simulation (program/lm_program.h
/// simulate_lm_step) all call it.
///  - cpu ranks (hw.cpu.cores > 0) with every member in one core group (always when the members
///    come from core_group: a cpu profile's ranks share one machine): processor sharing of those
///    cores, shared_cores_collective_ns(own_ns..., ranks_on_node);
///  - else (GPUs; calls across nodes): the largest of the members' own_ns x
///    contention_factor(hw, its ranks_on_node), each rounded to ns (for GPUs the factor is 1: the
///    largest member's nccl-tests time, cost_model.h);
/// plus, on cpu ranks (hw.cpu.cores > 0) for two or more members, the call's wait for a core:
/// round(hw.cpu.call_wait_ns x oversubscribed_share(hw, the members' largest ranks_on_node)) (coll45).
/// 0 for no members. Throws std::invalid_argument (processor_sharing_time) when more members than
/// ranks_on_node share a node. Example: 2 cores, members {1000, 5000, 1000, 1000} ns all on node 0
/// of 4 ranks: 6,000 ns; the same members on two nodes of 2 ranks each: 5000 x f(2) = 5,000 ns;
/// with call_wait_ns 300: 6,300 ns on the node of 4 ranks (share 1), 5,000 ns on the two nodes of 2
/// (share 0).
int64_t collective_call_ns(const std::vector<CallMember>& members, const HardwareProfile& hw);

}  // namespace embedscope::engine
