// int4 rows (FBGEMM's fused 4-bit row-wise layout, row_codec.h) against rows worked out by hand,
// and stochastic rounding (TableSpec::stochastic_rounding) against its definition: which
// neighbour each value goes to for the counter-based number u, and that the stored value is the
// fp32 value in expectation where round to nearest loses the update.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/quant/row_codec.h"

using namespace embedscope::engine;

namespace {
uint16_t int4_test_half_word(const uint8_t* p) {
  uint16_t w;
  std::memcpy(&w, p, 2);
  return w;
}
}  // namespace

TEST(Int4Codec, RowBytesAreHalfADimPlusAnFp16ScaleAndBias) {
  EXPECT_EQ(row_bytes(TableDataType::int4, 16), 12);   // 8 bytes of codes + 2 + 2
  EXPECT_EQ(row_bytes(TableDataType::int4, 128), 68);
  EXPECT_EQ(row_bytes(TableDataType::int4, 0), 4);
  EXPECT_THROW(row_bytes(TableDataType::int4, 7), std::invalid_argument);
  EXPECT_THROW(row_bytes(TableDataType::int4, -2), std::invalid_argument);
  EXPECT_DOUBLE_EQ(row_unit_roundoff(TableDataType::int4), 1.0 / 15.0);
  const float x[3] = {1, 2, 3};
  uint8_t row[8];
  EXPECT_THROW(encode_row(TableDataType::int4, x, 3, row), std::invalid_argument);
}

// By hand: {-1, -0.25, 0.3, 0.5, 1.2, 2}: min -1 is an fp16 value (bias 0xbc00); range 3,
// scale fp16(3 / 15 = 0.2) = 1638 / 8192 = 0.199951171875 (0x3266); 1 / scale = 5.0012207;
// (x + 1) / scale = 0, 3.7509, 6.5016, 7.5018, 11.0027, 15.0037 -> codes 0, 4, 7, 8, 11, 15;
// low nibble first: 0x40, 0x87, 0xfb; then 66 32 (scale) 00 bc (bias), little-endian.
TEST(Int4Codec, HandComputedRowIsFbgemmFusedNBitRowwise) {
  const float x[6] = {-1.0f, -0.25f, 0.3f, 0.5f, 1.2f, 2.0f};
  uint8_t row[7];
  ASSERT_EQ(row_bytes(TableDataType::int4, 6), 7);
  QuantError err;
  encode_row(TableDataType::int4, x, 6, row, &err);
  EXPECT_EQ(row[0], 0x40);
  EXPECT_EQ(row[1], 0x87);
  EXPECT_EQ(row[2], 0xfb);
  EXPECT_EQ(int4_test_half_word(row + 3), 0x3266);  // scale
  EXPECT_EQ(int4_test_half_word(row + 5), 0xbc00);  // bias -1
  float back[6];
  decode_row(TableDataType::int4, row, 6, back);
  // scale q + bias: 0.199951171875 q - 1
  const float want[6] = {-1.0f, -0.2001953125f, 0.399658203125f, 0.599609375f, 1.199462890625f, 1.999267578125f};
  for (int c = 0; c < 6; ++c) EXPECT_EQ(back[c], want[c]) << c;
  EXPECT_NEAR(err.max_abs_error, 0.399658203125 - 0.3, 1e-7);  // 0.3 sits half a step from its code
  EXPECT_EQ(err.max_abs_value, 2.0);
}

// By hand: {0.1, 0.7, 0.35, 0.4}: the bias is min rounded to fp16, fp16(0.1) = 0.0999755859375
// (0x2e66), and the codes count from it; range 0.7 - 0.0999756 = 0.6000244, scale
// fp16(0.04000163) = 0.040008544921875 (0x291f); (x - bias) / scale = 0.0006, 14.9974, 6.2493,
// 7.4990 -> codes 0, 15, 6, 7 (0.4 lands just below the tie).
TEST(Int4Codec, BiasIsTheMinimumRoundedToFp16) {
  const float x[4] = {0.1f, 0.7f, 0.35f, 0.4f};
  uint8_t row[6];
  encode_row(TableDataType::int4, x, 4, row);
  EXPECT_EQ(row[0], 0xf0);
  EXPECT_EQ(row[1], 0x76);
  EXPECT_EQ(int4_test_half_word(row + 2), 0x291f);
  EXPECT_EQ(int4_test_half_word(row + 4), 0x2e66);
  float back[4];
  decode_row(TableDataType::int4, row, 4, back);
  EXPECT_EQ(back[0], 0.0999755859375f);
  EXPECT_EQ(back[1], 0.700103759765625f);
  EXPECT_EQ(back[2], 0.34002685546875f);
  EXPECT_EQ(back[3], 0.380035400390625f);
  // a constant row: scale 1 (FBGEMM's corner case), every code 0, read back exactly
  const float k[2] = {0.5f, 0.5f};
  encode_row(TableDataType::int4, k, 2, row);
  EXPECT_EQ(row[0], 0x00);
  EXPECT_EQ(int4_test_half_word(row + 1), 0x3c00);  // 1.0
  decode_row(TableDataType::int4, row, 2, back);
  EXPECT_EQ(back[0], 0.5f);
  EXPECT_EQ(back[1], 0.5f);
}

