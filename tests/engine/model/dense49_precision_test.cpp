// dense49: dense.precision (fp32 / tf32 / bf16 / fp16, PyTorch AMP's semantics) on the cpu
// backend: the rounding of GEMM inputs against an independent rounding (frexp / nearbyint, not
// bit patterns), a linear layer's forward and backward against a naive triple loop with the same
// rounding, fp32 bit for bit the plain sgemm, the workload field (parse, to_json, errors, the
// cuda refusal), the activation bytes and the work the rounding adds, hand-computed.
#include <gtest/gtest.h>

#include <cblas.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/model/dense.h"
#include "embedscope/engine/quant/dense_precision.h"
#include "embedscope/engine/workload/enums.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/engine/workload/spec_error.h"

namespace {

namespace es = embedscope::engine;
using es::DensePrecision;
using nlohmann::json;

// An independent rounding to `mant` explicit mantissa bits, nearest even, by arithmetic: v = m 2^e
// with 0.5 <= |m| < 1 (frexp), m scaled to mant + 1 integer bits and rounded by nearbyint in the
// default FE_TONEAREST mode (ties to even), then scaled back. fp16 (`half` true): below 2^-14 the
// quantum is 2^-24 (subnormals); past 65504 inf.
float dense49_ref_round(float v, int mant, bool half) {
  if (v == 0.0f || std::isnan(v) || std::isinf(v)) return v;
  if (std::fegetround() != FE_TONEAREST) std::fesetround(FE_TONEAREST);
  const double x = v;
  if (half && std::fabs(x) < std::ldexp(1.0, -14)) return static_cast<float>(std::nearbyint(x * std::ldexp(1.0, 24)) * std::ldexp(1.0, -24));
  int e = 0;
  const double m = std::frexp(x, &e);
  const double r = std::ldexp(std::nearbyint(std::ldexp(m, mant + 1)), e - (mant + 1));
  if (half && std::fabs(r) > 65504.0) return std::copysign(std::numeric_limits<float>::infinity(), v);
  if (!half && std::fabs(r) > std::numeric_limits<float>::max()) return std::copysign(std::numeric_limits<float>::infinity(), v);
  return static_cast<float>(r);
}

float dense49_ref(float v, DensePrecision p) {
  switch (p) {
    case DensePrecision::fp32: return v;
    case DensePrecision::tf32: return dense49_ref_round(v, 10, false);
    case DensePrecision::bf16: return dense49_ref_round(v, 7, false);
    case DensePrecision::fp16: return dense49_ref_round(v, 10, true);
  }
  return v;
}

bool dense49_same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(Dense49Precision, RoundingHandComputedTiesToEven) {
  const float one = 1.0f;
  EXPECT_EQ(es::round_dense_value(1.0f + std::ldexp(1.0f, -8), DensePrecision::bf16), one);  // a tie: to even (1)
  EXPECT_EQ(es::round_dense_value(1.0f + 3 * std::ldexp(1.0f, -8), DensePrecision::bf16), 1.0f + std::ldexp(1.0f, -6));  // tie to even 2
  EXPECT_EQ(es::round_dense_value(1.0f + 3 * std::ldexp(1.0f, -9), DensePrecision::bf16), 1.0f + std::ldexp(1.0f, -7));
  EXPECT_EQ(es::round_dense_value(1.0f + std::ldexp(1.0f, -11), DensePrecision::tf32), one);
  EXPECT_EQ(es::round_dense_value(1.0f + 3 * std::ldexp(1.0f, -12), DensePrecision::tf32), 1.0f + std::ldexp(1.0f, -10));
  EXPECT_EQ(es::round_dense_value(1.0f + std::ldexp(1.0f, -11), DensePrecision::fp16), one);
  EXPECT_EQ(es::round_dense_value(1e-8f, DensePrecision::fp16), 0.0f);
  EXPECT_EQ(es::round_dense_value(65519.0f, DensePrecision::fp16), 65504.0f);
  EXPECT_TRUE(std::isinf(es::round_dense_value(65520.0f, DensePrecision::fp16)));
  EXPECT_TRUE(std::isinf(es::round_dense_value(70000.0f, DensePrecision::fp16)));
  EXPECT_EQ(es::round_dense_value(70000.0f, DensePrecision::bf16), 70144.0f);  // 2^16 x (1 + 9 / 128)
  EXPECT_TRUE(std::isnan(es::round_dense_value(std::nanf(""), DensePrecision::bf16)));
  const float odd = 0.1f;  // fp32 unchanged, bit for bit
  EXPECT_TRUE(dense49_same_bits(es::round_dense_value(odd, DensePrecision::fp32), odd));
  EXPECT_EQ(es::dense_activation_value_bytes(DensePrecision::fp32), 4);
  EXPECT_EQ(es::dense_activation_value_bytes(DensePrecision::tf32), 4);
  EXPECT_EQ(es::dense_activation_value_bytes(DensePrecision::bf16), 2);
  EXPECT_EQ(es::dense_activation_value_bytes(DensePrecision::fp16), 2);
}

TEST(Dense49Precision, RoundingAgreesWithAnIndependentRoundingOverManyValues) {
  std::mt19937 rng(49);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> ex(-30, 20);
  std::vector<float> values;
  for (int i = 0; i < 20000; ++i) {
    const float v = std::ldexp(mant(rng), ex(rng));
    values.push_back(i % 2 ? v : -v);
  }
  // ties at every precision: 1 + half a unit of the kept bits, and one above them
  for (int bits : {7, 10}) {
    values.push_back(1.0f + std::ldexp(1.0f, -(bits + 1)));
    values.push_back(1.0f + 3 * std::ldexp(1.0f, -(bits + 1)));
    values.push_back(std::ldexp(1.0f + std::ldexp(1.0f, -(bits + 1)), -20));
  }
  for (DensePrecision p : {DensePrecision::tf32, DensePrecision::bf16, DensePrecision::fp16}) {
    int differ = 0;
    for (const float v : values) {
      const float got = es::round_dense_value(v, p), want = dense49_ref(v, p);
      if (!dense49_same_bits(got, want)) ++differ;
      if (differ == 1 && !dense49_same_bits(got, want))
        ADD_FAILURE() << es::to_string(p) << " of " << v << ": " << got << ", reference " << want;
    }
    EXPECT_EQ(differ, 0) << es::to_string(p);
  }
}

// A linear layer's inputs: x B x in, w out x in, b out, dy B x out, normal values.
struct Dense49Layer {
  int64_t B = 5, in = 37, out = 6;
  std::vector<float> x, w, b, dy;
  Dense49Layer() {
    std::mt19937 rng(7);
    std::normal_distribution<float> n(0.0f, 1.0f);
    auto fill = [&](std::vector<float>& v, int64_t count) {
      v.resize(static_cast<size_t>(count));
      for (auto& e : v) e = n(rng);
    };
    fill(x, B * in);
    fill(w, out * in);
    fill(b, out);
    fill(dy, B * out);
  }
};

TEST(Dense49Precision, LinearForwardBackwardMatchNaiveReferenceWithTheSameRounding) {
  const Dense49Layer L;
  for (DensePrecision p : {DensePrecision::tf32, DensePrecision::bf16, DensePrecision::fp16}) {
    SCOPED_TRACE(es::to_string(p));
    auto r = [&](float v) { return static_cast<double>(dense49_ref(v, p)); };
    std::vector<float> y(static_cast<size_t>(L.B * L.out)), y32(y.size());
    es::linear_forward(L.B, L.in, L.out, L.x.data(), L.w.data(), L.b.data(), false, y.data(), p);
    es::linear_forward(L.B, L.in, L.out, L.x.data(), L.w.data(), L.b.data(), false, y32.data());
    double max_rounding_effect = 0;
    for (int64_t i = 0; i < L.B; ++i)
      for (int64_t o = 0; o < L.out; ++o) {
        double want = 0, mag = 0;
        for (int64_t k = 0; k < L.in; ++k) {
          const double t = r(L.x[i * L.in + k]) * r(L.w[o * L.in + k]);
          want += t;
          mag += std::fabs(t);
        }
        want += L.b[o];
        const size_t q = static_cast<size_t>(i * L.out + o);
        // products of rounded inputs are exact in fp32; only the fp32 summation order differs
        EXPECT_NEAR(y[q], want, 2.5e-6 * (mag + std::fabs(L.b[o]))) << i << "," << o;
        max_rounding_effect = std::max(max_rounding_effect, std::fabs(static_cast<double>(y32[q]) - want) / (mag + 1e-30));
      }
    // the rounding is there: the fp32 product is further from the reference than the tolerance
    EXPECT_GT(max_rounding_effect, 1e-5);

    std::vector<float> dy = L.dy, dw(static_cast<size_t>(L.out * L.in)), db(static_cast<size_t>(L.out)),
                       dx(static_cast<size_t>(L.B * L.in));
    es::linear_backward(L.B, L.in, L.out, L.x.data(), L.w.data(), y.data(), false, dy.data(), dw.data(), db.data(),
                        dx.data(), p);
    for (int64_t o = 0; o < L.out; ++o) {
      double sum_dy = 0;
      for (int64_t i = 0; i < L.B; ++i) sum_dy += L.dy[i * L.out + o];
      EXPECT_NEAR(db[o], sum_dy, 1e-5);  // the bias gradient: fp32 dy, not rounded
      for (int64_t k = 0; k < L.in; ++k) {
        double want = 0, mag = 0;
        for (int64_t i = 0; i < L.B; ++i) {
          const double t = r(L.dy[i * L.out + o]) * r(L.x[i * L.in + k]);
          want += t;
          mag += std::fabs(t);
        }
        EXPECT_NEAR(dw[o * L.in + k], want, 2e-6 * mag + 1e-12) << "dw " << o << "," << k;
      }
    }
    for (int64_t i = 0; i < L.B; ++i)
      for (int64_t k = 0; k < L.in; ++k) {
        double want = 0, mag = 0;
        for (int64_t o = 0; o < L.out; ++o) {
          const double t = r(L.dy[i * L.out + o]) * r(L.w[o * L.in + k]);
          want += t;
          mag += std::fabs(t);
        }
        EXPECT_NEAR(dx[i * L.in + k], want, 2e-6 * mag + 1e-12) << "dx " << i << "," << k;
      }
  }
}

TEST(Dense49Precision, Fp32IsThePlainSgemmBitForBit) {
  const Dense49Layer L;
  std::vector<float> y(static_cast<size_t>(L.B * L.out)), want(y.size());
  es::linear_forward(L.B, L.in, L.out, L.x.data(), L.w.data(), L.b.data(), true, y.data(), DensePrecision::fp32);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(L.B), static_cast<int>(L.out),
              static_cast<int>(L.in), 1.0f, L.x.data(), static_cast<int>(L.in), L.w.data(), static_cast<int>(L.in), 0.0f,
              want.data(), static_cast<int>(L.out));
  for (int64_t i = 0; i < L.B; ++i)
    for (int64_t o = 0; o < L.out; ++o) {
      float& v = want[static_cast<size_t>(i * L.out + o)];
      v += L.b[static_cast<size_t>(o)];
      if (v < 0) v = 0;
    }
  EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)), 0);
  // backward: dw = dy^T x and dx = dy W by the same sgemm calls
  std::vector<float> dy = L.dy, dw(static_cast<size_t>(L.out * L.in)), db(static_cast<size_t>(L.out)),
                     dx(static_cast<size_t>(L.B * L.in)), dw_want(dw.size()), dx_want(dx.size());
  es::linear_backward(L.B, L.in, L.out, L.x.data(), L.w.data(), y.data(), false, dy.data(), dw.data(), db.data(),
                      dx.data(), DensePrecision::fp32);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(L.out), static_cast<int>(L.in),
              static_cast<int>(L.B), 1.0f, L.dy.data(), static_cast<int>(L.out), L.x.data(), static_cast<int>(L.in), 0.0f,
              dw_want.data(), static_cast<int>(L.in));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(L.B), static_cast<int>(L.in),
              static_cast<int>(L.out), 1.0f, L.dy.data(), static_cast<int>(L.out), L.w.data(), static_cast<int>(L.in),
              0.0f, dx_want.data(), static_cast<int>(L.in));
  EXPECT_EQ(std::memcmp(dw.data(), dw_want.data(), dw.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(dx.data(), dx_want.data(), dx.size() * sizeof(float)), 0);
}

