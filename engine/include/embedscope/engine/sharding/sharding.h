#pragma once
// ShardingPlan: where every table's rows and columns live (TorchRec ShardingPlan /
// ParameterSharding). Built by plan_sharding() from the spec's default type, per-table
// overrides with explicit ranks, and a greedy placement for what the user left open.

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/model/units.h"

namespace embedscope::engine {

/// One shard of a table: rows [row_offset, row_offset + num_rows) x columns
/// [col_offset, col_offset + num_cols) held by `rank`. num_rows may be 0 (a rank that holds
/// no rows of a row-wise table still joins every collective).
struct Shard {
  int rank = 0;
  int64_t row_offset = 0;
  int64_t num_rows = 0;
  int64_t col_offset = 0;
  int64_t num_cols = 0;
};

struct TablePlan {
  int table = 0;                 ///< index into WorkloadSpec::tables
  ShardingType type = ShardingType::table_wise;
  /// table_row_wise, table_column_wise: the node holding the table; -1 for the other types
  /// (grid_shard: each column block's node is its shards' ranks / local_world_size)
  int node = -1;
  std::vector<Shard> shards;     ///< data_parallel: one full replica per rank
};

struct ShardingPlan {
  int world_size = 1;
  int local_world_size = 1;      ///< ranks per node (table_row_wise, table_column_wise, grid_shard)
  std::vector<TablePlan> tables; ///< same order as WorkloadSpec::tables
};

/// Splits n items into `parts` contiguous blocks as evenly as possible, larger blocks first:
/// 10 over 4 -> {3,3,2,2}. Used for column blocks (column_split); rows use row_wise_split.
/// Throws std::invalid_argument if parts < 1.
std::vector<int64_t> even_split(int64_t n, int parts);
/// Rows per shard of a table of `rows` rows split row-wise over `parts` ranks, TorchRec's split
/// (torchrec/distributed/sharding_plan.py, _calculate_rw_shard_sizes_and_offsets): block =
/// ceil(rows / parts); the ranks below rows / block hold `block` rows, the next the remainder,
/// the rest none. It matches TorchRec's bucketization (block_bucketize_sparse_features sends id
/// to rank id / block). 10 over 4 -> {3,3,3,1}; 14 over 8 -> {2,2,2,2,2,2,2,0}; 5 over 4 ->
/// {2,2,1,0}; 3 over 4 -> {1,1,1,0}; 0 rows -> all 0. Shards of 0 rows are valid (their rank
/// still joins every collective). Throws std::invalid_argument if parts < 1 or rows < 0.
std::vector<int64_t> row_wise_split(int64_t rows, int parts);
/// Column widths for `parts` column shards of a `dim`-wide table: multiples of 4 where dim
/// allows (the remainder dim % 4 goes to the last shard), otherwise an even split; never 0
/// wide. 16 over 3 -> {8,4,4}; 18 over 4 -> {4,4,4,6}; 6 over 4 -> {2,2,1,1}.
/// Throws std::invalid_argument unless 1 <= parts <= dim.
std::vector<int64_t> column_split(int64_t dim, int parts);

/// Builds the plan. Explicit ranks are honoured; table_wise tables without ranks and
/// column_wise shards without ranks go to the rank with the fewest bytes planned so far
/// (largest tables first, as TorchRec's greedy partitioner); column_wise without ranks uses
/// min(world, max(1, dim / 4)) shards. table_row_wise tables without a node go to the node
/// with the fewest bytes. table_column_wise: min(local_world_size, max(1, dim / 4)) column
/// shards on the least-loaded ranks of one node (the given one, else the node with the fewest
/// bytes); grid_shard: min(nodes, max(1, dim / 4)) column blocks, each on its own node (the
/// fewest bytes first) with its rows split over the node's ranks (row_wise_split). Example: a 100 x 16
/// grid_shard table on 4 ranks in 2 nodes: columns [0, 8) rows [0, 50) on rank 0 and [50, 100)
/// on rank 1, columns [8, 16) the same on ranks 2 and 3. Throws SpecError for impossible
/// requests (e.g. more column shards than columns).
ShardingPlan plan_sharding(const WorkloadSpec& spec);

/// The per-table overrides (ShardingSpec::per_table, by table name) that pin `plan` in the
/// workload spec, so that plan_sharding of the spec with them gives `plan` back as far as the
/// spec can say it: table_wise its rank; column_wise its shards' ranks in column order (the
/// widths are column_split's); table_row_wise and table_column_wise their node; row_wise,
/// data_parallel and grid_shard their type (plan_sharding places them: row_wise_split rows, every rank,
/// blocks onto the nodes with the fewest bytes). Used to turn a searched plan (plan_search)
/// into an editable workload. Throws std::invalid_argument when the plan's table count differs
/// from the spec's. Cost O(shards).
std::map<std::string, TableSharding> plan_overrides(const WorkloadSpec& spec, const ShardingPlan& plan);

/// Planned bytes per device, before anything is allocated.
/// a + b for byte counts a, b >= 0, at most INT64_MAX: the sums of an estimate, whose tables
/// may reach 2^58 bytes each (2^40 rows x 65536 fp32 columns) so that a rank's sum can pass
/// int64 (tester53 F6).
inline int64_t add_bytes_saturating(int64_t a, int64_t b) {
  return a > std::numeric_limits<int64_t>::max() - b ? std::numeric_limits<int64_t>::max() : a + b;
}

struct DeviceMemoryEstimate {
  int rank = 0;
  int64_t weights = 0;          ///< embedding shards, in each table's data_type (row_bytes of quant/row_codec.h)
  int64_t optimizer_state = 0;  ///< FBGEMM state of those shards, in each table's optimizer_state_type
  int64_t dense = 0;  ///< dense params, grads, activations (cuda: + its largest call's copies): the bytes asked for, each rounded to 512 B, not the allocator blocks that held them (their slack is in buffers)
  int64_t buffers = 0;          ///< KJT, pooled outputs and their gradients, comm buffers (pipeline_buffers included)
  int64_t pipeline_buffers = 0; ///< the part of `buffers` held by the batches the pipeline keeps ahead
  /// device caches of host_cached tables (their rows: ceil(cache_load_factor x shard rows) x row bytes)
  int64_t cache = 0;
  /// host memory, not in total(): rows, optimizer state and LFU counters of host / host_cached
  /// shards (devices.host_memory_bytes is its capacity). Their fetch buffers are in `buffers`.
  int64_t host = 0;
  /// the largest single block (rounded to 512 B)
  int64_t largest_block = 0;
  /// the least the caching / expandable allocator must reserve at once for the step's buffers
  /// under any layout (PyTorch's segment rules; planner/memory_replay.h), bytes
  int64_t min_reserved_caching = 0;
  int64_t min_reserved_expandable = 0;
  /// the most the replay's allocator (spec.memory's kind) reserved at once, its segments, with no
  /// capacity limit: a device of this many bytes serves the replay's every request, bytes
  int64_t peak_reserved = 0;
  /// Where the same replay through an allocator of devices.memory_bytes runs out, as the run's
  /// allocator would (planner/memory_replay.h AllocatorReplay::shortfall_at; only looked at
  /// when peak_reserved > devices.memory_bytes; never for cuda_async): the request refused,
  /// bytes (0: every request is served) ...
  int64_t shortfall_request = 0;
  /// ... what it was for ("weights", "optimizer state", "device cache", "hot-row replicas",
  /// "dense part": before the first step; "buffers": a step's) ...
  std::string shortfall_what;
  /// ... the replayed iteration (-1: setup, before the first step; 0: the run's first, warm-up included) ...
  int64_t shortfall_iteration = -1;
  /// ... whether it was fragmentation (the free bytes were there, not where a segment could be
  /// made), and whether the expandable / direct allocator serves the same replay at that capacity
  bool shortfall_fragmentation = false, expandable_serves = false, direct_serves = false;
  /// weights + optimizer_state + cache + dense + buffers, at most INT64_MAX (a rank beyond any
  /// device's kMaxMemoryBytes, tester53 F6, may hold tables of up to 2^58 bytes each)
  int64_t total() const {
    int64_t t = 0;
    for (const int64_t b : {weights, optimizer_state, cache, dense, buffers}) t = add_bytes_saturating(t, b);
    return t;
  }
};

/// Batches beyond the current one whose buffers the pipeline keeps in device memory while the
/// current batch trains: base 0; sparse_dist 0 (its next batch's input dist is received into
/// host memory and reaches the device only after the current batch ends); semi_sync 1 (the
/// next batch's KJT, looked-up rows, pooled outputs and output-dist buffers; the batch after
/// it is in its input dist, in host memory). step_program.cpp gives each pipeline's schedule.
int64_t device_batches_ahead(PipelineKind pipeline);

/// Estimates every device's memory (bytes) for the spec under the plan: the peak allocated
/// bytes of the rank's device arena on the cpu backend, predicted by replaying the buffers the
/// threaded executor takes and gives back - setup's shards and dense parameters, then each
/// phase of the pipeline's schedule with its KJT, pooled outputs, comm buffers, gradients and
/// activations, batches ahead included - through an allocator of spec.memory's kind
/// (planner/memory_replay.h), so PyTorch's rounding and unsplit block remainders count as a run
/// counts them. Bags hold their expected ids plus a margin that the largest batch of the run
/// exceeds with probability <= 5% (max_quantile_z); data-parallel gradients their expected
/// distinct rows. Measured within 2% of the peak on every DLRM preset x sharding type x
/// optimizer x pipeline (tests/engine/planner/memory_matrix_test.cpp). `buffers` is the peak
/// less weights, optimizer state and dense; `pipeline_buffers` the part of it held by batches
/// ahead of the one training at the peak. Not counted: fragmentation of reserved segments
/// (reserved can exceed the estimate), memory compaction, live rebalancing, the cuda backend's
/// copies of the lookups' ids and the updates' rows. With devices.backend cuda the dense part's
/// device memory is counted in `dense`: a dot / cat dense part is resident (its activations'
/// block of dense_resident_activation_floats_per_sample floats a sample, model/dense.h, in place
/// of the cpu backend's), DCN-v2 and "dense": null add each layer, interaction and loss call's
/// copies and the SGD step's parameters and gradients (planner/memory_replay.h
/// dense_device_calls); within 0.02% of the device path's peak on the host stand-in
/// (tests/engine/planner/cuda_staging_estimate_test.cpp; not measured on a GPU).
std::vector<DeviceMemoryEstimate> estimate_memory(const WorkloadSpec& spec,
                                                  const ShardingPlan& plan);

/// The planned storage of one table over all its shards (every replica of a data_parallel
/// table counted), before anything is allocated: what `embedscope plan` prints per table.
struct TableStorageEstimate {
  int table = 0;                     ///< index into WorkloadSpec::tables
  TableDataType data_type = TableDataType::fp32;
  int64_t rows = 0;                  ///< stored rows: hash_size when hashing, else num_embeddings
  /// bytes of one row as stored, over its column shards: the sum over the plan's distinct
  /// column ranges of row_bytes(data_type, their width) (quant/row_codec.h), so an int8 / int4
  /// column shard's own 8-byte scale and bias count once per shard (16 x int8 over 2 column
  /// shards: 2 x (8 + 8) = 32; table_wise: 16 + 8 = 24); rows x row_bytes = weight_bytes for a
  /// table stored once (a data_parallel table's replicas multiply it, tester55 F5); a low-rank
  /// table: of one row of A, 4 low_rank_dim
  int64_t row_bytes = 0;
  int64_t low_rank_dim = 0;          ///< TableSpec::low_rank_dim (0: a full table)
  /// sum over the shards of num_rows x row_bytes(data_type, num_cols) (an int8 column shard keeps
  /// its own 8-byte scale and bias a row), bytes; a low-rank table: A and B of every shard, 4 (rows
  /// r + r dim) (model/low_rank.h: shard_weight_bytes); not rounded to allocator blocks
  int64_t weight_bytes = 0;
  OptimizerStateType optimizer_state_type = OptimizerStateType::fp32;
  int64_t optimizer_state_bytes = 0; ///< the shards' FBGEMM state, in optimizer_state_type, bytes
  /// TableSpec::placement: weight_bytes and optimizer_state_bytes are in host memory unless device
  TablePlacement placement = TablePlacement::device;
  int64_t cache_bytes = 0;           ///< host_cached: the device caches of every shard, bytes
};

/// Per table (spec order) its stored rows and bytes under the plan. Example: 100,000 x 16 int8
/// rows, table_wise: rows 100,000, row_bytes 24, weight_bytes 2,400,000; with hash_size 1,000 and
/// fp16: rows 1,000, row_bytes 32, weight_bytes 32,000; fp32 with low_rank_dim 4: rows 100,000,
/// row_bytes 16, weight_bytes 4 (400,000 + 64) = 1,600,256. Cost O(shards).
std::vector<TableStorageEstimate> estimate_table_storage(const WorkloadSpec& spec, const ShardingPlan& plan);

/// The least the allocator `kind` must reserve at once on the device of `e` (bytes), PyTorch's
/// rules (c10 CUDACachingAllocator): caching and expandable, e's min_reserved_caching /
/// min_reserved_expandable (the large pool's live blocks in their segments or pages, plus the
/// small pool's in 2 MiB segments, at the worst moment of the replay); direct and cuda_async
/// (no segments of their own): 0.
int64_t min_reservation(AllocatorKind kind, const DeviceMemoryEstimate& e);

/// Which of the allocator replay's shortfalls (DeviceMemoryEstimate::shortfall_request) a fit
/// check counts.
enum class ShortfallScope {
  /// Every one (the planner: `plan`, plan_stats, the search, --allow-storage): a plan whose
  /// replay runs out does not fit - except one in a step when memory.compaction is set, which
  /// the replay does not model (the compaction between steps is what rescues such a run).
  plan,
  /// Only one before the first step, allocating the shards or the dense part, whose sizes and
  /// order are exact (run's pre-run check: refused rather than an OOM at the weights, tester48
  /// F9); a step's is left to the run, whose session shows it (the teaching scenarios'
  /// fragmentation, caching_vs_expandable; the replay's batches hold a quantile of the ids).
  setup,
};

/// Whether `e`'s allocator replay runs out at devices.memory_bytes in a way `scope` counts
/// (ShortfallScope): e.shortfall_request > 0, cuda_async never, a step's not under `setup` nor
/// with memory.compaction.
bool allocator_runs_out(const WorkloadSpec& spec, const DeviceMemoryEstimate& e, ShortfallScope scope);

/// Why devices.memory_bytes cannot hold one segment of the workload's allocator: the caching
/// and expandable allocators map memory in segments of at least 2 MiB (memory/allocator.h
/// kSmallBuffer), so a smaller device holds nothing. "1.0 MiB is smaller than one 2.0 MiB segment
/// of the caching allocator", or "" when it holds one or the allocator does not segment (direct,
/// cuda_async). The reason alone, without a JSON pointer: check_memory_fits names
/// /devices/memory_bytes, `--simulate PROFILE` the profile's /gpu/memory_bytes (tester54 F8).
std::string segment_shortfall(const WorkloadSpec& spec);

/// Throws SpecError if a device's estimate exceeds devices.memory_bytes, with the per-device
/// breakdown (weights, optimizer state, dense, buffers) of every device that does not fit and one
/// "to try" line (plan --auto / --allow-storage, row_wise or column_wise for the largest table by
/// its stored bytes, named, more devices, a larger devices.memory_bytes), or if
/// its allocator's min_reservation does (no layout of segments could hold the step; the error
/// gives the size that would, and the allocators that fit), or if the replay of its buffers in
/// the run's order through its allocator at that capacity runs out (allocator_runs_out; tester48
/// F9): "rank 1: fits in bytes (36.7 MiB of 40.0 MiB), but the caching allocator reserves 48.0
/// MiB for its buffers in the run's order: at 40.0 MiB it runs out allocating 12.2 MiB for the
/// weights before the first step (...); use the expandable allocator or devices of at least 48.0
/// MiB". The 5 % headroom of a storage change (storage_fallback.h kStorageHeadroom) is on top of
/// this, on the allocated bytes.
void check_memory_fits(const WorkloadSpec& spec, const std::vector<DeviceMemoryEstimate>& est,
                       ShortfallScope scope = ShortfallScope::plan);

/// The plan as JSON (per table: name, sharding type, shards with rank, rows and columns).
nlohmann::json to_json(const WorkloadSpec& spec, const ShardingPlan& plan);

/// "12.5 MiB"-style byte counts: sessions::format_bytes (embedscope/sessions/model/units.h),
/// named here for the engine's own callers.
using sessions::format_bytes;

}  // namespace embedscope::engine
