// fit_zipf and token_counts (input/zipf_fit.h) against hand-computed fits and exact Zipf samples.

#include <cmath>
#include <random>
#include <stdexcept>

#include <gtest/gtest.h>

#include "embedscope/engine/input/input.h"
#include "embedscope/engine/input/zipf_fit.h"

namespace es = embedscope::engine;

TEST(ZipfFit, CountsOfTwelveOverRankGiveAlphaOneExactly) {
  // ranks 1..4 hold 12, 6, 4, 3 = 12 / r after sorting; the zero is not a rank
  const es::ZipfFit f = es::fit_zipf({3, 12, 0, 4, 6});
  EXPECT_NEAR(f.alpha, 1.0, 1e-12);
  EXPECT_NEAR(f.log_c, std::log(12.0), 1e-12);
  EXPECT_NEAR(f.r_squared, 1.0, 1e-12);
  EXPECT_EQ(f.first_rank, 1);
  EXPECT_EQ(f.last_rank, 4);
  EXPECT_EQ(f.distinct, 4);
  EXPECT_EQ(f.total, 25);
}

TEST(ZipfFit, TwoPointsGiveTheSlopeBetweenThem) {
  // ranks 1, 2 with 9 and 3: alpha = ln(9/3) / ln 2 = 1.58496...
  const es::ZipfFit f = es::fit_zipf({3, 9});
  EXPECT_NEAR(f.alpha, std::log(3.0) / std::log(2.0), 1e-12);
}

TEST(ZipfFit, FitRangeIsHonoured) {
  // 100, 50, then a flat tail of 1s: ranks 1..2 alone give alpha = 1 (ln 2 / ln 2)
  const es::ZipfFit f = es::fit_zipf({1, 1, 1, 100, 50, 1}, 1, 2);
  EXPECT_NEAR(f.alpha, std::log(2.0) / std::log(2.0), 1e-12);
  EXPECT_EQ(f.last_rank, 2);
  EXPECT_EQ(f.distinct, 6);
  const es::ZipfFit all = es::fit_zipf({1, 1, 1, 100, 50, 1});
  EXPECT_EQ(all.last_rank, 6);
  EXPECT_GT(all.alpha, 1.0);  // the flat tail after a steep head steepens the fitted line
}

TEST(ZipfFit, RecoversTheExponentOfAnExactZipfTable) {
  std::vector<int64_t> counts;
  for (int k = 1; k <= 1000; ++k) counts.push_back(std::llround(1e9 * std::pow(k, -1.2)));
  EXPECT_NEAR(es::fit_zipf(counts).alpha, 1.2, 1e-6);
}

TEST(ZipfFit, RecoversTheExponentOfASampledZipf) {
  // 2,000,000 draws of the workloads' ZipfSampler over 100 ids, alpha 1.0: every rank's count is
  // ~ 2e6 / (5.19 r) >= 3,800, so the fit over all 100 ranks is within sampling noise of 1.0
  const es::ZipfSampler z(100, 1.0);
  std::mt19937_64 rng(7);
  std::vector<int64_t> ids;
  for (int i = 0; i < 2'000'000; ++i) ids.push_back(z(rng));
  const es::ZipfFit f = es::fit_zipf(es::token_counts(ids, 100));
  EXPECT_EQ(f.distinct, 100);
  EXPECT_NEAR(f.alpha, 1.0, 0.01);
}

TEST(ZipfFit, TooFewRanksAndBadIdsAreErrors) {
  EXPECT_THROW(es::fit_zipf({5, 0, 0}), std::invalid_argument);
  EXPECT_THROW(es::fit_zipf({5, 4}, 0), std::invalid_argument);
  EXPECT_THROW(es::token_counts({0, 3}, 3), std::out_of_range);
  EXPECT_EQ(es::token_counts({0, 2, 2}, 3), (std::vector<int64_t>{1, 0, 2}));
}
