#pragma once
// Imports a PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot, see snapshot.h)
// into a session: one rank per device, and per rank
//  - memory_events: every trace entry in order, with PyTorch's action names, its stream and
//    its stack (frames interned in memory_frames / memory_stacks);
//  - memory_snapshots (reason "dump") + memory_blocks: every segment and block at the dump
//    (a block freed but pending on another stream has allocated = 1 and pending_free = 1);
//  - memory_timeline: allocated, reserved, active, largest free block and both fragmentation
//    measures after every trace entry (derived from the trace: see TimelineWalk below);
//  - memory_counters: one row (step 0) with the figures at the dump and the trace's peaks;
//  - metadata: imported, import_format, import_producer, import_sources_json, allocator_settings_json, memory_trace_start,
//    world_size, clock (time_ns = (time_us - earliest time_us) x 1000), wall_anchor_unix_ns.
// Times: PyTorch records time_us as Unix microseconds; sessions count ns from the earliest.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "embedscope/sessions/importers/torch_memory_snapshot/snapshot.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions::torch_snapshot {

/// The layout of one device's memory while a trace is walked: segments (PyTorch's
/// segment_alloc / segment_free, and segment_map / segment_unmap growing and shrinking an
/// expandable segment at its end) and live blocks (alloc; a block stays live, "pending", from
/// free_requested to free_completed). A block's size is its size at the dump where the dump
/// holds it, else its request rounded up to 512 bytes - or the whole free gap it was placed in
/// when PyTorch would not split that (sessions/model/torch_allocator.h torch_block_bytes: a
/// rest of at most 1 MiB in the large pool), as analysis/memory_history.h sizes it.
struct TimelineWalk {
  /// The layout at the first entry, found by walking back from the dump: true when it is empty
  /// (the trace starts at the process start), false when it starts mid-way (a ring buffer).
  bool starts_empty = true;
  /// Live blocks and segments at the first entry (mid-way traces).
  int64_t initial_blocks = 0, initial_segments = 0;
  struct LiveBlock {
    uint64_t address = 0;
    int64_t size = 0;     ///< bytes (see above)
    int64_t stream = 0;   ///< its segment's stream at the dump, or its free's stream in the trace
    bool pending = false; ///< free requested before the first entry, completed in the trace
  };
  /// The blocks live at the first entry, address order (empty when starts_empty).
  std::vector<LiveBlock> initial_live;
  /// One point per trace entry (rank = the device).
  std::vector<MemoryTimelinePoint> points;
  /// Entries that contradict the layout (a free of a block that is not live, a segment_free of
  /// an unknown segment, ...), as "device D entry I: ..."; they are skipped. Also alloc entries
  /// whose size is larger than the block the dump holds for them (kept; see `oversized`).
  std::vector<std::string> problems;
  /// The import_stats name of each of `problems` (same order): alloc_block_not_live,
  /// free_requested_block_not_pending, free_completed_block_still_live,
  /// segment_alloc_segment_missing, segment_free_segment_still_there,
  /// segment_map_no_segment_end, trace_size_disagrees_with_dump, alloc_larger_than_block,
  /// free_completed_address_not_a_block (see `misaddressed`).
  std::vector<std::string> problem_names;
  /// Alloc entries (index) whose requested size is larger than their block (bytes): the block
  /// at the dump (trace_size_disagrees_with_dump) or, for a block freed before the dump, the
  /// one its free and its segment give it (alloc_larger_than_block). A request never exceeds
  /// its block, so the entry's size is wrong; the import stores the block's size as its
  /// request, and replay-memory replays that size (engine snapshot_actions).
  std::map<size_t, int64_t> oversized;
  /// free_completed entries (index) at an address where no block starts, taken as the
  /// completion of the block whose free_requested has no other completion
  /// (sessions/model/torch_allocator.h torch_misaddressed_frees): that block's address. The walk
  /// frees that block there, and such an entry does not make the trace start mid-way.
  std::map<size_t, uint64_t> misaddressed;
};

/// Walks the trace of `device` (back from the dump, then forward). `t0_us`: the time that is 0 ns.
TimelineWalk walk_timeline(const MemorySnapshotFile& snap, int64_t device, int64_t t0_us);

struct ImportSummary {
  int64_t devices = 0;
  int64_t segments = 0;
  int64_t blocks = 0;
  int64_t trace_entries = 0;
  int64_t frames = 0;
  int64_t stacks = 0;       ///< distinct, the empty stack included
  bool starts_at_process_start = true;  ///< every device's trace starts with an empty layout
  std::vector<std::string> problems;    ///< from walk_timeline, prefixed by the device
  /// The same problems counted by name (severity error, the first example, the file): what the
  /// import stored in `import_stats`.
  std::vector<ImportStat> import_stats;
};

/// Writes `snap` (read from `source`) into `w` (which the caller closes): one rank per device
/// that holds anything (MemorySnapshotFile::used_devices), labelled "cuda:D".
ImportSummary import_torch_memory_snapshot(const MemorySnapshotFile& snap, const std::string& source, SessionWriter& w);

/// One snapshot of several (import_torch_memory_snapshots): the parsed file and its name.
struct SnapshotInput {
  const MemorySnapshotFile* snap = nullptr;
  std::string source;
};

/// Several snapshots, one per process of a job (each names its own GPU, often as device 0), as
/// one session: ranks 0..N-1 in the order given, one per device that holds anything (segments
/// or trace entries; device 0 of a file with nothing), labelled "cuda:D of FILE"; one clock (the
/// earliest time_us of all files is 0; PyTorch's time_us are Unix microseconds); frames and
/// stacks of every file in one table (ids offset per file); the first file's allocator
/// settings (others that differ: import problem allocator_settings_differ, info). One input
/// is import_torch_memory_snapshot (the same rule: an unused GPU's empty trace list is no rank).
/// `ImportSummary::devices` counts ranks.
ImportSummary import_torch_memory_snapshots(const std::vector<SnapshotInput>& inputs, SessionWriter& w);

/// load_snapshot(path) and the import above. Throws PickleError / SnapshotError (SessionError).
ImportSummary import_torch_memory_snapshot(const std::string& path, SessionWriter& w);

}  // namespace embedscope::sessions::torch_snapshot
