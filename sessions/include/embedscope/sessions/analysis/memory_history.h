#pragma once
// The allocator state of one rank at any entry of its memory history (table memory_events):
// which segments exist and which blocks are live, replayed from the events without Qt, so that
// `embedscope stats` and the workbench's memory view (scrubbing the segment/block map entry by
// entry) read one answer.
//
// Sources:
//  - imported PyTorch memory snapshots (import_format torch_memory_snapshot): PyTorch's actions
//    alloc / free_requested / free_completed / segment_alloc / segment_free / segment_map /
//    segment_unmap / oom (torch/csrc/cuda/CUDACachingAllocator.h TraceEntry). A trace may start
//    mid-way (a ring buffer): the state before its first entry is found by walking back from the
//    dump snapshot (reason "dump"), as sessions/importers/torch_memory_snapshot walk_timeline
//    does. An alloc records the requested bytes; its block size is the block's size at the dump
//    when the dump still holds it, else the request rounded up to 512 B - or the whole free gap
//    it was placed in when PyTorch would not split it (the rest <= 1 MiB in the large pool).
//  - engine runs: alloc / free / segment_alloc / segment_free / oom with block sizes; the history
//    starts empty. An expandable segment grows by a segment_alloc at its end and shrinks by a
//    segment_free of its tail.
// "allocated" counts live blocks whose free was not requested; "active" adds the blocks whose
// free is pending (free_requested, waiting for free_completed: in use on another stream).
//
// Cost: build O(n log n) for n entries; state_at(i) copies the nearest checkpoint at or before i
// (one every `checkpoint_every` entries) and applies the entries after it: O(K log n), K the
// checkpoint interval, whatever i is (scrubbing backwards costs the same as forwards).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "embedscope/sessions/model/events.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

/// What one history entry does to the layout.
enum class MemoryEntryKind : uint8_t {
  alloc, free_requested, free_completed, segment_alloc, segment_free, segment_grow, segment_shrink, oom, other
};

/// One entry of the history (memory_events of the rank, in order). Bytes, ns.
struct MemoryEntry {
  MemoryEntryKind kind = MemoryEntryKind::other;
  uint64_t address = 0;   ///< block / segment address; oom: the device's free bytes (PyTorch device_free) or 0
  int64_t size = 0;       ///< alloc: the block's bytes; segment_*: the segment (or pages) bytes; oom: the request
  int64_t requested = 0;  ///< alloc, oom: bytes asked for
  int64_t stream = 0;
  int64_t time_ns = 0;
  int64_t step = 0;
  int32_t allocation = -1;  ///< alloc / free_*: index into MemoryHistory::allocations(); -1 for others
  int32_t stack_id = 0;
  std::string action;     ///< the action as recorded ("alloc", "segment_map", ...)
};

/// One block's life. Entries index MemoryHistory::entries().
struct MemoryAllocation {
  uint64_t address = 0;
  int64_t size = 0;       ///< block bytes
  int64_t requested = 0;  ///< bytes asked for
  int64_t stream = 0;
  int32_t stack_id = 0;   ///< memory_stacks.stack_id (0: none)
  std::string tag;        ///< engine tag, or the innermost frame's function
  int64_t alloc_entry = -1;           ///< -1: live before the first entry
  int64_t free_requested_entry = -1;  ///< from here its free is pending; -1: never requested
  int64_t free_entry = -1;            ///< free_completed / free; -1: live after the last entry
  bool pending_at_start = false;      ///< its free was requested before the first entry
};

/// The layout after one entry.
struct MemoryState {
  int64_t entry = -1;  ///< the state after this entry (-1: before the first)
  std::map<uint64_t, int64_t> segments;  ///< address -> bytes
  std::map<uint64_t, int32_t> blocks;    ///< live block address -> allocation index
  int64_t allocated = 0, active = 0, requested = 0, reserved = 0;  ///< bytes (see the file comment)
};

/// PyTorch's caching allocator serves requests of at most 1 MiB (kSmallSize) from 2 MiB segments
/// (kSmallBuffer) and larger ones from segments of 20 MiB (requests under 10 MiB) or of at least
/// 10 MiB (c10/cuda/CUDACachingAllocator.cpp), so a segment of kSmallPoolSegment bytes is taken
/// as the small pool's and any other as the large pool's. With expandable segments, which map
/// pages of 2 MiB (small pool) or 20 MiB (large pool), a small pool's run of pages that grew counts
/// as large: the split is then approximate. A segment here is a run of mapped pages, as PyTorch's
/// snapshot shows an expandable segment: pages unmapped in the middle of one split it in two,
/// pages mapped into such a hole join the runs beside it.
inline constexpr int64_t kSmallPoolSegment = int64_t{2} << 20;
/// Requests of at most this many bytes (after rounding to 512 B) come from the small pool.
inline constexpr int64_t kSmallPoolRequest = int64_t{1} << 20;

