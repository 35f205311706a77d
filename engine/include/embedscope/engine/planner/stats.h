#pragma once
// The planner's statistics of one plan, as TorchRec's planner prints them
// (torchrec/distributed/planner/stats.py, EmbeddingStats): per rank the shards by type, the
// estimated HBM (and DDR: the host memory of tables placed in host memory, TableSpec::placement), forward /
// backward compute and comms, the critical path, and imbalance as max/mean plus TorchRec's
// divergence measures of the per-rank distribution.
//
// Expected lookups (rows read per step) of a shard: batch_size x world x mean pooling factor,
// summed over the table's features, times the shard's share of the table's ids:
//   table_wise / column_wise: 1 (every id of the table; a column shard reads its columns);
//   data_parallel: 1 / world per replica (each rank looks up its own batch only);
//   row_wise / table_row_wise: the share of the ids in the shard's row range (a hashed table:
//     rows / hash_size, shard_id_share in input/id_share.h). Uniform ids: rows /
//     num_embeddings. Zipf with permute = false (the hottest row is row 0): the Zipf mass of the
//     range, sum_{k=lo+1..hi} k^-alpha / sum_{k=1..N} k^-alpha (zipf_mass in input/id_share.h).
//     Zipf with permute = true (plan42): the mass the feature's seeded permutation puts in the
//     range (input/realized_share.h realized_id_share: the 4,096 hottest ranks exactly), not
//     rows / num_embeddings, the mean over permutations: criteo_kaggle row_wise on 4 ranks
//     predicted max/mean 1.031 that way, 1.163 now; 20 measured steps: 1.161.
// The StepProgram's figures (program_sink.h expected_slot_ids) and so the compute and comms
// columns below use the same realized_id_share (share43), as do the simulator and the search's
// pre-ranking: one definition of a row shard's share wherever time and bytes are estimated.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/input/id_share.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// Expected rows looked up per step on each rank (size world), summed over the plan's shards.
std::vector<double> expected_lookups_per_rank(const WorkloadSpec& spec, const ShardingPlan& plan);

/// TorchRec's imbalance measures of a distribution p over k ranks (p normalized to sum 1; an
/// empty p gives -1 as TorchRec does), stats.py:
///   total_variation = max_i |p_i - 1/k|                    (_total_variation)
///   total_distance  = sum_i |p_i - 1/k|                    (_total_distance)
///   chi_divergence  = sum_i |p_i - 1/k|^alpha k^(alpha-1)  (_chi_divergence, alpha >= 1; TorchRec prints alpha = 1)
///   kl_divergence   = sum_{p_i > 0} p_i ln(k p_i)          (_kl_divergence)
/// and their upper bounds for k ranks: max_chi_divergence = (k-1)^alpha / k + (k-1) / k
/// (_calc_max_chi_divergence), max_kl_divergence = ln k (_calc_max_kl_divergence); and, reached
/// with every value on one rank (p = (1, 0, ..., 0)), max_total_variation = 1 - 1/k and
/// max_total_distance = 2 (1 - 1/k) (k = 4: 0.750 and 1.500; tester44 F17: the table's legend
/// said "0 to 1" for both). k >= 1.
double total_variation(const std::vector<double>& p);
double total_distance(const std::vector<double>& p);
double chi_divergence(const std::vector<double>& p, double alpha = 1.0);
double kl_divergence(const std::vector<double>& p);
double max_chi_divergence(int k, double alpha = 1.0);
double max_kl_divergence(int k);
double max_total_variation(int k);
double max_total_distance(int k);

/// Imbalance of per-rank values x (e.g. lookups, ns, bytes): max/mean (1 when balanced; 0 for
/// all-zero x) and TorchRec's measures of x normalized to sum 1.
struct Imbalance {
  double max_over_mean = 0, total_variation = 0, total_distance = 0, chi_divergence = 0, kl_divergence = 0;
};
Imbalance imbalance(const std::vector<double>& x);

/// Sharding types, for arrays indexed by ShardingType (data_parallel .. grid_shard).
inline constexpr size_t kShardingTypeCount = static_cast<size_t>(ShardingType::grid_shard) + 1;

