#pragma once
// Records shared by the engine, the collectors and the SQLite session file (FORMAT.md).
// Timestamps are integer nanoseconds on one steady clock per run, measured from the run's
// start; the wall-clock time of that start is the session's `wall_anchor_unix_ns`.

#include <cstdint>
#include <string>
#include <vector>

namespace embedscope::sessions {

/// What an op spends its time on; the same categories colour every view.
enum class OpCategory : uint8_t { input = 0, lookup = 1, comm = 2, dense = 3, optimizer = 4, memcpy = 5, other = 6 };
constexpr int kNumCategories = 7;

/// Lanes of a rank: the compute worker and the comm worker (threads of the CPU executor, or the
/// host threads of a GPU rank), and on a GPU rank its streams as CUPTI saw them: kernels of the
/// compute stream, NCCL kernels of the comm stream, and copies / memsets.
enum class Lane : uint8_t { compute = 0, comm = 1, gpu_compute = 2, gpu_comm = 3, gpu_copy = 4 };

const char* to_string(OpCategory c);
const char* to_string(Lane l);
/// Inverse of to_string; returns false for an unknown name.
bool category_from_string(const std::string& s, OpCategory& out);

/// One op span on a rank's lane. `name` points to a string with static storage duration
/// (op names are literals), so recording a span never allocates.
struct OpEvent {
  int32_t rank = 0;
  Lane lane = Lane::compute;
  OpCategory category = OpCategory::other;
  const char* name = "";
  int64_t step = 0;       ///< training step (warmup steps are negative: -warmup..-1)
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t bytes = 0;      ///< bytes sent + received by a collective, 0 otherwise
  uint64_t correlation = 0;  ///< collective sequence number within its group, 0 otherwise
};

/// One rank's view of one collective (the row `rank` of the per-peer split matrix).
struct CollectiveRecord {
  int32_t rank = 0;
  std::string op;          ///< all_to_all, reduce_scatter, all_gather, all_reduce
  std::string name;        ///< the engine's name, e.g. "output_dist/all_to_all"
  std::string group;       ///< process group: world, node0, cross1, ...
  uint64_t sequence = 0;   ///< sequence number within the group (same on every member)
  std::string dtype;       ///< float32, int64
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t bytes_sent = 0;      ///< to other ranks
  int64_t bytes_received = 0;  ///< from other ranks
  std::vector<int32_t> peers;          ///< global ranks of the group, in group order
  std::vector<int64_t> send_elements;  ///< elements sent to each peer (group order)
  std::vector<int64_t> recv_elements;  ///< elements received from each peer
};

/// Load of one table shard on one rank in one step.
struct LoadCounter {
  int64_t step = 0;
  int32_t rank = 0;
  int32_t table = 0;       ///< index into the workload's tables
  int32_t shard = 0;       ///< index into the table's shards in the sharding plan
  int64_t ids = 0;         ///< ids looked up in the shard
  int64_t unique_ids = 0;  ///< distinct rows the optimizer updated
  int64_t bytes_in = 0;    ///< ids and lengths received for the lookup
  int64_t bytes_out = 0;   ///< pooled rows produced for other ranks (and this one)
  int64_t lookup_ns = 0;   ///< time of the shard's pooled lookup
  /// Tables placed in host memory (placement host / host_cached; schema 11; 0 on the device):
  int64_t cache_hits = 0;    ///< distinct rows of each lookup found in the device cache (host_cached)
  int64_t cache_misses = 0;  ///< distinct rows of each lookup not in it (host_cached; every row of a host table)
  int64_t rows_fetched = 0;  ///< rows copied host -> device (lookups' misses, update rows not cached)
  int64_t bytes_h2d = 0;     ///< bytes copied host -> device: rows and optimizer state rows
  int64_t bytes_d2h = 0;     ///< bytes written back device -> host: updated rows, evicted dirty rows, state
};

/// How one rank's input ids of one table fell into one bucket of the table's row range, summed
/// over the measured steps (schema 3, table `id_histogram`). A table of N rows has
/// min(256, N) equal buckets: row r is in bucket floor(r * buckets / N), so bucket b holds rows
/// [row_begin, row_end) = [ceil(b N / buckets), ceil((b + 1) N / buckets)).
struct IdHistogramBucket {
  int32_t rank = 0;
  int32_t table = 0;       ///< index into the workload's tables
  int32_t bucket = 0;
  int64_t row_begin = 0;   ///< first row of the bucket
  int64_t row_end = 0;     ///< one past its last row
  int64_t ids = 0;         ///< ids in [row_begin, row_end) in the rank's input batches
};

/// One rank's step.
struct StepMetric {
  int64_t step = 0;
  int32_t rank = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  double loss = 0;  ///< global mean loss of the step (the same on every rank)
  int64_t memory_in_use_bytes = 0;  ///< device memory in use at the end of the step
  int64_t memory_peak_bytes = 0;    ///< peak device memory in use so far
};

/// Device memory of one rank at the end of one step (engine/allocator.h MemoryStats).
struct MemoryCounter {
  int64_t step = 0;
  int32_t rank = 0;
  int64_t allocated = 0;
  int64_t reserved = 0;
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;
  int64_t largest_free_block = 0;
  int64_t rounding_loss = 0;
  int64_t segments = 0;
  double external_fragmentation = 0;  ///< 1 - largest free block / free bytes in segments
  double memviz_fragmentation = 0;    ///< MemoryViz's calculate_fragmentation: sum of free gaps^2 / (sum of segment sizes)^2
};

/// One allocator action: alloc, free, segment_alloc, segment_free or oom.
struct MemoryEvent {
  int32_t rank = 0;
  int64_t time_ns = 0;
  int64_t step = 0;
  std::string action;
  int64_t address = 0;
  int64_t size = 0;       ///< block or segment bytes (oom: the rounded request)
  int64_t requested = 0;  ///< bytes asked for (alloc, free, oom)
  std::string tag;
  int64_t stream = 0;     ///< the CUDA stream (schema 5; 0 in older files and engine runs)
  int32_t stack_id = 0;   ///< `memory_stacks.stack_id` of the allocating stack; 0 = none (schema 5)
};

/// One block of a memory snapshot.
struct MemoryBlockRecord {
  int64_t segment_address = 0;
  int64_t segment_size = 0;
  int64_t address = 0;
  int64_t size = 0;
  int64_t requested = 0;
  bool allocated = false;
  std::string tag;
  int64_t stream = 0;         ///< the segment's CUDA stream (schema 5)
  int32_t stack_id = 0;       ///< `memory_stacks.stack_id` where the block was allocated; 0 = none (schema 5)
  bool pending_free = false;  ///< freed, but in use on another stream until an event completes (schema 5)
};

/// Every segment and block of one rank's device at one moment.
struct MemorySnapshot {
  int64_t id = 0;       ///< assigned by the writer
  int32_t rank = 0;
  int64_t step = 0;
  int64_t time_ns = 0;
  std::string reason;   ///< "step" (the layout changed since the last snapshot) or "oom"
  std::vector<MemoryBlockRecord> blocks;
};

/// One distinct frame of the stacks of memory events and blocks (schema 5, table
/// `memory_frames`; imported PyTorch memory snapshots).
struct MemoryFrame {
  int32_t id = 0;
  std::string filename;
  int64_t line = 0;
  std::string name;  ///< the function
};

/// Frame `depth` (0 innermost) of stack `stack_id` (schema 5, table `memory_stacks`).
struct MemoryStackFrame {
  int32_t stack_id = 0;
  int32_t depth = 0;
  int32_t frame_id = 0;
};

/// A rank's device memory after one entry of its allocator trace (schema 5, table
/// `memory_timeline`; the counters over time of an imported memory snapshot). Bytes.
struct MemoryTimelinePoint {
  int32_t rank = 0;
  int64_t entry = 0;    ///< index of the trace entry (`memory_events` of the rank, in order)
  int64_t time_ns = 0;
  int64_t allocated = 0;
  int64_t reserved = 0;
  int64_t active = 0;   ///< allocated + blocks freed but still pending on another stream
  int64_t largest_free_block = 0;
  double external_fragmentation = 0;  ///< 1 - largest free block / free bytes in segments
  double memviz_fragmentation = 0;    ///< MemoryViz's calculate_fragmentation: sum of free gaps^2 / (sum of segment sizes)^2
};

/// One shard of the sharding plan a run used (table `shards`, schema 4).
struct ShardRecord {
  int32_t table = 0;          ///< index into the workload's tables
  std::string table_name;
  std::string sharding_type;  ///< TorchRec spelling: "data_parallel", "table_wise", "row_wise", "column_wise", "table_row_wise"
  int32_t node = -1;          ///< table_row_wise: the node holding the table; otherwise -1
  int32_t shard_index = 0;    ///< index among the table's shards (= load_counters.shard)
  int32_t rank = 0;
  int64_t row_offset = 0, num_rows = 0, col_offset = 0, num_cols = 0;
  int64_t planned_bytes = -1; ///< weights + optimizer state of this shard as planned, bytes; -1 unknown
};

/// One live rebalance of a run (table `rebalances`, schema 6; engine/rebalance/): the policy
/// fired after measured step `step`, the ranks all-gathered their load counters, computed the
/// same proposal and, when it was worth it, moved its tables (plan_changes) before step + 1.
struct RebalanceRecord {
  int64_t step = 0;                ///< measured step after which it ran; the new plan serves from step + 1
  std::string reason;              ///< the trigger, e.g. "every 5 steps", "imbalance 2.80 > 1.50 over steps 3..4"
  int32_t moves = 0;               ///< tables moved whole or changed to row_wise (0: nothing worth moving, or every move refused)
  int64_t bytes_moved = 0;         ///< weights + optimizer state of the moved tables, bytes
  int64_t window_steps = 0;        ///< steps the load before was observed over
  double imbalance_before = 1.0;   ///< max/mean ids per rank over those steps, observed
  double imbalance_predicted = 1.0;  ///< the same under the new plan, predicted (the tables' ids moved with them)
  double imbalance_after = -1.0;   ///< observed over the next steps (up to window_steps, before the next rebalance); -1 none ran
  int64_t after_steps = 0;         ///< steps imbalance_after was observed over
  int64_t start_ns = 0;            ///< session clock, the earliest rank's start
  int64_t duration_ns = 0;         ///< time spent (all-gather, proposal, move, rebuild), the slowest rank's
  std::string refused;             ///< moves the proposal wanted and could not make (memory, max_bytes_per_move), "; "-joined
  /// "complete", or "failed: ..." for a move that did not finish on every rank (the run ended
  /// during it): how far each rank got; its tables stay where they were (no plan_changes rows).
  /// Schema 10; older files read "complete".
  std::string outcome = "complete";
};

/// One shard placed by a live rebalance (table `plan_changes`, schema 6; the types and rows,
/// schema 7): from `step` on, shard `shard_index` of table `table` (rows row_offset ..
/// row_offset + num_rows - 1) is on `to_rank`. A table_wise move is one row (table_wise ->
/// table_wise, all rows); a change of a table to row_wise is one row per new shard, each
/// from_rank the rank that held the whole table ("table_wise -> row_wise"). The plan at step s is
/// table `shards` with the changes of step <= s applied in order (a type change replaces the
/// table's shards by its rows of that step).
struct PlanChangeRecord {
  int64_t step = 0;             ///< first measured step under the new placement
  int32_t table = 0;            ///< index into the workload's tables
  std::string table_name;
  int32_t shard_index = 0;      ///< index among the table's shards (= shards.shard_index)
  int32_t from_rank = 0;
  int32_t to_rank = 0;
  int64_t bytes = 0;            ///< weights + optimizer state moved (0: the rows stayed on their rank)
  std::string from_type = "table_wise";  ///< the table's sharding type before (schema 7; older files: table_wise)
  std::string to_type = "table_wise";    ///< and from `step` on
  int64_t row_offset = 0;       ///< first row of the shard (schema 7)
  int64_t num_rows = -1;        ///< rows of the shard; -1 (files before schema 7): all the table's rows
  int64_t col_offset = 0;       ///< first column of the shard (schema 9)
  int64_t num_cols = -1;        ///< columns of the shard; -1 (files before schema 9): all the table's columns
};

/// One kind of problem an importer met, with its count and first example (table `import_stats`,
/// schema 5; importers/common/import_problems.h).
struct ImportStat {
  std::string name;       ///< stable name, e.g. "negative_duration", "truncated"
  std::string severity;   ///< "info", "error" or "data_loss"
  int64_t count = 0;      ///< occurrences
  std::string source;     ///< the file of the first occurrence ("" when not tied to one)
  int64_t byte_offset = -1;  ///< its byte offset in the uncompressed text, -1 unknown
  std::string example;    ///< what was wrong, with line:column where known
};

/// A lane of a rank: a host thread (the CPU executor's workers, a GPU rank's host threads) or
/// a CUDA stream as CUPTI saw it (kind "stream": gpu_compute, gpu_comm, gpu_copy).
struct LaneInfo {
  int32_t rank = 0;
  int32_t lane = 0;
  std::string name;   ///< "compute", "comm", "gpu_compute", "gpu_comm", "gpu_copy"
  std::string kind;   ///< "thread" or "stream"; imported traces also "gpu_annotation" (user spans on a GPU stream's track)
};

/// An op as stored: the name is an index into SessionReader::strings().
struct OpRecord {
  int32_t rank = 0;
  int32_t lane = 0;
  OpCategory category = OpCategory::other;
  int32_t name_id = 0;
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t bytes = 0;
  uint64_t correlation = 0;
};

/// A rank and the device it ran on.
struct RankInfo {
  int32_t rank = 0;
  std::string host;
  std::string device;                 ///< e.g. "cpu (thread)"
  int64_t memory_capacity_bytes = 0;  ///< devices.memory_bytes
};

}  // namespace embedscope::sessions
