#pragma once
// PyTorch CUDACachingAllocator's rules that an imported memory snapshot's trace leaves implicit,
// shared by the import's counters over time (importers/torch_memory_snapshot walk_timeline) and
// the allocator state at any entry (analysis/memory_history.h), so both give one answer.

#include <cstdint>

namespace embedscope::sessions {

/// CUDACachingAllocator.cpp: requests of at most kSmallSize bytes use the small pool, whose
/// segments are kSmallBuffer bytes.
inline constexpr int64_t kTorchSmallSize = int64_t{1} << 20;    // 1 MiB
inline constexpr int64_t kTorchSmallBuffer = int64_t{2} << 20;  // 2 MiB

/// The bytes of the block PyTorch makes for a request of `rounded` bytes (already rounded up to
/// 512 B) placed at the start of a free gap of `gap` bytes in a segment of `segment_size` bytes.
/// PyTorch splits the gap only when the rest is worth keeping (should_split: in the small pool a
/// rest of >= 512 B, in the large pool a rest of more than kSmallSize); otherwise the block takes
/// the whole gap. Example: 19.5 MiB in an empty 20 MiB large-pool segment is a 20 MiB block; 8
/// MiB in it is an 8 MiB block. `gap` <= `rounded` (or not known: 0) gives `rounded`.
inline int64_t torch_block_bytes(int64_t rounded, int64_t gap, int64_t segment_size) {
  const bool small_pool = segment_size == kTorchSmallBuffer && rounded <= kTorchSmallSize;
  const int64_t rest = gap - rounded;
  return !small_pool && rest > 0 && rest <= kTorchSmallSize ? gap : rounded;
}

}  // namespace embedscope::sessions