/// One rank's row of the stats table.
struct RankStats {
  int rank = 0;
  /// shard count per sharding type, indexed by ShardingType (data_parallel .. grid_shard)
  std::array<int, kShardingTypeCount> shards{};
  double lookups = 0;           ///< expected rows looked up per step
  int64_t hbm_bytes = 0;        ///< estimate_memory's total for the rank
  int64_t ddr_bytes = 0;        ///< estimate_memory's host bytes (tables placed host / host_cached)
  /// when the rank's bytes fit (hbm_bytes <= devices.memory_bytes) but the replay of its
  /// allocator runs out at that capacity (allocator_runs_out, ShortfallScope::plan): the bytes it reserves with no limit (DeviceMemoryEstimate::
  /// peak_reserved), what the device would need; else 0. The search's overflow of a candidate
  /// counts it (tester48 F9: 36.7 MiB allocated, 50.0 MiB reserved on 40 MiB devices)
  int64_t reserved_bytes = 0;
  /// ns per step, from the rank's StepProgram ops timed by the cost model (a collective: its
  /// call's time, equal on every member, plan_stats):
  int64_t fwd_compute_ns = 0;   ///< bucketize, kjt_permute, lookup
  int64_t fwd_comms_ns = 0;     ///< input dist (KJT all-to-alls) and output dist
  int64_t bwd_compute_ns = 0;   ///< backward_fused_optimizer and the data-parallel updates
  int64_t bwd_comms_ns = 0;     ///< gradient dist (and data-parallel gradient collectives)
  /// The host link (tables in host memory, TableSpec::placement; TorchRec's Perf.prefetch_compute
  /// term, torchrec/distributed/planner/types.py): the rank's host_fetch and host_update ops
  /// (program/step_program.h, bytes from cost/cache_model.h) timed by host_copy_ns, as the
  /// simulated executor times them, plus the part of its prefetch op that the step's
  /// dense_forward_backward (compute_ns) does not hide: max(0, prefetch_ns - dense). host_update
  /// is counted whole (the simulator may run it under the output dist and the dense part: an
  /// upper bound, as the sum of phases is). 0 without tables in host memory. In total_ns.
  int64_t host_ns = 0;
  /// The rank's prefetch op (TableSpec::prefetch_pipeline) timed by host_copy_ns, ns: it runs on
  /// the copy lane under the dense part of the step before; only its excess is in host_ns.
  int64_t prefetch_ns = 0;
  int64_t total_ns() const { return fwd_compute_ns + fwd_comms_ns + bwd_compute_ns + bwd_comms_ns + host_ns; }
};

/// The statistics of one plan.
struct PlanStats {
  std::string hardware;              ///< the profile the times are from
  std::vector<RankStats> ranks;
  /// TorchRec's "Sum of Maxima" (stats.py, _log_max_perf_and_max_hbm): sum over the five
  /// phases (fwd compute, fwd comms, bwd compute, bwd comms, host) of the maximum over ranks, ns.
  int64_t critical_path_ns = 0;
  /// The longest rank's total (TorchRec's "Longest Critical Path (Maximum of Total Perf)"), ns.
  int64_t max_rank_total_ns = 0;
  Imbalance perf, hbm, lookups;      ///< of total_ns, hbm_bytes and lookups per rank
  bool fits = true;                  ///< every rank's HBM within devices.memory_bytes (and each node's under a cpu profile: check_node_memory_fits)
  std::string does_not_fit;          ///< check_memory_fits's message (names the rank and the term)
};

/// The memory check of ranks that share one host (tester44 F12): under a cpu profile
/// (hw.cpu.cores > 0, e.g. a calibrated `this_machine`) the ranks are threads of one process and
/// hw.gpu.memory_bytes is the host's RAM, which every rank of the world shares: the profile's
/// nodes (`local_world_size` ranks each) are emulated nodes of this same machine, so they are
/// counted together (tester46 F1: `--nodes 8 --gpus-per-node 1` passed where `--devices 8` was
/// refused). Throws SpecError when the device totals (DeviceMemoryEstimate::total) plus the host
/// bytes (DeviceMemoryEstimate::host: tables placed host / host_cached live in the same RAM) of
/// all ranks together exceed it:
///   "/devices/memory_bytes: the ranks of a node share its memory (cpu profile NAME: its ranks are
///    threads of one host, and 23.5 GiB is that host's memory), and the workload does not fit under
///    this sharding plan:\n  node 0 (ranks 0-7) needs 125.2 GiB together > 23.5 GiB; its fullest
///    rank 0: 15.7 GiB (weights ..., optimizer state ..., dense ..., buffers ...)"; over several
///    emulated nodes "(...; its 8 emulated nodes are that same host)" and "nodes 0-7 (ranks 0-7)
///    need 125.2 GiB together > 23.5 GiB; their fullest rank ..."; with host bytes "needs S
///    together (of which H for tables in host memory) > M" and the fullest rank (by total + host)
///    ends ", tables in host memory H)".
/// GPU profiles (cpu.cores 0: each rank its own device) pass. `est` one entry per rank, in rank
/// order; local_world_size <= 0 counts every rank on one node.
void check_node_memory_fits(const std::vector<DeviceMemoryEstimate>& est, int local_world_size, const HardwareProfile& hw);