// The model of dense_test.cpp's gradient check: 3 dense features, bottom [5, 4], top [6, 1],
// features of dims {3, 2} (cat, dcn) or {4, 4, 4} (dot).
es::WorkloadSpec dense49_spec(es::Interaction interaction, DensePrecision p) {
  es::WorkloadSpec s;
  s.seed = 11;
  s.dense = es::DenseSpec{3, {5, 4}, interaction, 2, 3, {6, 1}};
  s.dense->precision = p;
  return s;
}

// forward_backward of the model on a fixed batch of 4: the loss, then the gradients and d pooled.
std::pair<double, std::vector<float>> dense49_train(const es::WorkloadSpec& s, const std::vector<int64_t>& dims) {
  es::DenseModel m(s, dims);
  const int64_t B = 4;
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(B * 3)), labels{1, 0, 0, 1};
  for (auto& v : x) v = n(rng);
  std::vector<std::vector<float>> pooled, dpooled;
  std::vector<const float*> pp;
  std::vector<float*> dp;
  for (auto d : dims) {
    pooled.emplace_back(static_cast<size_t>(B * d));
    for (auto& v : pooled.back()) v = 0.5f * n(rng);
    dpooled.emplace_back(static_cast<size_t>(B * d));
  }
  for (size_t f = 0; f < dims.size(); ++f) {
    pp.push_back(pooled[f].data());
    dp.push_back(dpooled[f].data());
  }
  const double loss = m.forward_backward(B, x.data(), pp, labels.data(), dp);
  std::vector<float> out = m.grads();
  for (const auto& d : dpooled) out.insert(out.end(), d.begin(), d.end());
  return {loss, out};
}

