#pragma once
// Replays the device trace of a PyTorch CUDA memory snapshot (sessions torch_snapshot, issue 13)
// through allocator settings: "would expandable_segments or a max_split_size have avoided this
// OOM?" (`embedscope replay-memory x.pickle`).
//
// The trace's entries become replay actions: alloc (the block's address is its id, its stream
// and its request as recorded), free_requested (the block stays in use: pending), free_completed
// (reusable from here), and segment_free / segment_unmap as torch.cuda.empty_cache() at that
// point (a run of them is one call), except a run the allocator made itself inside one malloc:
// recorded with the stack of the segment_alloc / segment_map right after it (PyTorch's release
// before a retry, release_available_cached_blocks / release_cached_blocks / unmap_block, share
// malloc's `context`), or a garbage_collection_threshold's collection; every setting releases by
// itself when it runs out of room, and at a larger capacity need not (tester63c F7).
// segment_alloc / segment_map are the allocator's own decisions and are not replayed. An oom entry is the request that failed: it
// is replayed as that request (and freed at once: in the recorded run it never got memory), so
// a setting that serves it would have avoided the OOM.
//
// A trace that starts at the process start replayed under its own settings (caching or
// expandable, its max_split_size) ends with the segments of the dump: the same number and the
// same reserved bytes (a test holds it for the fixtures). A trace that starts mid-way (a ring
// buffer dropped its oldest entries) begins with the blocks live at its first entry, found by
// walking back from the dump (sessions walk_timeline), allocated first in address order: their
// real order, and so the segments they shared, is unknown, and the segments of the dump are then
// not expected to be reproduced (SnapshotReplay::starts_at_process_start says which).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "embedscope/engine/memory/replay.h"
#include "embedscope/sessions/analysis/memory_history.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"  // TimelineWalk, MemorySnapshotFile

