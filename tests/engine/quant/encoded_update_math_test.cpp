// The device row update of reduced-precision shards (kernels/cuda/encoded_update_math.h, the
// code the CUDA kernel apply_row_optimizer_encoded_cuda runs one thread a row) compiled for the
// host and checked bit for bit against the CPU kernels it reproduces: the fp16 / bf16
// conversions against encode_row / decode_row (Eigen), the stochastic-rounding hash and uniform
// numbers against stochastic_rounding_row_hash / _uniform (libxxhash), and whole updates
// (every data type x optimizer x state type, round to nearest and stochastic, three
// iterations) against apply_row_optimizer_encoded: stored rows, stored state and the encoding
// error. Runs without a GPU; the device run of the same code is GpuEncodedUpdate (label gpu).

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/quant/row_codec.h"
#include "kernels/cuda/encoded_update_math.h"

namespace {

namespace es = embedscope::engine;
namespace enc = embedscope::engine::encoded;

uint16_t eumt_code_of(es::TableDataType t, float x) {
  uint8_t b[2];
  es::encode_row(t, &x, 1, b);
  return static_cast<uint16_t>(b[0] | b[1] << 8);
}

TEST(EncodedUpdateMath, HalfConversionsMatchEigenBitForBit) {
  std::vector<float> xs = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.99f, 65520.0f, 70000.0f, 1e-8f, -3e-6f,
                           6.1035156e-05f, 6.0975552e-05f, 5.9604645e-08f, 2.9802322e-08f, 2.98023259e-08f,
                           std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                           0.1f, 1.0f / 3.0f, 3.0e38f, 1.00048828125f, 1.000732421875f};
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    float f;
    const uint32_t u = bits(rng);
    std::memcpy(&f, &u, 4);
    if (!std::isnan(f)) xs.push_back(f);
  }
  std::uniform_real_distribution<float> small(-2.0f, 2.0f);
  for (int i = 0; i < 100000; ++i) xs.push_back(small(rng) * std::ldexp(1.0f, -(i % 30)));
  int fp16_bad = 0, bf16_bad = 0;
  for (float x : xs) {
    if (enc::fp16_code(x) != eumt_code_of(es::TableDataType::fp16, x) && fp16_bad++ < 5)
      ADD_FAILURE() << "fp16 of " << x << ": " << enc::fp16_code(x) << " vs " << eumt_code_of(es::TableDataType::fp16, x);
    if (enc::bf16_code(x) != eumt_code_of(es::TableDataType::bf16, x) && bf16_bad++ < 5)
      ADD_FAILURE() << "bf16 of " << x << ": " << enc::bf16_code(x) << " vs " << eumt_code_of(es::TableDataType::bf16, x);
  }
  for (uint32_t c = 0; c < 65536; ++c) {  // every code back to fp32 (NaN codes: both NaN)
    const uint8_t b[2] = {static_cast<uint8_t>(c & 0xff), static_cast<uint8_t>(c >> 8)};
    for (auto t : {es::TableDataType::fp16, es::TableDataType::bf16}) {
      float want;
      es::decode_row(t, b, 1, &want);
      const float got = enc::half_value(static_cast<uint16_t>(c), t == es::TableDataType::bf16);
      if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << c;
      else ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << es::enum_name(t) << " code " << c << ": " << got << " vs " << want;
    }
  }
  // a hand-checked value: 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even gives 1
  EXPECT_EQ(enc::fp16_code(1.00048828125f), 0x3c00);
  EXPECT_EQ(enc::fp16_code(1.000732421875f), 0x3c01);  // 1 + 1.5 * 2^-11 rounds up
}

TEST(EncodedUpdateMath, StochasticRoundingNumbersMatchTheCpuCodec) {
  for (uint64_t seed : {0ull, 7ull, 0xfedcba9876543210ull})
    for (int table : {0, 3})
      for (int64_t row : {int64_t{0}, int64_t{5}, int64_t{123456789}})
        for (int64_t it : {int64_t{1}, int64_t{2}, int64_t{1000}}) {
          const uint64_t h = es::stochastic_rounding_row_hash(seed, table, row, it);
          ASSERT_EQ(enc::row_hash(seed, table, row, it), h) << seed << " " << table << " " << row << " " << it;
          for (int64_t col : {0, 1, 17, 511}) ASSERT_EQ(enc::uniform(h, col), es::stochastic_rounding_uniform(h, col));
        }
}