TEST(Dense49Precision, ModelsTrainCloseToFp32ButNotEqualAndFp32IsUnchanged) {
  for (auto [inter, dims] : {std::pair{es::Interaction::dcn, std::vector<int64_t>{3, 2}},
                             std::pair{es::Interaction::dot, std::vector<int64_t>{4, 4, 4}},
                             std::pair{es::Interaction::cat, std::vector<int64_t>{3, 2}}}) {
    SCOPED_TRACE(es::to_string(inter));
    const auto [loss32, g32] = dense49_train(dense49_spec(inter, DensePrecision::fp32), dims);
    es::WorkloadSpec plain = dense49_spec(inter, DensePrecision::fp32);  // the default, as before the field
    plain.dense = es::DenseSpec{3, {5, 4}, inter, 2, 3, {6, 1}};
    const auto [loss_plain, g_plain] = dense49_train(plain, dims);
    EXPECT_EQ(std::memcmp(&loss32, &loss_plain, sizeof loss32), 0);
    EXPECT_EQ(std::memcmp(g32.data(), g_plain.data(), g32.size() * sizeof(float)), 0);
    for (DensePrecision p : {DensePrecision::tf32, DensePrecision::bf16, DensePrecision::fp16}) {
      const auto [loss, g] = dense49_train(dense49_spec(inter, p), dims);
      const double tol = p == DensePrecision::tf32 || p == DensePrecision::fp16 ? 5e-3 : 3e-2;
      EXPECT_NEAR(loss, loss32, tol * std::fabs(loss32)) << es::to_string(p);
      EXPECT_NE(loss, loss32) << es::to_string(p);
      ASSERT_EQ(g.size(), g32.size());
      double diff = 0, norm = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        diff += (g[i] - g32[i]) * (g[i] - g32[i]);
        norm += g32[i] * g32[i];
      }
      EXPECT_GT(diff, 0.0) << es::to_string(p);
      EXPECT_LT(std::sqrt(diff / norm), 10 * tol) << es::to_string(p);
    }
  }
}

