#pragma once
// What the threaded executors (the DLRM rank, rank.h, and the LM executor, lm_executor.cpp) write
// of a rank's device memory into its session: the allocator's counters and its snapshots.

#include <cstdint>

#include "embedscope/engine/input/input.h"
#include "embedscope/engine/memory/memory.h"
#include "embedscope/sessions/model/events.h"

namespace embedscope::engine::threaded {

/// The counters of `arena` at the end of `step` of `rank` (bytes; MemoryStats' fields).
inline sessions::MemoryCounter arena_counter(const DeviceArena& arena, int rank, int64_t step) {
  const MemoryStats s = arena.allocator().stats();
  return {step, rank, s.allocated, s.reserved, s.peak_allocated, s.peak_reserved, s.largest_free_block,
          s.rounding_loss, s.segments, s.external_fragmentation, s.memviz_fragmentation};
}

/// The segments and blocks of `arena` as a snapshot of `rank` at `step` (time_ns on the
/// session's clock), and in `layout` the hash of its layout (mix64 over each block's address,
/// size and state): equal hashes, the same layout, which the executors record only once.
inline sessions::MemorySnapshot arena_snapshot(const DeviceArena& arena, int rank, int64_t step, int64_t time_ns,
                                               const char* reason, uint64_t& layout) {
  sessions::MemorySnapshot sn;
  sn.rank = rank;
  sn.step = step;
  sn.time_ns = time_ns;
  sn.reason = reason;
  uint64_t h = 0x9e3779b97f4a7c15ULL;
  for (const auto& seg : arena.allocator().snapshot())
    for (const auto& b : seg.blocks) {
      sn.blocks.push_back({seg.address, seg.size, b.address, b.size, b.requested, b.allocated, b.tag});
      h = mix64(h ^ static_cast<uint64_t>(b.address)) ^ mix64(static_cast<uint64_t>(b.size) * 2 + (b.allocated ? 1 : 0));
    }
  layout = h;
  return sn;
}

}  // namespace embedscope::engine::threaded
