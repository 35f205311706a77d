#include "embedscope/profiler/tracer.h"

#include <algorithm>
#include <tuple>

namespace embedscope::profiler {

Tracer::Tracer(int world_size, bool enabled)
    : enabled_(enabled), buffers_(static_cast<size_t>(world_size * kLanes)) {}

std::vector<sessions::OpEvent> Tracer::events() const {
  std::vector<sessions::OpEvent> all;
  for (const auto& b : buffers_) all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return std::tie(a.start_ns, a.rank, a.lane) < std::tie(b.start_ns, b.rank, b.lane);
  });
  return all;
}

}  // namespace embedscope::profiler
