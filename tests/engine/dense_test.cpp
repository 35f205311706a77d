// DenseModel backward against central finite differences of its own loss.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "embedscope/engine/model/dense.h"

using namespace embedscope::engine;

namespace {

struct Case {
  Interaction interaction;
  std::vector<int64_t> dims;
};

void gradient_check(const Case& c) {
  WorkloadSpec s;
  s.seed = 11;
  s.dense = DenseSpec{3, {5, 4}, c.interaction, 2, 3, {6, 1}};
  if (c.dims.empty()) s.dense.reset();
  std::vector<int64_t> dims = c.dims.empty() ? std::vector<int64_t>{3, 2} : c.dims;
  DenseModel m(s, dims);
  const int64_t B = 4;
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(B * 3));
  for (auto& v : x) v = n(rng);
  std::vector<std::vector<float>> pooled, dpooled;
  for (auto d : dims) {
    pooled.emplace_back(static_cast<size_t>(B * d));
    for (auto& v : pooled.back()) v = 0.5f * n(rng);
    dpooled.emplace_back(static_cast<size_t>(B * d));
  }
  std::vector<float> labels{1, 0, 0, 1};
  auto loss = [&]() {
    std::vector<const float*> pp;
    std::vector<float*> dp;
    for (size_t f = 0; f < dims.size(); ++f) {
      pp.push_back(pooled[f].data());
      dp.push_back(dpooled[f].data());
    }
    return m.forward_backward(B, x.data(), pp, labels.data(), dp);
  };
  loss();
  const std::vector<float> grads = m.grads();
  const auto dpooled0 = dpooled;
  // Central differences at two step sizes; where they disagree a ReLU kink lies within the
  // step and the coordinate is skipped (at most a fifth of them may be).
  auto numeric_at = [&](float& v, float eps) {
    const float keep = v;
    v = keep + eps;
    const double up = loss();
    v = keep - eps;
    const double down = loss();
    v = keep;
    return (up - down) / (2 * eps);
  };
  int checked = 0, skipped = 0;
  auto check = [&](float analytic, float& v, const std::string& what) {
    const double n1 = numeric_at(v, 4e-3f), n2 = numeric_at(v, 1e-3f);
    if (std::abs(n1 - n2) > 1e-3 + 1e-2 * std::abs(n2)) {
      ++skipped;
      return;
    }
    ++checked;
    EXPECT_NEAR(analytic, n2, 1e-3 + 2e-2 * std::abs(n2)) << what;
  };
  for (size_t i = 0; i < m.params().size(); i += 7) check(grads[i], m.params()[i], "param " + std::to_string(i));
  for (size_t f = 0; f < dims.size(); ++f)
    for (size_t i = 0; i < pooled[f].size(); i += 3)
      check(dpooled0[f][i], pooled[f][i], "feature " + std::to_string(f) + " [" + std::to_string(i) + "]");
  EXPECT_LE(skipped * 5, checked + skipped);
  EXPECT_GT(checked, 5);
}

}  // namespace

TEST(DenseModel, GradientsMatchFiniteDifferencesCat) { gradient_check({Interaction::cat, {3, 2}}); }
TEST(DenseModel, GradientsMatchFiniteDifferencesDot) { gradient_check({Interaction::dot, {4, 4, 4}}); }
TEST(DenseModel, GradientsMatchFiniteDifferencesDcn) { gradient_check({Interaction::dcn, {3, 2}}); }
TEST(DenseModel, GradientsMatchFiniteDifferencesFixedHead) { gradient_check({Interaction::cat, {}}); }

TEST(DenseModel, ParameterCountOfDlrmKaggle) {
  WorkloadSpec s;
  s.dense = DenseSpec{13, {512, 256, 64, 16}, Interaction::dot, 3, 512, {512, 256, 1}};
  DenseModel m(s, std::vector<int64_t>(26, 16));
  // bottom: 13*512+512 + 512*256+256 + 256*64+64 + 64*16+16; interaction 16 + 27*26/2 = 367;
  // top: 367*512+512 + 512*256+256 + 256+1
  const int64_t bottom = 13 * 512 + 512 + 512 * 256 + 256 + 256 * 64 + 64 + 64 * 16 + 16;
  const int64_t top = 367 * 512 + 512 + 512 * 256 + 256 + 256 + 1;
  EXPECT_EQ(m.num_params(), bottom + top);
  EXPECT_EQ(dense_sizes(s, std::vector<int64_t>(26, 16)).num_params, bottom + top);
  for (Interaction i : {Interaction::cat, Interaction::dcn}) {  // the estimate agrees with the model
    s.dense->interaction = i;
    s.dense->dcn_low_rank_dim = 8;
    EXPECT_EQ(dense_sizes(s, std::vector<int64_t>(26, 16)).num_params, DenseModel(s, std::vector<int64_t>(26, 16)).num_params());
  }
}

