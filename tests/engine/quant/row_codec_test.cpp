// Stored rows (row_codec.h) against values worked out by hand: the bytes of each layout, the
// FBGEMM fused 8-bit codes of a row, and the encoded lookup and update kernels (kernels.h) on
// those rows.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/quant/row_codec.h"

using namespace embedscope::engine;

TEST(RowCodec, RowBytesOfEachLayout) {
  EXPECT_EQ(row_bytes(TableDataType::fp32, 16), 64);
  EXPECT_EQ(row_bytes(TableDataType::fp16, 16), 32);
  EXPECT_EQ(row_bytes(TableDataType::bf16, 16), 32);
  EXPECT_EQ(row_bytes(TableDataType::int8, 16), 24);  // 16 codes + fp32 scale + fp32 bias
  EXPECT_EQ(row_bytes(TableDataType::int8, 0), 8);
  EXPECT_THROW(row_bytes(TableDataType::int8, -1), std::invalid_argument);
}

TEST(RowCodec, Int8IsFbgemmFusedRowwise) {
  // min 0, max 1: scale 1/255, bias 0; 0.25 * 255 = 63.75 -> code 64, read back 64/255
  const float x[3] = {0.0f, 0.25f, 1.0f};
  uint8_t row[11];
  QuantError err;
  encode_row(TableDataType::int8, x, 3, row, &err);
  EXPECT_EQ(row[0], 0);
  EXPECT_EQ(row[1], 64);
  EXPECT_EQ(row[2], 255);
  float scale, bias;
  std::memcpy(&scale, row + 3, 4);
  std::memcpy(&bias, row + 7, 4);
  EXPECT_FLOAT_EQ(scale, 1.0f / 255.0f);
  EXPECT_EQ(bias, 0.0f);
  float back[3];
  decode_row(TableDataType::int8, row, 3, back);
  EXPECT_EQ(back[0], 0.0f);
  EXPECT_FLOAT_EQ(back[1], 64.0f / 255.0f);
  EXPECT_FLOAT_EQ(back[2], 1.0f);
  EXPECT_NEAR(err.max_abs_error, 64.0 / 255.0 - 0.25, 1e-7);  // 0.000980
  EXPECT_EQ(err.max_abs_value, 1.0);
  // a negative bias: {-2, -1}: scale 1/255, codes 0 and 255
  const float y[2] = {-2.0f, -1.0f};
  uint8_t r2[10];
  encode_row(TableDataType::int8, y, 2, r2);
  std::memcpy(&bias, r2 + 6, 4);
  EXPECT_EQ(r2[0], 0);
  EXPECT_EQ(r2[1], 255);
  EXPECT_EQ(bias, -2.0f);
}

TEST(RowCodec, HalfAndBfloat16CodesAreLittleEndianWords) {
  const float x[2] = {1.0f / 3.0f, -2.5f};
  uint8_t h[4], b[4];
  QuantError eh, eb;
  encode_row(TableDataType::fp16, x, 2, h, &eh);
  encode_row(TableDataType::bf16, x, 2, b, &eb);
  EXPECT_EQ(h[0], 0x55);  // 0x3555 = 0.333251953125
  EXPECT_EQ(h[1], 0x35);
  EXPECT_EQ(h[2], 0x00);  // 0xC100 = -2.5
  EXPECT_EQ(h[3], 0xC1);
  EXPECT_EQ(b[0], 0xAB);  // 0x3EAB = 0.333984375
  EXPECT_EQ(b[1], 0x3E);
  float back[2];
  decode_row(TableDataType::bf16, b, 2, back);
  EXPECT_EQ(back[0], 0.333984375f);
  EXPECT_EQ(back[1], -2.5f);
  EXPECT_NEAR(eh.max_abs_error, 1.0 / 3.0 - 0.333251953125, 1e-8);
  EXPECT_NEAR(eb.max_abs_error, 0.333984375 - 1.0 / 3.0, 1e-8);
  EXPECT_EQ(eh.max_abs_value, 2.5);
}

TEST(RowCodec, EncodedLookupSumsDecodedRowsInFp32) {
  // two int8 rows of dim 2: {0, 1} and {-1, 1} (both exact in the code); bag {0, 1, 1}
  const float rows[4] = {0.0f, 1.0f, -1.0f, 1.0f};
  std::vector<uint8_t> packed(2 * 10);
  for (int r = 0; r < 2; ++r) encode_row(TableDataType::int8, rows + 2 * r, 2, packed.data() + 10 * r);
  const int64_t ids[3] = {0, 1, 1}, off[2] = {0, 3};
  float out[2];
  const float half = 0.5f;
  pooled_lookup_encoded(TableDataType::int8, packed.data(), 2, 2, ids, off, 1, &half, out, 2);
  EXPECT_FLOAT_EQ(out[0], 0.5f * (0 - 1 - 1));
  EXPECT_FLOAT_EQ(out[1], 0.5f * (1 + 1 + 1));
}

TEST(RowCodec, EncodedUpdateRoundsTheUpdatedRowAndCountsTheError) {
  // fp16 row {1, 1}; sgd lr 1, gradient {2^-12, 2^-9}. Below 1 halves are 2^-11 apart, so
  // 1 - 2^-12 lies halfway between 0x3BFF (1 - 2^-11) and 0x3C00 (1): to even, 1 (the update is
  // lost, and is the error counted); 1 - 2^-9 is exact.
  const float init[2] = {1.0f, 1.0f};
  uint8_t row[4];
  encode_row(TableDataType::fp16, init, 2, row);
  SparseGrad g;
  g.dim = 2;
  g.rows = {0};
  g.values = {0x1p-12f, 0x1p-9f};
  OptimizerSpec opt;
  opt.type = OptimizerType::sgd;
  opt.learning_rate = 1.0;
  QuantError err;
  apply_row_optimizer_encoded(opt, 1, TableDataType::fp16, row, 2, {}, g, &err);
  float back[2];
  decode_row(TableDataType::fp16, row, 2, back);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], 1.0f - 0x1p-9f);
  EXPECT_EQ(err.max_abs_error, 0x1p-12);
  EXPECT_EQ(err.max_abs_value, 1.0 - 0x1p-12);  // max |x| of the updated fp32 row
}
