// tester52 F2: `compare` marked a +331 % throughput "within noise" where the runs train different
// amounts a step (row_wise 512 tokens a step vs vocab_parallel's 128; a batch of 64 vs 8): the
// noise rule reads the step times, which say nothing about throughput then. Hand-made sessions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "embedscope/sessions/analysis/compare.h"

namespace {
namespace ss = embedscope::sessions;
using ss::CompareFigure;

// 5 measured steps {mean - 20, mean, mean - 10, mean + 20, mean + 10} ms in step order (batch
// means of 2: mean - 10 and mean + 5, se 7.5 ms), training `per_step` tokens a step
ss::ComparedSession cmp52_session(int64_t mean, int64_t per_step) {
  ss::ComparedSession s;
  s.stats.steps = 5;
  for (const int64_t d : {-20, 0, -10, 20, 10}) s.stats.step_series_ns.push_back((mean + d) * 1'000'000);
  s.stats.step_time_ns.count = 5;
  s.stats.step_time_ns.mean = static_cast<double>(mean) * 1e6;
  s.stats.step_time_ns.stddev = std::sqrt(250.0) * 1e6;
  s.stats.step_time_ns.min = (mean - 20) * 1'000'000;
  s.stats.step_time_ns.p50 = mean * 1'000'000;
  s.stats.step_time_ns.p99 = (mean + 20) * 1'000'000;
  s.stats.step_time_ns.max = (mean + 20) * 1'000'000;
  s.rate = {static_cast<double>(per_step) / (static_cast<double>(mean) * 1e-3), "tokens", per_step};
  return s;
}
}  // namespace

TEST(Cmp52UnlikeWork, ThroughputOfUnlikeWorkIsNeverWithinNoise) {
  // 100 ms against 110 ms, batch-means se 7.5 each: t 0.94, df 2 (t 4.303): the step times are
  // within noise either way
  const auto vp = cmp52_session(100, 128), rw = cmp52_session(110, 512);
  ASSERT_TRUE(ss::within_noise(vp, rw));
  EXPECT_TRUE(ss::compare_delta(vp, rw, CompareFigure::StepMean).within_noise);
  // 1280 tokens/s vs 512 / 0.110 = 4654.5 tokens/s: +3374.5 (+263.6 %), the work a step's, no noise mark
  const ss::CompareDelta d = ss::compare_delta(vp, rw, CompareFigure::Throughput);
  ASSERT_TRUE(d.diff.has_value());
  EXPECT_NEAR(*d.diff, 512 / 0.110 - 1280, 1e-6);
  EXPECT_FALSE(d.within_noise);
  EXPECT_EQ(d.text.find("within noise"), std::string::npos) << d.text;
  // the same work a step: the throughput's difference is the step times' and stays marked
  const auto vp2 = cmp52_session(110, 128);
  EXPECT_TRUE(ss::compare_delta(vp, vp2, CompareFigure::Throughput).within_noise);
  // a work a step not known (0: a session without it) keeps the step-time rule
  auto unknown = rw;
  unknown.rate.per_step = 0;
  EXPECT_TRUE(ss::compare_delta(vp, unknown, CompareFigure::Throughput).within_noise);
}
