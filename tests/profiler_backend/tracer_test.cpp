#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "embedscope/profiler/device/cuda_device.h"
#include "embedscope/profiler/cpu/tracer.h"

using namespace embedscope;

TEST(Tracer, RecordsSpansPerLaneAndDrains) {
  profiler::Tracer t(2, true);
  {
    profiler::ScopedSpan s(t, 1, sessions::Lane::comm, sessions::OpCategory::comm, "all_to_all", 3);
    s.set_bytes(128);
    s.set_correlation(7);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  { profiler::ScopedSpan s(t, 1, sessions::Lane::compute, sessions::OpCategory::lookup, "lookup", 3); }
  { profiler::ScopedSpan s(t, 0, sessions::Lane::compute, sessions::OpCategory::dense, "mlp", 3); }
  auto r1 = t.take(1);
  ASSERT_EQ(r1.size(), 2u);
  EXPECT_STREQ(r1[0].name, "lookup");  // lane order: compute, then comm
  EXPECT_STREQ(r1[1].name, "all_to_all");
  EXPECT_EQ(r1[1].bytes, 128);
  EXPECT_EQ(r1[1].correlation, 7u);
  EXPECT_GE(r1[1].end_ns - r1[1].start_ns, 2'000'000);
  EXPECT_TRUE(t.take(1).empty());  // drained
  EXPECT_EQ(t.take(0).size(), 1u);
  EXPECT_EQ(t.recorded(), 3);
  EXPECT_GT(t.overhead_ns(), 0);
  EXPECT_EQ(t.dropped(), 0);
}

TEST(Tracer, FullLaneDropsAndCounts) {
  profiler::Tracer t(1, true, 2);
  for (int i = 0; i < 5; ++i) profiler::ScopedSpan s(t, 0, sessions::Lane::compute, sessions::OpCategory::other, "x", i);
  EXPECT_EQ(t.dropped(), 3);
  EXPECT_EQ(t.take(0).size(), 2u);
}

TEST(Tracer, DisabledRecordsNothing) {
  profiler::Tracer t(1, false);
  { profiler::ScopedSpan s(t, 0, sessions::Lane::compute, sessions::OpCategory::dense, "mlp", 0); }
  EXPECT_TRUE(t.take(0).empty());
  EXPECT_EQ(t.overhead_ns(), 0);
}

TEST(CudaDevices, ReasonAgreesWithTheCount) {
  const auto& d = profiler::cuda_devices();
  EXPECT_EQ(&d, &profiler::cuda_devices());  // asked once
  if (!d.error.empty()) {
    EXPECT_EQ(d.count, 0);
  }
  EXPECT_EQ(d.names.size(), static_cast<size_t>(d.count));
  EXPECT_EQ(profiler::cuda_unavailable_reason(0), "");
  if (d.count > 0) {
    EXPECT_EQ(profiler::cuda_unavailable_reason(d.count), "");
  }
  const std::string more = profiler::cuda_unavailable_reason(d.count + 1);
  EXPECT_EQ(more.rfind("needs " + std::to_string(d.count + 1) + " CUDA device(s)", 0), 0u) << more;
  EXPECT_NE(more.find(d.error.empty() ? "found " + std::to_string(d.count) : d.error), std::string::npos) << more;
}

// The run's steady-clock zero on the wall clock (wall_anchor_unix_ns, which `merge --align none`
// places each process's session by): a wall-clock read now lies where the steady clock says, to
// within the anchor's stated uncertainty (plus 50 us for the wall clock's own slewing).
TEST(RunClock, WallAnchorPlacesTheSteadyZeroWithinItsUncertainty) {
  embedscope::profiler::RunClock c;
  EXPECT_GE(c.wall_anchor_uncertainty_ns(), 0);
  for (int i = 0; i < 20; ++i) {
    const int64_t s1 = c.now_ns();
    const int64_t wall =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    const int64_t s2 = c.now_ns();
    const int64_t since_anchor = wall - c.wall_anchor_ns();
    const int64_t slack = c.wall_anchor_uncertainty_ns() + 50'000;
    EXPECT_GE(since_anchor, s1 - slack) << "read " << i;
    EXPECT_LE(since_anchor, s2 + slack) << "read " << i;
  }
}
