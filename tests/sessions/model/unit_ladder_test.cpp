// The unit ladder of durations (sessions/model/unit_ladder.h) that format_duration, the CLI's
// long durations and the compare charts' axes share, and rates below one a second (tester39).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "embedscope/sessions/model/unit_ladder.h"
#include "embedscope/sessions/model/units.h"

using namespace embedscope::sessions;

TEST(UnitLadder, EachRungAndItsBoundaries) {
  auto name = [](double ns) { return std::string(duration_unit(ns).name); };
  EXPECT_EQ(name(0), "ns");
  EXPECT_EQ(name(999), "ns");
  EXPECT_EQ(name(1e3), "us");
  EXPECT_EQ(name(0.5e6), "us");  // a tiny run's 0.5 ms step: its chart reads in us
  EXPECT_EQ(name(1e6), "ms");
  EXPECT_EQ(name(1e9), "s");
  EXPECT_EQ(name(599.9e9), "s");
  EXPECT_EQ(name(600e9), "min");  // 10 minutes
  EXPECT_EQ(name(5999e9), "min");
  EXPECT_EQ(name(6000e9), "h");  // 100 minutes
  EXPECT_EQ(name(46974990650000.0), "h");  // tester39's 13-hour simulated step
  EXPECT_EQ(name(172799e9), "h");
  EXPECT_EQ(name(172800e9), "d");  // 48 hours
  EXPECT_EQ(name(4458677101160000.0), "d");  // a 51.6-day import
  EXPECT_EQ(name(-46974990650000.0), "h");   // a difference keeps the unit of its size
  EXPECT_EQ(name(std::nan("")), "ns");
  EXPECT_DOUBLE_EQ(duration_unit(46974990650000.0).ns, 3600e9);
  EXPECT_DOUBLE_EQ(duration_unit(4458677101160000.0).ns, 86400e9);
  EXPECT_DOUBLE_EQ(duration_unit(0.5e6).ns, 1e3);
}

TEST(UnitLadder, FormatDurationWritesTheRungItPicks) {
  EXPECT_EQ(format_duration(999), "999 ns");
  EXPECT_EQ(format_duration(340'000), "340.0 us");
  EXPECT_EQ(format_duration(12'500'000), "12.50 ms");
  EXPECT_EQ(format_duration(1'200'000'000), "1.20 s");
  EXPECT_EQ(format_duration(750'000'000'000), "12.5 min");
  EXPECT_EQ(format_duration(46'974'990'650'000), "13.05 h");
  EXPECT_EQ(format_duration(4'458'677'101'160'000), "51.61 d");
  EXPECT_EQ(format_duration(-46'974'990'650'000), "-13.05 h");
}

TEST(UnitLadder, RatesBelowOneASecondKeepThreeSignificantDigits) {
  EXPECT_EQ(format_rate(15378.4), "15378");
  EXPECT_EQ(format_rate(3.4), "3");
  EXPECT_EQ(format_rate(0.25), "0.250");
  EXPECT_EQ(format_rate(8 / 46974.99065), "0.000170");  // 8 samples a 13.05-hour step
  EXPECT_EQ(format_rate(0), "0");
  EXPECT_EQ(format_rate(1e-12), "< 0.000000001");
  EXPECT_EQ(format_rate(-28284.0), "-28284");  // a difference
  EXPECT_EQ(format_rate(-0.25), "-0.250");
  EXPECT_EQ(format_rate(std::numeric_limits<double>::infinity()), "-");
  EXPECT_EQ(format_rate(std::nan("")), "-");
}
