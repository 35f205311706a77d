#pragma once
// Replays a recorded list of alloc/free actions through allocator settings, so a user can try
// a setting on their own allocation pattern (`embedscope replay-memory`).
//
// Trace JSON: {"capacity_bytes": 17179869184,            (optional; --capacity overrides)
//              "actions": [{"action": "alloc", "id": 1, "size": 4096, "stream": 0, "tag": "kjt"},
//                          {"action": "free", "id": 1}, ...]}

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/engine/memory/allocator.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

struct MemoryAction {
  bool alloc = true;
  int64_t id = 0;
  int64_t size = 0;   ///< alloc only
  int64_t stream = 0;
  std::string tag;
};

struct MemoryTrace {
  int64_t capacity_bytes = 0;  ///< 0: not given
  std::vector<MemoryAction> actions;
};

/// Parses a trace; SpecError names the file and the JSON pointer ("/actions/3/size: ...").
MemoryTrace load_memory_trace(const std::string& path);

struct ReplayResult {
  AllocatorConfig config;
  std::string label;             ///< e.g. "caching, max_split_size 32.0 MiB"
  bool oom = false;
  int64_t oom_action = -1;       ///< index of the action that failed
  std::string oom_message;
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;
  double fragmentation_at_peak = 0;  ///< external fragmentation near the reserved peak (sampled at
                                     ///< every 1% of growth of the peak)
  double memviz_at_peak = 0;
  int64_t final_reserved = 0;
  int64_t segments_at_peak = 0;
};

/// Replays `trace` through one allocator setting (bookkeeping only: no host memory is used).
/// Stops at the first OOM. A free of an unknown id, or a repeated alloc id, throws SpecError
/// naming the action.
ReplayResult replay(const MemoryTrace& trace, const AllocatorConfig& config, const std::string& origin);

}  // namespace embedscope::engine
