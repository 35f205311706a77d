// Welch's t-test behind compare's "within noise" (noise.h), its table of Student's t critical
// values (NIST/SEMATECH e-Handbook 1.3.6.7.2) and the sample standard deviation of summarize,
// against hand-computed figures.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "embedscope/sessions/analysis/noise.h"
#include "embedscope/sessions/analysis/stats.h"

namespace {
namespace ss = embedscope::sessions;
}  // namespace

TEST(Docs57Welch, StudentTCriticalValuesReadTheRowBelow) {
  EXPECT_DOUBLE_EQ(ss::student_t_975(1), 12.706);
  EXPECT_DOUBLE_EQ(ss::student_t_975(5), 2.571);
  EXPECT_DOUBLE_EQ(ss::student_t_975(5.88), 2.571);  // a fractional df reads the row below: the larger value
  EXPECT_DOUBLE_EQ(ss::student_t_975(10.7), 2.228);
  EXPECT_DOUBLE_EQ(ss::student_t_975(30), 2.042);
  EXPECT_DOUBLE_EQ(ss::student_t_975(39.9), 2.042);
  EXPECT_DOUBLE_EQ(ss::student_t_975(45), 2.021);
  EXPECT_DOUBLE_EQ(ss::student_t_975(60), 2.000);
  EXPECT_DOUBLE_EQ(ss::student_t_975(1000), 1.980);
  EXPECT_DOUBLE_EQ(ss::student_t_975(std::numeric_limits<double>::infinity()), 1.960);
  EXPECT_DOUBLE_EQ(ss::student_t_975(0.4), 12.706);
  EXPECT_DOUBLE_EQ(ss::student_t_975(std::nan("")), 12.706);
}

// A {100, 120, 80, 110, 90}: mean 100, sd sqrt(1000 / 4) = 15.811; B = 2 x A: mean 200, sd
// 31.623. se sqrt(250 / 5 + 1000 / 5) = 15.811, t 100 / 15.811 = 6.325, df 250^2 / (50^2 / 4 +
// 200^2 / 4) = 5.882, critical (df 5) 2.571: they differ. C = A + 10 ms: t 1.0, df 8, 2.306: not.
TEST(Docs57Welch, ATwoFoldChangeDiffersAndAShiftWithinTheNoiseDoesNot) {
  const ss::Distribution a = ss::summarize({100, 120, 80, 110, 90}), b = ss::summarize({200, 240, 160, 220, 180}),
                         c = ss::summarize({110, 130, 90, 120, 100});
  EXPECT_DOUBLE_EQ(a.mean, 100);
  EXPECT_NEAR(a.stddev, std::sqrt(250.0), 1e-12);
  EXPECT_NEAR(b.stddev, std::sqrt(1000.0), 1e-12);
  const auto far = ss::welch_t_test(a.mean, a.stddev, a.count, b.mean, b.stddev, b.count);
  ASSERT_TRUE(far.has_value());
  EXPECT_NEAR(far->t, 100 / std::sqrt(250.0), 1e-9);
  EXPECT_NEAR(far->df, 62500.0 / 10625.0, 1e-9);
  EXPECT_DOUBLE_EQ(far->critical, 2.571);
  EXPECT_TRUE(far->differs);
  const auto near = ss::welch_t_test(a.mean, a.stddev, a.count, c.mean, c.stddev, c.count);
  ASSERT_TRUE(near.has_value());
  EXPECT_NEAR(near->t, 1.0, 1e-9);
  EXPECT_NEAR(near->df, 8.0, 1e-9);
  EXPECT_DOUBLE_EQ(near->critical, 2.306);
  EXPECT_FALSE(near->differs);
  // the sign follows B - A
  EXPECT_NEAR(ss::welch_t_test(c.mean, c.stddev, c.count, a.mean, a.stddev, a.count)->t, -1.0, 1e-9);
}

TEST(Docs57Welch, FewSamplesGetNoTestAndSamplesWithoutSpreadDifferWhenTheirMeansDo) {
  EXPECT_FALSE(ss::welch_t_test(100, 10, 4, 200, 10, 20).has_value());
  EXPECT_FALSE(ss::welch_t_test(100, 10, 20, 200, 10, 4).has_value());
  EXPECT_TRUE(ss::welch_t_test(100, 10, 5, 200, 10, 5).has_value());
  // a simulation's identical steps: se 0; df n_a + n_b - 2 = 8
  const auto same = ss::welch_t_test(100, 0, 5, 100, 0, 5);
  ASSERT_TRUE(same.has_value());
  EXPECT_EQ(same->t, 0.0);
  EXPECT_DOUBLE_EQ(same->df, 8.0);
  EXPECT_FALSE(same->differs);
  const auto moved = ss::welch_t_test(100, 0, 5, 101, 0, 5);
  EXPECT_TRUE(std::isinf(moved->t) && moved->t > 0);
  EXPECT_TRUE(moved->differs);
  // summarize: one value has no spread; none gives zeros
  EXPECT_EQ(ss::summarize({7}).stddev, 0.0);
  EXPECT_EQ(ss::summarize({}).count, 0);
}
