#include <gtest/gtest.h>

#include <thread>

#include "embedscope/profiler/tracer.h"

using namespace embedscope;

TEST(Tracer, RecordsSpansPerLaneInOrder) {
  profiler::Tracer t(2, true);
  {
    profiler::ScopedSpan s(t, 1, sessions::Lane::comm, sessions::OpCategory::comm, "all_to_all", 3);
    s.set_bytes(128);
    s.set_correlation(7);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  { profiler::ScopedSpan s(t, 0, sessions::Lane::compute, sessions::OpCategory::lookup, "lookup", 3); }
  const auto& comm = t.lane_events(1, sessions::Lane::comm);
  ASSERT_EQ(comm.size(), 1u);
  EXPECT_STREQ(comm[0].name, "all_to_all");
  EXPECT_EQ(comm[0].bytes, 128);
  EXPECT_EQ(comm[0].correlation, 7u);
  EXPECT_GE(comm[0].end_ns - comm[0].start_ns, 2'000'000);
  auto all = t.events();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_LE(all[0].start_ns, all[1].start_ns);
  EXPECT_EQ(all[1].rank, 0);
  EXPECT_TRUE(t.lane_events(0, sessions::Lane::comm).empty());
}

TEST(Tracer, DisabledRecordsNothing) {
  profiler::Tracer t(1, false);
  { profiler::ScopedSpan s(t, 0, sessions::Lane::compute, sessions::OpCategory::dense, "mlp", 0); }
  EXPECT_TRUE(t.events().empty());
}
