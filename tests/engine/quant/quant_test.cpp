// Reduced-precision codes (quant.h) against values worked out by hand from the IEEE 754 half and
// bfloat16 formats (round to nearest even).
#include <gtest/gtest.h>

#include "embedscope/engine/quant/quant.h"

using namespace embedscope::engine;

TEST(Quant, RoundsToNearestEvenAsHalfAndBfloat16) {
  // 1/3: half keeps 10 fraction bits -> 0x3555 = 0.333251953125; bfloat16 7 bits -> 0x3EAB = 0.333984375
  EXPECT_FLOAT_EQ(round_to_precision(1.0f / 3.0f, CommPrecision::fp16), 0.333251953125f);
  EXPECT_FLOAT_EQ(round_to_precision(1.0f / 3.0f, CommPrecision::bf16), 0.333984375f);
  EXPECT_EQ(round_to_precision(1.0f / 3.0f, CommPrecision::fp32), 1.0f / 3.0f);
  // 1 + 2^-11 is halfway between two halves: to even (1.0); 1 + 3 * 2^-11 rounds up to 1 + 2^-9
  EXPECT_EQ(round_to_precision(1.0f + 0x1p-11f, CommPrecision::fp16), 1.0f);
  EXPECT_EQ(round_to_precision(1.0f + 3 * 0x1p-11f, CommPrecision::fp16), 1.0f + 0x1p-9f);
  EXPECT_EQ(precision_bytes(CommPrecision::bf16), 2u);
  EXPECT_STREQ(precision_dtype(CommPrecision::fp16), "float16");
}

TEST(Quant, CodesRoundTripAndCountTheirError) {
  const float x[3] = {1.0f, -2.5f, 1.0f / 3.0f};
  QuantError err;
  const auto q = quantize(x, 3, CommPrecision::fp16, &err);
  EXPECT_EQ(q[0], 0x3C00);  // 1.0 in half
  EXPECT_EQ(q[1], 0xC100);  // -2.5
  EXPECT_EQ(q[2], 0x3555);
  float back[3];
  dequantize(q.data(), 3, CommPrecision::fp16, back);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], -2.5f);
  EXPECT_FLOAT_EQ(back[2], 0.333251953125f);
  EXPECT_DOUBLE_EQ(err.max_abs_error, static_cast<double>(1.0f / 3.0f - 0.333251953125f));
  EXPECT_DOUBLE_EQ(err.max_abs_value, 2.5);
  EXPECT_DOUBLE_EQ(err.relative(), static_cast<double>(1.0f / 3.0f - 0.333251953125f) / 2.5);
  EXPECT_THROW(quantize(x, 3, CommPrecision::fp32, nullptr), std::invalid_argument);
}
