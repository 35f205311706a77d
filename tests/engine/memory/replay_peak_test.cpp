// The replay's fragmentation "at peak reserved" is taken at the final peak, not at the last 1%
// step of its growth (tester41 #7: the Replay panel's 9.1% beside the recording's figure).
#include <gtest/gtest.h>

#include "embedscope/engine/memory/replay.h"

using namespace embedscope::engine;

namespace {
constexpr int64_t kReplayPeakMiB = int64_t{1} << 20;
MemoryAction replay_peak_alloc(int64_t id, int64_t size) { return {MemoryAction::Kind::alloc, id, size, 0, "t", -1}; }
MemoryAction replay_peak_free(int64_t id) { return {MemoryAction::Kind::free, id, 0, 0, "", -1}; }
}  // namespace

TEST(ReplayPeak, FragmentationIsTakenWhereReservedLastGrew) {
  // caching: three large segments of 100 + 100 + 200 MiB (each a >= 1% growth of the peak: its
  // figures are taken then, nothing free: 0%); blocks 1 and 3 freed (300 MiB free, the largest
  // 200 MiB); a 512 B request opens a 2 MiB small-pool segment: reserved 402 MiB, a 0.5% growth,
  // the final peak. There: free = 300 MiB + 2 MiB - 512 B, largest free block 200 MiB.
  MemoryTrace t;
  t.actions = {replay_peak_alloc(1, 100 * kReplayPeakMiB), replay_peak_alloc(2, 100 * kReplayPeakMiB),
               replay_peak_alloc(3, 200 * kReplayPeakMiB), replay_peak_free(1), replay_peak_free(3),
               replay_peak_alloc(4, 512)};
  const ReplayResult r = replay(t, {AllocatorKind::caching, 1024 * kReplayPeakMiB, 0, false}, "hand-built");
  EXPECT_FALSE(r.oom);
  EXPECT_EQ(r.peak_reserved, 402 * kReplayPeakMiB);
  EXPECT_EQ(r.peak_reserved_action, 5);
  const double free_bytes = static_cast<double>(302 * kReplayPeakMiB - 512);
  EXPECT_NEAR(r.fragmentation_at_peak, 1.0 - static_cast<double>(200 * kReplayPeakMiB) / free_bytes, 1e-12);  // 0.33775
  EXPECT_EQ(r.segments_at_peak, 4);
  // the figures still end where the replay ended
  EXPECT_EQ(r.final_reserved, 402 * kReplayPeakMiB);
}