namespace embedscope::engine {

struct SnapshotReplay {
  int64_t device = 0;
  int64_t entries = 0;                 ///< trace entries of the device
  bool starts_at_process_start = true;
  int64_t initial_blocks = 0;          ///< blocks live at the first entry (mid-way traces)
  int64_t snapshot_segments = 0;       ///< the dump's segments of the device
  int64_t snapshot_reserved = 0;       ///< and their bytes
  std::vector<int64_t> recorded_ooms;  ///< entry indices of the trace's oom entries
  int64_t capacity_bytes = 0;          ///< the capacity replayed against
  std::vector<ReplayResult> results;   ///< one per setting, in the order given
  /// Entries that contradict the dump or their block, as `embedscope import` reports them
  /// (sessions walk_timeline: "device D entry I (action): ..."); an alloc larger than its block
  /// is replayed at the block's size, as the import stores it.
  std::vector<std::string> problems;
};

/// The actions of `device`'s trace (see above). An alloc whose request is larger than its block
/// (TimelineWalk::oversized: import problems trace_size_disagrees_with_dump and
/// alloc_larger_than_block) asks for the block's size, the figure `stats` uses too; an oom
/// request above kMaxMemoryBytes asks for replayable_request() of it. A run of segment_free /
/// segment_unmap entries is one empty_cache, except a run right before a segment_alloc /
/// segment_map with that entry's (non-empty) stack, the allocator's release before a retry, and,
/// where the snapshot records a garbage_collection_threshold in (0, 1) (caching), a run of
/// segment_free right before a segment_alloc: malloc's collection; both are left out (the
/// allocator model does them itself).
std::vector<MemoryAction> snapshot_actions(const sessions::torch_snapshot::MemorySnapshotFile& snap, int64_t device);
/// The same with the device's walk (walk_timeline(snap, device, 0)) already made.
std::vector<MemoryAction> snapshot_actions(const sessions::torch_snapshot::MemorySnapshotFile& snap, int64_t device,
                                           const sessions::torch_snapshot::TimelineWalk& walk);
/// A recorded request of `bytes` as replayed: at most kMaxMemoryBytes + 512, which no device of
/// at most kMaxMemoryBytes can serve (PyTorch records an OOM's request as asked, 2^63 - 1
/// included; the allocator model's 512-byte rounding would overflow on it).
int64_t replayable_request(int64_t bytes);

/// The recorded settings as an AllocatorConfig of `capacity`: expandable when
/// expandable_segments, else caching; its max_split_size (0 = unlimited); its
/// roundup_power2_divisions (recorded_roundup_divisions); its
/// garbage_collection_threshold where recorded in (0, 1) with the caching allocator (0 otherwise:
/// PyTorch refuses other values, and expandable segments have no whole free segment to collect).
AllocatorConfig recorded_config(const sessions::torch_snapshot::MemorySnapshotFile& snap, int64_t capacity);

/// The recorded roundup_power2_divisions as AllocatorConfig takes them: 16 entries, one per
/// power-of-two interval from 1 MiB (memory_snapshot.cpp writes a dict keyed by the interval's
/// start in MiB; a list is taken by index); empty when none is above 1 (off).
std::vector<int64_t> recorded_roundup_divisions(const sessions::torch_snapshot::AllocatorSettings& s);

/// The device's capacity as far as the snapshot tells it: at its first oom entry, the
/// device's free bytes (device_free) + the bytes reserved then; 0 when the trace has no oom.
int64_t snapshot_capacity(const sessions::torch_snapshot::MemorySnapshotFile& snap, int64_t device);

/// Replays `device`'s trace through every setting (their capacity_bytes used as given). An
/// entry the allocator model cannot apply throws SpecError naming `origin`, the device and the
/// entry (replay_actions).
SnapshotReplay replay_snapshot(const sessions::torch_snapshot::MemorySnapshotFile& snap, int64_t device,
                               const std::vector<AllocatorConfig>& settings, const std::string& origin);

/// What a recorded run did, for recorded_replay_verdict: bytes; -1 where unknown or not compared.
struct RecordedMemory {
  int64_t peak_reserved = -1;                  ///< the recording's peak reserved bytes
  double fragmentation_at_peak_reserved = -1;  ///< external fragmentation (0..1) at the first entry at that peak
  int64_t first_oom_entry = -1;                ///< the recording's first oom entry; -1: it did not run out
  int64_t dump_segments = -1;                  ///< the dump's segments (-1: no dump, e.g. an engine run)
  int64_t dump_reserved = -1;                  ///< the dump's reserved bytes
  /// The capacity replayed against is assumed (no OOM records the device's memory: the trace's
  /// peak reserved bytes are offered), so a peak that depends on it (a recorded
  /// garbage_collection_threshold, a fraction of the capacity) is said to, not blamed on the model.
  bool capacity_assumed = false;
};

/// Whether the replay of the recorded settings reproduces the recording, and where not.
struct ReplayVerdict {
  bool reproduces = false;
  std::vector<std::string> differences;  ///< one clause each, in the order of `text`
  std::string text;                      ///< the sentence replay-memory and the workbench's Replay panel both print
};

/// The one verdict on a replay of the recorded settings (`own`, labelled `label`: "caching",
/// "expandable"), printed by `embedscope replay-memory` and the workbench's Replay panel alike
/// (snap54, tester54 F9: the panel said "reproduces the recording" where replay-memory said
/// "(differs)" for the same file). It reproduces when every known figure of `rec` agrees: the
/// peak reserved bytes, the fragmentation at peak reserved (within 0.05 points), whether and
/// where it ran out of memory (the recorded first OOM against own.oom_action), and the dump's
/// segments and reserved bytes against the replay's end. Pure.
ReplayVerdict recorded_replay_verdict(const ReplayResult& own, const std::string& label, const RecordedMemory& rec);

/// The same replay from a session's memory history (sessions/analysis/memory_history.h; the
/// workbench's Replay button on an imported snapshot or an engine run): its entries become
/// actions as snapshot_actions makes them (alloc with the recorded request, free_requested,
/// free_completed - an engine run's "free" is one -, a run of segment_free / segment_unmap as one
/// empty_cache, an oom as its request allocated and freed at once), after the blocks live
/// before its first entry (MemoryHistory::initial, address order). `recorded_gc_threshold` in
/// (0, 1): the recording ran with that garbage_collection_threshold (caching), so a run of
/// segment_free entries right before a segment_alloc is the allocator collecting, not an
/// empty_cache of the program's, and is left out as snapshot_actions leaves it out.
std::vector<MemoryAction> history_actions(const sessions::MemoryHistory& h, double recorded_gc_threshold = 0);
std::vector<InitialBlock> history_initial_blocks(const sessions::MemoryHistory& h);
/// As snapshot_capacity: at the first oom entry that records the device's free bytes,
/// device_free + the bytes reserved then; 0 when there is none.
int64_t history_capacity(const sessions::MemoryHistory& h);
/// replay_actions of the history through every setting (lenient: frees of blocks it never saw
/// are counted, not errors). ReplayResult::oom_action is the history entry that failed.
std::vector<ReplayResult> replay_history(const sessions::MemoryHistory& h, const std::vector<AllocatorConfig>& settings,
                                         const std::string& origin, double recorded_gc_threshold = 0);

/// The rows `embedscope replay-memory` replays a snapshot under by default, each at `capacity`:
/// the recorded settings (`recorded`, when given), caching, expandable and direct.
std::vector<AllocatorConfig> advice_candidates(const AllocatorConfig* recorded, int64_t capacity);

/// The advice the one place both front ends take it from: every OOM row of `rows` (replays of the
/// device's trace at one capacity) advised by advise_from_replays ("the device's trace"), weighing
/// advice_candidates(recorded, capacity) too, so replay-memory and the workbench's Replay panel say
/// the same for the same snapshot (tester63c F1: the panel kept the allocator's generic "try the
/// expandable allocator ..., a max_split_size" beside rows showing both fail). `replay_one`
/// replays the same actions through one setting. `pytorch_program`: the trace is a PyTorch
/// program's (an imported snapshot), whose OOM for want of room is not told the Embedscope
/// workload's remedies (tables over more devices, batch_size, rowwise_adagrad) but
/// kPytorchLiveDataAdvice (tester63c F3).
void advise_snapshot_rows(std::vector<ReplayResult>& rows, const AllocatorConfig* recorded,
                          const std::function<ReplayResult(const AllocatorConfig&)>& replay_one,
                          bool pytorch_program = true);

/// What an OOM of a PyTorch program's trace whose live bytes exceed the device is advised.
inline constexpr const char* kPytorchLiveDataAdvice =
    "the live data does not fit this device: hold fewer bytes at once (a smaller batch, activation "
    "checkpointing, freeing tensors sooner) or give the device more memory";

}  // namespace embedscope::engine
