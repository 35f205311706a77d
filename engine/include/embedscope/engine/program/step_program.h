#pragma once
// StepProgram: what one training step does on one rank, as data (DESIGN.md "The data flow of
// one run", step 3). Per rank, the ordered ops of one step on the rank's two lanes (the compute
// worker and the comm worker), each with its category, the collectives it runs (kind, process
// group, elements per peer), the embedding rows or dense flops it touches, and the ops it
// waits for. Built from (workload spec, sharding plan, rank, iteration); the pipeline
// (spec.pipeline) is a schedule over the phases of a batch:
//   base         every phase of the step's batch, in order.
//   sparse_dist  before the dense part of batch i, the input and the input dist of batch i+1
//                (the input dist queued on the comm lane ahead of the dense all-reduces).
//   semi_sync    before the dense part of batch i, batch i+1's kjt_permute, lookup and output
//                dist, then batch i+2's input and input dist.
// Tables in host memory (TableSpec::placement host / host_cached, model/host_cache.h) add ops
// on the host link (lane gpu_copy, category memcpy: a GPU's copy engine; on CPU ranks the
// compute worker does these copies inside its lookup and optimizer spans, and records only the
// prefetch as a span of its own, on its compute lane), with bytes_h2d / bytes_d2h expected
// from the cache model (cost/cache_model.h):
//   host_fetch       before the lookup (which waits for it): the rows its lookup misses.
//   host_write_back  after backward_fused_optimizer: the optimizer state rows (fetched and
//                    written back), the updated rows not cached and the dirty rows evicted.
//   prefetch         (TableSpec::prefetch_pipeline) a phase of the batch whose ids the step
//                    holds ahead (sparse_dist: batch i+1, semi_sync: i+2), right before the
//                    train phase: its misses fetched into the cache once its input dist has
//                    its ids; the step's backward_fused_optimizer waits for it (FBGEMM's
//                    prefetch pipeline), and that batch's lookup has no host_fetch of the
//                    tables it prefetched.
// Op names are the span names the executors record in the session (sessions/FORMAT.md), so a
// program can be read against a recorded step op by op. `embedscope program` prints it.
//
// The executors run the program: the simulated one times its ops (exec/simulated/), the
// threaded one (cpu and cuda, exec/threaded/rank.h) interprets it op by op. It walks the
// schedule and hands each op to who runs it, recorded as the op was emitted
// (program/program_sink.h OpOwner: the executor's own handlers, or a sharding module): comm ops
// are queued on the rank's comm worker, a compute op first waits for the queued ops its
// waits_for names, a sync phase ends with its batch's collectives awaited, and ops launched_by
// another are issued by it. Nothing in exec/ names a sharding type.
//
// Example (preset tiny, 2 ranks, table_wise, base, rank 0): input, bucketize (compute);
// input_dist/splits, input_dist/lengths, input_dist/ids (comm, world all-to-alls); kjt_permute,
// lookup; output_dist/all_to_all; dense_forward_backward, during which the DDP buckets'
// dense_all_reduce ops are queued on the comm lane; grad_dist/all_to_all;
// backward_fused_optimizer; dense_optimizer.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embedscope/engine/model/dense_work.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/model/events.h"

