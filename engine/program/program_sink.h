#pragma once
// Where the parts of a step program are written: the program builder's phases and the sharding
// modules (sharding/embedding_sharding.h) append ops through it. Derives what each op waits for
// from the order of issue (see Emitter in program_sink.cpp). Internal to the engine.

#include <optional>
#include <string>
#include <vector>

#include "sharding/layout.h"
#include "embedscope/engine/program/step_program.h"

namespace embedscope::engine::program {

/// Expected ids of slot `sl` that one rank sends per batch (B bags of the slot's feature at
/// the mean pooling factor, times, for row-bucketized slots, the expected share of the table's
/// ids in the slot's row range: input/realized_share.h realized_id_share, so a row-wise shard
/// holding Zipf ids' hot rows gets their mass, at the start of the table for permute = false and
/// where the feature's seeded permutation puts them for permute = true; less the hot rows'
/// hot_id_share); `exact` becomes false where the count depends on the ids (row ranges, Poisson
/// lengths, dropped ids).
/// Example: criteo_kaggle's 3-row t_cat_8 (alpha 1.15, permuted) row-wise 1/1/1 over 3 ranks:
/// shares 0.577, 0.163, 0.260 of B x its pooling factor (the even share gave 1/3 each).
double expected_slot_ids(const WorkloadSpec& spec, const detail::Slot& sl, bool& exact);

/// The expected share in [0, 1] of feature `feature`'s ids (table `table`) that fall in the
/// table's hot rows (TableSharding::hot_rows) within [row_begin, row_end): the sum over those
/// rows of each row's realized_id_share (input/realized_share.h): for Zipf ids with permute =
/// true (no hashing) the Zipf mass of the row's rank under the feature's permutation,
/// (k + 1)^-alpha / H(n, alpha), for the 4,096 hottest ranks, the even share of the remaining
/// mass for colder rows; otherwise shard_id_share of the row; 0 without hot rows. Those ids stay
/// on the rank of their bag (sharding/hot_rows.cpp), so expected_slot_ids subtracts them from a
/// row-wise slot's realized share, which leaves exactly the realized share of the slot's other
/// rows (the realized share is additive over rows). O(hot rows in range x log 4,096).
/// Examples: 10 rows, uniform ids, hot rows {2, 7}, range [0, 5): 0.1; 10 rows, permuted Zipf
/// alpha 1, hot rows {perm(0), perm(1)}: (1 + 1/2) / H(10, 1) = 1.5 / 2.928968 = 0.512126.
double hot_id_share(const WorkloadSpec& spec, int table, int feature, int64_t row_begin, int64_t row_end);

/// Who runs an op in an executor that interprets the program op by op (exec/threaded/rank.h):
/// `owner` -1 for the executor's own ops (kind: a RankOp), k >= 0 for sharding module k of the
/// plan (sharding/embedding_sharding.h, embedding_shardings order; kind: the module's own op
/// kind, opaque outside it); `arg` the kind's argument (a table, a DDP bucket), 0 when it has
/// none. kind -1: not tagged (an executor refuses it). Recorded as the op is emitted
/// (ProgramSink::own), one per op of StepProgram::ops, in the same order.
struct OpOwner {
  int owner = -1;
  int kind = -1;
  int arg = 0;
};

/// The executor's own ops (OpOwner::owner -1), one kind per op name of the program builder's
/// phases (step_program.cpp); the sharding modules' ops are theirs.
enum class RankOp : int {
  input,                     ///< "input"
  bucketize,                 ///< "bucketize"
  input_dist_splits,         ///< "input_dist/splits"
  input_dist_lengths,        ///< "input_dist/lengths"
  input_dist_ids,            ///< "input_dist/ids"
  kjt_permute,               ///< "kjt_permute"
  host_fetch,                ///< "host_fetch" (gpu_copy lane)
  lookup,                    ///< "lookup" (with the modules' local lookups)
  prefetch,                  ///< "prefetch" (gpu_copy lane)
  dense_forward_backward,    ///< "dense_forward_backward" (launches the dense_all_reduce ops)
  dense_all_reduce,          ///< "dense_all_reduce", arg: the DDP bucket
  host_update,               ///< "host_update" (gpu_copy lane)
  backward_fused_optimizer,  ///< "backward_fused_optimizer"
  dense_optimizer,           ///< "dense_optimizer"
};

/// build_step_program (step_program.h) of a plan already validated, over its layout: what an
/// executor that builds every rank's programs uses (the layout is built once, not per rank).
/// `cold_start`: the host-link ops of tables in host memory carry the cache model's cold-start
/// expectation for the batch they move (cost/cache_model.h estimate_cache with lookups_before =
/// the batch's index in the run: the caches start empty), not the steady state; what the
/// simulated executor runs for the first cold_start_iterations. The default (false) is the
/// steady state, what plan_stats and `embedscope program` show.
StepProgram build_step_program(const WorkloadSpec& spec, const ShardingPlan& plan, const detail::Layout& layout, int rank,
                               int64_t iteration, bool cold_start = false, std::vector<OpOwner>* owners = nullptr);
/// The same, with the owner of every op (owners[i] of program.ops[i]): what the threaded
/// executor interprets (exec/threaded/rank.h).
StepProgram build_step_program(const WorkloadSpec& spec, const ShardingPlan& plan, const detail::Layout& layout, int rank,
                               int64_t iteration, std::vector<OpOwner>& owners);

/// The iterations whose cold-start programs differ from the steady ones: ceil of the largest
/// CacheEstimate::fill_batches (batches until a cache that started empty is full) over every
/// rank's host_cached shards, + 2 (the pipelines' batches ahead), at most warmup_steps + steps
/// (a cache that holds every row never fills: all of them); 0 without host_cached tables.
int64_t cold_start_iterations(const WorkloadSpec& spec, const detail::Layout& layout);

class ProgramSink {
 public:
  /// Throws what detail::Layout throws for a plan that does not fit the spec.
  ProgramSink(const WorkloadSpec& spec, const ShardingPlan& plan, int rank, StepProgram& p);
  /// Over a layout built once for every rank (it must outlive the sink).
  ProgramSink(const WorkloadSpec& spec, const detail::Layout& layout, int rank, StepProgram& p);

