#pragma once
// Replays a recorded list of allocator actions through allocator settings, so a user can try
// a setting on their own allocation pattern (`embedscope replay-memory`): a JSON trace of
// alloc/free actions, or the device trace of a PyTorch CUDA memory snapshot
// (snapshot_replay.h).
//
// Trace JSON: {"capacity_bytes": 17179869184,            (optional; --capacity overrides)
//              "actions": [{"action": "alloc", "id": 1, "size": 4096, "stream": 0, "tag": "kjt"},
//                          {"action": "free", "id": 1}, ...]}
// "free" frees at once; "free_requested" then "free_completed" (same id) is a free that
// completes later (the block was used on another stream, record_stream-style): the block is
// reusable only from free_completed, or from a request that finds no room otherwise: PyTorch's
// malloc then waits for the outstanding events (release_cached_blocks calls
// synchronize_and_free_events before releasing the cache and retrying, CUDACachingAllocator.cpp),
// so a pending free delays a request but does not make it run out of memory. (One difference:
// PyTorch's last try is a new segment only; the replay's retry may also take a free block that
// the waited-for frees left inside a segment still split.)
//
// Streams are honoured: a request on stream s is served only from segments of stream s
// (allocator.h). Every replay also watches for reserved memory that keeps growing while
// allocated memory does not (detect_unbounded_growth): such a setting is not `ok`.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "embedscope/engine/memory/allocator.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

struct MemoryAction {
  /// compact: DeviceArena::compact (memory.compaction): every live block freed, the cache
  /// released, and the blocks allocated again largest first (blocks whose free is pending stay).
  enum class Kind { alloc, free, free_requested, free_completed, empty_cache, compact };
  Kind kind = Kind::alloc;
  int64_t id = 0;     ///< the block: a trace id, or a snapshot's block address
  int64_t size = 0;   ///< alloc only: bytes asked for
  int64_t stream = 0;
  std::string tag;
  int64_t entry = -1; ///< index of the source entry (snapshot trace entry, JSON action); -1: the action's index
};

struct MemoryTrace {
  int64_t capacity_bytes = 0;  ///< 0: not given
  std::vector<MemoryAction> actions;
};

/// Parses a trace; SpecError names the file and the JSON pointer ("/actions/3/size: ...").
MemoryTrace load_memory_trace(const std::string& path);

/// Reserved memory growing without bound while allocated memory does not.
struct GrowthVerdict {
  bool unbounded = false;
  double bytes_per_1000_actions = 0;  ///< the reserved trend over the second half of the replay
  int64_t reserved_from = 0, reserved_to = 0;  ///< peaks of reserved in the second and last quarter
  int64_t held_peak_early = 0, held_peak_late = 0;  ///< peaks of the bytes held in the same quarters
  std::string message;                ///< "reserved grows without bound: +140.0 MiB per 1000 actions ..."
};

/// Looks at (reserved, held) after each action, held = the bytes the program asked for and has
/// not freed (not the block sizes: a small request that takes a whole unsplit block is what
/// makes the block sizes grow). Unbounded when, over the quarters Q2 < Q3 < Q4 of the replay,
/// the peak of reserved rises in each, by at least max(2 MiB, 5% of Q2's peak) from Q2 to Q4,
/// while held's peak in Q4 is at most 1% (+ 1 MiB) above Q2's. Needs
/// at least 16 samples. The rate is (Q4 peak - Q2 peak) over the actions between the quarters'
/// middles, per 1000 actions.
GrowthVerdict detect_unbounded_growth(const std::vector<std::pair<int64_t, int64_t>>& reserved_allocated);

struct ReplayResult {
  AllocatorConfig config;
  std::string label;             ///< e.g. "caching, max_split_size 32.0 MiB"
  bool oom = false;
  int64_t oom_action = -1;       ///< index of the action that failed (MemoryAction::entry where given)
  std::string oom_message;       ///< oom_explanation + " Advice: " + oom_advice + oom_note
  std::string oom_explanation;   ///< DeviceOutOfMemory::explanation
  std::string oom_advice;        ///< the allocator's advice, or advice_from_replays' (from the other settings' rows)
  std::string oom_other_advice;  ///< DeviceOutOfMemory::other_advice (capacity, order)
  std::string oom_note;          ///< " Pending frees: ..." where frees were pending at the OOM ("" else)
  bool oom_pending = false;      ///< the OOM is explained by blocks whose free was still pending
  int64_t pending_bytes_at_oom = 0;
  /// The layout when the request ran out (after the allocator released what it could):
  /// external fragmentation (1 - largest free block / free bytes in segments), MemoryViz's
  /// measure and the largest free block (bytes). 0 without an OOM.
  double fragmentation_at_oom = 0;
  double memviz_at_oom = 0;
  int64_t largest_free_at_oom = 0;
  int64_t peak_allocated = 0;
  /// The most bytes the program held at once (requested sizes, not freed): below peak_allocated
  /// by the rounding, and by more where max_split_size hands a request of max_split_size or more
  /// a whole cached block up to 20 MiB larger (the caching allocator's get_free_block and
  /// should_split; tester43 F20). Up to an OOM, the same for every setting.
  int64_t peak_requested = 0;
  int64_t peak_reserved = 0;
  /// External fragmentation (1 - largest free block / free bytes in segments) at peak reserved:
  /// the layout after the first action at which reserved bytes reach peak_reserved (the moment
  /// of sessions RankMemoryAnalysis::at_peak_reserved). Sampled while the peak grows by 1% or
  /// more; where a smaller growth set the final peak, the actions are replayed a second time up
  /// to it (so at most twice the work).
  double fragmentation_at_peak = 0;
  double memviz_at_peak = 0;         ///< PyTorch MemoryViz's measure (0-1), at the same moment
  int64_t peak_reserved_action = -1;  ///< index of that action (-1: no action replayed)
  int64_t final_reserved = 0;
  int64_t final_segments = 0;
  int64_t segments_at_peak = 0;
  GrowthVerdict growth;
  int64_t skipped_frees = 0;     ///< frees of blocks the replay never allocated (mid-way snapshots)
  /// Requests that found no room while frees were pending, so the allocator waited for those
  /// blocks' events, freed them and released its cache before trying once more (PyTorch's
  /// release_cached_blocks: synchronize_and_free_events first).
  int64_t synchronized_waits = 0;