namespace embedscope::engine {

/// The collectives an op can run (NCCL / Gloo names).
enum class CollectiveKind { all_to_all, reduce_scatter, all_gather, all_reduce };

/// What a compute op's ProgramOp::work_items count: the per-item work of a cpu rank's kernels
/// that no byte count describes (cost/cost_model.h host_work_ns; lookup44). Each has one
/// coefficient in the hardware profile (hardware_profile.h GpuProfile, ns per item).
enum class HostWork {
  none,             ///< no per-item term
  lookup_bags,      ///< "lookup": bags pooled, empty ones included (lookup_bag_ns)
  input_ids,        ///< "input": ids of the rank's batch made and checked (input_id_ns)
  bucketize_items,  ///< "bucketize": bags and ids scanned, once per destination slot (bucketize_item_ns)
  /// "backward_fused_optimizer": over its local shards, each shard's expected distinct rows x the
  /// 64-byte cache lines of one row and of its optimizer state (ProgramSink::update_row_lines), the
  /// lines its row update reads and writes back at random places in the table (update_line_ns)
  update_row_lines,
  /// "lookup" (ProgramOp::work2, beside its lookup_bags): over its local shards, each shard's
  /// expected distinct rows x the 64-byte cache lines of one stored row (ProgramSink::
  /// lookup_row_lines), the lines its pooling reads at random places in the table; an id
  /// repeated in the batch finds its row's lines in cache (lookup_line_ns)
  lookup_row_lines,
};
const char* to_string(CollectiveKind k);

/// One collective of an op, as the session's `collectives` table will record it.
struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::all_to_all;
  std::string name;          ///< the record's name, e.g. "input_dist/ids"
  std::string group;         ///< process group: "world", "node<n>", "cross<l>"
  std::vector<int> peers;    ///< global ranks of the group, in group order
  int group_rank = 0;        ///< this rank's index in peers
  /// Elements sent to / received from each peer (group order; this rank's own slice included,
  /// as the session's collective records hold it). Empty for all_reduce, whose `count` says the buffer.
  std::vector<int64_t> send_elements, recv_elements;
  int64_t count = 0;         ///< all_reduce: elements reduced
  int64_t elem_bytes = 4;    ///< bytes per element on the wire (int64 8, float32 4, fp16/bf16 2)
  std::string dtype;         ///< "int64", "float32", "float16", "bfloat16"
  /// false: the element counts depend on the batch's ids (id counts of row-wise buckets, or
  /// Poisson bag lengths); the figures are their expectation at the mean pooling factor, a
  /// row range getting its expected share of the ids (input/realized_share.h
  /// realized_id_share: the Zipf mass of the range for Zipf ids with permute = false, the mass
  /// the feature's seeded permutation puts in it for permute = true, else its share of the rows).
  bool exact = true;
  /// Bytes this rank sends to / receives from other ranks (own slice excluded), as the
  /// records' bytes_sent / bytes_received (collective_math.h).
  int64_t bytes_sent() const;
  int64_t bytes_received() const;
};

/// Whether `c` is the split-size check of an all-to-all or reduce-scatter: the all-gather named
/// "<name>/split_check" that ProgramSink puts before each of them (program_sink.h; the cpu and
/// cuda executors run it, comm/gloo_process_group.h), an Embedscope cross-check of the split
/// sizes that TorchRec does not run. Decided by the name's suffix alone; no errors.
/// Example: "output_dist/all_to_all/split_check" -> true; "output_dist/all_to_all" -> false.
bool is_split_check(const CollectiveCall& c);