TEST(Linear, ForwardBackwardHandComputed) {
  // B = 2, in = 2, out = 2, W = [[1, 2], [-3, 1]], b = [0.5, 0]
  const float x[] = {1, 1, 2, -1}, w[] = {1, 2, -3, 1}, b[] = {0.5f, 0};
  float y[4];
  embedscope::engine::linear_forward(2, 2, 2, x, w, b, /*relu=*/true, y);
  // sample 0: (1 + 2 + 0.5, -3 + 1) = (3.5, -2) -> relu (3.5, 0); sample 1: (2 - 2 + 0.5, -6 - 1) -> (0.5, 0)
  EXPECT_FLOAT_EQ(y[0], 3.5f);
  EXPECT_FLOAT_EQ(y[1], 0.0f);
  EXPECT_FLOAT_EQ(y[2], 0.5f);
  EXPECT_FLOAT_EQ(y[3], 0.0f);
  float dy[] = {1, 5, 2, 7}, dw[4], db[2], dx[4];
  embedscope::engine::linear_backward(2, 2, 2, x, w, y, true, dy, dw, db, dx);
  EXPECT_FLOAT_EQ(dy[1], 0.0f);  // masked where the ReLU was off
  EXPECT_FLOAT_EQ(dy[3], 0.0f);
  // dw = dy^T x: row 0 = 1 * (1, 1) + 2 * (2, -1) = (5, -1); row 1 = 0
  EXPECT_FLOAT_EQ(dw[0], 5.0f);
  EXPECT_FLOAT_EQ(dw[1], -1.0f);
  EXPECT_FLOAT_EQ(dw[2], 0.0f);
  EXPECT_FLOAT_EQ(dw[3], 0.0f);
  EXPECT_FLOAT_EQ(db[0], 3.0f);
  EXPECT_FLOAT_EQ(db[1], 0.0f);
  // dx = dy W: sample 0 = 1 * (1, 2) = (1, 2); sample 1 = 2 * (1, 2) = (2, 4)
  EXPECT_FLOAT_EQ(dx[0], 1.0f);
  EXPECT_FLOAT_EQ(dx[1], 2.0f);
  EXPECT_FLOAT_EQ(dx[2], 2.0f);
  EXPECT_FLOAT_EQ(dx[3], 4.0f);
}

// DDP bucket assignment: tensors in reverse order, a bucket closes once it holds >= the cap.
TEST(DenseBuckets, ReverseOrderClosedAtTheCap) {
  const std::vector<std::pair<int64_t, int64_t>> tensors{{0, 24}, {24, 8}, {32, 32}, {64, 4}, {68, 60}, {128, 6}};
  // cap 100 B = 25 floats: {128..134) 24 B open, + {68..) = 264 B closes; {64..) 16 B, + {32..) = 144 B
  // closes; {24..) 32 B, + {0..) = 128 B closes
  using B = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(dense_buckets(tensors, 100), (B{{68, 134}, {32, 68}, {0, 32}}));
  EXPECT_EQ(dense_buckets(tensors, 25 << 20), (B{{0, 134}}));            // DDP's default: one bucket
  EXPECT_EQ(dense_buckets(tensors, 4), (B{{128, 134}, {68, 128}, {64, 68}, {32, 64}, {24, 32}, {0, 24}}));
  EXPECT_EQ(dense_buckets({}, 4), B{});
}

// The backward pass reports gradients final in reverse layer order: each report's suffix
// already equals the completed backward's gradients.
TEST(DenseModel, GradientsReadyInReverseLayerOrder) {
  WorkloadSpec s;
  s.tables = {{"t", 10, 4, Pooling::sum, {"f"}}};
  s.features = {{"f", {}, {}}};
  s.batch_size = 3;
  s.dense = DenseSpec{2, {5, 4}, Interaction::dcn, 2, 3, {6, 1}};
  DenseModel m(s, {4});
  const std::vector<float> x{0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f}, pooled(12, 0.25f), labels{1, 0, 1};
  std::vector<float> dp(12);
  const float* pp[] = {pooled.data()};
  float* dpp[] = {dp.data()};
  std::vector<int64_t> reports;
  std::vector<std::vector<float>> suffixes;
  m.forward_backward(3, x.data(), pp, labels.data(), dpp, [&](int64_t from) {
    reports.push_back(from);
    suffixes.emplace_back(m.grads().begin() + from, m.grads().end());
  });
  const auto tensors = m.param_tensors();
  // bottom (w, b) x 2, cross (U, V, b) x 2, top (w, b) x 2; reported: the first tensor of each
  // layer, last layer first
  ASSERT_EQ(tensors.size(), 4u + 6u + 4u);
  EXPECT_EQ(reports, (std::vector<int64_t>{tensors[12].first, tensors[10].first, tensors[7].first, tensors[4].first,
                                           tensors[2].first, 0}));
  int64_t total = 0;
  for (const auto& [at, n] : tensors) {
    EXPECT_EQ(at, total);
    total += n;
  }
  EXPECT_EQ(total, m.num_params());
  for (size_t i = 0; i < reports.size(); ++i)
    EXPECT_EQ(suffixes[i], std::vector<float>(m.grads().begin() + reports[i], m.grads().end())) << i;
}
