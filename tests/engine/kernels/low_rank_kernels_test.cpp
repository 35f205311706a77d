// The low-rank kernels (kernels/low_rank.h) and byte counts (model/low_rank.h) on values
// computed by hand.

#include <gtest/gtest.h>

#include <cmath>

#include "embedscope/engine/kernels/low_rank.h"
#include "embedscope/engine/model/low_rank.h"

using namespace embedscope::engine;

namespace {

// A (3 x 2) and B (2 x 3):
//   A = [[1, 2], [3, 4], [5, 6]]   B = [[1, 0, -1], [2, 1, 0]]
const float kA[] = {1, 2, 3, 4, 5, 6};
const float kB[] = {1, 0, -1, 2, 1, 0};

TEST(LowRankKernels, PooledLookupIsPooledARowsTimesB) {
  // bag 0 = {0, 2}: p = [6, 8], p B = [22, 8, -6]; bag 1 = {1}, scale 0.5: p = [1.5, 2],
  // p B = [5.5, 2, -1.5]; bag 2 empty: 0
  const int64_t ids[] = {0, 2, 1};
  const int64_t off[] = {0, 2, 3, 3};
  const float scale[] = {1.0f, 0.5f, 1.0f};
  float out[4 * 3];
  std::fill(std::begin(out), std::end(out), 99.0f);
  low_rank_pooled_lookup(kA, 3, 2, kB, 3, ids, off, 3, scale, out, 4);  // stride 4: column 3 untouched
  const float want[] = {22, 8, -6, 99, 5.5f, 2, -1.5f, 99, 0, 0, 0};
  for (int i = 0; i < 11; ++i) EXPECT_FLOAT_EQ(out[i], want[i]) << i;
}

TEST(LowRankKernels, BackwardGivesGBTransposeAndATransposeG) {
  // G rows {0, 2}: g0 = [1, 0, 0], g2 = [0, 1, 1]
  //   dA_0 = g0 B^T = [1, 2]; dA_2 = g2 B^T = [0 - 1, 1 + 0] = [-1, 1]
  //   dB = A_0^T g0 + A_2^T g2 = [[1, 0, 0], [2, 0, 0]] + [[0, 5, 5], [0, 6, 6]] = [[1, 5, 5], [2, 6, 6]]
  SparseGrad g;
  g.dim = 3;
  g.rows = {0, 2};
  g.values = {1, 0, 0, 0, 1, 1};
  const auto [da, db] = low_rank_backward(kA, 2, kB, 3, g);
  EXPECT_EQ(da.dim, 2);
  EXPECT_EQ(da.rows, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(da.values, (std::vector<float>{1, 2, -1, 1}));
  EXPECT_EQ(db.dim, 3);
  EXPECT_EQ(db.rows, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(db.values, (std::vector<float>{1, 5, 5, 2, 6, 6}));
  // no rows: no gradient for B either
  SparseGrad none;
  none.dim = 3;
  const auto [da0, db0] = low_rank_backward(kA, 2, kB, 3, none);
  EXPECT_TRUE(da0.rows.empty());
  EXPECT_TRUE(db0.rows.empty());
}

TEST(LowRankKernels, RowOfTheProduct) {
  float row[3];
  low_rank_row(kA, 2, kB, 3, 2, row);  // [5, 6] B = [17, 6, -5]
  EXPECT_FLOAT_EQ(row[0], 17);
  EXPECT_FLOAT_EQ(row[1], 6);
  EXPECT_FLOAT_EQ(row[2], -5);
}

TEST(LowRankBytes, FactorsInsteadOfRows) {
  TableSpec t{"t", 1000, 64, Pooling::sum, {"f"}};
  EXPECT_EQ(shard_weight_bytes(t, 1000, 64), 1000 * 64 * 4);
  t.low_rank_dim = 8;
  EXPECT_EQ(shard_weight_bytes(t, 1000, 64), 34048);  // 4 (8,000 + 512)
  EXPECT_EQ(shard_optimizer_state_bytes(OptimizerType::sgd, t, 1000, 64), 0);
  EXPECT_EQ(shard_optimizer_state_bytes(OptimizerType::rowwise_adagrad, t, 1000, 64), 4032);  // 4 (1,000 + 8)
  EXPECT_EQ(shard_optimizer_state_bytes(OptimizerType::adam, t, 1000, 64), 2 * 34048);
  t.optimizer_state_type = OptimizerStateType::bf16;
  EXPECT_EQ(shard_optimizer_state_bytes(OptimizerType::adam, t, 1000, 64), 34048);
  const ShardBuffers b = shard_buffers(OptimizerType::rowwise_adagrad, t, 1000, 64);
  EXPECT_EQ(b.weights[0], 32000);
  EXPECT_EQ(b.weights[1], 2048);
  EXPECT_EQ(b.state[0], 2000);  // bf16 accumulators of A's rows
  EXPECT_EQ(b.state[2], 16);    // and of B's 8 rows
}

TEST(LowRankInit, BHasUnitOverRVariance) {
  // uniform in [-sqrt(3 / r), sqrt(3 / r)): mean 0, variance 1 / r (64 x 256 draws, r 64)
  const int64_t r = 64, dim = 256;
  std::vector<float> b(static_cast<size_t>(r * dim));
  init_low_rank_b(7, 3, r, dim, b.data());
  double sum = 0, sq = 0, bound = std::sqrt(3.0 / r);
  for (float v : b) {
    sum += v;
    sq += static_cast<double>(v) * v;
    EXPECT_LT(std::abs(v), bound);
  }
  const double n = static_cast<double>(b.size());
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0 / r, 0.1 / r);
  EXPECT_EQ(b[5], low_rank_initial_b(7, 3, 0, 5, r));
  EXPECT_NE(b[5], low_rank_initial_b(8, 3, 0, 5, r));  // the seed matters
}

}  // namespace
