#include <gtest/gtest.h>

#include <cmath>

#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/quant/row_codec.h"

using namespace embedscope::engine;

namespace {
// 4 rows x 3 cols: row r = (r, 10 r, 100 r) + (1, 2, 3)
std::vector<float> table() {
  std::vector<float> w;
  for (int r = 0; r < 4; ++r)
    for (float base : {1.0f, 2.0f, 3.0f}) w.push_back(base + static_cast<float>(r) * (base == 1 ? 1 : base == 2 ? 10 : 100));
  return w;
}
}  // namespace

TEST(PooledLookup, SumMeanAndEmptyBags) {
  auto w = table();
  // bags: {0, 3}, {}, {2, 2, 1}
  std::vector<int64_t> ids{0, 3, 2, 2, 1}, off{0, 2, 2, 5};
  std::vector<float> out(3 * 5, -7.0f);  // stride 5: columns 3, 4 untouched
  pooled_lookup(w.data(), 4, 3, ids.data(), off.data(), 3, nullptr, out.data(), 5);
  EXPECT_FLOAT_EQ(out[0], 1 + 4);        // rows 0 and 3, col 0
  EXPECT_FLOAT_EQ(out[1], 2 + 32);
  EXPECT_FLOAT_EQ(out[2], 3 + 303);
  EXPECT_FLOAT_EQ(out[3], -7.0f);        // outside dim
  EXPECT_FLOAT_EQ(out[5], 0.0f);         // empty bag is zeros
  EXPECT_FLOAT_EQ(out[7], 0.0f);
  EXPECT_FLOAT_EQ(out[10], 3 + 3 + 2);
  EXPECT_FLOAT_EQ(out[12], 203 + 203 + 103);
  std::vector<float> scale{0.5f, 0.0f, 1.0f / 3};
  pooled_lookup(w.data(), 4, 3, ids.data(), off.data(), 3, scale.data(), out.data(), 5);
  EXPECT_FLOAT_EQ(out[0], 2.5f);
  EXPECT_FLOAT_EQ(out[12], (203 + 203 + 103) / 3.0f);
}

TEST(PooledLookup, SliceOfLargerKjtAndOddDims) {
  // dim 1 and dim 1280, offsets not starting at 0
  for (int64_t dim : {1, 3, 100, 1280}) {
    std::vector<float> w(static_cast<size_t>(5 * dim));
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 17) - 8.0f;
    std::vector<int64_t> ids{9, 9, 4, 1, 4}, off{2, 4, 5};  // bags {4, 1}, {4}
    std::vector<float> out(static_cast<size_t>(2 * dim));
    pooled_lookup(w.data(), 5, dim, ids.data(), off.data(), 2, nullptr, out.data(), dim);
    for (int64_t c = 0; c < dim; ++c) {
      EXPECT_FLOAT_EQ(out[static_cast<size_t>(c)], w[static_cast<size_t>(4 * dim + c)] + w[static_cast<size_t>(dim + c)]);
      EXPECT_FLOAT_EQ(out[static_cast<size_t>(dim + c)], w[static_cast<size_t>(4 * dim + c)]);
    }
  }
}

TEST(SparseGrad, DuplicatesAreSummedPerRowInOrder) {
  // bags {2, 0, 2}, {2}, {} ; grads per bag (dim 2)
  std::vector<int64_t> ids{2, 0, 2, 2}, off{0, 3, 4, 4};
  std::vector<float> g{1, 2, 10, 20, 100, 200};
  std::vector<float> scale{0.5f, 1.0f, 1.0f};
  SparseGrad sg = accumulate_sparse_grad(2, ids.data(), off.data(), 3, scale.data(), g.data(), 2);
  ASSERT_EQ(sg.rows, (std::vector<int64_t>{0, 2}));
  EXPECT_FLOAT_EQ(sg.values[0], 0.5f);
  EXPECT_FLOAT_EQ(sg.values[1], 1.0f);
  EXPECT_FLOAT_EQ(sg.values[2], 0.5f + 0.5f + 10);
  EXPECT_FLOAT_EQ(sg.values[3], 1 + 1 + 20);
  // merge two parts
  SparseGrad a{2, {1, 4}, {1, 1, 2, 2}}, b{2, {0, 4}, {5, 5, 3, 3}};
  std::vector<SparseGrad> parts{a, b};
  SparseGrad m = merge_sparse_grads(parts, 2);
  ASSERT_EQ(m.rows, (std::vector<int64_t>{0, 1, 4}));
  EXPECT_FLOAT_EQ(m.values[4], 5.0f);
  EXPECT_FLOAT_EQ(m.values[0], 5.0f);
}