TEST(Int4Codec, EncodedLookupSumsDecodedInt4RowsInFp32) {
  // two rows of dim 2: {0, 3} -> scale fp16(0.2), codes 0 15 -> {0, 2.999267578125};
  // {1, 1} -> scale 1, codes 0 0 -> {1, 1}
  const float rows[4] = {0, 3, 1, 1};
  std::vector<uint8_t> packed(2 * static_cast<size_t>(row_bytes(TableDataType::int4, 2)));
  encode_row(TableDataType::int4, rows, 2, packed.data());
  encode_row(TableDataType::int4, rows + 2, 2, packed.data() + row_bytes(TableDataType::int4, 2));
  const int64_t ids[3] = {0, 1, 0}, off[2] = {0, 3};
  float out[2];
  pooled_lookup_encoded(TableDataType::int4, packed.data(), 2, 2, ids, off, 1, nullptr, out, 2);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 2.999267578125f * 2 + 1);
}

TEST(StochasticRounding, UniformNumbersAre24BitAndKeyedByTableRowColumnAndIteration) {
  const uint64_t h = stochastic_rounding_row_hash(7, 2, 11, 3);
  EXPECT_EQ(h, stochastic_rounding_row_hash(7, 2, 11, 3));
  EXPECT_NE(h, stochastic_rounding_row_hash(8, 2, 11, 3));
  EXPECT_NE(h, stochastic_rounding_row_hash(7, 1, 11, 3));
  EXPECT_NE(h, stochastic_rounding_row_hash(7, 2, 12, 3));
  EXPECT_NE(h, stochastic_rounding_row_hash(7, 2, 11, 4));
  double sum = 0;
  constexpr int kN = 20000;
  for (int c = 0; c < kN; ++c) {
    const float u = stochastic_rounding_uniform(h, c);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    const double scaled = std::ldexp(static_cast<double>(u), 24);
    ASSERT_EQ(scaled, std::floor(scaled)) << "u is a multiple of 2^-24";
    sum += u;
  }
  EXPECT_NEAR(sum / kN, 0.5, 0.01);
}

// fp16: 1 + 2^-12 lies a quarter of the way from 1 to 1 + 2^-10: stored 1 + 2^-10 exactly when
// u < 0.25, else 1; negative values mirror it; 2^-26 (below fp16's smallest subnormal 2^-24)
// goes to 2^-24 when u < 0.25, else 0. bf16: 1 + 2^-12 is 1/32 of the way to 1 + 2^-7.
TEST(StochasticRounding, HalfAndBfloat16GoToTheNeighbourThatUSays) {
  const float xs[4] = {1.0f + std::ldexp(1.0f, -12), -(1.0f + std::ldexp(1.0f, -12)), std::ldexp(1.0f, -26), 1.0f};
  const StochasticRoundingKey key{5, 1, 100, 8};
  int up = 0;
  constexpr int kRows = 4000;
  for (int64_t r = 0; r < kRows; ++r) {
    uint8_t row[8];
    encode_row_stochastic(TableDataType::fp16, xs, 4, row, key, r, 1);
    float back[4];
    decode_row(TableDataType::fp16, row, 4, back);
    const uint64_t h = stochastic_rounding_row_hash(5, 1, 100 + r, 1);
    const bool u0 = stochastic_rounding_uniform(h, 8) < 0.25f, u1 = stochastic_rounding_uniform(h, 9) < 0.25f;
    const bool u2 = stochastic_rounding_uniform(h, 10) < 0.25f;
    EXPECT_EQ(back[0], u0 ? 1.0f + std::ldexp(1.0f, -10) : 1.0f);
    EXPECT_EQ(back[1], u1 ? -(1.0f + std::ldexp(1.0f, -10)) : -1.0f);
    EXPECT_EQ(back[2], u2 ? std::ldexp(1.0f, -24) : 0.0f);
    EXPECT_EQ(back[3], 1.0f);  // representable: never moved
    up += u0;

    encode_row_stochastic(TableDataType::bf16, xs, 4, row, key, r, 1);
    decode_row(TableDataType::bf16, row, 4, back);
    EXPECT_EQ(back[0], stochastic_rounding_uniform(h, 8) < 0.03125f ? 1.0f + std::ldexp(1.0f, -7) : 1.0f);
  }
  EXPECT_NEAR(static_cast<double>(up) / kRows, 0.25, 0.03);
}

