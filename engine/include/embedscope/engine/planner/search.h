#pragma once
// The planner's search (issue 15, "Search"): proposers suggest a sharding type per table,
// a partitioner places the shards on ranks, and every candidate plan is scored by its estimated
// critical path; the best plan that fits the devices' memory wins. Then `embedscope plan --auto`
// prints TorchRec's planner statistics for it (stats.h of this folder: plan_stats).
//
// Proposers (TorchRec's torchrec/distributed/planner/proposers.py names in brackets):
//   greedy     today's plan_sharding (largest tables first onto the rank with the fewest bytes).
//   uniform:T  every open table of type T, for each type T the tables allow [UniformProposer].
//   balanced   table_wise, except a table whose estimated time alone exceeds the mean time per rank goes row_wise.
//   split:B/T  when open tables are too large for one device whole (shard bytes over the partitioner's bound, below): B = table_wise, and the best uniform type so far,
//              with those tables alone of type T, each of column_wise, row_wise, table_row_wise, grid_shard they allow (a 330M x 64 table on 64 H100s: 2.030 ms; uniform:column_wise 2.867).
//   grid       a grid over the types each table allows [GridSearchProposer]: the full product when it has at most kMaxGridProposals members, else one pass of coordinate
//              descent from the best proposal so far over the kDescentTables open tables of the most lookup bytes (largest first, each tries each allowed type, a change is
//              kept when the shard-level critical path improves, or stays the same and the shards' times summed over the ranks fall: from a start of symmetric ranks,
//              every table split, no one table's move lowers the maxima).
// Open tables are those without an override in spec.sharding.tables: an override fixes the
// type (and the ranks / node when it gives them). Allowed types of an open table: table_wise,
// row_wise, column_wise (embedding_dim >= 8), table_row_wise (only when local_world_size <
// world), grid_shard (embedding_dim >= 8, only when local_world_size < world), data_parallel;
// table_column_wise (embedding_dim >= 8) only when PlanSearchOptions::sharding_types asks for it
// (it is column_wise kept inside one node, which the time estimate never prefers). A row shard
// without rows is never planned (plan42): a table with fewer rows than the world does not allow
// row_wise, one with fewer rows than local_world_size not table_row_wise or grid_shard (they
// fall back to the table's first allowed type, table_wise; `balanced` keeps such a table
// table_wise); when PlanSearchOptions::sharding_types then leaves it none of the types, it keeps
// table_wise (a row_wise-only search of criteo_kaggle on 4 ranks keeps the 3-row table whole).
//
// Partitioner (every proposer but greedy): fixed shards first (overrides, row_wise,
// data_parallel, table_row_wise's node rows), then the open shards largest estimated time
// first (LPT, longest processing time; ties: larger bytes first) onto the rank with the least
// estimated time so far (ties: the fewest bytes, then the lowest rank) among the ranks whose
// shard bytes (stored rows at their data_type's row_bytes plus optimizer state; a hashed table
// has hash_size rows) would stay within devices.memory_bytes less the non-shard bytes every plan
// has: the dense part and the fewest buffers of a rank in the table_wise reference plan (not
// the as-written plan's, so the search does not depend on sharding.default: tester44 F1); a column_wise table's shards go to distinct ranks; table_row_wise tables go to the
// node with the least time; a table_column_wise table's shards to distinct ranks of the node
// with the least time; a grid_shard table's column blocks (min(nodes, dim / 4)) each to its own
// node, least time first, rows split over the node's ranks (row_wise_split). Every candidate is then checked with estimate_memory +
// check_memory_fits, and a candidate that does not fit is dropped. The coordinate descent starts
// from the best proposal other than greedy (the as-written plan), which competes on its own.
//
// Time estimate of a shard (ns per step, the partitioner's and the proposers' unit): the
// shard's expected lookups per step L (lookups.h: batch x world x mean pooling factor of the
// table's features, times the shard's share of the ids) timed with the hardware profile:
// forward = L x row_bytes(data_type, cols) / (HBM bw x TBE forward efficiency), with
// the table's stored row size (quant/row_codec.h: fp32 4 cols, fp16 / bf16 2 cols, int8 cols +
// 8); backward = 2 L x (row_bytes + optimizer state bytes of one row in the table's
// optimizer_state_type, 4 or 2 a value) / (HBM bw x TBE backward eff.) (rows and state read
// and written back);
// comms = the bytes the shard's output dist sends (pooled rows, fp32) / the intra-node bus
// bandwidth, twice (output dist forward, gradient dist backward). No kernel launch, latency or
// contention: they do not depend on which rank a shard goes to.
//
// Pre-ranking estimate (the score that ranks every candidate; the best kStatsCandidates are then
// scored with plan_stats, their StepPrograms timed by the cost model): the shards' figures summed
// per rank, then per rank and phase, as plan_stats has them (plan41):
//  - compute: (sum of the shards' compute + kernel_launch x the rank's ops: 3 forward;
//    1 fused backward + 2 per data_parallel replica) x contention_factor(hw, ranks on the
//    rank's node) (cost_model.h; 1 for GPUs).
//  - comms: the step's collective calls, one a module as the StepProgram has them (prerank.h
//    Call: input dist splits / lengths / ids, the output dist's pooled all-to-all, row-wise
//    reduce-scatter, table-row-wise reduce-scatter in each node and all-to-all across nodes,
//    each mirrored in the gradient dist; 2 world all-reduces per data_parallel table, DDP's of
//    its dense rows x dim fp32 gradient and one of its rows' touched flags, each timed as
//    plan_stats times an all-reduce (sharding/data_parallel.cpp); every
//    all-to-all and reduce-scatter preceded by its split check, an all-gather of 2n counts),
//    each present only when a shard needs it. Member r of a call whose shards give X_r bytes (over all
//    destinations; T their sum over the n members) moves max(X_r (n-1)/n, (T - X_r)/n) bytes,
//    split over its peers on its node and on other nodes by their count, timed by
//    member_collective_ns (cost_model.h: latency per call + bytes / busbw); the call by
//    collective_call_ns (cost/shared_cores.h: processor sharing on a cpu node, else the largest
//    member), floored by the emulated network when spec.network has one (cost/network_floor.h);
//    every member gets the call's time; qcomms fp16 / bf16 halve the output and gradient dist.
//  - host: the shards' host-link copies (below), summed.
// The critical path is the sum over the five phases of the max over ranks, as plan_stats'.
// Since plan42 also as plan_stats has them: compute from the bytes the StepProgram's ops carry
// (program_sink.h lookup_bytes / update_bytes per (shard, feature) slot, every rank's B bags of
// it; program/input_op_bytes.h kjt_permute of the rank's slots and bucketize of its batch, the
// same on every rank), 3 launches forward (bucketize, kjt_permute, lookup); a factorized
// row_wise table's B all-reduce and hot-row replication's one all-reduce, world calls every rank
// joins, timed as plan_stats times an all-reduce (collective_ns of each member); on a profile
// with per-line host work (a cpu profile's lookup_line_ns / update_line_ns, hardware_profile.h),
// a shard's expected distinct rows (cost/cache_model.h shard_distinct_rows) x the lines of a row
// (program_sink.h lookup_row_lines forward, update_row_lines backward) x the coefficient, as the
// program's lookup and fused update carry them (look46). The "input" op
// is no phase of plan_stats' and is left out of both. A data_parallel replica's backward is
// its two ops' bytes (program/data_parallel_bytes.h: the dense gradient and flags zeroed,
// written and scanned, 4 rows (dim + 1) each, and the fused update of the rows every rank's ids
// touch, the uniform expectation). Not modelled: the hot rows' replica lookups and updates (the
// slots' ids do exclude the hot rows' share), rounding of each op to ns.
// host = a shard of a table in host memory (placement host / host_cached): the expected bytes of
// its host_fetch (the lookup's misses) and host_update (optimizer state rows, dirty rows
// evicted) from the cache model (cost/cache_model.h estimate_cache + host_traffic, what the
// step program's host-link ops carry), each copy timed by host_link_ns (cost/cost_model.h: the
// link's latency + max(h2d, d2h) / its bandwidth, the formula the simulated executor uses); a
// prefetch_pipeline table's fetch is left out (it runs under the dense part of the step before).
// It is a fifth phase of the shard's time (TorchRec's Perf.prefetch_compute), so the LPT
// partitioner spreads host traffic over ranks and a row_wise split that divides the misses
// can win over table_wise; plan_stats then counts each rank's copies once (RankStats::host_ns).
//
// Hardware: the workload's devices.hardware when set, else kDefaultPlanningProfile. On cpu
// ranks this is honest only as *relative* costs (a lookup of 2x the bytes costs 2x): the
// profile's absolute times are a GPU's, not this machine's; calibrating this_machine is
// another slice of issue 15.
//
// Speed: O(P x (S log S + S x W)) for P proposals of S shards on W ranks, plus plan_stats of
// the few best candidates (kStatsCandidates), which builds every rank's StepProgram (about
// O(W^2 x tables)); the pre-ranking's calls add O(W) a call and candidate: 1,000 tables on 64
// ranks take 1.65-1.85 s of CPU with them, 1.61-1.73 s without (bench/planner_bench.cpp
// BM_PlanSearch, plan41, the same shared 2-core machine, interleaved; 648 proposals);
// mlperf_dlrm_dcnv2 on 128 simulated ranks 2.3 s (measured before plan41).

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine {

/// The built-in profile plan_search uses when the workload names none (devices.hardware empty).
inline constexpr const char* kDefaultPlanningProfile = "h100_sxm";
/// The grid proposer enumerates the full product of the tables' allowed types up to this size.
inline constexpr int kMaxGridProposals = 256;
/// The grid proposer's coordinate descent visits at most this many tables.
inline constexpr int kDescentTables = 128;
/// How many of the best candidates (by the shard-level estimate) are scored with plan_stats.
inline constexpr int kStatsCandidates = 4;

/// The hardware profile the planner times a workload with: devices.hardware if set, else
/// kDefaultPlanningProfile. Throws what load_hardware_profile throws.
HardwareProfile planning_profile(const WorkloadSpec& spec);

/// Critical paths within this fraction of the fastest scored plan's are a tie, which the plan
/// with the least memory on its fullest device (max over ranks of the estimated HBM bytes) wins:
/// the cost model cannot tell 0.1% apart, and memory is what a tight device runs out of. A
/// user's 6-table workload on 4 ranks: grid 95,524 ns at 5.4 MiB on its fullest device against
/// uniform:table_wise 95,553 ns (+0.03%) at 10.0 MiB: grid.
inline constexpr double kCriticalPathTie = 1e-3;

/// A scored plan that fits, as the tie rule sees it: its critical path (ns) and the estimated
/// bytes on its fullest device.
struct ScoredPlan {
  int64_t critical_path_ns = 0;
  int64_t max_hbm_bytes = 0;
};

/// The order plan_search ranks the plans that fit in: by critical path, then max HBM (ties to
/// the earlier index), and then the plan with the least max HBM among those whose critical path
/// is within kCriticalPathTie of the fastest's (<= fastest x 1.001; the earliest of equal HBM)
/// moves to the front, the others keeping their order. Returns indices into `plans`. Example
/// (tested): {100,000 ns 10 MiB, 100,050 ns 5 MiB, 100,200 ns 1 MiB}: the tie reaches 100,100
/// ns, so {1, 0, 2}: the second plan (+0.05 %) wins on memory, the third (+0.2 %) is no tie.
std::vector<size_t> tie_break_order(const std::vector<ScoredPlan>& plans);

/// The result of plan_search.
struct PlanSearchResult {
  ShardingPlan plan;        ///< the best plan that fits
  PlanStats stats;          ///< its statistics (plan_stats)
  std::string proposer;     ///< which proposer made it: "greedy", "uniform:row_wise", "balanced", "grid"
  int proposals = 0;        ///< proposals evaluated (TorchRec's "Evaluated N proposal(s)")
  int feasible = 0;         ///< of those, the plans that fit in memory ("found N possible plan(s)")
  double seconds = 0;       ///< wall time of the search
  /// The runner-up: the best other plan that fits among those the full estimate scored (the
  /// kStatsCandidates best by the pre-ranking, distinct plans; same order: critical path, then
  /// max HBM, with a tie within kCriticalPathTie going to the plan of less max HBM): its proposer, its
  /// plan_stats critical path, ns, and its fullest device's estimated bytes. Empty / 0 when no
  /// other scored plan fits. So a user sees by how much the best won (criteo_kaggle x 4 before plan42:
  /// row_wise 0.174 ms against table_wise 0.177 ms), or that it won a tie on memory (the
  /// runner-up then may be up to kCriticalPathTie faster).
  std::string runner_up_proposer;
  int64_t runner_up_critical_path_ns = 0;
  int64_t runner_up_max_hbm_bytes = 0;
  /// The best plan's fullest device's estimated bytes (max over ranks of RankStats::hbm_bytes).
  int64_t max_hbm_bytes = 0;
};

/// Where a running search is, for a progress line (plan --auto prints it on stderr).
struct SearchProgress {
  int proposals = 0;          ///< plans proposed so far (every partitioner call: uniform, split, balanced, grid moves)
  int scored = 0;             ///< proposals scored by their step programs so far (the best few, at the end)
  std::string best_proposer;  ///< the best that fits so far ("" while none fits)
  double best_ns = 0;         ///< its critical path, ns: the pre-ranking estimate, or plan_stats' once best_scored
  bool best_scored = false;   ///< best_ns is a scored plan's critical path (plan_stats), not the estimate
  double seconds = 0;         ///< since this plan_search started
};

/// What the search may choose (TorchRec's ParameterConstraints.sharding_types, for every open table).
struct PlanSearchOptions {
  /// When not empty: the sharding types open tables may get (each table keeps those of them it
  /// allows; table_row_wise and grid_shard are then allowed on one node too, where they are
  /// row_wise over the node's ranks, and table_column_wise is allowed). The greedy and balanced proposals take part only when their types are
  /// among these. E.g. {table_wise}: the tables placed table-wise by estimated time (LPT)
  /// instead of plan_sharding's bytes.
  std::vector<ShardingType> sharding_types;
  /// When set: called on the searching thread with where the search is, at most once a second
  /// (the first call a second after the start; a search shorter than that makes none). Last, so
  /// that PlanSearchOptions{{types}} stays the types alone.
  std::function<void(const SearchProgress&)> progress{};
};

/// The search's pre-ranking estimate of one plan (see "Pre-ranking estimate" above), ns per
/// step: each phase's maximum over ranks and their sum, the score candidates are ranked by.
struct PreRankEstimate {
  double fwd_compute_ns = 0, fwd_comms_ns = 0, bwd_compute_ns = 0, bwd_comms_ns = 0, host_ns = 0;
  double critical_path_ns = 0;  ///< the sum of the five
};

/// The pre-ranking estimate of `plan` (validated with validate_plan, whose errors it throws) for
/// `spec` timed with `hw` (and spec.network's emulated floor). Example (tests/engine/planner/
/// prerank_test.cpp): one table_wise table on rank 0 of 2 GPU ranks, 1 B/ns links with 10 us
/// latency: fwd comms 10,008 + 10,032 + 10,032 + 10,128 ns (splits, lengths, ids, pooled rows)
/// and 4 x 10,032 ns (each all-to-all's split check).
PreRankEstimate pre_rank_estimate(const WorkloadSpec& spec, const ShardingPlan& plan, const HardwareProfile& hw);

/// plan_search's refusal when no candidate fits (a SpecError, exit 2): the candidate nearest to
/// fitting, the one of the smallest overflow_bytes, one measure for every candidate
/// (planner/candidate_overflow.h): what it needs beyond the memory there is - the largest amount
/// any rank's need exceeds devices.memory_bytes by, a rank's need being its estimated device
/// bytes where they exceed the device, else, where its bytes fit but the replay of its allocator
/// runs out at the capacity, the bytes that allocator reserves (stats.h RankStats::reserved_bytes)
/// (under a cpu profile, or the amount any node's ranks together exceed the host's memory by,
/// stats.h node_excess, when that is larger), plus the largest amount any rank's host bytes
/// exceed devices.host_memory_bytes by (ties: the better pre-ranking score). So a candidate 1 MiB
/// over in bytes is nearer than one 5 MiB over in its allocator's reserve. Its what() says which
/// measure each figure is: "/devices/memory_bytes: no plan fits the devices; the nearest
/// candidate (PROPOSER, N MiB over in bytes on its fullest rank (rank R)): " + that candidate's
/// check_memory_fits message (the rank and the term); "(PROPOSER, N MiB over in the caching
/// allocator's reserve on rank R (its bytes fit: B of C)): " where the reserve binds; when a node
/// binds, "(PROPOSER, N MiB over in bytes on node 0 (ranks 0-3 need 12.0 GiB together > 10.0 GiB,
/// the host's memory)): " + its check_memory_fits or check_node_memory_fits message; a host part
/// is added as "N over: D ... , plus H of host bytes over devices.host_memory_bytes on rank R".
class NoPlanFits : public SpecError {
 public:
  NoPlanFits(const std::string& what, std::string proposer_, int64_t overflow, int64_t fullest,
             std::string measure = "")
      : SpecError(what), proposer(std::move(proposer_)), overflow_bytes(overflow), fullest_rank_bytes(fullest),
        overflow_measure(std::move(measure)) {}
  std::string proposer;            ///< the nearest candidate's proposer, e.g. "uniform:row_wise"
  int64_t overflow_bytes = 0;      ///< its overflow (above), bytes
  int64_t fullest_rank_bytes = 0;  ///< its largest estimated device total of a rank, bytes
  /// what binds its device part: "bytes", "allocator reserve", "node bytes", "" (host only)
  std::string overflow_measure;
};

/// Searches for the plan with the shortest estimated critical path (plan_stats) that fits the
/// devices' memory, timed with `hw`. Throws SpecError what plan_sharding throws for an invalid
/// override, SpecError "/tables/N (name): none of the sharding types ...: <why each is not
/// allowed> (it allows ...)" when options.sharding_types leaves a table nothing it allows (e.g.
/// "column_wise splits a table's columns over 2 ranks or more: on 1 rank its one column shard
/// would hold every column, which is table_wise"), and NoPlanFits (above) naming the
/// candidate of the smallest overflow when no candidate fits.
PlanSearchResult plan_search(const WorkloadSpec& spec, const HardwareProfile& hw,
                             const PlanSearchOptions& options = {});

}  // namespace embedscope::engine