TEST(RowOptimizers, OneStepByHand) {
  SparseGrad g{2, {1}, {0.3f, -0.4f}};
  OptimizerSpec o;
  o.learning_rate = 0.1;
  {
    std::vector<float> w{1, 1, 1, 1};
    auto st = make_optimizer_state(OptimizerType::sgd, 2, 2);
    o.type = OptimizerType::sgd;
    apply_row_optimizer(o, 1, w.data(), 2, st, g);
    EXPECT_FLOAT_EQ(w[0], 1.0f);  // row 0 untouched
    EXPECT_FLOAT_EQ(w[2], 1 - 0.03f);
    EXPECT_FLOAT_EQ(w[3], 1 + 0.04f);
  }
  {
    std::vector<float> w{1, 1, 1, 1};
    o.type = OptimizerType::rowwise_adagrad;
    auto st = make_optimizer_state(o.type, 2, 2);
    ASSERT_EQ(st.momentum1.size(), 2u);
    apply_row_optimizer(o, 1, w.data(), 2, st, g);
    // m = (0.09 + 0.16) / 2 = 0.125; step = 0.1 / sqrt(0.125)
    EXPECT_FLOAT_EQ(st.momentum1[1], 0.125f);
    EXPECT_NEAR(w[2], 1 - 0.1 * 0.3 / std::sqrt(0.125), 1e-6);
    apply_row_optimizer(o, 2, w.data(), 2, st, g);
    EXPECT_FLOAT_EQ(st.momentum1[1], 0.25f);
  }
  {
    std::vector<float> w{1, 1, 1, 1};
    o.type = OptimizerType::adam;
    auto st = make_optimizer_state(o.type, 2, 2);
    apply_row_optimizer(o, 1, w.data(), 2, st, g);
    // first step of Adam moves by lr * sign(g) (bias-corrected m / sqrt(v) = g / |g|)
    EXPECT_NEAR(w[2], 1 - 0.1, 1e-6);
    EXPECT_NEAR(w[3], 1 + 0.1, 1e-6);
    EXPECT_NEAR(st.momentum1[2], 0.1 * 0.3, 1e-7);
    EXPECT_NEAR(st.momentum2[3], 0.001 * 0.16, 1e-8);
  }
  EXPECT_EQ(optimizer_state_bytes(OptimizerType::adam, 10, 4), 320);
  EXPECT_EQ(optimizer_state_bytes(OptimizerType::rowwise_adagrad, 10, 4), 40);
  EXPECT_EQ(optimizer_state_bytes(OptimizerType::sgd, 10, 4), 0);
}