/// One op of a step.
struct ProgramOp {
  int id = 0;                 ///< index in StepProgram::ops
  std::string name;           ///< the span name ("input_dist/ids", "lookup", ...)
  sessions::Lane lane = sessions::Lane::compute;  ///< compute or comm
  sessions::OpCategory category = sessions::OpCategory::other;
  /// The batch it works on, relative to the step's own batch: 0, or 1 / 2 for a batch a
  /// pipeline starts ahead.
  int batch = 0;
  /// comm ops: what they run, in order. Every all-to-all and reduce-scatter is preceded by its
  /// split check ("<name>/split_check": an all-gather of each member's 2 x group-size send and
  /// receive counts, comm/gloo_process_group.h), which the cpu and cuda executors run before data moves.
  std::vector<CollectiveCall> collectives;
  int64_t rows = 0;           ///< lookup: ids looked up (embedding rows read); optimizer: rows updated (both expected)
  int64_t flops = 0;          ///< dense_forward_backward: 2 x multiply-adds of forward and backward of the MLPs
  /// dense_forward_backward: its work by kind (DenseModel::work: GEMM flops, the dot
  /// interaction's multiply-adds, element-wise floats written), which the cost model times at
  /// one rate each when the profile has the non-GEMM rates (cost/cost_model.h); empty elsewhere.
  /// Not in the program's JSON.
  DenseWork dense_work;
  /// dense_forward_backward: the precision of its GEMMs (the workload's dense.precision), whose
  /// rate the cost model times them at (cost/dense_gemm_rate.h); fp32 elsewhere. Not in the
  /// program's JSON.
  DensePrecision dense_precision = DensePrecision::fp32;
  /// compute ops: bytes the op reads and writes in device memory (expected), the memory-bound
  /// term of its cost (cost/cost_model.h): rows and ids read, pooled rows written, rows and
  /// optimizer state read and written back.
  int64_t bytes = 0;
  /// gpu_copy ops (tables in host memory): bytes over the host link, host -> device and back
  /// (expected; cost/cache_model.h). 0 for the other ops.
  int64_t bytes_h2d = 0, bytes_d2h = 0;
  /// compute ops: what work_items counts (HostWork; none for most ops) and how many (expected):
  /// lookup: bags pooled = W x B per local slot (every rank's B bags of each (shard, feature)
  /// bucket, empty ones included: a row-wise shard pools W x B bags of which most are empty) +
  /// B per feature of a replicated (data_parallel, hot-row) table; input: B x the features' mean
  /// pooling factors summed (the KJT's ids, program/input_op_bytes.h input_ids); bucketize:
  /// over every destination slot, B bags + its feature's ids (input_op_bytes.h bucketize_items);
  /// backward_fused_optimizer: over the local shards, the expected distinct rows of the ids every
  /// rank sends the shard (cost/cache_model.h shard_distinct_rows) x the cache lines of a row and
  /// its optimizer state (program_sink.h ProgramSink::update_row_lines).
  HostWork work = HostWork::none;
  int64_t work_items = 0;
  /// compute ops: a second per-item term of the same op (none for every op but the lookup, whose
  /// work2 is lookup_row_lines: over the local shards, the expected distinct rows of the ids every
  /// rank sends the shard x the cache lines of a stored row, program_sink.h
  /// ProgramSink::lookup_row_lines). cost_model.h host_work_ns charges both.
  HostWork work2 = HostWork::none;
  int64_t work2_items = 0;
  /// Ops that must have ended before this one starts: the previous op of its lane (the lanes
  /// run their ops one at a time, in order) and the ops of the other lane whose results it needs.
  std::vector<int> waits_for;
  /// -1, or the op during which this one is issued (the DDP buckets' all-reduces are queued
  /// from inside the backward pass, as soon as their gradients are final).
  int launched_by = -1;
  std::string what;           ///< one line for people: what the op does
};

/// The phases of a batch, the units a pipeline schedules (each a run of ops of one batch; a
/// phase without ops is a point where the executors wait for the batch's collectives).
enum class PhaseKind {
  start_batch,        ///< input, bucketize, input dist (KJT all-to-all)
  lookup,             ///< kjt_permute, lookup, output dist (queued; `sync`: waited for)
  finish_output_dist, ///< waits for the batch's output dist and unpacks the pooled embeddings (no op of its own)
  train,              ///< dense forward/backward, DDP buckets, grad dist, embedding and dense optimizers
  /// the cache misses of a batch ahead fetched into the caches of its prefetch_pipeline tables
  /// (waits for the batch's input dist; no collective)
  prefetch,
};
const char* to_string(PhaseKind k);

/// One entry of a step's schedule: a phase of batch `batch` (relative to the step's own), its
/// ops [first_op, first_op + num_ops) in StepProgram::ops.
struct Phase {
  PhaseKind kind = PhaseKind::start_batch;
  int batch = 0;
  /// start_batch / lookup: the compute worker waits for the phase's collectives (false: they
  /// run on the comm lane under what follows, and a later phase waits for them).
  bool sync = true;
  int first_op = 0;
  int num_ops = 0;
};