 private:
  std::optional<detail::Layout> owned_layout_;

 public:
  const WorkloadSpec& spec;
  const detail::Layout& layout;
  const int rank, world;
  const int64_t B;
  std::vector<int> world_ranks, node_ranks, cross_ranks;  ///< members of this rank's groups
  std::string node_group, cross_group;                    ///< "node<n>", "cross<l>"
  StepProgram& program;
  /// The owner of every op emitted so far (OpOwner), when the builder wants them; else null.
  std::vector<OpOwner>* owners = nullptr;
  /// The owner of the ops emitted from now on: -1 the executor, k sharding module k (the
  /// builder sets it around each module's emit_* calls).
  int owner = -1;
  /// Tags op `op` (emitted by the current owner) with the owner's op kind `kind` and its
  /// argument `arg` (OpOwner). Returns op.
  int own(int op, int kind, int arg = 0);
  int own(int op, RankOp kind, int arg = 0) { return own(op, static_cast<int>(kind), arg); }

  /// A compute op; it waits for the previous compute op and the last comm op queued
  /// synchronously since.
  int compute(std::string name, sessions::OpCategory cat, int batch, std::string what, int64_t rows = 0,
              int64_t flops = 0, int64_t bytes = 0);

  /// Device-memory bytes of a pooled lookup of `ids` ids into rows of `dim` columns stored as
  /// `dt` (row_bytes(dt, dim) a row, quant/row_codec.h: fp32 4 dim, fp16 / bf16 2 dim, int8
  /// dim + 8), pooled into `bags` fp32 bags (lookups accumulate in fp32): the rows and the
  /// 8-byte ids read, the pooled rows written:
  ///   ids x (row_bytes(dt, dim) + 8) + bags x 4 dim.
  /// Example: 100 ids, dim 64, 10 bags: fp32 100 x 264 + 2,560 = 28,960; int8 100 x 80 + 2,560 = 10,560.
  static double lookup_bytes(double ids, int64_t dim, double bags, TableDataType dt = TableDataType::fp32);
  /// Device-memory bytes of the backward of that lookup with the fused optimizer `type` (TBE
  /// backward): the bags' fp32 gradients and the ids read, every row (stored as `dt`) and its
  /// optimizer state (stored as `st`, 4 or 2 bytes a value) read and written back (counted
  /// once per id: duplicates are not merged in the estimate):
  ///   bags x 4 dim + ids x (8 + 2 row_bytes(dt, dim) + 2 x value bytes x (state values per row)).
  static double update_bytes(double ids, int64_t dim, double bags, OptimizerType type,
                             TableDataType dt = TableDataType::fp32, OptimizerStateType st = OptimizerStateType::fp32);
  /// lookup_bytes / update_bytes of `cols` columns of table t as it is stored: its data_type and
  /// optimizer_state_type, and for a low-rank table (TableSpec::low_rank_dim r, model/low_rank.h)
  /// the A rows of r fp32 values read per id plus B (r x cols, 4 r cols bytes) read once:
  ///   lookup: ids x (4 r + 8) + 4 r cols + bags x 4 cols
  ///   update: bags x 4 cols + ids x (8 + 8 r + 2 x A state bytes a row)
  ///           + 2 x (4 r cols + B state bytes)   (B read and written whole)
  /// Example: 100 ids, cols 64, 10 bags, r 8: lookup 100 x 40 + 2,048 + 2,560 = 8,608 (fp32 full
  /// table: 28,960).
  static double lookup_bytes(double ids, const TableSpec& t, int64_t cols, double bags);
  static double update_bytes(double ids, const TableSpec& t, int64_t cols, double bags, OptimizerType type);
  /// The 64-byte cache lines one distinct row's fused update reads and writes back at a random
  /// place in the shard (HostWork::update_row_lines, per distinct row): its row, as stored
  /// (row_bytes(data_type, cols); a low-rank table's A row, 4 r bytes), and its optimizer state
  /// (optimizer_state_bytes of one row; none for sgd), each rounded up to whole lines:
  ///   ceil(row bytes / 64) + ceil(state bytes / 64).
  /// A line is what a cpu's memory access moves, so a 16-byte row costs the line a 64-byte one
  /// does. Examples: fp32, 16 cols, sgd: 1; 4 cols, sgd: 1; 128 cols, rowwise_adagrad: 8 + 1 = 9;
  /// 16 cols, adam (two fp32 moments of 64 B each): 1 + 2 = 3.
  static double update_row_lines(const TableSpec& t, int64_t cols, OptimizerType type);
  /// The 64-byte cache lines the lookup reads for one distinct row of `cols` columns of table t
  /// (HostWork::lookup_row_lines, per distinct row): its row as stored (row_bytes(data_type,
  /// cols); a low-rank table's A row, 4 r bytes) rounded up to whole lines, ceil(row bytes / 64).
  /// Examples: fp32 4 cols (16 B): 1; 16 cols: 1; 17 cols: 2; 128 cols: 8; fp16 64 cols: 2.
  static double lookup_row_lines(const TableSpec& t, int64_t cols);
  /// A host-link op (lane gpu_copy, category memcpy; program/step_program.h): `h2d` / `d2h`
  /// bytes host -> device and back. It waits for the previous op of its lane and for `after`
  /// (ops of other lanes whose results it needs; -1 entries skipped).
  int copy(std::string name, int batch, std::string what, int64_t h2d, int64_t d2h, const std::vector<int>& after);
  /// Makes op `op` wait for op `on` too (nothing for on < 0).
  void depend(int op, int on) { wait(op, on); }
  /// A comm op queued after the last compute op (or, launched_by >= 0, from inside that op);
  /// `sync`: the compute worker waits for it. Every all-to-all and reduce-scatter in `calls`
  /// is preceded by its split check ("<name>/split_check", comm/gloo_process_group.h).
  int comm(std::string name, int batch, std::vector<CollectiveCall> calls, bool sync, std::string what,
           int launched_by = -1);

