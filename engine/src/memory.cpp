#include "embedscope/engine/memory.h"

#include <chrono>

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
    throw OomError(fmt::format("rank {}: {}", rank_, e.what()), rank_, e.fragmentation, bytes);
  }
}

void DeviceArena::release(const Allocation& a) {
  const int64_t t0 = now_ns();
  allocator_->free(a);
  allocator_ns_ += now_ns() - t0;
}

}  // namespace embedscope::engine
