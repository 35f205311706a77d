#include "embedscope/profiler/cupti/step_drain.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace embedscope::profiler {

StepDrain::StepDrain(std::vector<int32_t> ranks, int64_t setup_step) : setup_step_(setup_step) {
  for (int32_t r : ranks) windows_[r];
}

bool StepDrain::close_step(int32_t rank, int64_t step, int64_t start_ns, int64_t end_ns) {
  auto it = windows_.find(rank);
  if (it == windows_.end())
    throw std::invalid_argument("StepDrain::close_step: rank " + std::to_string(rank) + " is not one of the drain's ranks");
  it->second.push_back({step, start_ns, end_ns});
  size_t fewest = it->second.size();
  for (const auto& [r, w] : windows_) fewest = std::min(fewest, w.size());
  if (static_cast<int64_t>(fewest) <= drains_) return false;
  drains_ = static_cast<int64_t>(fewest);
  return true;
}

bool StepDrain::step_of(int32_t rank, int64_t t, bool final, int64_t& step) const {
  auto it = windows_.find(rank);
  const auto run = running_.find(rank);
  if (it == windows_.end() || it->second.empty()) {  // no window: setup's, once final
    // (or the first step's, from its start on, when the rank died in it)
    const bool died_in_it = run != running_.end() && run->second.start_ns >= 0 && t >= run->second.start_ns;
    step = died_in_it ? run->second.step : setup_step_;
    return final;
  }
  const auto& w = it->second;
  if (t >= w.back().end_ns) {
    if (!final) return false;  // a step still running (or between two)
    if (run != running_.end() && run->second.step > w.back().step &&
        (run->second.start_ns < 0 || t >= run->second.start_ns)) {  // the step the rank died in
      step = run->second.step;
      return true;
    }
  }
  // the last window that started at or before t
  auto after = std::upper_bound(w.begin(), w.end(), t, [](int64_t v, const Window& x) { return v < x.start_ns; });
  step = after == w.begin() ? setup_step_ : std::prev(after)->step;
  return true;
}

std::vector<GpuOp> StepDrain::place(std::vector<GpuOp> ops, bool final) {
  std::vector<GpuOp> all = std::move(held_ops_), out;
  held_ops_.clear();
  all.insert(all.end(), std::make_move_iterator(ops.begin()), std::make_move_iterator(ops.end()));
  for (GpuOp& g : all) {
    int64_t step = 0;
    if (step_of(g.op.rank, g.op.start_ns, final, step)) {
      g.op.step = step;
      out.push_back(g);
    } else {
      held_ops_.push_back(g);
    }
  }
  return out;
}

std::vector<sessions::MemoryEvent> StepDrain::place(std::vector<sessions::MemoryEvent> events, bool final) {
  std::vector<sessions::MemoryEvent> all = std::move(held_events_), out;
  held_events_.clear();
  all.insert(all.end(), std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
  for (auto& e : all) {
    int64_t step = 0;
    if (step_of(e.rank, e.time_ns, final, step)) {
      e.step = step;
      out.push_back(std::move(e));
    } else {
      held_events_.push_back(std::move(e));
    }
  }
  return out;
}

}  // namespace embedscope::profiler
