#pragma once
// The memory figures of `embedscope stats` (sessions memory_analysis.h): per rank the peaks,
// fragmentation and the largest free block at the peak, the bytes lost to rounding, the stacks
// holding the most bytes at the peak, and every OOM with its request against the largest free
// block, as text and as JSON.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/memory_analysis.h"

namespace embedscope::cli {

/// Lines ending in '\n' ("" for no ranks): a "memory" heading, one block per rank.
std::string memory_text(const std::vector<sessions::RankMemoryAnalysis>& ranks);

/// [{"rank", "entries", "starts_at_process_start", "peak_entry", "peak_allocated_bytes",
///   "peak_reserved_bytes", "peak_active_bytes", "at_peak": {"reserved_bytes", "requested_bytes",
///   "largest_free_block_bytes", "free_in_segments_bytes", "external_fragmentation",
///   "memviz_fragmentation"}, "rounding_loss_bytes", "reserved_minus_requested_bytes",
///   "top_stacks_at_peak": [{"stack_id", "name", "bytes", "requested_bytes", "blocks"}],
///   "ooms": [{"entry", "time_ns", "requested_bytes", "device_free_bytes" (null unknown),
///             "largest_free_block_bytes", "free_in_segments_bytes", "allocated_bytes",
///             "reserved_bytes", "fragmentation", "top_stacks"}], "problems"}]
nlohmann::json memory_json(const std::vector<sessions::RankMemoryAnalysis>& ranks);

}  // namespace embedscope::cli