// A shard of kRows rows: the CPU update (apply_row_optimizer_encoded) and the device code on
// the host (enc::update_row per gradient row), the same gradients for three iterations; the
// rows' bytes, the state's bytes and the errors must be equal.
void eumt_check(es::TableDataType type, es::OptimizerType opt_type, es::OptimizerStateType st, bool sr, int64_t dim) {
  SCOPED_TRACE(std::string(es::enum_name(type)) + " " + es::to_string(opt_type) + " state " + es::enum_name(st) +
               (sr ? " stochastic" : " nearest") + " dim " + std::to_string(dim));
  constexpr int64_t kRows = 9;
  es::OptimizerSpec opt;
  opt.type = opt_type;
  opt.learning_rate = opt_type == es::OptimizerType::sgd ? 0.5 : 0.05;
  const int64_t rb = es::row_bytes(type, dim);
  std::mt19937_64 rng(42 + dim);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  std::vector<uint8_t> cpu_rows(static_cast<size_t>(kRows * rb));
  std::vector<float> x(static_cast<size_t>(dim));
  for (int64_t r = 0; r < kRows; ++r) {
    for (auto& v : x) v = r == 2 ? 0.125f : r == 3 ? 40.0f * val(rng) : 0.1f * val(rng);  // a constant row, a wide one
    es::encode_row(type, x.data(), dim, cpu_rows.data() + r * rb);
  }
  std::vector<uint8_t> dev_rows = cpu_rows;
  es::OptimizerStateBuffers cpu_state = es::make_optimizer_state(opt_type, kRows, dim, st);
  es::OptimizerStateBuffers dev_state = es::make_optimizer_state(opt_type, kRows, dim, st);
  const es::StochasticRoundingKey key{7, 2, 100, 6};
  bool changed = false;
  for (int64_t it = 1; it <= 3; ++it) {
    es::SparseGrad g;
    g.dim = dim;
    for (int64_t r = 0; r < kRows; ++r)
      if ((r + it) % 3 != 0 || r == 3) g.rows.push_back(r);
    for (size_t u = 0; u < g.rows.size() * static_cast<size_t>(dim); ++u) g.values.push_back(val(rng) * (u % 7 == 0 ? 3.0f : 0.3f));
    es::QuantError cpu_err;
    const std::vector<uint8_t> before = cpu_rows;
    es::apply_row_optimizer_encoded(opt, it, type, cpu_rows.data(), dim, cpu_state, g, &cpu_err, sr ? &key : nullptr);
    changed |= before != cpu_rows;
    enc::UpdateArgs a;
    a.opt_type = static_cast<int32_t>(opt_type);
    a.data_type = static_cast<int32_t>(type);
    a.state_type = static_cast<int32_t>(st);
    a.stochastic = sr && type != es::TableDataType::fp32;
    a.lr = static_cast<float>(opt.learning_rate);
    a.eps = static_cast<float>(opt.eps);
    a.b1 = static_cast<float>(opt.beta1);
    a.b2 = static_cast<float>(opt.beta2);
    a.one_minus_b1 = 1.0f - a.b1;
    a.one_minus_b2 = 1.0f - a.b2;
    a.c1 = 1.0f - static_cast<float>(std::pow(opt.beta1, it));
    a.c2 = 1.0f - static_cast<float>(std::pow(opt.beta2, it));
    a.dim = dim;
    a.row_bytes = rb;
    a.iteration = it;
    a.seed = key.seed;
    a.table = key.table;
    a.row_offset = key.row_offset;
    a.col_offset = key.col_offset;
    void* s1 = st == es::OptimizerStateType::fp32 ? static_cast<void*>(dev_state.momentum1.data()) : dev_state.packed1.data();
    void* s2 = st == es::OptimizerStateType::fp32 ? static_cast<void*>(dev_state.momentum2.data()) : dev_state.packed2.data();
    std::vector<float> w(static_cast<size_t>(dim));
    es::QuantError dev_err;
    for (size_t u = 0; u < g.rows.size(); ++u) {
      float e[2];
      enc::update_row(a, dev_rows.data(), s1, s2, g.rows[u], g.values.data() + u * static_cast<size_t>(dim), w.data(), e);
      dev_err.merge({e[0], e[1]});
    }
    ASSERT_EQ(dev_rows, cpu_rows) << "rows after iteration " << it;
    EXPECT_EQ(dev_state.momentum1, cpu_state.momentum1) << "iteration " << it;
    EXPECT_EQ(dev_state.momentum2, cpu_state.momentum2) << "iteration " << it;
    EXPECT_EQ(dev_state.packed1, cpu_state.packed1) << "iteration " << it;
    EXPECT_EQ(dev_state.packed2, cpu_state.packed2) << "iteration " << it;
    if (type != es::TableDataType::fp32) {  // the CPU does not measure fp32 rows (error 0)
      EXPECT_EQ(dev_err.max_abs_error, cpu_err.max_abs_error) << "iteration " << it;
      EXPECT_EQ(dev_err.max_abs_value, cpu_err.max_abs_value) << "iteration " << it;
      EXPECT_GT(cpu_err.max_abs_value, 0.0);
    }
  }
  EXPECT_TRUE(changed) << "the updates changed no stored byte";
}

TEST(EncodedUpdateMath, EveryTypeOptimizerAndStateEqualsTheCpuKernel) {
  for (auto type : {es::TableDataType::fp16, es::TableDataType::bf16, es::TableDataType::int8, es::TableDataType::int4,
                    es::TableDataType::fp32})
    for (auto opt : {es::OptimizerType::sgd, es::OptimizerType::rowwise_adagrad, es::OptimizerType::adam})
      for (auto st : {es::OptimizerStateType::fp32, es::OptimizerStateType::fp16, es::OptimizerStateType::bf16}) {
        if (opt == es::OptimizerType::sgd && st != es::OptimizerStateType::fp32) continue;  // no state
        for (bool sr : {false, true}) {
          if (type == es::TableDataType::fp32 && sr) continue;  // fp32 rows are not rounded
          for (int64_t dim : {6, 34}) eumt_check(type, opt, st, sr, dim);
        }
      }
}

}  // namespace