/// The amount by which the ranks together exceed the host's memory under a cpu profile (the sum
/// of hbm_bytes + ddr_bytes of every rank, as check_node_memory_fits counts them, minus
/// hw.gpu.memory_bytes), bytes, and where in words: "on node 0 (ranks 0-3 need 12.0 GiB together >
/// 10.0 GiB, the host's memory)", over several emulated nodes "on nodes 0-1 (ranks 0-3 need ...".
/// bytes 0 and where empty for a GPU profile (cpu.cores 0) or when the ranks fit.
/// Where the two figures round to the same text they are given in bytes ("need 101888 B together
/// > 101887 B"), here and in check_node_memory_fits.
struct NodeExcess {
  int64_t bytes = 0;
  std::string where;
};
NodeExcess node_excess(const PlanStats& st, int local_world_size, const HardwareProfile& hw);

/// Computes the statistics of `plan` (validated with validate_plan) with `hw`: builds each
/// rank's program of the pipeline's steady iteration (steady_iteration) and times its ops as the
/// simulated executor does (gpus per node: plan.local_world_size): compute ops compute_ns x the
/// node's contention (cost/shared_cores.h contended_ns; x 1 for GPUs: the static factor, every
/// rank computing at once - an estimate without a timeline; the simulated executor shares a cpu
/// node's cores among the ops running at each moment, conc46, and gives less where ranks wait in
/// collectives), each collective call the
/// same for all its members, collective_call_ns of the members' collective_ns (processor sharing
/// on a cpu node; the largest member's time for GPUs; calib40) with no waiting for late members,
/// and never under the member's emulated network floor when spec.network emulates one (a cpu
/// run's `--network-bandwidth` / `--network-latency`: max(call, the member's floor of
/// cost/network_floor.h emulated_member_floors_ns), by the rule the Gloo emulation holds the real
/// call's members with, commit 0c3457e8: an all-reduce's members until the slowest port is done,
/// another call's member until its own port and each sender's fair-share delivery to it are),
/// its host-link ops with
/// host_copy_ns (RankStats::host_ns, prefetch_ns: the simulated executor's figures). The dense part (dense
/// forward/backward, its all-reduces and optimizer) and the input op are the same under every
/// plan and are left out, as TorchRec's planner leaves them out of its shards' perf.
/// Throws what validate_plan throws.
PlanStats plan_stats(const WorkloadSpec& spec, const ShardingPlan& plan, const HardwareProfile& hw);

/// The stats table for people: one row per rank, then the critical path and the imbalance
/// measures (TorchRec's layout, ns shown as ms, bytes as GiB/MiB).
std::string to_text(const PlanStats& s);
/// {"hardware", "critical_path_ns", "max_rank_total_ns", "fits", "does_not_fit"?, "ranks":
/// [{"rank", "shards": {"table_wise": n, ...}, "lookups", "hbm_bytes", "ddr_bytes",
/// "fwd_compute_ns", "fwd_comms_ns", "bwd_compute_ns", "bwd_comms_ns", "host_ns", "prefetch_ns", "total_ns"}],
/// "imbalance": {"perf"|"hbm"|"lookups": {"max_over_mean", "total_variation", "total_distance",
/// "chi_divergence", "kl_divergence"}}, "max_total_variation", "max_total_distance", "max_chi_divergence", "max_kl_divergence"}
nlohmann::json to_json(const PlanStats& s);

}  // namespace embedscope::engine
