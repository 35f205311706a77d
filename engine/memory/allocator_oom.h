#pragma once
// Internal to engine/memory: the parts of the OOM explanation (allocator_oom.cpp) that the
// block allocator (allocator.cpp) adds to DeviceAllocator::out_of_memory's.

#include <cstdint>
#include <vector>

#include "embedscope/engine/memory/allocator.h"

namespace embedscope::engine::detail {

/// A fragmentation OOM that a free block of another stream's segment could have served: the
/// caching and expandable allocators hand a request only the free blocks of its own stream's
/// segments (PyTorch's per-stream pools), so "the largest free block is 10 MiB" beside a 10 MiB
/// request needs that rule said. `snapshot`: the allocator's layout at the OOM; `rounded`: the
/// request after rounding (bytes); `small`: its pool. Returns `e` unchanged when no other
/// stream's free block of that pool is large enough; else `e` with, before ". Allocated", e.g.
/// "; the free blocks large enough (10.0 MiB) are in stream 0's segments, and a block freed on
/// one stream is never handed to a request on another (the per-stream rule, as PyTorch's caching
/// allocator): stream 1's largest free block is 0 B". Never throws beyond std::bad_alloc.
DeviceOutOfMemory stream_rule_oom(const DeviceOutOfMemory& e, const std::vector<SegmentInfo>& snapshot, int64_t stream,
                                  bool small, int64_t rounded);

}  // namespace embedscope::engine::detail
