// tester53 F4: a collective that threw now records when it failed (FlightRecorder::failed, set by
// a FlightFailMark on the way out): its state stays scheduled or started, time_completed_ns is
// the failure time. A completed entry and a normal return leave it alone.
#include <gtest/gtest.h>

#include <stdexcept>

#include "embedscope/engine/comm/flight_recorder.h"

namespace fr53_ff = embedscope::engine;

TEST(Fr53FlightFailed, AThrowRecordsTheFailureTimeAndKeepsTheState) {
  fr53_ff::FlightRecorder fr(0, 8);
  const int members[] = {0, 1};
  const auto a = fr.scheduled("world", members, 1, "all_gather", "a", "int64", 2, 4, 300);  // throws before starting
  const auto b = fr.scheduled("world", members, 2, "all_gather", "b", "int64", 2, 4, 300);  // throws once started
  const auto c = fr.scheduled("world", members, 3, "all_gather", "c", "int64", 2, 4, 300);  // returns
  const auto d = fr.scheduled("world", members, 4, "all_gather", "d", "int64", 2, 4, 300);  // completed, then a throw
  EXPECT_THROW([&] {
    const fr53_ff::FlightFailMark mark(&fr, a);
    throw std::runtime_error("closed");
  }(), std::runtime_error);
  EXPECT_THROW([&] {
    const fr53_ff::FlightFailMark mark(&fr, b);
    fr.started(b);
    throw std::runtime_error("timed out");
  }(), std::runtime_error);
  {
    const fr53_ff::FlightFailMark mark(&fr, c);
    fr.started(c);
  }
  EXPECT_THROW([&] {
    const fr53_ff::FlightFailMark mark(&fr, d);
    fr.started(d);
    fr.completed(d);
    throw std::runtime_error("after it completed");
  }(), std::runtime_error);
  { const fr53_ff::FlightFailMark mark(nullptr, a); }  // no recorder: nothing
  fr.failed(-1);                                          // no entry: nothing
  const auto e = fr.dump(0, "collective timeout");
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].state, "scheduled");
  EXPECT_GE(e[0].time_completed_ns, e[0].time_created_ns);
  EXPECT_EQ(e[1].state, "started");
  EXPECT_GE(e[1].time_completed_ns, e[1].time_started_ns);
  EXPECT_EQ(e[2].state, "started");
  EXPECT_EQ(e[2].time_completed_ns, -1);  // returned normally: not failed, not completed
  EXPECT_EQ(e[3].state, "completed");
  EXPECT_GE(e[3].time_completed_ns, e[3].time_started_ns);
}
