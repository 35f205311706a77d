// The moment of a rank's memory peak (core/plan_history.h).
#include "core/plan_history.h"

namespace embedscope::ui {

std::optional<int64_t> peak_step(const std::vector<sessions::MemoryCounter>& counters, int32_t rank, int64_t peak_bytes) {
  std::optional<int64_t> out;
  for (const auto& c : counters)
    if (c.rank == rank && c.peak_allocated >= peak_bytes && (!out || c.step < *out)) out = c.step;
  return out;
}

}  // namespace embedscope::ui
