#include "embedscope/engine/memory.h"

#include <fmt/format.h>

#include "embedscope/engine/sharding.h"

namespace embedscope::engine {

void DeviceArena::allocate(const std::string& tag, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (in_use_ + bytes > capacity_) {
    std::string holders;
    for (const auto& [t, b] : by_tag_)
      if (b > 0) holders += fmt::format("{}{} {}", holders.empty() ? "" : ", ", t, format_bytes(b));
    throw OomError(fmt::format("rank {}: out of memory allocating {} for {}: {} of {} in use ({})", rank_,
                               format_bytes(bytes), tag, format_bytes(in_use_), format_bytes(capacity_),
                               holders.empty() ? "nothing else" : holders),
                   rank_, bytes, in_use_, capacity_);
  }
  in_use_ += bytes;
  by_tag_[tag] += bytes;
  if (in_use_ > peak_) peak_ = in_use_;
}

void DeviceArena::release(const std::string& tag, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  in_use_ -= bytes;
  by_tag_[tag] -= bytes;
}

int64_t DeviceArena::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

int64_t DeviceArena::peak() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

std::map<std::string, int64_t> DeviceArena::by_tag() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_tag_;
}

}  // namespace embedscope::engine
