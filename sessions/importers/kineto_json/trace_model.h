#pragma once
// What the Kineto importer holds of one rank's trace between parsing and writing: events with
// exact integer-ns times on the trace's own clock, interned names, lanes by their original
// (pid, tid) or (device, stream), ProfilerStep windows and the args of record_param_comms.

#include <cstdint>
#include <deque>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "importers/common/interner.h"

namespace embedscope::sessions::importers::kineto {

/// What an event is, from its `cat` and args.
enum class EventKind : uint8_t {
  cpu,            ///< host op (cpu_op, user_annotation, python_function, ...)
  runtime,        ///< cuda_runtime / cuda_driver call: a launch, a copy, a sync from the host
  kernel,         ///< GPU kernel (cat kernel, numeric args.stream)
  gpu_memcpy,     ///< cat gpu_memcpy
  gpu_memset,     ///< cat gpu_memset
  gpu_other,      ///< any other event with a numeric args.stream (cuda_sync, ...)
  gpu_annotation  ///< gpu_user_annotation: a user span drawn on a GPU stream's track
};

inline bool on_stream(EventKind k) {
  return k == EventKind::kernel || k == EventKind::gpu_memcpy || k == EventKind::gpu_memset || k == EventKind::gpu_other;
}

/// A lane as the trace names it: kind "thread" (pid, tid), "stream" (pid = device, stream) or
/// "gpu_annotation" (pid, tid of the GPU track).
struct LaneDesc {
  std::string kind;
  std::string pid, tid;  ///< original text (numbers as written, strings as they are)
  int64_t order_pid = 0, order_tid = 0;  ///< numeric value for ordering (0 for strings)
  /// A stream lane's track: the "tid" its first event was drawn on ("" for other lanes). An
  /// Embedscope Chrome export draws each GPU stream on a tid of its rank's process and names it
  /// there (thread_name), which becomes `label` (rank_processes.h).
  std::string track_tid;
  /// The lane's name in the session where the trace gave it one (an Embedscope Chrome export's
  /// stream lane: "stream 7 (cuda:0 NVIDIA A100)"); "" names it by kind, pid and tid.
  std::string label;
};

/// Event::arg_step of an event whose args give no step.
inline constexpr int64_t kNoArgStep = INT64_MIN;

struct Event {
  int64_t ts = 0, end = 0;   ///< ns, trace clock (Kineto ts x 1000)
  uint64_t correlation = 0;  ///< args.correlation (0: none)
  int64_t bytes = 0;         ///< args.bytes of copies and memsets; an Embedscope export's host op: "bytes" / "embedscope bytes"
  uint32_t name = 0;         ///< Interner id
  uint32_t lane = 0;         ///< index into RankTrace::lanes
  int32_t comm_param = -1;   ///< record_param_comms: index into RankTrace::comm_params
  EventKind kind = EventKind::cpu;
  /// A host event whose `cat` is an Embedscope op category ("comm", "dense", ...: what
  /// `embedscope export --format chrome` writes): that category's number, else -1. Used only for
  /// the ranks of such an export (RankTrace::categories_from_cat).
  int8_t cat_category = -1;
  /// The profiler never saw it end (negative "dur", a "B" without its "E"): `end` == `ts`, its
  /// name marked did_not_end_name (model/did_not_end.h); left out of the session's time range.
  bool unfinished = false;
  /// cat_category comes from args "embedscope category" (`embedscope export --format kineto`,
  /// sessions/exporters/kineto_export.h): the session's category, trusted on any lane.
  bool category_from_args = false;
  /// The step an Embedscope export gives the op in its args ("embedscope step" of the Kineto
  /// export, "step" of the Chrome export), kNoArgStep if none: used for an export's ranks only
  /// (RankTrace::categories_from_cat, category_from_args), where it is the session's own
  /// attribution (a pipelined run's next-batch collectives: the batch's step, not the span's).
  int64_t arg_step = kNoArgStep;
  /// A comm op's collective sequence in an Embedscope export's args ("embedscope sequence",
  /// "sequence"; 0: none): the op's correlation on a rank without GPU events, as in the session.
  uint64_t arg_sequence = 0;
};

/// The args of one record_param_comms span (PyTorch's names in comments).
struct CommParams {
  std::string collective;        ///< "Collective name": allreduce, all_to_allv, _allgather_base, ...
  std::string group;             ///< "Process Group Name" ("" absent)
  std::string group_desc;        ///< "Process Group Description"
  std::string dtype;             ///< "dtype": Float, Long, BFloat16, ...
  int64_t in_nelems = -1, out_nelems = -1, group_size = -1;  ///< "In/Out msg nelems", "Group size"
  int64_t seq = -1;              ///< "Seq" (absent in older traces)
  std::vector<int64_t> in_split, out_split;  ///< "In/Out split size" (elements per peer)
  std::vector<int32_t> ranks;    ///< "Process Group Ranks"
  /// "embedscope collective": the engine's name of the collective ("output_dist/all_to_all",
  /// "input_dist/ids/split_check"), which `embedscope export --format kineto` adds to each
  /// record_param_comms span; the imported record is named by it (else by `collective`). "" absent.
  std::string engine_name;
  bool has_args = false;         ///< any of the above was present
};

struct Step {
  int64_t number = 0;  ///< N of ProfilerStep#N
  int64_t ts = 0, end = 0;
  uint32_t lane = 0;   ///< index into RankTrace::lanes of the span's thread
};

/// The exported run's keys of an Embedscope export's top-level "embedscope" object
/// (sessions/exporters/exported_run_keys.h; read by exported_run.h): "" / 0 where absent.
struct ExportedRunKeys {
  std::string pipeline;       ///< "base", "sparse_dist" or "semi_sync"
  int64_t planned_steps = 0;  ///< the run's planned measured steps; 0 absent
  std::string ended;          ///< how the run ended (SessionReader::status()'s words)
  std::string end_message;    ///< its end message; "" none
  bool operator==(const ExportedRunKeys&) const = default;
};

/// What a file's top-level "embedscope" object said of the exported run (exported_run.h).
enum class ExportedRunState : uint8_t {
  none,  ///< no Embedscope export object, or one written before these keys (an older export)
  keys,  ///< RankTrace::exported_run holds valid keys
  bad    ///< a key is malformed or missing (problem bad_exported_run_key said which)
};

/// One file a rank was read from: a trace's own, or each window of one process
/// (process_windows.h joins them).
struct SourceFile {
  std::string file;
  int64_t file_bytes = 0, text_bytes = 0;
};

struct RankTrace {
  std::string file;
  int64_t file_bytes = 0, text_bytes = 0;
  /// Every file this rank was read from, in time order: `file` alone, or the successive profiling
  /// windows of one process that process_windows.h joined (the first is `file`).
  std::vector<SourceFile> sources;
  /// The trace is what PyTorch's legacy profiler writes (torch.autograd.profiler without Kineto,
  /// e.g. Debian's torch 1.13: a bare JSON array of "X" events on pid "CPU functions", no
  /// schemaVersion): its ts count from the profiler's own start, not from an epoch.
  bool legacy_profiler = false;
  std::string backend;           ///< distributedInfo.backend ("nccl", "gloo"); "" absent
  int32_t rank = 0;
  bool rank_known = false;       ///< distributedInfo.rank was present
  bool rank_bad = false;         ///< distributedInfo.rank was present but not a rank (problem bad_rank said so)
  /// An Embedscope export's rank (rank_processes.h): host ops take the category their `cat`
  /// names (Event::cat_category), as the session had them, not one guessed from their names.
  bool categories_from_cat = false;
  int64_t world_size = 0;
  std::string producer;          ///< schemaVersion, NCCL version, ...
  /// the document's "displayTimeUnit" is "ns" (time_unit.h)
  bool display_time_unit_ns = false;
  int64_t base_time_ns = -1;     ///< baseTimeNanoseconds, -1 absent
  std::vector<std::string> devices;  ///< deviceProperties names, by id
  std::vector<int64_t> device_memory;  ///< deviceProperties totalGlobalMem, bytes, by id (0: absent)
  std::vector<LaneDesc> lanes;
  std::unordered_map<std::string, uint32_t> lane_index;  ///< kind/pid/tid -> lanes index
  std::unordered_map<std::string, std::string> thread_names;  ///< "pid/tid" -> thread_name
  std::unordered_map<std::string, std::string> process_names;  ///< pid -> process_name
  /// pid -> (args.labels, args "embedscope device memory") of its process_labels metadata event:
  /// what an Embedscope Chrome export names a rank's GPU by (RankInfo::device, bytes; 0 absent)
  std::unordered_map<std::string, std::pair<std::string, int64_t>> process_labels;
  /// An Embedscope Chrome export's rank (rank_processes.h): its GPU as the session named it, and
  /// its memory in bytes; "" none (the device then comes from deviceProperties, as in Kineto).
  std::string device_label;
  int64_t device_label_memory = 0;
  /// The rank's events of cat cuda_sync without args.stream (a cuda run's synchronization lane in
  /// an Embedscope Chrome export): kept on their thread's lane.
  int64_t sync_on_thread = 0;
  /// Names of the lanes an Embedscope Chrome export marks as GPU streams written as threads (an
  /// Embedscope run's: thread_name args "embedscope lane kind": "stream"), in file order.
  std::vector<std::string> streams_as_threads;
  std::vector<Event> events;
  std::vector<CommParams> comm_params;
  std::vector<Step> steps;
  /// The file was cut short (import problem truncated or gzip_cut_short), and the index into
  /// `events` of the last event it held before the cut, in file order (-1: none). A thread's host
  /// ops are written in start order, its ProfilerStep span before the ops inside it, so a cut
  /// that falls among the ops of the last surviving step on the steps' thread may have lost the
  /// next step's span (trace_builder.cpp: the lost step). Not set for the ranks of an Embedscope
  /// export split by process (rank_processes.h).
  bool cut = false;
  int64_t last_before_cut = -1;
  /// The cuts of the windows of a joined process before its last one (process_windows.h): each
  /// such window's file was cut short too, so the step its cut fell in is incomplete as the last
  /// window's is (`cut`, `last_before_cut`). Empty for a trace of one file.
  struct WindowCut {
    int64_t last_before_cut = -1;  ///< index into `events` of the last event its file held
    /// where the next window's events begin (trace clock ns): this window's steps start before
    int64_t next_window_ts = std::numeric_limits<int64_t>::max();
    std::string file;              ///< the window's file
  };
  std::vector<WindowCut> earlier_window_cuts;
  /// names (Interner ids) of the host spans of cat user_annotation (record_function ranges,
  /// "## forward ##"): they enclose ops and stay off the critical path (tester37 #16)
  std::set<uint32_t> annotation_names;
  /// An Embedscope export's exported run (tester53 F3): its pipeline, planned steps and end,
  /// which the import records (exported_run.h record_exported_run); valid where
  /// exported_run_state is `keys`.
  ExportedRunState exported_run_state = ExportedRunState::none;
  ExportedRunKeys exported_run;
};

}  // namespace embedscope::sessions::importers::kineto