/// The program of one step of one rank.
struct StepProgram {
  int rank = 0;
  int world_size = 1;
  int64_t iteration = 0;       ///< 0-based, warmup steps included
  int64_t step = 0;            ///< as the session numbers steps (iteration - warmup_steps)
  PipelineKind pipeline = PipelineKind::base;
  std::vector<ProgramOp> ops;  ///< in the order the rank issues them
  /// The pipeline's schedule of this step: the phases in the order the executors run them.
  std::vector<Phase> schedule;
  /// Ops on one lane, in order.
  std::vector<const ProgramOp*> lane(sessions::Lane l) const;
};

/// Builds the program of `rank` in iteration `iteration` (0-based, warmup included; the first
/// and last iterations of a pipeline differ from the steady state: the first starts its own
/// batch, the last starts none ahead). Memory compaction (memory.compaction) is not part of
/// the program. Throws SpecError for a rank outside [0, world_size) or an iteration outside
/// [0, warmup_steps + steps), and what validate_plan throws for a plan that does not fit.
StepProgram build_step_program(const WorkloadSpec& spec, const ShardingPlan& plan, int rank, int64_t iteration);

/// The same, where `cold_start` gives the host-link ops (host_fetch, prefetch, host_update) of
/// tables in host_cached memory the cache model's expectation for a cache that started empty at
/// iteration 0 (cost/cache_model.h estimate_cache with lookups_before = `iteration`), not the
/// steady state: what the simulated executor runs for the first cold_start_iterations(spec,
/// plan) iterations. Same errors as above.
StepProgram build_step_program(const WorkloadSpec& spec, const ShardingPlan& plan, int rank, int64_t iteration,
                               bool cold_start);

/// How many iterations from 0 start with the caches of host_cached tables still filling (the
/// programs cold_start describes): ceil of the largest expected number of batches until an empty
/// cache is full, + 2 (the pipelines' batches ahead), at most warmup_steps + steps (a cache that
/// holds every row never fills); 0 without host_cached tables. Throws what validate_plan throws.
int64_t cold_start_iterations(const WorkloadSpec& spec, const ShardingPlan& plan);

/// The phases of iteration `iteration`'s schedule, in order, without their ops (first_op and
/// num_ops are 0): the pipeline's schedule that build_step_program fills with ops and that
/// the memory estimate replays (planner/memory_replay.h). The same on every rank. Cost O(1).
/// Example: semi_sync, iteration 0 of 3: start_batch 0, lookup 0, finish_output_dist 0,
/// start_batch 1, lookup 1 (async), start_batch 2 (async), train 0.
std::vector<Phase> step_schedule(const WorkloadSpec& spec, int64_t iteration);

/// The first iteration whose program is the pipeline's steady state (base 0; sparse_dist and
/// semi_sync 1), or the last iteration when the run is too short to have one.
int64_t steady_iteration(const WorkloadSpec& spec);

/// The iteration's place in the run, the only way a rank's program depends on the iteration:
/// equal places give equal programs (up to `iteration` and `step`), so executors build one
/// program per place. Bits: 1 first iteration, 2 a next iteration exists, 4 one after that
/// exists; pipeline base has a single place, 0. At most four distinct places in a run.
/// Example: 5 iterations of sparse_dist: places 7, 6, 6, 2, 0.
int place_in_run(const WorkloadSpec& spec, int64_t iteration);

/// {"rank", "world_size", "iteration", "step", "pipeline", "schedule": [{"phase", "batch",
/// "sync", "ops": [ids]}], "ops": [{"id", "name", "lane",
/// "category", "batch", "waits_for", "launched_by"?, "rows"?, "flops"?, "bytes"?, "bytes_h2d"?, "bytes_d2h"?,
/// "what", "collectives":
/// [{"kind", "name", "group", "peers", "send_elements", "recv_elements", "count"?, "dtype",
/// "bytes_sent", "bytes_received", "exact"}]}]}
nlohmann::json to_json(const StepProgram& program);
/// A table for people: one line per op (id, lane, batch, name, collectives with bytes, waits).
std::string to_text(const StepProgram& program);

}  // namespace embedscope::engine