// int4: row {0, 3, 1.1, 0, ...}: scale fp16(0.2) = 0.199951171875, 1.1 / scale = 5.50134 -> code 6
// when u < 0.50134, else 5. A small update of a value (a tenth of a step) is lost by round to
// nearest and kept on average by stochastic rounding.
TEST(StochasticRounding, Int4CodesAreFloorPlusBernoulliAndKeepSmallUpdatesOnAverage) {
  std::vector<float> x = {0.0f, 3.0f, 1.1f, 0.0f};
  const StochasticRoundingKey key{1, 0, 0, 0};
  const float scale = 0.199951171875f, t = 1.1f * (1.0f / scale);
  ASSERT_NEAR(t, 5.50134, 1e-4);
  uint8_t row[6];
  for (int64_t it = 1; it <= 200; ++it) {
    encode_row_stochastic(TableDataType::int4, x.data(), 4, row, key, 0, it);
    const float u = stochastic_rounding_uniform(stochastic_rounding_row_hash(1, 0, 0, it), 2);
    EXPECT_EQ(row[1] & 0xf, u < t - 5.0f ? 6 : 5) << it;
    EXPECT_EQ(row[0], 0xf0);  // 0 and 3 are on the grid: codes 0 and 15 whatever u
  }
  // 0.4 = 2 steps + 0.0005: + a tenth of a step
  const float step = scale;
  x[2] = 2 * step + 0.1f * step;
  double mean_rtn = 0, mean_sr = 0;
  constexpr int kIters = 4000;
  for (int64_t it = 1; it <= kIters; ++it) {
    float back[4];
    encode_row(TableDataType::int4, x.data(), 4, row);
    decode_row(TableDataType::int4, row, 4, back);
    mean_rtn += back[2];
    encode_row_stochastic(TableDataType::int4, x.data(), 4, row, key, 0, it);
    decode_row(TableDataType::int4, row, 4, back);
    mean_sr += back[2];
  }
  mean_rtn /= kIters;
  mean_sr /= kIters;
  EXPECT_FLOAT_EQ(static_cast<float>(mean_rtn), 2 * step);       // the update is gone
  EXPECT_NEAR(mean_sr, x[2], 0.02 * step);                        // kept in expectation
}

// The update kernel with a key: a shard whose local row 0 is global row 5 draws the numbers of
// row 5, so sharding does not change the rounding; without a key it rounds to nearest.
TEST(StochasticRounding, EncodedUpdateKeysTheGlobalRow) {
  OptimizerSpec opt;
  opt.type = OptimizerType::sgd;
  opt.learning_rate = 1.0f;
  const int64_t dim = 4;
  const float start[4] = {0.0f, 3.0f, 1.0f, 2.0f};
  const int64_t rb = row_bytes(TableDataType::int4, dim);
  std::vector<uint8_t> whole(static_cast<size_t>(6 * rb)), shard(static_cast<size_t>(rb));
  for (int64_t r = 0; r < 6; ++r) encode_row(TableDataType::int4, start, dim, whole.data() + r * rb);
  encode_row(TableDataType::int4, start, dim, shard.data());
  SparseGrad g;
  g.dim = dim;
  g.rows = {5};
  g.values = {0.0f, 0.0f, -0.05f, 0.03f};
  auto state = make_optimizer_state(OptimizerType::sgd, 6, dim);
  const StochasticRoundingKey k_whole{3, 2, 0, 0}, k_shard{3, 2, 5, 0};
  apply_row_optimizer_encoded(opt, 4, TableDataType::int4, whole.data(), dim, state, g, nullptr, &k_whole);
  SparseGrad g0 = g;
  g0.rows = {0};
  auto state1 = make_optimizer_state(OptimizerType::sgd, 1, dim);
  apply_row_optimizer_encoded(opt, 4, TableDataType::int4, shard.data(), dim, state1, g0, nullptr, &k_shard);
  EXPECT_EQ(std::memcmp(whole.data() + 5 * rb, shard.data(), static_cast<size_t>(rb)), 0);
  // the value by the definition: the start row decodes to {0, 2.99927, 0.99976, 1.99951} (scale
  // fp16(0.2) = 0.199951171875, bias 0), the update moves columns 2 and 3 between codes (min and
  // max, so the scale, stay), and u of (row 5, column c, iteration 4) picks the code
  float start_back[4], back[4];
  decode_row(TableDataType::int4, whole.data(), dim, start_back);
  decode_row(TableDataType::int4, shard.data(), dim, back);
  const uint64_t h = stochastic_rounding_row_hash(3, 2, 5, 4);
  const float scale = 0.199951171875f;
  const float w2 = start_back[2] - 1.0f * -0.05f, w3 = start_back[3] - 1.0f * 0.03f;
  const float t2 = w2 * (1.0f / scale), t3 = w3 * (1.0f / scale);
  EXPECT_EQ(back[2], scale * (std::floor(t2) + (stochastic_rounding_uniform(h, 2) < t2 - std::floor(t2) ? 1.0f : 0.0f)));
  EXPECT_EQ(back[3], scale * (std::floor(t3) + (stochastic_rounding_uniform(h, 3) < t3 - std::floor(t3) ? 1.0f : 0.0f)));
  EXPECT_EQ(back[1], 2.999267578125f);
}
