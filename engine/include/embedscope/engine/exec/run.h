#pragma once
// The executors of sharded embedding training (devices.backend), one step program for both:
//  - cpu: one thread per rank (the compute worker) plus one comm worker thread per rank, real
//    Gloo collectives over TCP on 127.0.0.1, and a capacity-limited DeviceArena per rank.
//  - cuda (EMBEDSCOPE_WITH_CUDA): rank r on GPU r, the same threads, NCCL collectives
//    (ncclCommInitAll) instead of Gloo, and the DeviceArena over the GPU's memory (cudaMalloc,
//    CUDA VMM or a cudaMallocAsync pool; cuda_memory.h). The shard weights and optimizer state
//    live on the GPU, where the lookup (tbe_forward), the row optimizer (tbe_backward_update)
//    and the MLP layers (cuBLAS) run; bucketizing, the KJT permute, packing of the dist
//    buffers, the sparse-gradient accumulation, the interaction and the loss run on the host,
//    with explicit copies.
//    base pipeline, fp32 qcomms, no network emulation or compaction (validate refuses the
//    rest). With a session and options.trace, CUPTI records the GPU work into it (GPU lanes).
//
// One training step, as TorchRec runs it (base pipeline: each op waits for the previous one);
// program/step_program.h holds it as data (the ops of every rank and iteration, and the
// pipeline's schedule, which the executor follows), `embedscope program` prints it:
//   input_dist   KJT all-to-all: id counts per (shard, feature), then lengths, then ids
//                (row-wise tables bucketize ids by row range first)
//   lookup       pooled lookup of every local shard (sum / mean)
//   output_dist  all-to-all (table_wise, column_wise), reduce-scatter (row_wise),
//                reduce-scatter in the node then all-to-all across nodes (table_row_wise),
//                nothing (data_parallel)
//   dense        forward, BCE loss, backward (replicated dense part)
//   grad_dist    the reverse collectives: all-to-all, all-gather, all-to-all + all-gather
//   backward     embedding backward with the fused optimizer (data_parallel: each replica's
//                dense rows x dim gradient all-reduced as DDP does, with the rows' touched
//                flags, then the touched rows updated on every replica)
//   allreduce    dense gradients (and the loss) all-reduced in DDP buckets (dense.bucket_cap_bytes),
//                each started on the comm worker during the backward pass; SGD on the dense part
// Pipelines (spec.pipeline; the comm worker runs queued collectives one at a time, in order):
//   base         the phases above, in order, one batch per step.
//   sparse_dist  TrainPipelineSparseDist: just before the dense part of batch i, the input of
//                batch i+1 is made and bucketized and its input dist queued on the comm
//                worker, so the KJT all-to-all runs under the dense forward/backward; step i+1
//                starts from the received KJT. Same results as base.
//   semi_sync    TrainPipelineSemiSync: just before the dense part of batch i, batch i+1 is
//                input-distributed and looked up and its output dist queued on the comm worker,
//                so the embedding all-to-all of batch i+1 runs under the dense forward/backward
//                of batch i, followed on the comm worker by the input dist of batch i+2 (as in
//                sparse_dist; TorchRec's TrainPipelineSemiSync extends TrainPipelineSparseDist).
//                Staleness: batch i+1 is looked up before batch i's embedding update
//                is applied, so batch 0 sees the initial tables and batch i >= 1 sees the tables
//                after the updates of batches 0..i-2 (not i-1). The gradients of batch i+1 are
//                applied to the current tables (after batch i's update) and optimizer state;
//                the dense part is not stale. run_reference() trains the same way.
// The queued collectives of batch i+1 are always followed in the queue by a collective of
// batch i that the step waits for, so every step's collectives end inside the step.
// Gradients are those of the mean loss over the global batch (B x world samples): the
// pooled-embedding gradients are divided by the world size before the gradient dist, and the
// dense all-reduce is averaged, so every sharding type trains the same model as the
// unsharded reference.

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "embedscope/engine/input/input.h"
#include "embedscope/engine/model/held_out.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/model/events.h"

