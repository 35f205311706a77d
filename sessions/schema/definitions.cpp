#include "schema/definitions.h"

#include <charconv>
#include <cstring>
#include <limits>
#include <system_error>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace embedscope::sessions::schema::detail {

namespace {
using T = SqlType;

template <class V>
std::string json_array(const std::vector<V>& v) {
  return fmt::format("[{}]", fmt::join(v, ","));
}
// `text` as json_array writes it ("[1,-2,3]", "[]": integers in decimal, no spaces) into `out`;
// false (out partly filled) for anything else, which parse_array reads as JSON.
template <class V>
bool parse_integer_array(const char* text, std::vector<V>& out) {
  static_assert(std::is_integral_v<V>);
  const char* const end = text + std::strlen(text);
  const char* p = text;
  if (p == end || *p++ != '[') return false;
  if (*p == ']') return p + 1 == end;
  for (;;) {
    V x{};
    const auto [next, ec] = std::from_chars(p, end, x);
    if (ec != std::errc() || next == p) return false;
    out.push_back(x);
    p = next;
    if (p < end && *p == ',') {
      ++p;
      continue;
    }
    return p < end && *p == ']' && p + 1 == end;
  }
}

// A JSON array of integers. What json_array wrote is read directly (a collectives row has three
// of them: a 26,000-step session of 2 ranks has 460,000 rows, and a JSON parse of each took most
// of the time its collectives took to read); anything else through nlohmann::json, as before.
template <class V>
std::vector<V> parse_array(const unsigned char* text) {
  std::vector<V> out;
  if (!text) return out;
  if (parse_integer_array(reinterpret_cast<const char*>(text), out)) return out;
  out.clear();
  for (const auto& v : nlohmann::json::parse(reinterpret_cast<const char*>(text))) out.push_back(v.get<V>());
  return out;
}
/// A collectives column holding one of the record's per-peer lists as a JSON array.
template <auto M>
Col<CollectiveRecord> split_list(const char* name, const char* meaning) {
  Col<CollectiveRecord> c;
  c.info = {name, T::text, true, "", meaning, 1};
  c.codec.put = [](sqlite3_stmt* st, int i, const CollectiveRecord& r) { bind_value(st, i, json_array(r.*M)); };
  c.codec.get = [](sqlite3_stmt* st, int i, CollectiveRecord& r) {
    using V = typename decltype(value_of(M))::value_type;
    try {
      r.*M = parse_array<V>(sqlite3_column_text(st, i));
    } catch (const std::exception& e) {
      throw RowError(fmt::format("collectives row {} {}: bad split list: {}", r.group, r.sequence, e.what()));
    }
  };
  return c;
}
// A value as the message shows it: "text 'abc'", "NULL", "the real 2.5", "a blob of 4 bytes".
std::string shown_value(sqlite3_stmt* st, int n) {
  switch (sqlite3_column_type(st, n)) {
    case SQLITE_NULL:
      return "NULL";
    case SQLITE_FLOAT:
      return fmt::format("the real {}", sqlite3_column_double(st, n));
    case SQLITE_BLOB:
      return fmt::format("a blob of {} bytes", sqlite3_column_bytes(st, n));
    case SQLITE_TEXT: {
      const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(st, n));
      std::string v = t ? t : "";
      if (v.size() > 40) v = v.substr(0, 40) + "...";
      return fmt::format("text '{}'", v);
    }
    default:
      return std::to_string(sqlite3_column_int64(st, n));
  }
}

// Steps and collectives end where they start or later.
template <class R>
std::string ends_before_start(const R& r) {
  if (r.end_ns >= r.start_ns) return "";
  int64_t d = 0;
  if (__builtin_sub_overflow(r.end_ns, r.start_ns, &d))
    return fmt::format("{} is before start_ns {}", r.end_ns, r.start_ns);
  return fmt::format("{} is before start_ns {} (a duration of {} ns)", r.end_ns, r.start_ns, d);
}
}  // namespace

std::string value_problem(sqlite3_stmt* st, int n, SqlType type, const ValueRule& rule, const ReadContext& ctx) {
  if (value_ok(st, n, type, rule, ctx)) return "";
  const int t = sqlite3_column_type(st, n);
  if (type == SqlType::integer && t != SQLITE_INTEGER) return shown_value(st, n) + " where an integer is stored";
  if (type != SqlType::integer) return shown_value(st, n) + " where a number is stored";
  const int64_t v = sqlite3_column_int64(st, n);
  if (rule.rank) {
    if (ctx.world_size > 0)
      return fmt::format("rank {} is outside the world of {} rank{} (metadata world_size: ranks 0-{})", v,
                         ctx.world_size, ctx.world_size == 1 ? "" : "s", ctx.world_size - 1);
    return fmt::format("rank {} is not a rank id in [0, {})", v, meta::kMaxWorldSize);
  }
  if (rule.lo == 0 && v < 0) return fmt::format("{} is negative", v);
  return fmt::format("{} is outside [{}, {}]", v, rule.lo, rule.hi);
}

