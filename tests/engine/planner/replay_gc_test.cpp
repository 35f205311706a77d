// The planner's replay (planner/memory_replay.h AllocatorReplay) honours the workload's
// garbage_collection_threshold: its bookkeeping allocator has kMaxMemoryBytes, yet it collects
// where the run's allocator of the device's capacity does. The hand case of
// tests/engine/memory/mem61_gc_threshold_test.cpp (capacity 100 MiB, threshold 0.5: collection
// above 50 MiB reserved): A 12 MiB is released before Y (reserved 50 + 24 = 74 MiB), then B, C
// and Y before Z (74 - 54 + 30 = 50 MiB): peak reserved 74 MiB. Without the threshold nothing is
// released below the bookkeeping capacity: 62 + 24 = 86, + 30 = 116 MiB.
#include <gtest/gtest.h>

#include <stdexcept>

#include "planner/memory_replay.h"

using namespace embedscope::engine;
using embedscope::engine::detail::AllocatorReplay;

namespace {
constexpr int64_t kGcMiB = int64_t{1} << 20;

void mem61_sequence(AllocatorReplay& r) {
  Allocation s = r.take(512 * 1024);
  r.give(s);
  Allocation A = r.take(12 * kGcMiB), B = r.take(14 * kGcMiB), C = r.take(16 * kGcMiB);
  r.give(A);
  Allocation X = r.take(18 * kGcMiB);
  r.give(B);
  Allocation s2 = r.take(512 * 1024);
  r.give(s2);
  Allocation Y = r.take(24 * kGcMiB);
  r.give(C);
  r.give(Y);
  Allocation Z = r.take(30 * kGcMiB);
  r.give(Z);
  r.give(X);
}
}  // namespace

TEST(ReplayGcThreshold, CollectsAtTheDevicesThresholdNotTheBookkeepingCapacity) {
  AllocatorReplay with(AllocatorKind::caching, 0, 0.5, 100 * kGcMiB);
  mem61_sequence(with);
  EXPECT_EQ(with.stats().peak_reserved, 74 * kGcMiB);
  EXPECT_EQ(with.stats().peak_allocated, (18 + 16 + 24) * kGcMiB);  // X, C, Y live together
  EXPECT_EQ(with.shortfall_at(100 * kGcMiB).request, 0);  // at the device's capacity: served, no retry needed

  AllocatorReplay without(AllocatorKind::caching, 0);
  mem61_sequence(without);
  EXPECT_EQ(without.stats().peak_reserved, 116 * kGcMiB);
  EXPECT_EQ(without.stats().peak_allocated, (18 + 16 + 24) * kGcMiB);

  // the expandable allocator has no whole free segment: the threshold changes nothing there
  AllocatorReplay expandable(AllocatorKind::expandable, 0, 0.5, 100 * kGcMiB);
  AllocatorReplay expandable_off(AllocatorKind::expandable, 0);
  mem61_sequence(expandable);
  mem61_sequence(expandable_off);
  EXPECT_EQ(expandable.stats().peak_reserved, expandable_off.stats().peak_reserved);

  EXPECT_THROW(AllocatorReplay(AllocatorKind::caching, 0, 1.0, 100 * kGcMiB), std::invalid_argument);
  EXPECT_THROW(AllocatorReplay(AllocatorKind::caching, 0, 0.5, 0), std::invalid_argument);
}