  /// An all-to-all(v) of this rank: send[j] / recv[j] elements to / from peer j.
  CollectiveCall all_to_all(const char* name, const std::vector<int>& peers, const std::string& group,
                            std::vector<int64_t> send, std::vector<int64_t> recv, int64_t elem_bytes, const char* dtype,
                            bool exact = true) const;
  /// A reduce-scatter: block j (counts[j] elements) to peer j; counts[group rank] from each.
  CollectiveCall reduce_scatter(const char* name, const std::vector<int>& peers, const std::string& group,
                                const std::vector<int64_t>& counts, int64_t elem_bytes, const char* dtype) const;
  /// An all-gather(v): this rank's counts[group rank] elements to every peer, counts[j] from j.
  CollectiveCall all_gather(const char* name, const std::vector<int>& peers, const std::string& group,
                            const std::vector<int64_t>& counts, int64_t elem_bytes, const char* dtype,
                            bool exact = true) const;

  /// An all-reduce (sum) of `count` elements over `peers`: every member sends and receives the
  /// whole buffer (CollectiveCall::count).
  CollectiveCall all_reduce(const char* name, const std::vector<int>& peers, const std::string& group, int64_t count,
                            int64_t elem_bytes, const char* dtype) const;

  /// Bytes per element and dtype name of a communicated tensor of precision p.
  static int64_t elem_bytes(CommPrecision p) { return p == CommPrecision::fp32 ? 4 : 2; }
  static const char* dtype(CommPrecision p) {
    return p == CommPrecision::fp16 ? "float16" : p == CommPrecision::bf16 ? "bfloat16" : "float32";
  }

 private:
  void init_groups();
  int add(std::string name, sessions::Lane lane, sessions::OpCategory cat, int batch, std::string what);
  void wait(int op, int on);
  int last_compute_ = -1, last_comm_ = -1, sync_comm_ = -1, last_copy_ = -1;
};

}  // namespace embedscope::engine::program