/// Figures of a state (bytes). Fragmentation as engine/memory/allocator.h MemoryStats:
/// external = 1 - largest free block / free bytes in segments (0 without free bytes);
/// memviz = sum of free gaps^2 / (sum of segment sizes)^2 (PyTorch MemoryViz.js calculate_fragmentation).
struct MemoryStateFigures {
  int64_t allocated = 0, active = 0, requested = 0, reserved = 0;
  int64_t free_in_segments = 0, largest_free_block = 0, segments = 0, blocks = 0;
  int64_t largest_free_small_pool = 0;  ///< the largest free block in 2 MiB segments, bytes
  int64_t largest_free_large_pool = 0;  ///< the largest free block in the other segments, bytes
  double external_fragmentation = 0, memviz_fragmentation = 0;
};

class MemoryHistory {
 public:
  MemoryHistory() = default;
  /// The history of one rank from its events in order and, for an imported snapshot, the blocks
  /// of its dump (`dump`; nullptr: an engine run, whose history starts empty). Entries that
  /// contradict the layout (a free of a block that is not live, ...) are kept but do nothing
  /// (kind other); problems() names them. Imported: a free_completed at an address where no block
  /// starts, after the free_requested of a block that gets no other completion, frees that block
  /// (model/torch_allocator.h torch_misaddressed_frees) and is named in problems() too, as the
  /// import's walk_timeline does. `checkpoint_every` >= 1 (std::invalid_argument otherwise).
  static MemoryHistory build(std::vector<MemoryEvent> events, const std::vector<MemoryBlockRecord>* dump,
                             int64_t checkpoint_every = 1024);
  /// build() from `session`'s memory_events of `rank` and its "dump" snapshot when imported.
  /// Throws SessionError on an unreadable file.
  static MemoryHistory load(const SessionReader& session, int32_t rank, int64_t checkpoint_every = 1024);
  /// The ranks that have memory events, ascending.
  static std::vector<int32_t> ranks_with_history(const SessionReader& session);

  const std::vector<MemoryEntry>& entries() const { return entries_; }
  const std::vector<MemoryAllocation>& allocations() const { return allocations_; }
  int64_t size() const { return static_cast<int64_t>(entries_.size()); }
  /// Allocated / active / requested / reserved bytes after entry i (cheap, per entry).
  int64_t allocated_after(int64_t i) const { return allocated_[static_cast<size_t>(i)]; }
  int64_t active_after(int64_t i) const { return active_[static_cast<size_t>(i)]; }
  int64_t requested_after(int64_t i) const { return requested_[static_cast<size_t>(i)]; }
  int64_t reserved_after(int64_t i) const { return reserved_[static_cast<size_t>(i)]; }
  /// The layout before the first entry (empty unless a trace starts mid-way).
  const MemoryState& initial() const { return initial_; }
  bool starts_empty() const { return initial_.segments.empty() && initial_.blocks.empty(); }
  const std::vector<std::string>& problems() const { return problems_; }

  /// The state after entry i, i in [-1, size()); std::out_of_range otherwise. O(K log n).
  MemoryState state_at(int64_t i) const;
  /// Applies entry st.entry + 1 to `st` (st.entry < size() - 1).
  void step(MemoryState& st) const;
  /// Whether allocation `a` is pending (its free requested, not completed) in `st`.
  bool pending(const MemoryState& st, int32_t a) const;
  /// The figures of `st`: O(blocks + segments).
  MemoryStateFigures figures(const MemoryState& st) const;
  /// The segments of `st` as the block map draws them: every live block (allocated, with
  /// pending_free for pending ones, its tag, stack and requested bytes) and the free gaps between
  /// them (allocated = false), address order, covering each segment. Addresses as int64 bit
  /// patterns (uint64 above 2^63 stay exact).
  std::vector<MemoryBlockRecord> blocks_of(const MemoryState& st) const;
  /// The allocation whose block covers `address` in `st`, or -1.
  int32_t allocation_at(const MemoryState& st, uint64_t address) const;

 private:
  void apply(MemoryState& st, int64_t i) const;
  static int64_t unsplit_size(const MemoryState& st, uint64_t address, int64_t rounded);
  std::vector<MemoryEntry> entries_;
  std::vector<MemoryAllocation> allocations_;
  std::vector<int64_t> allocated_, active_, requested_, reserved_;
  MemoryState initial_;
  std::vector<MemoryState> checkpoints_;  ///< checkpoints_[k]: the state after entry (k + 1) * K - 1
  int64_t every_ = 1024;
  std::vector<std::string> problems_;
};

/// The block map's label of a snapshot, naming warm-up steps as such: "rank 0, warm-up step 1 of
/// 2, end of step", "rank 1, step 3, at the OOM", "rank 0, at the dump" (an imported snapshot).
/// `warmup_steps`: the session's warmup_steps (step -warmup_steps is warm-up step 1).
std::string snapshot_label(const MemorySnapshot& s, int64_t warmup_steps, bool imported);

}  // namespace embedscope::sessions
