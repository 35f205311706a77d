#pragma once
// The Memory page's line about the allocator entry the replay stands on (MemoryView::scrub_to):
// what happened (action, block, size, tag), when and on which stream, and the allocator's
// figures after it.

#include <QString>

#include <cstdint>
#include <vector>

#include "embedscope/sessions/analysis/memory_analysis.h"
#include "embedscope/sessions/analysis/memory_history.h"

namespace embedscope::ui {

/// "entry 12 of 40: alloc 2.0 MiB (requested 2.0 MiB) weights at 1.250 ms, stream 0 | allocated
/// 3.0 MiB, reserved 4.0 MiB, 1 segment, largest free block 1.0 MiB, fragmentation 0.0%" for entry
/// `entry` of `h` (0 <= entry < h.size()), `state` its h.state_at(entry); an OOM entry whose pool
/// is not the one of the largest free block says that pool's (`ooms`: MemoryAnalysis::ooms).
QString memory_entry_line(const sessions::MemoryHistory& h, int64_t entry, const sessions::MemoryState& state,
                          const std::vector<sessions::MemoryOom>& ooms);

}  // namespace embedscope::ui
