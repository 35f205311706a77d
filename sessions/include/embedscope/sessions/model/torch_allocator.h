#pragma once
// PyTorch CUDACachingAllocator's rules that an imported memory snapshot's trace leaves implicit,
// shared by the import's counters over time (importers/torch_memory_snapshot walk_timeline) and
// the allocator state at any entry (analysis/memory_history.h), so both give one answer.

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

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

/// One entry of a trace as torch_misaddressed_frees reads it: its kind, address and size (bytes).
struct TorchFreeStep {
  enum Kind { other, free_requested, free_completed } kind = other;
  uint64_t addr = 0;
  int64_t size = 0;
};

/// For each entry of `trace` (entry order), the entry of the free_requested that it most likely
/// completes under a wrong address, or -1. PyTorch frees a block in two entries at one address
/// (free_requested, then free_completed once its streams are done with it); a free_completed at an
/// address with no open free_requested, while a free_requested of the same size never gets its
/// completion in the trace, is that completion with a corrupt address. A free_completed whose own
/// free_requested is open pairs with it first; of several candidates, one whose block holds the
/// address wins, else the latest before it; each free_requested is paired at most once. Whether
/// the block was live (and no block starts at the corrupt address) is the caller's to check: it
/// walks the layout. Empty trace: empty result; never throws.
inline std::vector<int64_t> torch_misaddressed_frees(const std::vector<TorchFreeStep>& trace) {
  const size_t n = trace.size();
  std::vector<int64_t> out(n, -1);
  std::map<uint64_t, size_t> open;  // address -> its free_requested still waiting for a completion
  std::vector<size_t> stray;        // free_completed entries with no open free_requested
  for (size_t i = 0; i < n; ++i) {
    const TorchFreeStep& e = trace[i];
    if (e.kind == TorchFreeStep::free_requested) {
      open[e.addr] = i;
    } else if (e.kind == TorchFreeStep::free_completed) {
      if (auto it = open.find(e.addr); it != open.end()) open.erase(it);
      else stray.push_back(i);
    }
  }
  std::map<size_t, bool> never_completed;  // request entry -> paired already
  for (const auto& [a, r] : open) never_completed[r] = false;
  for (size_t c : stray) {
    int64_t best = -1;
    bool best_holds = false;
    for (auto& [r, used] : never_completed) {
      if (r >= c) break;
      const TorchFreeStep& q = trace[r];
      if (used || q.size != trace[c].size) continue;
      const bool holds = trace[c].addr >= q.addr && trace[c].addr - q.addr < static_cast<uint64_t>(q.size);
      if (best < 0 || holds || !best_holds) {  // entries rise: a later one wins unless the earlier holds
        best = static_cast<int64_t>(r);
        best_holds = holds;
      }
    }
    if (best >= 0) {
      out[c] = best;
      never_completed[static_cast<size_t>(best)] = true;
    }
  }
  return out;
}

}  // namespace embedscope::sessions
