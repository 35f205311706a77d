// dense_core.h (the BCE-with-logits loss and the SGD step, shared by DenseModel on the host and
// bce_with_logits_cuda / sgd_step_cuda on the GPU) against hand-computed values and an
// independent long-double reference (the loss written as y softplus(-z) + (1 - y) softplus(z)),
// and DenseModel's use of the loss / sgd hooks the cuda executor sets (LinearOps).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "embedscope/engine/kernels/dense_core.h"
#include "embedscope/engine/model/dense.h"

using namespace embedscope::engine;

namespace {

long double softplus_ref(long double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

}  // namespace

TEST(DenseCore, BceTermHandComputed) {
  // z = 0, y = 1: log 2; dlogit (0.5 - 1) / 2
  auto t = dense_core::bce_with_logits_term(0.0f, 1.0f, 2);
  EXPECT_DOUBLE_EQ(t.loss, 0.69314718055994531);
  EXPECT_FLOAT_EQ(t.dlogit, -0.25f);
  // z = 2, y = 0, B = 4: 2 + log1p(e^-2) = 2.1269280110429727; sigmoid(2) / 4 = 0.2201992694
  t = dense_core::bce_with_logits_term(2.0f, 0.0f, 4);
  EXPECT_NEAR(t.loss, 2.1269280110429727, 1e-15);
  EXPECT_FLOAT_EQ(t.dlogit, 0.22019927f);
  // z = -3, y = 1: 3 + log1p(e^-3) = 3.0485873515737421; sigmoid(-3) - 1 = -0.9525741268
  t = dense_core::bce_with_logits_term(-3.0f, 1.0f, 1);
  EXPECT_NEAR(t.loss, 3.0485873515737421, 1e-15);
  EXPECT_FLOAT_EQ(t.dlogit, -0.95257413f);
  // a NaN logit gives a NaN loss (std::max(NaN, 0) is NaN): the divergence check sees it
  EXPECT_TRUE(std::isnan(dense_core::bce_with_logits_term(std::nanf(""), 1.0f, 1).loss));
}

TEST(DenseCore, BceTermMatchesLongDoubleReference) {
  std::mt19937 rng(38);
  std::normal_distribution<float> n(0.0f, 6.0f);
  const int64_t B = 37;
  for (int k = 0; k < 2000; ++k) {
    const float z = k < 4 ? std::array<float, 4>{-80.0f, 80.0f, -1e-7f, 30.0f}[static_cast<size_t>(k)] : n(rng);
    const float y = static_cast<float>(k % 2);
    const auto t = dense_core::bce_with_logits_term(z, y, B);
    const long double zl = z, yl = y;
    const long double loss = yl * softplus_ref(-zl) + (1 - yl) * softplus_ref(zl);
    const long double dz = (1 / (1 + std::exp(-zl)) - yl) / B;
    ASSERT_NEAR(t.loss, static_cast<double>(loss), 1e-14 * std::max(1.0, std::fabs(static_cast<double>(loss)))) << z;
    // sigmoid(z) - y is computed in double: for large |z| with the "right" label it cancels, so
    // the error is absolute (~1e-16 of the double sigmoid), relative 1e-6 (float) otherwise
    ASSERT_NEAR(t.dlogit, static_cast<double>(dz), 1e-6 * std::fabs(static_cast<double>(dz)) + 1e-16) << z;
  }
}

TEST(DenseCore, BceWithLogitsIsTheMeanOverTheBatch) {
  const std::vector<float> z{0.0f, 2.0f, -3.0f}, y{1.0f, 0.0f, 1.0f};
  std::vector<float> dz(3);
  const double loss = bce_with_logits(3, z.data(), y.data(), dz.data());
  EXPECT_NEAR(loss, (0.69314718055994531 + 2.1269280110429727 + 3.0485873515737421) / 3, 1e-15);
  EXPECT_FLOAT_EQ(dz[0], -0.5f / 3);
  EXPECT_FLOAT_EQ(dz[1], 0.88079708f / 3);
  EXPECT_FLOAT_EQ(dz[2], -0.95257413f / 3);
  EXPECT_EQ(bce_with_logits(0, nullptr, nullptr, nullptr), 0.0);
}

TEST(DenseCore, SgdUpdateRoundsTheProductBeforeSubtracting) {
  EXPECT_EQ(dense_core::sgd_update(1.0f, 0.5f, 0.25f), 0.875f);
  EXPECT_EQ(dense_core::sgd_update(-2.0f, -4.0f, 0.5f), 0.0f);
  // where a fused multiply-add would round differently, the result is the two-rounding one (the
  // host loop's and the kernel's __fsub_rn(p, __fmul_rn(lr, g)))
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  int differing = 0;
  for (int k = 0; k < 100000 && differing < 20; ++k) {
    const float p = u(rng), g = u(rng), lr = 0.01f + 0.1f * std::fabs(u(rng));
    const volatile float prod = lr * g;  // volatile: rounded to float, never fused
    const float two = p - prod;
    const float fused = std::fma(-lr, g, p);
    ASSERT_EQ(dense_core::sgd_update(p, g, lr), two);
    if (fused != two) ++differing;
  }
  EXPECT_GT(differing, 0) << "no case where fma differs: the test checks nothing about fusing";
  // sgd_step over an array: the same per element, and within half an ulp of the double reference
  std::vector<float> p(1000), g(1000);
  for (auto& v : p) v = u(rng);
  for (auto& v : g) v = u(rng);
  std::vector<float> q = p;
  sgd_step(1000, 0.05f, g.data(), q.data());
  for (size_t i = 0; i < p.size(); ++i) {
    ASSERT_EQ(q[i], dense_core::sgd_update(p[i], g[i], 0.05f));
    ASSERT_NEAR(q[i], static_cast<double>(p[i]) - 0.05 * static_cast<double>(g[i]), 1e-7);
  }
}

TEST(DenseCore, DenseModelRunsTheLossAndSgdHooks) {
  WorkloadSpec s;
  s.seed = 3;
  s.dense = DenseSpec{3, {4}, Interaction::cat, 2, 3, {5, 1}};
  const std::vector<int64_t> dims{4, 4};
  DenseModel plain(s, dims), hooked(s, dims);
  int loss_calls = 0, sgd_calls = 0;
  int64_t sgd_n = -1;
  DenseModel::LinearOps ops;
  ops.loss = [&](int64_t B, const float* z, const float* y, float* dz) {
    ++loss_calls;
    return bce_with_logits(B, z, y, dz);
  };
  ops.sgd = [&](int64_t n, float lr, const float* g, float* p) {
    ++sgd_calls;
    sgd_n = n;
    sgd_step(n, lr, g, p);
  };
  hooked.set_linear_ops(ops);
  const int64_t B = 3;
  std::vector<float> x(static_cast<size_t>(B * 3), 0.3f), p0(static_cast<size_t>(B * 4)), p1(static_cast<size_t>(B * 4));
  for (size_t i = 0; i < p0.size(); ++i) p0[i] = 0.1f * static_cast<float>(i) - 0.5f, p1[i] = 0.05f * static_cast<float>(i);
  const std::vector<float> labels{1, 0, 1};
  std::vector<float> d0(p0.size()), d1(p0.size()), e0(p0.size()), e1(p0.size());
  const std::vector<const float*> pp{p0.data(), p1.data()};
  const double a = plain.forward_backward(B, x.data(), pp, labels.data(), std::vector<float*>{d0.data(), d1.data()});
  const double b = hooked.forward_backward(B, x.data(), pp, labels.data(), std::vector<float*>{e0.data(), e1.data()});
  EXPECT_EQ(loss_calls, 1);
  EXPECT_EQ(a, b);
  EXPECT_GT(a, 0.0);
  EXPECT_EQ(d0, e0);
  EXPECT_EQ(plain.grads(), hooked.grads());
  plain.sgd_step(0.1f, plain.grads().data());
  hooked.sgd_step(0.1f, hooked.grads().data());
  EXPECT_EQ(sgd_calls, 1);
  EXPECT_EQ(sgd_n, hooked.num_params());
  EXPECT_EQ(plain.params(), hooked.params());
}

namespace {

// DenseModel's dot interaction loops before they were rewritten per element (the host path
// must stay bit for bit what it was: the cpu backend's model and the parity suite's).
void dot_forward_loops(int64_t B, int64_t F, int64_t d0, const float* x0, float* r) {
  const int64_t in_w = (F + 1) * d0, out_w = d0 + (F + 1) * F / 2;
  for (int64_t i = 0; i < B; ++i) {
    const float* row = x0 + i * in_w;
    float* out = r + i * out_w;
    std::copy_n(row, d0, out);
    int64_t k = d0;
    for (int64_t a = 1; a <= F; ++a)
      for (int64_t b = 0; b < a; ++b) {
        float dot = 0;
        for (int64_t c = 0; c < d0; ++c) dot += row[a * d0 + c] * row[b * d0 + c];
        out[k++] = dot;
      }
  }
}

void dot_backward_loops(int64_t B, int64_t F, int64_t d0, const float* x0, const float* dr, float* dx0) {
  const int64_t in_w = (F + 1) * d0, out_w = d0 + (F + 1) * F / 2;
  std::fill(dx0, dx0 + B * in_w, 0.0f);
  for (int64_t i = 0; i < B; ++i) {
    const float* row = x0 + i * in_w;
    const float* g = dr + i * out_w;
    float* dro = dx0 + i * in_w;
    for (int64_t c = 0; c < d0; ++c) dro[c] += g[c];
    int64_t k = d0;
    for (int64_t a = 1; a <= F; ++a)
      for (int64_t b = 0; b < a; ++b) {
        const float gk = g[k++];
        for (int64_t c = 0; c < d0; ++c) {
          dro[a * d0 + c] += gk * row[b * d0 + c];
          dro[b * d0 + c] += gk * row[a * d0 + c];
        }
      }
  }
}

}  // namespace

TEST(DenseCore, DotInteractionHandComputed) {
  // F = 2, d0 = 2: e0 = (1, 2), e1 = (3, 4), e2 = (5, 6)
  const std::vector<float> x0{1, 2, 3, 4, 5, 6};
  ASSERT_EQ(dense_core::dot_out_width(2, 2), 5);
  std::vector<float> r(5);
  dot_interaction_forward(1, 2, 2, x0.data(), r.data());
  EXPECT_EQ(r, (std::vector<float>{1, 2, 11, 17, 39}));  // e0, <e1,e0>, <e2,e0>, <e2,e1>
  // dr = (0.5, -1 | g10 = 2, g20 = 3, g21 = -1):
  //   d e0 = (0.5, -1) + 2 e1 + 3 e2 = (21.5, 25); d e1 = 2 e0 - e2 = (-3, -2); d e2 = 3 e0 - e1 = (0, 2)
  const std::vector<float> dr{0.5f, -1, 2, 3, -1};
  std::vector<float> dx0(6, 99.0f);  // overwritten
  dot_interaction_backward(1, 2, 2, x0.data(), dr.data(), dx0.data());
  EXPECT_EQ(dx0, (std::vector<float>{21.5f, 25, -3, -2, 0, 2}));
}

TEST(DenseCore, DotInteractionEqualsThePairLoopsBitForBitAndDoubles) {
  std::mt19937 rng(26);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (const auto [B, F, d0] : {std::array<int64_t, 3>{3, 26, 16}, std::array<int64_t, 3>{5, 1, 7},
                                std::array<int64_t, 3>{2, 0, 4}, std::array<int64_t, 3>{4, 8, 1}}) {
    const int64_t in_w = (F + 1) * d0, out_w = dense_core::dot_out_width(F, d0);
    std::vector<float> x0(static_cast<size_t>(B * in_w)), dr(static_cast<size_t>(B * out_w));
    for (auto& v : x0) v = n(rng);
    for (auto& v : dr) v = n(rng);
    std::vector<float> r(dr.size()), r_ref(dr.size()), dx(x0.size()), dx_ref(x0.size());
    dot_interaction_forward(B, F, d0, x0.data(), r.data());
    dot_forward_loops(B, F, d0, x0.data(), r_ref.data());
    dot_interaction_backward(B, F, d0, x0.data(), dr.data(), dx.data());
    dot_backward_loops(B, F, d0, x0.data(), dr.data(), dx_ref.data());
    ASSERT_EQ(r, r_ref) << "B=" << B << " F=" << F << " d0=" << d0;
    ASSERT_EQ(dx, dx_ref) << "B=" << B << " F=" << F << " d0=" << d0;
    // and against double precision (independent of the float summation order)
    for (int64_t i = 0; i < B; ++i)
      for (int64_t a = 1; a <= F; ++a)
        for (int64_t b = 0; b < a; ++b) {
          double s = 0;
          for (int64_t c = 0; c < d0; ++c)
            s += static_cast<double>(x0[static_cast<size_t>(i * in_w + a * d0 + c)]) * x0[static_cast<size_t>(i * in_w + b * d0 + c)];
          ASSERT_NEAR(r[static_cast<size_t>(i * out_w + d0 + a * (a - 1) / 2 + b)], s, 1e-5 * (1 + std::fabs(s)));
        }
  }
}

TEST(DenseCore, DenseModelRunsTheDotInteractionHooks) {
  WorkloadSpec s;
  s.seed = 4;
  s.dense = DenseSpec{3, {4}, Interaction::dot, 2, 3, {5, 1}};
  const std::vector<int64_t> dims{4, 4, 4};
  DenseModel plain(s, dims), hooked(s, dims);
  int fw = 0, bw = 0;
  DenseModel::LinearOps ops;
  ops.dot_forward = [&](int64_t B, int64_t F, int64_t d0, const float* x0, float* r) {
    ++fw;
    EXPECT_EQ(F, 3);
    EXPECT_EQ(d0, 4);
    dot_interaction_forward(B, F, d0, x0, r);
  };
  ops.dot_backward = [&](int64_t B, int64_t F, int64_t d0, const float* x0, const float* dr, float* dx0) {
    ++bw;
    dot_interaction_backward(B, F, d0, x0, dr, dx0);
  };
  hooked.set_linear_ops(ops);
  const int64_t B = 2;
  std::vector<float> x(static_cast<size_t>(B * 3), -0.2f);
  std::vector<std::vector<float>> p(3, std::vector<float>(static_cast<size_t>(B * 4)));
  for (size_t f = 0; f < 3; ++f)
    for (size_t i = 0; i < p[f].size(); ++i) p[f][i] = 0.1f * static_cast<float>(i + f) - 0.3f;
  const std::vector<float> labels{0, 1};
  std::vector<std::vector<float>> d(3, std::vector<float>(8)), e(3, std::vector<float>(8));
  const std::vector<const float*> pp{p[0].data(), p[1].data(), p[2].data()};
  const double a = plain.forward_backward(B, x.data(), pp, labels.data(), std::vector<float*>{d[0].data(), d[1].data(), d[2].data()});
  const double b = hooked.forward_backward(B, x.data(), pp, labels.data(), std::vector<float*>{e[0].data(), e[1].data(), e[2].data()});
  EXPECT_EQ(fw, 1);
  EXPECT_EQ(bw, 1);
  EXPECT_EQ(a, b);
  EXPECT_EQ(d, e);
  EXPECT_EQ(plain.grads(), hooked.grads());
  EXPECT_NE(d[2], std::vector<float>(8, 0.0f));  // the embeddings got a gradient through the dot
}
