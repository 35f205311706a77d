#include "embedscope/engine/memory.h"

#include <fmt/format.h>

namespace embedscope::engine {

Allocation DeviceArena::allocate(const std::string& tag, int64_t bytes) {
  try {
    return allocator_->allocate(bytes, tag);
  } catch (const DeviceOutOfMemory& e) {
    throw OomError(fmt::format("rank {}: {}", rank_, e.what()), rank_, e.fragmentation, bytes);
  }
}

}  // namespace embedscope::engine