// Reduced-precision optimizer state (TableSpec::optimizer_state_type), by hand. rowwise_adagrad,
// g = (0.1, 0.2): m = (0.01 + 0.04) / 2 = 0.025, not an fp16 value; the step uses the fp32 value
// and fp16 stores 1638 x 2^-16 = 0.0249938965 (the nearest: 0.025 / 2^-16 = 1638.4). The second
// step adds 0.025 to the stored value.
TEST(RowOptimizers, ReducedPrecisionStateByHand) {
  SparseGrad g{2, {1}, {0.1f, 0.2f}};
  OptimizerSpec o;
  o.learning_rate = 0.1;
  o.eps = 1e-8;
  o.type = OptimizerType::rowwise_adagrad;
  std::vector<float> w{1, 1, 1, 1};
  auto st = make_optimizer_state(o.type, 2, 2, OptimizerStateType::fp16);
  EXPECT_TRUE(st.momentum1.empty());
  ASSERT_EQ(st.packed1.size(), 4u);  // 2 rows x 2 bytes
  apply_row_optimizer(o, 1, w.data(), 2, st, g);
  float m = 0;
  decode_row(TableDataType::fp16, st.packed1.data() + 2, 1, &m);
  EXPECT_DOUBLE_EQ(m, 1638.0 / 65536.0);
  const float m_fp32 = (0.1f * 0.1f + 0.2f * 0.2f) / 2.0f;
  EXPECT_FLOAT_EQ(w[2], 1.0f - 0.1f * 0.1f / (std::sqrt(m_fp32) + 1e-8f));  // the unrounded m
  EXPECT_FLOAT_EQ(w[0], 1.0f);                                             // row 0 untouched
  decode_row(TableDataType::fp16, st.packed1.data(), 1, &m);
  EXPECT_EQ(m, 0.0f);
  const float w2 = w[2];
  apply_row_optimizer(o, 2, w.data(), 2, st, g);
  const float m2 = 1638.0f / 65536.0f + m_fp32;
  EXPECT_FLOAT_EQ(w[2], w2 - 0.1f * 0.1f / (std::sqrt(m2) + 1e-8f));
  // on an encoded (bf16) row, the same update: the rows rounded to bf16 after it
  std::vector<uint8_t> rows(2 * row_bytes(TableDataType::bf16, 2));
  const float ones[2] = {1, 1};
  encode_row(TableDataType::bf16, ones, 2, rows.data());
  encode_row(TableDataType::bf16, ones, 2, rows.data() + 4);
  auto st16 = make_optimizer_state(o.type, 2, 2, OptimizerStateType::bf16);
  apply_row_optimizer_encoded(o, 1, TableDataType::bf16, rows.data(), 2, st16, g);
  decode_row(TableDataType::bf16, st16.packed1.data() + 2, 1, &m);
  EXPECT_EQ(m, round_to_precision(m_fp32, CommPrecision::bf16));
  EXPECT_NE(m, m_fp32);
  // adam: m1 and m2 of the row, dim values each, 2 bytes a value
  o.type = OptimizerType::adam;
  auto sa = make_optimizer_state(o.type, 2, 2, OptimizerStateType::bf16);
  EXPECT_EQ(sa.packed1.size(), 8u);
  EXPECT_EQ(sa.packed2.size(), 8u);
  std::vector<float> wa{1, 1, 1, 1};
  apply_row_optimizer(o, 1, wa.data(), 2, sa, g);
  float m1[2], v[2];
  decode_row(TableDataType::bf16, sa.packed1.data() + 4, 2, m1);
  decode_row(TableDataType::bf16, sa.packed2.data() + 4, 2, v);
  EXPECT_EQ(m1[1], round_to_precision((1.0f - 0.9f) * 0.2f, CommPrecision::bf16));
  EXPECT_EQ(v[1], round_to_precision((1.0f - 0.999f) * 0.2f * 0.2f, CommPrecision::bf16));
  EXPECT_NEAR(wa[3], 1 - 0.1, 1e-6);  // the first Adam step: lr x sign(g), from the unrounded state
  EXPECT_EQ(optimizer_state_bytes(OptimizerType::adam, 10, 4, OptimizerStateType::fp16), 160);
  EXPECT_EQ(optimizer_state_bytes(OptimizerType::rowwise_adagrad, 10, 4, OptimizerStateType::bf16), 20);
  EXPECT_EQ(optimizer_state_value_bytes(OptimizerStateType::fp32), 4);
}