  /// "ok", "OOM at action N", "OOM at action N (pending frees)", or "grows +X per 1000 actions".
  std::string verdict() const;
};

/// Blocks live before the first action (a snapshot trace that starts mid-way): allocated first,
/// in the given order, under these ids.
struct InitialBlock {
  int64_t id = 0;
  int64_t size = 0;
  int64_t stream = 0;
  bool pending = false;
};

/// Replays `trace` through one allocator setting (bookkeeping only: no host memory is used).
/// Stops at the first OOM. A free of an unknown id, or a repeated alloc id, throws SpecError
/// naming the action.
ReplayResult replay(const MemoryTrace& trace, const AllocatorConfig& config, const std::string& origin);

/// The same for actions that may free blocks the replay never saw (counted in skipped_frees,
/// not errors, when `lenient`) after `initial` blocks. When `lenient` (a recorded trace), an
/// action the allocator model cannot apply (a std::logic_error of the model) throws SpecError
/// "ORIGIN: entry E (KIND of N B): the allocator model cannot replay it (...)", E the action's
/// MemoryAction::entry.
ReplayResult replay_actions(const std::vector<MemoryAction>& actions, const std::vector<InitialBlock>& initial,
                            const AllocatorConfig& config, const std::string& origin, bool lenient);

/// "caching", "expandable, max_split_size 32.0 MiB", "caching, garbage_collection_threshold 0.6", ...
std::string setting_label(const AllocatorConfig& c);

/// Advice for an OOM from replays of the same actions through other settings (tester59 F1: the
/// allocator's own advice named expandable_segments and max_split_size beside rows showing both
/// fail). `failed`: the setting that ran out; `replays`: replays of the same actions at the same
/// capacity (rows equal to `failed`'s setting are skipped); `what`: what was replayed ("the
/// trace's actions"). Names the settings that complete ("direct (one segment per allocation, no
/// cache: PYTORCH_NO_CUDA_MEMORY_CACHING=1) completes the trace's actions (peak reserved 16.0
/// MiB)") and those that ran out as well; where none completes, says so and, when
/// `sufficient_capacity` > 0, that this capacity would (`sufficient_label` its setting).
/// `other_advice` (DeviceOutOfMemory::other_advice) follows after "; or ". `where`, when given,
/// says an action by its MemoryAction::entry for the rows that ran out ("OOM at " + where(61):
/// "OOM at step 3, embedding_backward, asking 12.0 MiB (action 61 of rank 0's log)"); without
/// it they say ReplayResult::verdict(). Pure.
std::string advice_from_replays(const AllocatorConfig& failed, const std::vector<ReplayResult>& replays,
                                const std::string& what, int64_t sufficient_capacity, const std::string& sufficient_label,
                                const std::string& other_advice,
                                const std::function<std::string(int64_t)>& where = nullptr);

/// Gives every OOM row of `rows` (replays of one action list at one capacity) the advice of
/// advice_from_replays from the other rows (oom_advice and oom_message rewritten). Where no row
/// completes, `replay_unlimited` (a replay of the same actions through a setting at unlimited
/// capacity) finds the least peak reserved that serves them all: the capacity that would have
/// sufficed. Rows that did not run out are unchanged. `where`: as advice_from_replays'.
/// `candidates`: settings also weighed for the advice where no row has them (replayed through
/// `replay_unlimited` at their own capacity_bytes, not added to `rows`): the workbench's Replay
/// panel passes replay-memory's default rows (advice_candidates) so that both advise alike on
/// the same file whichever rows the panel shows.
void advise_from_replays(std::vector<ReplayResult>& rows, const std::string& what,
                         const std::function<ReplayResult(const AllocatorConfig&)>& replay_unlimited,
                         const std::function<std::string(int64_t)>& where = nullptr,
                         const std::vector<AllocatorConfig>& candidates = {});

}  // namespace embedscope::engine
