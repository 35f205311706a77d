#pragma once
// What a rank's memory history says (memory_history.h), for `embedscope stats` and the memory
// view: the peaks, fragmentation at the peak, the OOMs with their request against the largest
// free block, the bytes lost to rounding, and the stacks that held the most bytes at the peak
// and at each OOM; and, for the view, the active memory timeline (PyTorch memory_viz's "Active
// Memory Timeline": live blocks stacked as bands, oldest at the bottom) sampled per column.
//
// "The peak" is the first entry at which the allocated bytes (live blocks whose free was not
// requested) reach their maximum; figures "at the peak" are the layout after that entry.
// Bytes held by a stack are the sizes of the active blocks (pending frees included) it allocated.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "embedscope/sessions/analysis/memory_history.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

/// Bytes held by one allocating stack (imported snapshots) or tag (engine runs).
struct MemoryStackHeld {
  int32_t stack_id = 0;   ///< memory_stacks.stack_id; 0: grouped by tag
  std::string name;       ///< the innermost frame "function (file:line)", or the tag
  int64_t bytes = 0;      ///< block bytes
  int64_t requested = 0;  ///< bytes asked for
  int64_t blocks = 0;
};

/// One recorded OOM: the request against what the layout offered.
struct MemoryOom {
  int64_t entry = 0;
  int64_t time_ns = 0;
  int64_t requested = 0;           ///< bytes the failing request asked for
  int64_t device_free = -1;        ///< the device's free bytes PyTorch recorded (device_free); -1 unknown
  int64_t largest_free_block = 0;  ///< in the reserved segments, then
  int64_t free_in_segments = 0;
  int64_t allocated = 0, reserved = 0;
  bool small_pool = false;         ///< the request (rounded to 512 B) is at most 1 MiB: the small pool serves it
  int64_t largest_free_in_pool = 0;  ///< the largest free block of the request's pool (MemoryStateFigures)
  /// free bytes (in segments + device_free) >= the request, and no free block of its pool could
  /// hold it: the free space is in the wrong places (or the other pool), not too little
  bool fragmentation = false;
  std::vector<MemoryStackHeld> top_stacks;
};

/// The memory figures of one rank.
struct RankMemoryAnalysis {
  int32_t rank = 0;
  int64_t entries = 0;
  bool starts_empty = true;
  int64_t peak_entry = -1;              ///< -1: no entries
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;            ///< over the whole history
  int64_t peak_active = 0;              ///< allocated + pending frees, its maximum
  MemoryStateFigures at_peak;           ///< the layout after peak_entry
  /// The first entry after which reserved bytes are at peak_reserved (-1: no entries; a
  /// segment_alloc / segment_map entry counts as the alloc after it, which it was made for) and
  /// the layout then: the moment `replay-memory` gives its fragmentation for (often not
  /// peak_entry: segments may be largest while less is allocated).
  int64_t peak_reserved_entry = -1;
  MemoryStateFigures at_peak_reserved;
  int64_t rounding_loss_at_peak = 0;    ///< allocated - requested at the peak
  int64_t reserved_overhead_at_peak = 0;  ///< reserved - requested at the peak
  int64_t largest_free_block_max = 0;   ///< the largest free block at the peak and at every OOM
  std::vector<MemoryStackHeld> top_stacks_at_peak;
  std::vector<MemoryOom> ooms;
  int64_t problems = 0;                 ///< entries that contradict the layout (MemoryHistory::problems)
};

/// The stacks (or tags) holding the most bytes in `st`, most first, at most `top` of them.
/// `frames` / `stacks`: the session's memory_frames and memory_stacks (empty: by tag).
std::vector<MemoryStackHeld> top_stacks(const MemoryHistory& h, const MemoryState& st, size_t top,
                                        const std::vector<MemoryFrame>& frames,
                                        const std::vector<MemoryStackFrame>& stacks);