TEST(Dense49Precision, ActivationBytesAtThePrecisionsWidthPlusHalfWeightCopies) {
  // cat, dims {3, 2}: params 3x5+5 + 5x4+4 + 9x6+6 + 6x1+1 = 111; activation floats a sample
  // 2 x (2 x 9 + 9 + (5 + 4 + 6 + 1)) = 86
  const std::vector<int64_t> dims{3, 2};
  const es::WorkloadSpec s32 = dense49_spec(es::Interaction::cat, DensePrecision::fp32);
  const es::DenseSizes z = es::dense_sizes(s32, dims);
  ASSERT_EQ(z.num_params, 111);
  ASSERT_EQ(z.activation_floats_per_sample, 86);
  EXPECT_EQ(es::dense_activation_bytes(s32, z, 4), 4 * 86 * 4);  // 1,376
  EXPECT_EQ(es::dense_activation_bytes(dense49_spec(es::Interaction::cat, DensePrecision::tf32), z, 4), 1376);
  EXPECT_EQ(es::dense_activation_bytes(dense49_spec(es::Interaction::cat, DensePrecision::bf16), z, 4), 4 * 86 * 2 + 2 * 111);  // 910
  EXPECT_EQ(es::dense_activation_bytes(dense49_spec(es::Interaction::cat, DensePrecision::fp16), z, 4), 910);
  const es::WorkloadSpec bf = dense49_spec(es::Interaction::cat, DensePrecision::bf16);
  EXPECT_EQ(es::DenseModel(bf, dims, true).activation_bytes(4), 910);
  es::WorkloadSpec none;
  EXPECT_EQ(es::dense_activation_bytes(none, es::dense_sizes(none, dims), 4), 0);
}

