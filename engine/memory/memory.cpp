#include "embedscope/engine/memory/memory.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

namespace embedscope::engine {

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Allocation DeviceArena::allocate(const std::string& tag, int64_t bytes) {
  const int64_t t0 = now_ns();
  try {
    Allocation a = allocator_->allocate(bytes, tag);
    allocator_ns_ += now_ns() - t0;
    return a;
  } catch (const DeviceOutOfMemory& e) {
    if (on_oom_) on_oom_();
    throw OomError(fmt::format("rank {}: {}", rank_, e.what()), rank_, e.fragmentation, bytes);
  }
}

void DeviceArena::release(const Allocation& a) {
  const int64_t t0 = now_ns();
  allocator_->free(a);
  allocator_ns_ += now_ns() - t0;
}

DeviceArena::Compaction DeviceArena::compact() {
  if (device_memory_) throw std::logic_error("compaction of GPU memory is not supported (spec validation refuses it)");
  Compaction c;
  const MemoryStats before = allocator_->stats();
  c.reserved_before = before.reserved;
  c.largest_free_before = before.largest_free_block;
  std::vector<std::pair<Allocation*, std::string>> owners(tracked_.begin(), tracked_.end());
  std::stable_sort(owners.begin(), owners.end(), [](const auto& a, const auto& b) {
    return a.first->size != b.first->size ? a.first->size > b.first->size : a.first->address < b.first->address;
  });
  std::vector<std::vector<char>> saved;
  saved.reserve(owners.size());
  for (auto& [owner, tag] : owners) {
    const auto* p = static_cast<const char*>(owner->ptr);
    saved.emplace_back(p, p + owner->requested);
    allocator_->free(*owner);
  }
  allocator_->empty_cache();
  for (size_t i = 0; i < owners.size(); ++i) {
    Allocation& owner = *owners[i].first;
    const Allocation fresh = allocate(owners[i].second, owner.requested);
    std::memcpy(fresh.ptr, saved[i].data(), saved[i].size());
    c.bytes_moved += static_cast<int64_t>(saved[i].size());
    ++c.blocks_moved;
    owner = fresh;
  }
  const MemoryStats after = allocator_->stats();
  c.reserved_after = after.reserved;
  c.largest_free_after = after.largest_free_block;
  return c;
}

}  // namespace embedscope::engine