/// The figures of one rank's history (see the file comment). O(n + OOMs x blocks).
RankMemoryAnalysis analyze_memory_history(const MemoryHistory& h, int32_t rank, size_t top,
                                          const std::vector<MemoryFrame>& frames,
                                          const std::vector<MemoryStackFrame>& stacks);

/// analyze_memory_history for every rank with memory events. Throws SessionError.
std::vector<RankMemoryAnalysis> analyze_memory(const SessionReader& session, size_t top = 5);

/// How an imported memory snapshot ended where the program it recorded ran out of memory: the
/// import is "complete", the recorded program is not (tester42 F25). `stats` heads its output
/// with this, `compare` its session line and the workbench's Summary its first line (tester52 F9:
/// those two said "complete"). "the recorded program ran out of memory: rank 0 at entry 20088
/// of 20090" (each rank with an OOM: its first one's entry, counted from 0, of the rank's
/// entries; ranks joined by ", "); "" when `session` is not imported (metadata imported "1") or
/// no rank of `memory` (analyze_memory of it) recorded an OOM.
std::string recorded_oom_text(const SessionReader& session, const std::vector<RankMemoryAnalysis>& memory);

/// The same from the session alone: analyze_memory where the session is an imported memory
/// snapshot (metadata import_format "torch_memory_snapshot"), else "" without reading its
/// memory. Throws SessionError.
std::string recorded_oom_text(const SessionReader& session);

/// The allocator settings a session records (the workbench's Memory page shows them).
struct AllocatorSettings {
  /// Where they come from: "PyTorch" (an imported snapshot's allocator_settings), "the run's
  /// workload" (a DLRM run's memory block), "the run's engine" (an lm_embedding run: its workload
  /// has no memory block, the engine's caching allocator is recorded), or "" (none recorded).
  std::string source;
  std::vector<std::pair<std::string, std::string>> entries;  ///< key, value (strings as is, the rest as JSON)
  /// One line, as a replay labels the setting (engine setting_label): "caching",
  /// "expandable_segments, max_split_size 128.0 MiB", "caching, garbage_collection_threshold 0.5"
  /// (a caching allocator with a threshold recorded), or "unknown".
  std::string recorded = "unknown";
};

/// Metadata allocator_settings_json (written by the memory snapshot importer, and by an
/// lm_embedding run: {"allocator": "caching", "max_split_size": 0, "compaction": false}; an
/// imported session (metadata imported = 1) is PyTorch's), else the memory block of the stored
/// workload JSON. Never throws (unparsable JSON counts as absent).
AllocatorSettings allocator_settings(const SessionReader& session);

/// The frames of stack `stack_id`, innermost first, as "function (file:line)".
std::vector<std::string> stack_frames(int32_t stack_id, const std::vector<MemoryFrame>& frames,
                                      const std::vector<MemoryStackFrame>& stacks);

/// One column of the active memory timeline: the layout at the entry of the column's span where
/// the active bytes peak, its live blocks stacked in allocation order (the oldest at offset 0).
struct TimelineColumn {
  int64_t first_entry = 0, last_entry = 0;  ///< the entries the column spans, inclusive
  int64_t entry = 0;                        ///< the one drawn
  struct Band {
    int32_t allocation = 0;  ///< MemoryHistory::allocations() index
    int64_t offset = 0;      ///< bytes below it
  };
  std::vector<Band> bands;   ///< bottom to top
  int64_t active = 0, reserved = 0;
  MemoryStateFigures figures;  ///< of the layout at `entry`
};

/// The active memory timeline in `columns` columns (fewer when there are fewer entries; none for
/// an empty history): column c spans entries [c n / C, (c + 1) n / C). O(n log n + C x blocks).
std::vector<TimelineColumn> active_timeline(const MemoryHistory& h, int64_t columns);

/// The band of `column` at height `bytes` (its allocation index), or -1. Binary search.
int32_t band_at(const MemoryHistory& h, const TimelineColumn& column, int64_t bytes);

}  // namespace embedscope::sessions