RowError refused_value(sqlite3_stmt* st, const TableInfo& table, const std::string& column, const std::string& why,
                       const ReadContext& ctx) {
  // the row by its key where every key column was read, else by its place in the query's order
  std::string key;
  size_t found = 0;
  for (const auto& k : table.primary_key)
    for (int c = 0; c < sqlite3_column_count(st); ++c)
      if (k == sqlite3_column_name(st, c)) {
        key += fmt::format("{}{} {}", found++ ? ", " : "", k, shown_value(st, c));
        break;
      }
  if (found != table.primary_key.size() && !table.primary_key.empty()) {
    // a key not read with the record (collectives.id, memory_events.id): looked up by the row's
    // place in the query's order (a tail without parameters; else the place is what is said)
    key.clear();
    found = 0;
    std::string cols;
    for (const auto& k : table.primary_key) cols += (cols.empty() ? "" : ", ") + k;
    sqlite3_stmt* q = nullptr;
    if (std::string(ctx.order).find('?') == std::string::npos &&
        sqlite3_prepare_v2(sqlite3_db_handle(st),
                           fmt::format("SELECT {} FROM {} {} LIMIT 1 OFFSET {}", cols, table.name, ctx.order, ctx.row)
                               .c_str(),
                           -1, &q, nullptr) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
      for (const auto& k : table.primary_key) {
        key += fmt::format("{}{} {}", found ? ", " : "", k, shown_value(q, static_cast<int>(found)));
        ++found;
      }
    sqlite3_finalize(q);
  }
  const std::string row = found == table.primary_key.size() && found > 0
                              ? fmt::format("row ({})", key)
                              : fmt::format("row {} ({})", ctx.row + 1, ctx.order);
  return RowError(fmt::format("table {}, {}, column {}: {}: the session file is damaged or was edited", table.name, row,
                              column, why));
}

const TableInfo& metadata_table() {
  static const TableInfo t = RecordTable<void*>(
      {"metadata", "one row per key: what ran, where, how it ended (the keys: section Metadata below)", {"key"}, true},
      {column<void*>("key", T::text, "the key (model/metadata_keys.h)", false),
       column<void*>("value", T::text, "its value, as text")}).info;
  return t;
}

const TableInfo& strings_table() {
  static const TableInfo t = RecordTable<void*>(
      {"strings", "interned op names; ids are dense from 0", {"id"}, false},
      {column<void*>("id", T::integer, "the name's id (`ops.name_id`)", false),
       column<void*>("value", T::text, "the op name")}).info;
  return t;
}

const TableInfo& categories_table() {
  static const TableInfo t = RecordTable<void*>(
      {"categories", "the op categories: 0 input, 1 lookup, 2 comm, 3 dense, 4 optimizer, 5 memcpy, 6 other", {"id"},
       false},
      {column<void*>("id", T::integer, "`ops.category`", false), column<void*>("name", T::text, "its name")}).info;
  return t;
}

const RecordTable<RankInfo>& ranks_table() {
  static const RecordTable<RankInfo> t(
      {"ranks", "one row per rank: the host it ran on and its device", {"rank"}, false},
      {field<&RankInfo::rank>("rank", "the rank").rank_id(), field<&RankInfo::host>("host", "host name"),
       field<&RankInfo::device>("device", "`cpu (thread)` for the CPU executor, `NVIDIA H200 (cuda:0)` for the cuda executor"),
       field<&RankInfo::memory_capacity_bytes>(
           "memory_capacity_bytes", "device capacity, bytes (`devices.memory_bytes`; on a GPU capped at its free memory when the run started)")});
  return t;
}

const RecordTable<LaneInfo>& lanes_table() {
  static const RecordTable<LaneInfo> t(
      {"lanes", "one row per lane of a rank", {"rank", "lane"}, true,  1,
       "Lane 0 `compute` and lane 1 `comm` (`kind` `thread`: the CPU executor's workers, or a GPU rank's host "
       "threads), and on GPU ranks (`kind` `stream`, from CUPTI) lane 2 `gpu_compute` (kernels), 3 `gpu_comm` (NCCL "
       "kernels, comm stream), 4 `gpu_copy` (memcpy / memset), and 5 `gpu_sync` (`kind` `sync`: CUPTI's "
       "synchronization records, the host waiting for the device - cudaStreamSynchronize, cudaEventSynchronize, "
       "cudaStreamWaitEvent, cudaDeviceSynchronize -, neither compute nor comm in the analyses and never on the "
       "critical path; older files put them on lane 0). Imported sessions number their lanes per rank: the "
       "trace's threads (`thread`), then the user spans drawn on GPU tracks (`gpu_annotation`), then each GPU stream "
       "(`stream`), each named after the trace (`thread 200 (trainer)`, `stream 7 (cuda:0 NVIDIA A100)`)."},
      {field<&LaneInfo::rank>("rank", "the rank").rank_id(), field<&LaneInfo::lane>("lane", "the lane number (0..255)"),
       field<&LaneInfo::name>("name", "`compute`, `comm`, `gpu_compute`, `gpu_comm`, `gpu_copy`, `gpu_sync`"),
       field<&LaneInfo::kind>("kind", "`thread`, `stream` or `sync` (cuda runs' waits); imported sessions also `gpu_annotation` and `annotation` (an Nsight export's NVTX ranges, a lane per thread)"),
       column<LaneInfo>("max_duration_ns", T::integer, "the longest op on the lane, ns: a range query uses it to bound its index scan",
                        true, "0")});
  return t;
}

const TableInfo& ops_table() {
  static const TableInfo t = RecordTable<void*>(
      {"ops", "op spans", {"lane_key", "start_ns", "id"}, true, 1,
       "The primary key clusters the ops of a lane by start time: \"the ops of rank r, lane l that overlap [t0, t1)\" "
       "is one range scan (`lane_key = r * 256 + l AND start_ns BETWEEN t0 - max_duration_ns AND t1`)."},
      {column<void*>("lane_key", T::integer, "`rank * 256 + lane` (one integer key inserts faster than two; `op_view` splits it)", false),
       column<void*>("start_ns", T::integer, "start of the span, ns", false),
       column<void*>("id", T::integer, "insertion order, unique", false),
       column<void*>("end_ns", T::integer, "end of the span, ns", false),
       column<void*>("category", T::integer, "`categories.id`", false),
       column<void*>("name_id", T::integer,
                     "`strings.id` of the op name (`lookup`, `input_dist/ids`, `output_dist/reduce_scatter`, `dense_forward_backward`, ...)", false),
       column<void*>("step", T::integer, "training step", false),
       column<void*>("bytes", T::integer, "for a collective: bytes sent + received by this rank; 0 otherwise", false),
       column<void*>("correlation", T::integer,
                     "for a collective: its sequence number in its group (joins `collectives.sequence`); in imported sessions "
                     "the trace's correlation id joining a GPU op and the host call that launched it; 0 otherwise",
                     false)})
                                .info;
  return t;
}

const RecordTable<CollectiveRecord>& collectives_table() {
  static const RecordTable<CollectiveRecord> t(
      {"collectives", "one row per collective per rank", {"id"}, false, 1,
       "The full split matrix of a collective is the rows of all ranks with the same (`group_name`, `sequence`).",
       {{"collectives_by_sequence", {"group_name", "sequence"}}}},
      {column<CollectiveRecord>("id", T::integer, "insertion order", false),
       field<&CollectiveRecord::rank>("rank", "the rank").rank_id(),
       field<&CollectiveRecord::op>("op", "`all_to_all`, `reduce_scatter`, `all_gather`, `all_reduce`"),
       field<&CollectiveRecord::name>("name", "the engine's name of the step it serves, e.g. `output_dist/all_to_all`; "
                                              "split-size checks are `.../split_check` all-gathers"),
       field<&CollectiveRecord::group>("group_name", "process group: `world`, `node<n>`, `cross<l>`"),
       field<&CollectiveRecord::sequence>("sequence", "sequence number within the group (the same on every member)"),
       field<&CollectiveRecord::dtype>("dtype", "`float32`, `int64`, and `float16` / `bfloat16` for quantized comms"),
       field<&CollectiveRecord::step>("step", "training step"),
       field<&CollectiveRecord::start_ns>("start_ns", "start, ns"), field<&CollectiveRecord::end_ns>("end_ns", "end, ns"),
       field<&CollectiveRecord::bytes_sent>("bytes_sent", "bytes to other ranks (a ring all-reduce counts 2 (n-1)/n of the buffer each way, in whole elements: model/ring_all_reduce.h)")
           .at_least(0),
       field<&CollectiveRecord::bytes_received>("bytes_received", "bytes from other ranks").at_least(0),
       split_list<&CollectiveRecord::peers>("peers", "JSON array: global ranks of the group, in group order"),
       split_list<&CollectiveRecord::send_elements>(
           "send_elements", "JSON array: elements sent to each peer (group order; empty for all-reduce, which has no per-peer split)"),
       split_list<&CollectiveRecord::recv_elements>("recv_elements", "JSON array: elements received from each peer")},
      {{"end_ns", &ends_before_start<CollectiveRecord>}});
  return t;
}

const RecordTable<LoadCounter>& load_counters_table() {
  static const RecordTable<LoadCounter> t(
      {"load_counters", "per step x rank x table shard", {"step", "rank", "table_index", "shard"}, true},
      {field<&LoadCounter::step>("step", "training step"), field<&LoadCounter::rank>("rank", "the rank").rank_id(),
       field<&LoadCounter::table>("table_index", "index into `workload_json` tables").at_least(0),
       field<&LoadCounter::shard>("shard", "index into that table's shards (`shards.shard_index`, `sharding_plan_json`); -1: the rank's replica of the table's `hot_rows`, the ids of its own batch it looked up there").at_least(-1),
       field<&LoadCounter::ids>("ids", "ids looked up in the shard").at_least(0),
       field<&LoadCounter::unique_ids>("unique_ids", "distinct rows the fused optimizer updated").at_least(0),
       field<&LoadCounter::bytes_in>("bytes_in", "ids and lengths received for the lookup, bytes").at_least(0),
       field<&LoadCounter::bytes_out>("bytes_out", "pooled rows the lookup produced, bytes").at_least(0),
       field<&LoadCounter::lookup_ns>("lookup_ns", "time of the shard's pooled lookup, ns").at_least(0),
       field<&LoadCounter::cache_hits>("cache_hits", "host_cached tables: distinct rows of the lookups found in the device cache", 11).at_least(0),
       field<&LoadCounter::cache_misses>("cache_misses", "tables in host memory: distinct rows of the lookups not in the device cache (every row of a `host` table)", 11).at_least(0),
       field<&LoadCounter::rows_fetched>("rows_fetched", "tables in host memory: distinct rows the step's lookup and prefetch missed and copied host to device (an update's reads of rows not cached are bytes only)", 11).at_least(0),
       field<&LoadCounter::bytes_h2d>("bytes_h2d", "tables in host memory: bytes copied host to device (rows and optimizer state rows)", 11).at_least(0),
       field<&LoadCounter::bytes_d2h>("bytes_d2h", "tables in host memory: bytes written back device to host (updated rows, evicted dirty rows, optimizer state rows)", 11).at_least(0)});
  return t;
}

const RecordTable<StepMetric>& steps_table() {
  static const RecordTable<StepMetric> t(
      {"steps", "per step x rank", {"step", "rank"}, true},
      {field<&StepMetric::step>("step", "training step"), field<&StepMetric::rank>("rank", "the rank").rank_id(),
       field<&StepMetric::start_ns>("start_ns", "start of the rank's step window, ns"),
       field<&StepMetric::end_ns>("end_ns", "its end, ns"),
       field<&StepMetric::loss>("loss", "global mean loss of the step (the same on every rank)"),
       field<&StepMetric::memory_in_use_bytes>("memory_in_use_bytes", "device memory the rank holds at the end of the step, bytes")
           .at_least(0),
       field<&StepMetric::memory_peak_bytes>("memory_peak_bytes", "the most it held so far, bytes").at_least(0)},
      {{"end_ns", &ends_before_start<StepMetric>}});
  return t;
}

const RecordTable<MemoryCounter>& memory_counters_table() {
  static const RecordTable<MemoryCounter> t(
      {"memory_counters", "device memory per step x rank, at the end of every step (warmup included)", {"step", "rank"},
       true, 2,
       "A run that fails (`oom`, `hang`, `crashed`) also records each rank's row for the step it was in when the run "
       "ended, unless that step's row exists (written at the OOM itself): a rank holding its weights when another "
       "rank failed has its memory recorded too."},
      {field<&MemoryCounter::step>("step", "training step"), field<&MemoryCounter::rank>("rank", "the rank").rank_id(),
       field<&MemoryCounter::allocated>("allocated_bytes", "live blocks, bytes").at_least(0),
       field<&MemoryCounter::reserved>("reserved_bytes", "segments, bytes").at_least(0),
       field<&MemoryCounter::peak_allocated>("peak_allocated_bytes", "peak of allocated_bytes so far").at_least(0),
       field<&MemoryCounter::peak_reserved>("peak_reserved_bytes", "peak of reserved_bytes so far").at_least(0),
       field<&MemoryCounter::largest_free_block>("largest_free_block_bytes", "the largest free block, bytes").at_least(0),
       field<&MemoryCounter::rounding_loss>("rounding_loss_bytes", "allocated - requested: the 512-byte rounding"),
       field<&MemoryCounter::segments>("segments", "segments reserved").at_least(0),
       field<&MemoryCounter::external_fragmentation>("external_fragmentation",
                                                     "1 - largest free block / free bytes in reserved segments"),
       field<&MemoryCounter::memviz_fragmentation>(
           "memviz_fragmentation", "PyTorch MemoryViz's measure (MemoryViz.js calculate_fragmentation): sum of squared free gaps / (sum of segment sizes)^2; 1 = the free memory in one piece, toward 0 = scattered (0 with nothing free); sessions written before 2026-12-06 divide by the sum of squared segment sizes")});
  return t;
}

const RecordTable<MemoryEvent>& memory_events_table() {
  static const RecordTable<MemoryEvent> t(
      {"memory_events", "the memory history: every allocator action of every rank, in order", {"id"}, false, 2,
       "As PyTorch's `_record_memory_history` keeps them. Replaying `alloc` and `free` of a rank gives its allocated "
       "bytes at any moment. An imported PyTorch memory snapshot keeps PyTorch's actions: `alloc`, `free_requested`, "
       "`free_completed` (a block is reusable from here), `segment_alloc`, `segment_free`, `segment_map`, "
       "`segment_unmap`, `oom` (`address` = the device's free bytes), `snapshot`, `annotate`. A cuda run adds CUPTI's "
       "MEMORY2 records as `cupti_alloc` / `cupti_free` (the driver's cudaMalloc / cudaFree / pool allocations: "
       "`tag` the memory kind, `cuda_device`, `cuda_pinned`, ..., with `_pool` for a memory pool's; `stream` the "
       "asynchronous call's CUPTI stream id, 0 otherwise; the rank of that stream, else of the device): beside the "
       "rank's own allocator's actions, which they never change (the arena's segments appear in both)."},
      {column<MemoryEvent>("id", T::integer, "order of the actions", false),
       field<&MemoryEvent::rank>("rank", "the rank").rank_id(), field<&MemoryEvent::time_ns>("time_ns", "when, ns"),
       field<&MemoryEvent::step>("step", "training step (setup's allocations carry the step before the first)"),
       field<&MemoryEvent::action>("action", "`alloc`, `free`, `segment_alloc`, `segment_free`, `oom`; cuda runs also `cupti_alloc`, `cupti_free`"),
       field<&MemoryEvent::address>("address", "block or segment; for `expandable` the pages added or returned; for `oom` "
                                                   "the device's free bytes (capacity - reserved), as PyTorch records them"),
       field<&MemoryEvent::size>("size", "block or segment bytes; for `oom` the rounded request"),
       field<&MemoryEvent::requested>("requested", "bytes asked for"), field<&MemoryEvent::tag>("tag", "what the memory holds"),
       field<&MemoryEvent::stream>("stream", "the CUDA stream (0: the default stream, and every engine run)", 5),
       field<&MemoryEvent::stack_id>("stack_id", "`memory_stacks.stack_id` of the stack that asked; 0 = none", 5)});
  return t;
}

const RecordTable<MemorySnapshot>& memory_snapshots_table() {
  static const RecordTable<MemorySnapshot> t(
      {"memory_snapshots", "a snapshot of every segment and block of a rank's device (its blocks: `memory_blocks`)",
       {"id"}, false, 2,
       "Taken at a step end when the layout changed since the rank's previous snapshot (`reason` `step`; a steady run "
       "stores one per rank), and at an out-of-memory error (`reason` `oom`: taken inside the failing allocation, so "
       "it is the layout that could not hold the request, with every buffer of that moment still alive)."},
      {field<&MemorySnapshot::id>("id", "the snapshot (assigned by the writer)"),
       field<&MemorySnapshot::rank>("rank", "the rank").rank_id(), field<&MemorySnapshot::step>("step", "training step"),
       field<&MemorySnapshot::time_ns>("time_ns", "when, ns"), field<&MemorySnapshot::reason>(
           "reason", "`step`, `oom`, `rebalance` (after a live rebalance moved shards: the new layout), or `dump` (an imported PyTorch memory snapshot: its segments and blocks at `_dump_snapshot`)")});
  return t;
}

const RecordTable<BlockRow>& memory_blocks_table() {
  static const RecordTable<BlockRow> t(
      {"memory_blocks", "the blocks of a memory snapshot", {"snapshot_id", "address"}, true, 2,
       "With the `cuda_async` allocator a snapshot has one opaque segment (the memory pool, `segment_address` the pool "
       "handle, size its reserved bytes): the pool does not reveal where its allocations are, so the live allocations "
       "are listed packed in address order from the segment start (their addresses are not the pool's), then one free "
       "block for the rest."},
      {field<&BlockRow::snapshot_id>("snapshot_id", "`memory_snapshots.id`"),
       nested<&BlockRow::block, &MemoryBlockRecord::address>("address", "the block's address"),
       nested<&BlockRow::block, &MemoryBlockRecord::segment_address>("segment_address", "its segment's address"),
       nested<&BlockRow::block, &MemoryBlockRecord::segment_size>("segment_size", "its segment's size, bytes"),
       nested<&BlockRow::block, &MemoryBlockRecord::size>("size", "block bytes"),
       nested<&BlockRow::block, &MemoryBlockRecord::requested>("requested", "bytes asked for (0 when free)"),
       nested<&BlockRow::block, &MemoryBlockRecord::allocated>("allocated", "0 free, 1 allocated (or freed but `pending_free`)"),
       nested<&BlockRow::block, &MemoryBlockRecord::tag>(
           "tag", "`weights`, `optimizer_state`, `kjt`, `pooled_output`, `gradients`, `comm_buffer`, `activations`, "
                  "`dense`; empty when free"),
       nested<&BlockRow::block, &MemoryBlockRecord::stream>("stream", "its segment's CUDA stream", 5),
       nested<&BlockRow::block, &MemoryBlockRecord::stack_id>("stack_id", "`memory_stacks.stack_id` where it was allocated; 0 = none", 5),
       nested<&BlockRow::block, &MemoryBlockRecord::pending_free>(
           "pending_free", "1: freed, but still in use on another stream (PyTorch's `active_pending_free`)", 5)});
  return t;
}

const RecordTable<IdHistogramBucket>& id_histogram_table() {
  static const RecordTable<IdHistogramBucket> t(
      {"id_histogram", "ids over each table's row range, per (table, bucket, rank) with ids",
       {"table_index", "bucket", "rank"}, true, 3,
       "For the load view's hot rows against the shard boundaries: a table of N rows has min(256, N) equal buckets, "
       "row r falls in bucket floor(r * buckets / N) (model/id_buckets.h). Each id of the global batch is counted once, "
       "by the rank whose batch holds it, whatever the sharding, with the step that looked the batch up; where the "
       "metadata `id_histogram_counts` is `counted_lookups`, only in the measured steps `stats` counts (a pipeline's "
       "fill and drain steps left out: its ids per table are those steps' load counters'), in older sessions every "
       "measured step's batch. A run writes each rank's changed buckets with each "
       "step's records, in the same transaction (a killed or crashed run keeps the ids of exactly the steps it kept; "
       "sessions of older Embedscope builds, and lm_embedding sessions before 2026-12-06, have buckets only where the "
       "run ended complete or cancelled); empty buckets have no row, except that an lm_embedding run's complete or "
       "cancelled end writes every bucket of each counting rank, the empty ones with 0."},
      {field<&IdHistogramBucket::rank>("rank", "whose input batches were counted").rank_id(),
       field<&IdHistogramBucket::table>("table_index", "index into `workload_json` tables"),
       field<&IdHistogramBucket::bucket>("bucket", "the bucket"),
       field<&IdHistogramBucket::row_begin>("row_begin", "first row of the bucket"),
       field<&IdHistogramBucket::row_end>("row_end", "one past its last row"),
       field<&IdHistogramBucket::ids>("ids", "ids in [row_begin, row_end), summed over the steps counted (see below)").at_least(0)});
  return t;
}

const RecordTable<ShardRecord>& shards_table() {
  static const RecordTable<ShardRecord> t(
      {"shards", "the sharding plan the run used: one row per shard of each table", {"table_index", "shard_index"},
       true, 4,
       "Older files have no such table: their plan is the metadata `sharding_plan_json`, from which "
       "SessionReader::shards() builds the same rows (with `planned_bytes` -1)."},
      {field<&ShardRecord::table>("table_index", "index into `workload_json` tables"),
       field<&ShardRecord::table_name>("table_name", "the table's name"),
       field<&ShardRecord::sharding_type>(
           "sharding_type", "TorchRec spelling: `data_parallel`, `table_wise`, `row_wise`, `column_wise`, `table_row_wise`, "
                            "`table_column_wise`, `grid_shard`"),
       field<&ShardRecord::node>("node", "`table_row_wise`, `table_column_wise`: the node holding the table; otherwise -1"),
       field<&ShardRecord::shard_index>("shard_index", "index among the table's shards (= `load_counters.shard`)"),
       field<&ShardRecord::rank>("rank", "the rank holding the shard").rank_id(),
       field<&ShardRecord::row_offset>("row_offset", "first row of the shard"),
       field<&ShardRecord::num_rows>("num_rows", "rows in the shard"),
       field<&ShardRecord::col_offset>("col_offset", "first column (embedding dimension) of the shard"),
       field<&ShardRecord::num_cols>("num_cols", "columns in the shard"),
       field<&ShardRecord::planned_bytes>("planned_bytes",
                                          "weights + optimizer state of the shard as planned, bytes; -1 unknown")});
  return t;
}

const RecordTable<RebalanceRecord>& rebalances_table() {
  static const RecordTable<RebalanceRecord> t(
      {"rebalances", "the live rebalances of a run: one row per time the `rebalance` policy fired", {"step"}, true, 6,
       "After measured step `step` the ranks all-gathered their load counters (`rebalance_load_all_gather` on the comm "
       "lane), computed the same proposal (engine/rebalance/policy.h) and moved its tables with one all-to-all of rows "
       "(`reshard` on the comm lane, in `collectives`); the tables moved are `plan_changes` rows. A row with `moves` 0 "
       "records a firing that moved nothing (no gain, or every move refused: `refused`); a later firing on the same plan "
       "that would say the same has no row: it is not proposed again while the load per shard moved by at most 5% "
       "(engine/rebalance/reshard.h kReproposeShift), and a proposal is recorded only if it refuses something not yet "
       "recorded under the current plan - each refusal once per (table, from rank, cause), whatever its target and "
       "numbers; the row's `refused` lists only those (files of earlier builds may repeat such rows). Older files and runs without a policy have no rows."},
      {field<&RebalanceRecord::step>("step", "measured step after which it ran; the new plan serves from step + 1"),
       field<&RebalanceRecord::reason>("reason", "the trigger, e.g. `every 5 steps`, `imbalance 2.80 > 1.50 over steps 3..4`"),
       field<&RebalanceRecord::moves>("moves", "tables moved whole or changed to row_wise"),
       field<&RebalanceRecord::bytes_moved>("bytes_moved", "weights + optimizer state of the moved tables, bytes").at_least(0),
       field<&RebalanceRecord::window_steps>("window_steps", "steps the load before was observed over"),
       field<&RebalanceRecord::imbalance_before>(
           "imbalance_before",
           "max/mean per rank over those steps of the policy's load: ids looked up, or lookup ns with the "
           "workload's `rebalance.balance` \"lookup_time\""),
       field<&RebalanceRecord::imbalance_predicted>(
           "imbalance_predicted", "the same under the new plan, predicted (each table's ids moved with it)"),
       field<&RebalanceRecord::imbalance_after>(
           "imbalance_after", "observed over the next steps (at most `window_steps`, before the next rebalance); -1 none ran"),
       field<&RebalanceRecord::after_steps>("after_steps", "steps `imbalance_after` was observed over"),
       field<&RebalanceRecord::start_ns>("start_ns", "when the earliest rank began (every rank past the load all-gather), ns"),
       field<&RebalanceRecord::duration_ns>("duration_ns", "time spent by the slowest rank (proposal, move, rebuild; from the end of the load all-gather, whose wait for ranks still in their step is the imbalance itself), ns"),
       field<&RebalanceRecord::refused>("refused", "moves wanted and not made, each `table \"NAME\" (BYTES) from rank F to ...: WHY`, `; `-joined (`stats --json` cuts it into {table, reason} objects); empty if none"),
       field<&RebalanceRecord::outcome>(
           "outcome",
           "`complete`, or `failed: ...` for a move the run ended in (a rank failed or vanished before every rank had "
           "its new shards): the phase each rank reached; its tables stay where they were (no `plan_changes` rows); "
           "`complete` in older files",
           10)});
  return t;
}

const RecordTable<PlanChangeRecord>& plan_changes_table() {
  static const RecordTable<PlanChangeRecord> t(
      {"plan_changes", "shards moved by live rebalances: the plan over time", {"step", "table_index", "shard_index"}, true, 6,
       "The plan at measured step s is `shards` with every change of `step` <= s applied in `step` order; a change of "
       "type (`from_type` table_wise, `to_type` row_wise or column_wise: one row per new shard) replaces the table's "
       "shards by the rows of that step; a change back (`to_type` table_wise from row_wise or column_wise) is one row, "
       "the table's new rank, `bytes` every block it received. Older files have no such table (their plan never changed); version 6 files have "
       "no types or rows (every change is a table_wise move of all rows); files before version 9 no columns (every shard "
       "holds all the table's columns)."},
      {field<&PlanChangeRecord::step>("step", "first measured step under the new placement"),
       field<&PlanChangeRecord::table>("table_index", "index into `workload_json` tables"),
       field<&PlanChangeRecord::table_name>("table_name", "the table's name"),
       field<&PlanChangeRecord::shard_index>("shard_index", "index among the table's shards (`shards.shard_index`)"),
       field<&PlanChangeRecord::from_rank>("from_rank", "the rank that held it before; -1 for a change back to table_wise (it was on several)"),
       field<&PlanChangeRecord::to_rank>("to_rank", "the rank holding it from `step` on").rank_id(),
       field<&PlanChangeRecord::bytes>("bytes", "weights + optimizer state moved, bytes (0: the rows stayed on their rank)")
           .at_least(0),
       field<&PlanChangeRecord::from_type>("from_type", "the table's sharding type before, e.g. `table_wise`", 7),
       field<&PlanChangeRecord::to_type>("to_type", "its sharding type from `step` on: `table_wise` (a move or a change back), `row_wise` or `column_wise`", 7),
       field<&PlanChangeRecord::row_offset>("row_offset", "first row of the shard", 7),
       field<&PlanChangeRecord::num_rows>("num_rows", "rows of the shard; -1 in older files (all the table's rows)", 7),
       field<&PlanChangeRecord::col_offset>("col_offset", "first column of the shard", 9),
       field<&PlanChangeRecord::num_cols>("num_cols", "columns of the shard; -1 in older files (all the table's columns)",
                                          9)});
  return t;
}

const RecordTable<FlightRecord>& flight_recorder_table() {
  static const RecordTable<FlightRecord> t(
      {"flight_recorder", "the collective flight recorder's dumps: each rank's last collectives when it dumped",
       {"rank", "dump", "record_id"}, true, 8,
       "PyTorch's NCCL flight recorder is the model (engine/comm/flight_recorder.h): every rank keeps its last N "
       "collectives (2,000 by default, `EMBEDSCOPE_FR_BUFFER_SIZE`; 0 turns it off) with their state and writes them "
       "here when its run ends by a collective timeout or another failure, and on SIGUSR1, SIGTERM or SIGINT (the "
       "run goes on after SIGUSR1). `embedscope stats` analyses the last dump of every rank "
       "(sessions/analysis/flight_recorder.h): the ranks that did not reach a collective, collectives that differ "
       "between ranks, process groups entered in opposite orders. Older files and runs that never dumped have no rows."},
      {field<&FlightRecord::rank>("rank", "global rank whose recorder it is").rank_id(),
       field<&FlightRecord::dump>("dump", "the rank's dump: 0, 1, ... in the order written"),
       field<&FlightRecord::reason>("reason", "why the dump was written, e.g. `collective timeout`, `SIGUSR1`, `run ended crashed`"),
       field<&FlightRecord::dump_time_ns>("dump_time_ns", "when the dump was written, ns"),
       field<&FlightRecord::ring_dropped>("ring_dropped", "entries the ring had overwritten by then"),
       field<&FlightRecord::record_id>("record_id", "the rank's running number of the collective, from 0"),
       field<&FlightRecord::group>("process_group", "process group name, e.g. `world`, `node0`, `cross1`"),
       field<&FlightRecord::members>("members", "the group's global ranks in group order, comma-joined"),
       field<&FlightRecord::sequence>("sequence", "sequence number within the group (as `collectives.sequence`)"),
       field<&FlightRecord::op>("op", "`all_to_all`, `all_gather`, `all_reduce`, `reduce_scatter`"),
       field<&FlightRecord::name>("name", "profiling name, e.g. `output_dist/all_to_all`"),
       field<&FlightRecord::dtype>("dtype", "element type on the wire"),
       field<&FlightRecord::input_elements>("input_elements", "elements this rank contributes"),
       field<&FlightRecord::output_elements>("output_elements", "elements it receives"),
       field<&FlightRecord::step>("step", "the rank's training step when it entered the collective"),
       field<&FlightRecord::state>("state", "`scheduled` (entered), `started` (arrived, transfer running) or `completed`"),
       field<&FlightRecord::time_created_ns>("time_created_ns", "the rank entered the collective, ns"),
       field<&FlightRecord::time_started_ns>("time_started_ns", "its transfer began, ns; -1 not yet"),
       field<&FlightRecord::time_completed_ns>("time_completed_ns", "it returned on this rank, ns (state `completed`), or threw there (any other state: it failed then); -1 not yet"),
       field<&FlightRecord::timeout_ms>("timeout_ms", "the group's collective timeout, ms")});
  return t;
}

const RecordTable<ImportStat>& import_stats_table() {
  static const RecordTable<ImportStat> t(
      {"import_stats", "problems an importer met, one row per kind (Perfetto's stats table is the model)", {"name"}, true,
       5,
       "Written by `embedscope import` (importers/common/import_problems.h); sessions Embedscope ran have no rows. "
       "Nothing listed here aborted the import: `info` lost nothing, `error` was repaired or kept as it was, "
       "`data_loss` counts events that could not be imported."},
      {field<&ImportStat::name>("name", "stable name of the problem, e.g. `negative_duration`, `truncated`"),
       field<&ImportStat::severity>("severity", "`info`, `error` or `data_loss`"),
       field<&ImportStat::count>("count", "occurrences"),
       field<&ImportStat::source>("source", "file of the first occurrence (`` when not tied to one)"),
       field<&ImportStat::byte_offset>("byte_offset", "its byte offset in the uncompressed text, -1 unknown"),
       field<&ImportStat::example>("example", "what was wrong there, with line:column where known")});
  return t;
}

const RecordTable<MemoryFrame>& memory_frames_table() {
  static const RecordTable<MemoryFrame> t(
      {"memory_frames", "the distinct frames of the stacks of memory events and blocks", {"id"}, false, 5,
       "Filled by imported PyTorch memory snapshots (`frames` of their trace entries, segments and blocks)."},
      {field<&MemoryFrame::id>("id", "the frame"), field<&MemoryFrame::filename>("filename", "source file"),
       field<&MemoryFrame::line>("line", "line in it"), field<&MemoryFrame::name>("name", "the function")});
  return t;
}

const RecordTable<MemoryStackFrame>& memory_stacks_table() {
  static const RecordTable<MemoryStackFrame> t(
      {"memory_stacks", "the distinct stacks: frame `depth` of stack `stack_id`", {"stack_id", "depth"}, true, 5,
       "Depth 0 is the innermost frame (PyTorch's order). Stack 0 is the empty stack and has no rows."},
      {field<&MemoryStackFrame::stack_id>("stack_id", "the stack (`memory_events.stack_id`, `memory_blocks.stack_id`)"),
       field<&MemoryStackFrame::depth>("depth", "0 innermost"),
       field<&MemoryStackFrame::frame_id>("frame_id", "`memory_frames.id`")});
  return t;
}

const RecordTable<MemoryTimelinePoint>& memory_timeline_table() {
  static const RecordTable<MemoryTimelinePoint> t(
      {"memory_timeline", "a rank's device memory after each entry of its allocator trace", {"rank", "entry"}, true, 5,
       "The counters over time of an imported PyTorch memory snapshot, derived from its trace: the layout is walked "
       "back from the segments at the dump to the first entry, then forward. Where the trace starts mid-way (a ring "
       "buffer that dropped its oldest entries) the walk back gives the layout at its first entry exactly for what the "
       "trace touches; metadata `memory_trace_start` says which."},
      {field<&MemoryTimelinePoint::rank>("rank", "the rank (one per device)").rank_id(),
       field<&MemoryTimelinePoint::entry>("entry", "index of the trace entry"),
       field<&MemoryTimelinePoint::time_ns>("time_ns", "when, ns"),
       field<&MemoryTimelinePoint::allocated>("allocated_bytes", "live blocks, bytes"),
       field<&MemoryTimelinePoint::reserved>("reserved_bytes", "segments, bytes"),
       field<&MemoryTimelinePoint::active>("active_bytes", "live blocks and blocks whose free is pending, bytes"),
       field<&MemoryTimelinePoint::largest_free_block>("largest_free_block_bytes", "the largest free block, bytes"),
       field<&MemoryTimelinePoint::external_fragmentation>("external_fragmentation",
                                                           "1 - largest free block / free bytes in reserved segments"),
       field<&MemoryTimelinePoint::memviz_fragmentation>(
           "memviz_fragmentation", "PyTorch MemoryViz's measure (MemoryViz.js calculate_fragmentation): sum of squared free gaps / (sum of segment sizes)^2; 1 = the free memory in one piece, toward 0 = scattered (0 with nothing free); sessions written before 2026-12-06 divide by the sum of squared segment sizes")});
  return t;
}

const TableInfo& op_blocks_table() {
  static const TableInfo t = RecordTable<void*>(
      {"op_blocks", "a run of up to 16,384 consecutive ops of one lane, packed (a copy of `ops`)", {"lane_key", "block"},
       true, 12,
       "The ops of each lane in the order of the `ops` key (lane_key, start_ns, id), cut into blocks of 16,384, so that "
       "a reader that needs every op of a lane (the workbench's timeline; the analyses, `stats` and `export`, lane by "
       "lane) decodes its blocks instead of stepping through one `ops` row per op (4.7M ops: 0.15 s instead of "
       "1.2 s). The writer packs each lane as its ops come "
       "and inserts every full block with them; when it closes the session it adds, in one transaction, each lane's "
       "last block, the blocks of lanes whose ops did not come in start order (packed from their rows) and last the "
       "marker row (lane_key -1, block 0, op_count = the session's ops, empty data). Readers use the blocks only "
       "where the marker is there: a file without it (older versions, a run that was killed or is still running) is "
       "read from `ops`, whatever blocks it holds; with it, a lane without blocks has no ops, and a reader of every "
       "lane checks that the blocks hold the marker's op_count ops. `data` holds per op, in "
       "this order, LEB128 varints (7 bits a byte, low first, high bit set on every byte but the last) of: start_ns - "
       "the previous op's start_ns, end_ns - start_ns, category, name_id, step - the previous op's step, bytes, "
       "correlation - the previous op's correlation (the first op of a block takes 0 as its previous values); every "
       "value but `category` is zigzag-coded ((v << 1) ^ (v >> 63)), differences wrap modulo 2^64. Tools that change "
       "`ops` by hand must delete this table's rows (the reader trusts them)."},
      {column<void*>("lane_key", T::integer, "`rank * 256 + lane`, as in `ops`; -1 for the marker row", false),
       column<void*>("block", T::integer, "0, 1, 2, ...: the block's place in the lane", false),
       column<void*>("op_count", T::integer, "ops in the block (1 .. 16,384); in the marker row the session's ops", false),
       column<void*>("data", T::blob, "the packed ops (see below)", false)})
                                .info;
  return t;
}

const char* const kOpViewSql = R"sql(CREATE VIEW op_view AS
  SELECT o.lane_key >> 8 AS rank, l.name AS lane, c.name AS category, s.value AS name, o.step, o.start_ns,
         o.end_ns, o.end_ns - o.start_ns AS dur_ns, o.bytes, o.correlation
  FROM ops o JOIN strings s ON s.id = o.name_id JOIN categories c ON c.id = o.category
       JOIN lanes l ON l.rank = o.lane_key >> 8 AND l.lane = o.lane_key & 255;)sql";

}  // namespace embedscope::sessions::schema::detail