TEST(Dense49Precision, WorkCountsTheRoundedInputsAsElementwise) {
  // cat, dims {3, 2}, B 2: the 11 GEMMs' m k + k n: (2,5,3) 21, (2,4,5) 30, (2,6,9) 72, (2,1,6) 18,
  // (1,6,2) 14, (2,6,1) 8, (6,9,2) 30, (2,9,6) 66, (4,5,2) 18, (2,5,4) 28, (5,3,2) 16 = 321
  const std::vector<int64_t> dims{3, 2};
  const es::DenseWork w32 = es::DenseModel(dense49_spec(es::Interaction::cat, DensePrecision::fp32), dims, true).work(2);
  const es::DenseWork w16 = es::DenseModel(dense49_spec(es::Interaction::cat, DensePrecision::bf16), dims, true).work(2);
  EXPECT_EQ(w16.gemm_flops, w32.gemm_flops);
  EXPECT_EQ(w16.interaction_ops, w32.interaction_ops);
  EXPECT_EQ(w16.elementwise_ops - w32.elementwise_ops, 321);
}

TEST(Dense49Precision, DeviceOpsAreRefusedBelowFp32) {
  const std::vector<int64_t> dims{3, 2};
  const es::WorkloadSpec spec = dense49_spec(es::Interaction::cat, DensePrecision::bf16);  // the model keeps a reference
  es::DenseModel m(spec, dims);
  es::DenseModel::LinearOps loss_only;
  loss_only.loss = [](int64_t B, const float* z, const float* y, float* dz) { return es::bce_with_logits(B, z, y, dz); };
  EXPECT_NO_THROW(m.set_linear_ops(loss_only));
  es::DenseModel::LinearOps linear;
  linear.forward = [](int64_t, int64_t, int64_t, const float*, const float*, const float*, bool, float*) {};
  try {
    m.set_linear_ops(linear);
    ADD_FAILURE() << "no error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("dense.precision bf16"), std::string::npos) << e.what();
  }
}

json dense49_workload(const json& precision) {
  json j = json::parse(R"({
    "tables": [{"name": "t0", "num_embeddings": 10, "embedding_dim": 4, "feature_names": ["f0"]}],
    "features": [{"name": "f0"}],
    "batch_size": 8,
    "devices": {"count": 1},
    "dense": {"num_dense_features": 3, "bottom_mlp": [4], "top_mlp": [8, 1]}
  })");
  if (!precision.is_null()) j["dense"]["precision"] = precision;
  return j;
}

std::string dense49_error(const json& j) {
  try {
    es::parse_workload(j, "w.json");
  } catch (const es::SpecError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Dense49Precision, WorkloadFieldParsesWritesAndNamesBadValues) {
  EXPECT_EQ(es::parse_workload(dense49_workload(nullptr), "w.json").dense->precision, DensePrecision::fp32);
  for (const char* p : {"fp32", "tf32", "bf16", "fp16"}) {
    const es::WorkloadSpec s = es::parse_workload(dense49_workload(p), "w.json");
    EXPECT_STREQ(es::to_string(s.dense->precision), p);
    const json back = es::to_json(s);
    // fp32 (the default) is not written: an fp32 workload's JSON and session are as before
    if (std::string(p) == "fp32") EXPECT_FALSE(back.at("dense").contains("precision"));
    else EXPECT_EQ(back.at("dense").at("precision"), p);
    EXPECT_EQ(es::parse_workload(back, "back").dense->precision, s.dense->precision);
  }
  EXPECT_EQ(dense49_error(dense49_workload("int8")),
            "w.json: /dense/precision: must be one of fp32, tf32, bf16, fp16, got \"int8\"");
  EXPECT_NE(dense49_error(dense49_workload(16)).find("/dense/precision"), std::string::npos);
  // the cuda rank's dense part is fp32 cuBLAS: refused there, naming the field
  es::WorkloadSpec s = es::parse_workload(dense49_workload("bf16"), "w.json");
  s.devices.backend = es::Backend::cuda;
  try {
    es::validate(s, "w.json");
    ADD_FAILURE() << "no error";
  } catch (const es::SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("w.json: /dense/precision: bf16 is not supported on the cuda backend yet"),
              std::string::npos)
        << e.what();
  }
  s.devices.backend = es::Backend::cpu;
  EXPECT_NO_THROW(es::validate(s, "w.json"));
}

}  // namespace
