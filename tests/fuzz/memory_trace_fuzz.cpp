// libFuzzer target: replay-memory's trace parser (engine/memory/replay.h) and the replay of what
// it accepts. Input: the bytes of a trace JSON file. load_memory_trace either returns the actions
// or throws SpecError naming the file and the JSON pointer; a trace it returns is replayed (as
// `embedscope replay-memory` does, bookkeeping only) through caching, caching with
// max_split_size 20 MiB, expandable and direct, which either finish or throw SpecError naming
// the action (a free of an unknown id, a repeated alloc id).
// Seeds: tests/data/memory/*.json.
#include "embedscope/engine/memory/replay.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace es = embedscope::engine;
  if (size > (size_t{1} << 20)) return -1;
  embedscope::fuzz::TempFile file("memory_trace", ".json", data, size);
  es::MemoryTrace trace;
  try {
    trace = es::load_memory_trace(file.path());
  } catch (const es::SpecError&) {
    return 0;
  }
  // The CLI needs a capacity: the trace's, else --capacity (here 1 GiB).
  const int64_t cap = trace.capacity_bytes > 0 ? trace.capacity_bytes : int64_t{1} << 30;
  const es::AllocatorConfig settings[] = {
      {es::AllocatorKind::caching, cap, 0, false},
      {es::AllocatorKind::caching, cap, es::kLargeBuffer, false},
      {es::AllocatorKind::expandable, cap, 0, false},
      {es::AllocatorKind::direct, cap, 0, false},
  };
  for (const auto& c : settings) {
    try {
      (void)es::replay(trace, c, file.path()).verdict();
    } catch (const es::SpecError&) {
    }
  }
  return 0;
}