namespace embedscope::engine {

struct StepProgress {
  int64_t step = 0;          ///< measured steps done (1-based); warmup steps report 0
  int64_t total_steps = 0;
  int64_t warmup_done = 0;
  double samples_per_s = 0;  ///< global samples per second over the measured steps so far
  double eta_s = 0;
  double loss = 0;
};

/// Requests to dump the collective flight recorders (comm/flight_recorder.h) while a run goes
/// on, e.g. from a signal handler (async-signal-safe: two lock-free stores): set `signal` to the
/// signal's number, then increment `count`. Each change of `count` that the run sees makes every
/// rank of this process write its ring into the session (table `flight_recorder`) with the
/// reason "SIGUSR1", "SIGTERM", "SIGINT" ("request" for another number or 0) within about 20 ms.
struct FlightDumpRequest {
  std::atomic<int> count{0};
  std::atomic<int> signal{0};
};

/// "SIGUSR1", "SIGUSR2", "SIGTERM", "SIGINT", "SIGQUIT", else "request".
const char* flight_dump_reason(int signal);

struct TrainerOptions {
  bool trace = true;  ///< record op spans (RunResult::events)
  /// Called from rank 0's thread after every step.
  std::function<void(const StepProgress&)> on_step;
  /// Test hook: the sharded forward output of every rank, step (0-based iteration) and
  /// feature: B x embedding_dim pooled embeddings.
  std::function<void(int rank, int64_t iteration, int feature, const float* pooled, int64_t B, int64_t dim)>
      on_pooled;
  /// Test hook: replaces the generated batch of (iteration, rank).
  std::function<std::optional<Batch>(int64_t iteration, int rank)> batch_source;
  /// Test hook: `rank` stops arriving from world-group collective `sequence` on.
  struct Vanish { int rank = -1; uint64_t sequence = 0; } vanish;
  /// Re-assemble full tables (and keep the dense parameters) at the end of the run.
  bool keep_tables = false;
  /// Global held-out batches the model is evaluated on after a complete run (model/held_out.h:
  /// loss and ROC AUC, RunResult::held_out and the session's held_out_json); 0: none. Evaluated
  /// where every rank's rows are in this process's host memory: the cpu backend with every rank
  /// a thread here (not one rank per process, not the cuda backend or the emulated device unless
  /// keep_tables brought the rows back), synthetic input, no batch_source.
  int64_t held_out_batches = kDefaultHeldOutBatches;
  /// Called now and then during the held-out evaluation with (global batches done, batches);
  /// may be empty. A `cancel` set meanwhile stops the evaluation: held_out_skipped says so and
  /// the run, whose steps all completed, stays "complete" (tester46 F14).
  std::function<void(int64_t, int64_t)> held_out_progress;
  /// Keep every span in RunResult::events (they also go to the session when there is one).
  bool keep_events = true;
  /// Write the session (sessions/schema/FORMAT.md) to this path; empty: no session file.
  std::string session_path;
  /// Replace an existing regular file at session_path (otherwise that is an error).
  bool session_overwrite = false;
  /// Set (e.g. from a SIGINT handler) to stop after the current step; the run ends "cancelled".
  const std::atomic<bool>* cancel = nullptr;
  /// Dump requests for the ranks' collective flight recorders (cpu backend; null: none). Without
  /// a request a ring is dumped only when the run ends by a failure (a collective timeout, a
  /// crash, an OOM), with the reason "collective timeout" or "run ended <how>". The rings keep
  /// flight_recorder_default_capacity() entries (EMBEDSCOPE_FR_BUFFER_SIZE).
  const FlightDumpRequest* flight_dump = nullptr;
  /// Test hook: on the cpu backend, run the cuda executor's device path with host memory
  /// standing in for each GPU (the weights, lookup, row optimizer and MLP layers behind the same
  /// copies, on the CPU kernels; Gloo collectives), so that path is tested without a GPU.
  bool emulate_device = false;
  /// With emulate_device: the number of emulated devices the ranks are placed on, as the cuda
  /// backend places them on the visible GPUs with automatic ranks_per_gpu: ceil(count /
  /// emulated_devices) ranks per device, block placement (exec/gpu_placement.h); the device of
  /// each rank names it in the session's ranks table ("host memory (emulated device 0)").
  /// 0: one per rank. run_training throws SpecError when the placement is refused.
  int emulated_devices = 0;
  /// With emulate_device: the memory of each emulated device in bytes (0: unlimited). The
  /// devices.memory_bytes of the ranks placed on one device must fit in it together, else the
  /// run is refused before it starts (SpecError with the per-device breakdown).
  int64_t emulated_device_bytes = 0;
  /// Test hook, device path (cuda backend, emulate_device): false stages the table_wise /
  /// column_wise output and gradient dists through host memory as before issue 14's device dist
  /// (the looked-up rows copied back, packed on the host, the collective on host buffers, the
  /// pooled embeddings and their gradients crossing per feature), so that a test measures the
  /// copies both ways on one workload (detail::step_copy_totals). True: on the device where the
  /// rank can (sharding::RankContext::dist_on_device).
  bool device_dist = true;
  /// Test hook, device path: false keeps the KJT input dist on the host (bucketize, the lengths
  /// and ids all-to-alls on host buffers, kjt_permute there, each slot's ids and offsets copied to
  /// the device for its lookup) where the rank could run it on the device (issue 14: only with
  /// device_dist, see Rank::input_dist_on_device), so that a test compares both on one workload.
  bool device_input_dist = true;
  /// Simulated backend: the slow-network emulation of a cpu run (WorkloadSpec::network, which
  /// the simulated backend refuses in the spec: a modelled cluster's links are its profile's)
  /// as a floor under every member of every simulated collective, from the call's last
  /// arrival: max(cost model, the member's cost/network_floor.h emulated_member_floors_ns), the
  /// rule by which the Gloo backend's emulation holds the real members (commit 0c3457e8: a ring's
  /// members until the slowest port is done, another call's until its own port and each
  /// sender's fair-share delivery to it are). calibrate's check sets it to
  /// simulate a run that was measured over an emulated link (cost/calibration.h).
  NetworkSpec simulated_network_floor;
  /// One rank per process (exec/launch/, cpu backend): when `rank` >= 0 this process runs rank
  /// `rank` of the workload's devices.count ranks only, and reaches the others through the
  /// Gloo store at `rendezvous` ("file:///shared/dir": a gloo FileStore there) with every key
  /// under the prefix "embedscope/<run_id>/". Before the session file exists, each rank claims
  /// its rank in the store, publishes a digest of its workload and plan and compares it with
  /// every other rank's, and measures its wall clock against rank 0's (a store round trip);
  /// run_training throws SpecError (bad input, exit 2) when the rank is not below the world
  /// size, is claimed already (another process, or keys an earlier run of this run id left),
  /// another rank's workload or plan differs (naming both ranks and the first differing field
  /// as a JSON pointer), the store cannot be opened, or a rank does not arrive within the
  /// workload's collective_timeout_ms (naming it). The session holds this rank's records only.
  struct ProcessRank {
    int rank = -1;                   ///< -1: every rank is a thread of this process
    std::string rendezvous;          ///< store URL: file:///dir
    std::string run_id = "default";  ///< namespace of the run's keys in the store
    std::string host = "127.0.0.1";  ///< address this rank's Gloo device binds to and advertises
                                     ///< ("": the address of this host's name, Gloo's default)
    int node = -1;                   ///< the launcher's node of this rank (-1: not said)
    int local_rank = -1;             ///< the launcher's rank of it within that node (-1: not said)
  } process;
};

struct RankSummary {
  int rank = 0;
  int64_t ids_looked_up = 0;   ///< ids looked up in this rank's shards, measured steps
  int64_t unique_ids = 0;      ///< distinct rows this rank updated, summed over measured steps
  int64_t bytes_sent = 0;      ///< to other ranks, all collectives, measured steps
  int64_t bytes_received = 0;
  int64_t memory_bytes = 0;    ///< peak bytes in use on the device (arena)
  int64_t invalid_ids = 0;     ///< ids clamped or dropped (policy clamp / drop)
  int64_t skipped_lines = 0;   ///< malformed input lines skipped for this rank's batches (input.malformed_lines skip), every step
  /// hashed tables (TableSpec::hash_size): distinct ids of this rank's batches that shared their
  /// row with another distinct id of the same batch (input/hashing.h), summed over measured steps
  int64_t hash_collisions = 0;
  int64_t allocator_ns = 0;    ///< time inside the device allocator, whole run (incl. setup)
};

/// How a run ended (the session's `ended`). Exit codes (DESIGN.md): complete and cancelled 0;
/// crashed (a rank's error, a diverged loss), oom, hang, write_failed 1; bad_input 2.
/// bad_input: the input's fault found while running (ids outside a table under "invalid_ids":
/// "error", a malformed Criteo TSV line, a file cut short) - the steps before it kept (tester49
/// F11); write_failed: the session could not be written (a full disk), the run stopped at the
/// end of the step in which it learnt of it and the session keeps its commits before the
/// failure (tester49 F3).
enum class RunEnd { complete, cancelled, crashed, oom, hang, bad_input, write_failed };
const char* to_string(RunEnd e);

struct RunResult {
  RunEnd ended = RunEnd::complete;
  std::string error;                    ///< the root cause when not complete
  bool bad_input = false;               ///< the error is bad input (exit code 2)
  ShardingPlan plan;                    ///< the plan the run started with
  /// Live rebalances (WorkloadSpec::rebalance, engine/rebalance/): one per firing of the policy
  /// (moves 0 when nothing was moved), the tables moved, and the plan the run ended with
  /// (= plan without a move). Also in the session's tables `rebalances` and `plan_changes`.
  std::vector<sessions::RebalanceRecord> rebalances;
  std::vector<sessions::PlanChangeRecord> plan_changes;
  ShardingPlan final_plan;
  std::vector<int64_t> step_time_ns;    ///< measured steps: slowest rank's step time
  std::vector<double> loss;             ///< measured steps: global mean loss
  std::vector<RankSummary> ranks;
  std::vector<sessions::OpEvent> events;
  std::string session_path;             ///< the session written, if any
  int64_t tracer_overhead_ns = 0;       ///< the tracer's estimated own cost
  int64_t dropped_records = 0;
  int64_t samples_per_step = 0;         ///< batch_size x world
  /// File input with malformed_lines skip: lines skipped per iteration (warmup included),
  /// over all ranks; empty when none was skipped.
  std::vector<int64_t> skipped_lines_per_step;
  /// keep_tables: full tables (num_embeddings x embedding_dim) and dense parameters.
  std::vector<std::vector<float>> tables;
  std::vector<float> dense_params;
  /// qcomms: the numerical error of the values sent in fp16 / bf16 against their fp32 values,
  /// over the whole run and every rank: max |x - dequantize(quantize(x))|, and that divided by
  /// max |x| (norm-wise relative error). forward: the output dist (pooled embeddings, or the
  /// per-rank partial sums of row-wise tables); backward: the gradient dist. 0 for fp32.
  struct QCommsError {
    double forward_max_abs = 0, forward_relative = 0;
    double backward_max_abs = 0, backward_relative = 0;
  } qcomms_error;
  /// Per table (spec order): what its rows and optimizer state take, measured from the buffers
  /// each rank allocated (bytes, every replica of a data_parallel table counted on its rank), and
  /// the error of its stored rows. No fp32 master copy is kept for reduced-precision tables
  /// (quant/row_codec.h says why), so master_copy_bytes is 0 and reported as such.
  struct TableStorage {
    std::string name;
    TableDataType data_type = TableDataType::fp32;
    /// TableSpec::uses_stochastic_rounding of a reduced-precision table (false for fp32)
    bool stochastic_rounding = false;
    std::vector<int64_t> weight_bytes;           ///< per rank: bytes of the table's stored rows
    OptimizerStateType optimizer_state_type = OptimizerStateType::fp32;  ///< TableSpec::optimizer_state_type
    std::vector<int64_t> optimizer_state_bytes;  ///< per rank: bytes of its optimizer state (in optimizer_state_type)
    int64_t master_copy_bytes = 0;               ///< fp32 master copy of the rows (none kept)
    /// The lookup error against an fp32 copy of the same rows: over the rows the measured steps
    /// updated, max |fp32 row after the update - the row as stored| and that over max |fp32 row|
    /// (0 for fp32 tables).
    double max_abs_error = 0, relative_error = 0;
    int64_t hash_size = 0;        ///< TableSpec::hash_size (0: no hashing)
    int64_t low_rank_dim = 0;     ///< TableSpec::low_rank_dim (0: a full table; weight_bytes count A and B)
    /// Hash collisions of the table (input/hashing.h: apply_hashing) in every rank's batches,
    /// summed over the measured steps and ranks (each rank's local batch counted on its own).
    int64_t hash_collisions = 0;
    /// The same per rank (world size entries; a rank run by another process stays 0, as in
    /// weight_bytes): the collisions of rank r's own batches, summed over the measured steps.
    std::vector<int64_t> hash_collisions_per_rank;
    /// Hot-row replication (TableSharding::hot_rows, sharding/hot_rows.cpp): the rows replicated
    /// on every rank (0: none; weight_bytes and optimizer_state_bytes count the replicas), the ids
    /// of them that stayed on their bag's rank instead of crossing the input all-to-all (every
    /// rank's batches, summed over the measured steps), and the bytes of each step's all-reduce
    /// of their gradients (hot_rows x (embedding_dim + 1) fp32 values, the buffer every rank
    /// reduces; what it puts on the wire depends on the algorithm: 2 (W - 1) / W of it for a ring).
    int64_t hot_rows = 0;
    int64_t hot_ids = 0;
    int64_t hot_all_reduce_bytes = 0;
    /// TableSpec::placement, cache_policy and cache_load_factor (the last two: host_cached).
    TablePlacement placement = TablePlacement::device;
    CachePolicy cache_policy = CachePolicy::lru;
    double cache_load_factor = 0;
    /// Per rank, bytes: weight_bytes and optimizer_state_bytes of a host / host_cached table are
    /// in host memory (host_bytes = those plus LFU counters); cache_bytes is the device cache's
    /// rows (host_cached). A device table: host_bytes and cache_bytes 0.
    std::vector<int64_t> host_bytes, cache_bytes;
    /// Summed over the measured steps and ranks (the load counters of sessions/model/events.h):
    /// distinct rows of lookups in / not in the cache, rows fetched, bytes host -> device and back.
    int64_t cache_hits = 0, cache_misses = 0, rows_fetched = 0, bytes_h2d = 0, bytes_d2h = 0;
    /// TableSpec::prefetch_pipeline, and of rows_fetched / bytes_h2d what the prefetches moved
    /// (model/host_cache.h HostRowStore::prefetch; measured steps, all ranks).
    bool prefetch_pipeline = false;
    int64_t prefetched_rows = 0, prefetch_bytes_h2d = 0;
    int64_t total_weight_bytes() const;
    int64_t total_optimizer_state_bytes() const;
  };
  std::vector<TableStorage> table_storage;
  /// The held-out evaluation (TrainerOptions::held_out_batches) of a complete run; nullopt when
  /// not evaluated, and then held_out_skipped says why ("" when it was not asked for).
  std::optional<HeldOutEval> held_out;
  std::string held_out_skipped;
};

/// Runs the workload under exactly `plan` (from plan_sharding, or a hand-edited plan read by
/// plan_from_json; run_training does not plan). Throws SpecError for a spec or plan that cannot
/// run (before any thread starts and before a session file is created: a plan that does not
/// fit the workload (validate_plan), memory that does not fit the devices or this host, a cuda
/// backend without enough GPUs: backend.h), and sessions::SessionError when the session file
/// cannot be created; on the cuda backend, std::runtime_error when NCCL cannot set up its
/// communicators. Failures during the run (OOM, collective timeout, invalid ids, split
/// mismatch) end the run and are reported in RunResult and the session, never thrown and never
/// hung.
RunResult run_training(const WorkloadSpec& spec, const ShardingPlan& plan, const TrainerOptions& options = {});

}  // namespace embedscope::engine
