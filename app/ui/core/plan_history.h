#pragma once
// The sharding plan of a session at any measured step, and when each rank's memory peaked, so
// that the summary shows the plan a rebalanced run ended with and compares each rank's measured
// peak with the estimate of the plan in force when the peak happened (issue 17). Without Qt.
// Sources: tables `shards` (the plan the run started with), `plan_changes` (live rebalances) and
// `memory_counters` (per rank and step: the allocator's running peak at the step's end, or
// after the live rebalance's move that followed it) - sessions/schema/FORMAT.md.

#include <cstdint>
#include <optional>
#include <vector>

#include "embedscope/sessions/analysis/plan_at_step.h"
#include "embedscope/sessions/model/events.h"

namespace embedscope::ui {

/// The shards serving a measured step: sessions::shards_at (embedscope/sessions/analysis/plan_at_step.h),
/// shared with `embedscope rebalance`.
using sessions::shards_at;

/// The measured step in which a rank's allocated memory reached `peak_bytes`: the first of its
/// memory counters (by step) whose running peak_allocated reaches it; warm-up steps are < 0.
/// A live rebalance's move writes the counter of the step it follows again (table
/// `memory_counters` keeps one row per step and rank), so a peak at step s of a rebalance after
/// step s happened in that step or in the move: the caller tells them apart, if it must.
/// nullopt when no counter of the rank reaches it (a session without memory counters).
/// Example: rank 1's counters {step 0: 10, step 1: 12, step 2: 20} and peak 20 -> 2; 12 -> 1.
std::optional<int64_t> peak_step(const std::vector<sessions::MemoryCounter>& counters, int32_t rank, int64_t peak_bytes);

}  // namespace embedscope::ui
