// The search's pre-ranking estimate of a row shard of a permuted Zipf table (share43, issue 15):
// its ids are the realized share of its rows (input/realized_share.h), as the StepProgram's and
// so plan_stats' are, not the even rows / num_embeddings. The shares are summed here by hand
// from the Zipf formula and the feature's permutation.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "embedscope/engine/input/input.h"
#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/sharding/sharding.h"
#include "engine/planner/round_profile.h"

using namespace embedscope::engine;

// 2 ranks, batch 1,000, one table of 1,000 rows x 8 fp32 split 500/500, one id a bag: 2,000 ids
// a step. Uniform ids: 1,000 a rank. Permuted Zipf(alpha 1): rank r gets 2,000 x S_r, S_r the
// sum of (1 / (k + 1)) / H(1000) over the Zipf ranks k the permutation puts in its rows. On the
// round profile (1 B/ns, every efficiency 1) an id costs 16 B of kjt_permute and 32 + 8 B of
// lookup: 56 ns; everything else of the forward compute (bucketize, the bags' permute and pooled
// rows, 3 launches) is the same for both id distributions. So the forward compute's maximum over
// ranks grows by 56 x 2,000 x (max S_r - 1/2) ns from the uniform table to the Zipf one (0 with
// the even share).
TEST(PlannerPreRankRealized, RowShardOfPermutedZipfPaysItsRealizedIds) {
  WorkloadSpec uni = planner_testing::round_workload(2, {1.0});
  uni.batch_size = 1000;
  WorkloadSpec zipf = uni;
  zipf.features[0].ids.kind = IdDistributionKind::zipf;
  zipf.features[0].ids.alpha = 1.0;
  zipf.features[0].ids.permute = true;
  double H = 0;
  for (int k = 1; k <= 1000; ++k) H += 1.0 / k;
  const RowPermutation perm = feature_row_permutation(zipf, 0, 1000);
  double S[2] = {0, 0};
  for (int64_t k = 0; k < 1000; ++k) S[perm(k) < 500 ? 0 : 1] += 1.0 / static_cast<double>(k + 1) / H;
  const double s_max = std::max(S[0], S[1]);
  ASSERT_GT(s_max, 0.52) << "the permutation should leave the two halves unequal";
  const ShardingPlan rw{2, 2, {{0, ShardingType::row_wise, -1, {{0, 0, 500, 0, 8}, {1, 500, 500, 0, 8}}}}};
  const HardwareProfile hw = planner_testing::round_profile("prerank_realized", 0);
  const PreRankEstimate eu = pre_rank_estimate(uni, rw, hw), ez = pre_rank_estimate(zipf, rw, hw);
  EXPECT_NEAR(ez.fwd_compute_ns - eu.fwd_compute_ns, 56.0 * 2000.0 * (s_max - 0.5), 1e-6);
  // plan_stats times the StepProgram's ops (rounded to whole ids and ns): the same per rank
  const PlanStats su = plan_stats(uni, rw, hw), sz = plan_stats(zipf, rw, hw);
  for (int r = 0; r < 2; ++r)
    EXPECT_NEAR(static_cast<double>(sz.ranks[static_cast<size_t>(r)].fwd_compute_ns - su.ranks[static_cast<size_t>(r)].fwd_compute_ns),
                56.0 * 2000.0 * (S[r] - 0.5), 2.0)
        << "rank " << r;
  EXPECT_NEAR(ez.fwd_compute_ns,
              static_cast<double>(std::max(sz.ranks[0].fwd_compute_ns, sz.ranks[1].fwd_compute_ns)), 2.0);
}
