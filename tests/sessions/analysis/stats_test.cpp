#include <gtest/gtest.h>

#include "embedscope/sessions/analysis/stats.h"

using namespace embedscope::sessions;

TEST(Stats, NearestRankPercentiles) {
  // 1..100: p50 is the 50th value, p99 the 99th.
  std::vector<int64_t> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  Distribution d = summarize(v);
  EXPECT_EQ(d.count, 100);
  EXPECT_DOUBLE_EQ(d.mean, 50.5);
  EXPECT_EQ(d.p50, 50);
  EXPECT_EQ(d.p99, 99);
  EXPECT_EQ(d.min, 1);
  EXPECT_EQ(d.max, 100);
}

TEST(Stats, SmallSamples) {
  Distribution d = summarize({30, 10, 20});
  EXPECT_EQ(d.p50, 20);  // ceil(1.5) = 2nd value
  EXPECT_EQ(d.p99, 30);
  EXPECT_DOUBLE_EQ(d.mean, 20.0);
  EXPECT_EQ(summarize({}).count, 0);
  EXPECT_THROW(percentile_nearest_rank({}, 50), std::invalid_argument);
  EXPECT_THROW(percentile_nearest_rank({1}, 0), std::invalid_argument);
}
