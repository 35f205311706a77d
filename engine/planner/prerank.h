#pragma once
// The planner search's pre-ranking estimate (planner/search.h, "Pre-ranking estimate"): the
// shard-level figures the search sums per rank (Perf) and the rule that turns a plan's per-rank
// sums into its estimated critical path (CallModel), with the collective calls timed by the same
// rule as the full estimate (cost/shared_cores.h collective_call_ns of the members' times from
// cost/cost_model.h member_collective_ns, floored by cost/network_floor.h).

#include <array>
#include <cstdint>
#include <vector>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::planner_detail {

/// The collective calls of a step whose bytes depend on the plan, one a module as the
/// StepProgram has them (program/step_program.h, sharding/*.cpp): the input dist's three world
/// all-to-alls (splits, lengths, ids: only when some shard is not data_parallel), the output
/// dist's world all-to-all of pooled rows (table_wise, column_wise, table_column_wise) and
/// world reduce-scatter (row_wise), table_row_wise / grid_shard's reduce-scatter inside each node
/// and all-to-all across nodes (one per local rank index). The gradient dist mirrors each of the
/// last four with the same bytes (all-to-all, all-gather).
enum Call : size_t { kSplits, kLengths, kIds, kPooled, kRow, kTwrwIntra, kTwrwCross, kCalls };

/// A shard's (or a rank's sum of its shards') pre-ranking figures, ns per step or bytes.
struct Perf {
  /// Bandwidth terms: compute without kernel launches (forward: the lookup and kjt_permute bytes
  /// of the shard, program_sink.h lookup_bytes and input_op_bytes.h kjt_permute_bytes), comms as
  /// bytes / intra-node busbw without latency. The LPT partitioner's unit (total()); the score adds launches, latency, contention.
  double fwd_compute = 0, fwd_comms = 0, bwd_compute = 0, bwd_comms = 0, host = 0;
  /// Per call, the shard's bytes X over all destinations: its owner's share of the call is
  /// X (n-1)/n, every other member's X / n (CallModel::call_ns).
  std::array<double, kCalls> bytes{};
  unsigned calls = 0;       ///< bit c: the step has call c
  int dp_tables = 0;        ///< data_parallel replicas (each: 2 compute ops and 2 all-reduces of its own)
  double dp_calls_ns = 0;   ///< the time of those calls, ns
  /// World calls of the gradient dist that every rank joins whatever it holds, ns: a factorized
  /// (low_rank_dim) row_wise table's B all-reduce, carried by the table's first row shard and
  /// charged to every rank's backward comms (CallModel::critical_path).
  double world_bwd_ns = 0;
  /// fp32 values of hot-row replication's one fused all-reduce (TableSharding::hot_rows: H x
  /// (dim + 1) a hot table), carried by the table's first row shard; timed once a step.
  double hot_values = 0;
  double total() const { return fwd_compute + fwd_comms + bwd_compute + bwd_comms + host; }
  void add(const Perf& o);
};

/// The five phases of the pre-ranking estimate, ns per step; their maxima over ranks summed.
struct PhaseMax {
  double fwd_compute = 0, fwd_comms = 0, bwd_compute = 0, bwd_comms = 0, host = 0;
  double critical_path() const { return fwd_compute + fwd_comms + bwd_compute + bwd_comms + host; }
};

/// A shard's per-line host work added to its compute (look46): on a profile with per-line
/// coefficients (hardware_profile.h lookup_line_ns, update_line_ns: a cpu profile's; GPU profiles
/// have 0, and then nothing is computed or added), the shard's expected distinct rows U
/// (cost/cache_model.h shard_distinct_rows of ids[k] ids of feature features[k] a step,
/// together) x ProgramSink::lookup_row_lines(t, s.num_cols) x lookup_line_ns onto fwd_compute and
/// x update_row_lines x update_line_ns onto bwd_compute, ns: what the StepProgram's lookup and
/// fused update carry (program/step_program.h HostWork). Example (tests/engine/cost/
/// line_terms_estimates_test.cpp): 1000 uniform rows of 8 fp32, 16 ids, sgd, 40 / 30 ns a line:
/// U = 15.880, + 635.2 / + 476.4 ns.
void add_line_terms(const WorkloadSpec& spec, const HardwareProfile& hw, const TableSpec& t, const Shard& s,
                    const std::vector<int>& features, const std::vector<double>& ids, Perf& p);

/// Times a plan's per-rank Perf sums (see search.h, "Pre-ranking estimate").
class CallModel {
 public:
  /// world ranks in nodes of `local` (the last node may have fewer).
  CallModel(const WorkloadSpec& spec, const HardwareProfile& hw, int world, int local);
  /// The critical path of per-rank sums `per` (size world).
  PhaseMax critical_path(const std::vector<Perf>& per) const;
  /// The 2 calls of one data_parallel table's gradient dist (sharding/data_parallel.cpp): the
  /// world all-reduces of its dense `rows` x `cols` fp32 gradient (for a factorized table,
  /// low_rank_dim r > 0: its factors' rows r + r cols, program/data_parallel_bytes.h) and of its
  /// `rows` fp32 touched flags, each world_all_reduce_ns, ns.
  double dp_calls_ns(int64_t rows, int64_t cols, int64_t low_rank_dim = 0) const;
  /// One world all-reduce of `count` elements of `elem_bytes`, ns, timed exactly as plan_stats
  /// times the program's call: each member by collective_ns (cost_model.h: ring, 2(n-1)/n of the
  /// buffer), the call by collective_call_ns, floored by emulated_floor_ns (network_floor.h).
  double world_all_reduce_ns(int64_t count, int64_t elem_bytes) const;
  /// The bucketize op's memory time on one rank, ns (program/input_op_bytes.h bucketize_bytes
  /// over HBM bandwidth x memory_kernel_efficiency; no launch, no contention).
  double bucketize_ns() const { return bucketize_ns_; }
  /// One call of the group `members` (global ranks) where member k's shards have X = own[k]
  /// bytes (Perf::bytes) times `scale`: each member moves max(X (n-1)/n, (T - X) / n) bytes
  /// (T = sum of own), split over its peers on its node and on others in proportion to their
  /// count, timed by member_collective_ns; the call by collective_call_ns, floored by the
  /// emulated network: the largest member's emulated_member_floor_ns, for every member (equal
  /// flows to every peer: each sender's deliveries end with its port, the ring's rule; an upper
  /// bound of plan_stats' per-member floors, cost/network_floor.h), ns.
  /// `paced` false: a split-size check, which the emulation does not pace (no floor).
  double call_ns(const std::vector<int>& members, const std::vector<double>& own, double scale,
                 bool paced = true) const;
  /// The ranks sharing rank r's cores (cost/shared_cores.h core_group: all ranks for a cpu profile, else r's node).
  int ranks_on_node(int r) const;

 private:
  const WorkloadSpec& spec_;
  const HardwareProfile& hw_;
  int W_, L_, nodes_;
  std::vector<int> world_;
  double bucketize_ns_ = 0;
};

}  // namespace embedscope::engine::planner_detail
