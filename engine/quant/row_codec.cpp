#include "embedscope/engine/quant/row_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <Eigen/Core>
#include <xxhash.h>

namespace embedscope::engine {

int64_t row_bytes(TableDataType t, int64_t dim) {
  if (dim < 0) throw std::invalid_argument("row_bytes: dim must be >= 0");
  switch (t) {
    case TableDataType::fp32: return 4 * dim;
    case TableDataType::fp16:
    case TableDataType::bf16: return 2 * dim;
    case TableDataType::int8: return dim + 8;
    case TableDataType::int4:
      if (dim % 2 != 0) throw std::invalid_argument("row_bytes: int4 rows need an even dim (two 4-bit codes a byte)");
      return dim / 2 + 4;
  }
  return 4 * dim;
}

double row_unit_roundoff(TableDataType t) {
  switch (t) {
    case TableDataType::fp32: return std::ldexp(1.0, -24);
    case TableDataType::fp16: return std::ldexp(1.0, -11);
    case TableDataType::bf16: return std::ldexp(1.0, -8);
    case TableDataType::int8: return 1.0 / 255.0;
    case TableDataType::int4: return 1.0 / 15.0;
  }
  return 0.0;
}

namespace {
void note(QuantError* err, const float* x, const float* back, int64_t dim) {
  if (!err) return;
  QuantError e;
  for (int64_t c = 0; c < dim; ++c) {
    e.max_abs_error = std::max(e.max_abs_error, static_cast<double>(std::abs(x[c] - back[c])));
    e.max_abs_value = std::max(e.max_abs_value, static_cast<double>(std::abs(x[c])));
  }
  err->merge(e);
}

// Rounding of one value to an integer code: to nearest (lrintf, ties to even), or stochastic
// (floor(t) + 1 with probability t - floor(t), u the value's uniform number).
struct CodeRounding {
  const uint64_t* row_hash = nullptr;  // null: round to nearest
  int64_t col0 = 0;                    // global column of local column 0
  long operator()(float t, int64_t c) const {
    if (!row_hash) return std::lrintf(t);
    const float fl = std::floor(t);
    return static_cast<long>(fl) + (stochastic_rounding_uniform(*row_hash, col0 + c) < t - fl ? 1 : 0);
  }
};

// FloatToFused8BitRowwiseQuantizedSBFloatRef (fbgemm/src/QuantUtils.cc)
void encode_int8(const float* x, int64_t dim, uint8_t* dst, const CodeRounding& round, QuantError* err) {
  constexpr float kEpsilon = 1e-8f;
  float lo = dim > 0 ? x[0] : 0.0f, hi = lo;
  for (int64_t c = 1; c < dim; ++c) {
    lo = std::min(lo, x[c]);
    hi = std::max(hi, x[c]);
  }
  const float range = hi - lo;
  const float scale = range / 255.0f, bias = lo;
  const float inverse_scale = 255.0f / (range + kEpsilon);
  double e_max = 0, v_max = 0;
  for (int64_t c = 0; c < dim; ++c) {
    dst[c] = static_cast<uint8_t>(std::clamp<long>(round((x[c] - lo) * inverse_scale, c), 0, 255));
    const float back = static_cast<float>(dst[c]) * scale + bias;
    e_max = std::max(e_max, static_cast<double>(std::abs(x[c] - back)));
    v_max = std::max(v_max, static_cast<double>(std::abs(x[c])));
  }
  std::memcpy(dst + dim, &scale, 4);
  std::memcpy(dst + dim + 4, &bias, 4);
  if (err) err->merge({e_max, v_max});
}

// FloatOrHalfToFusedNBitRowwiseQuantizedSBHalfRef at bit_rate 4 (fbgemm/src/QuantUtils.cc)
void encode_int4(const float* x, int64_t dim, uint8_t* dst, const CodeRounding& round, QuantError* err) {
  if (dim % 2 != 0) throw std::invalid_argument("encode_row: int4 rows need an even dim");
  float lo = dim > 0 ? x[0] : 0.0f, hi = lo;
  for (int64_t c = 1; c < dim; ++c) {
    lo = std::min(lo, x[c]);
    hi = std::max(hi, x[c]);
  }
  const Eigen::half bias_h(lo);  // the bias is stored in fp16: the codes count from it
  lo = static_cast<float>(bias_h);
  const float range = hi - lo;
  float scale = range == 0 ? 1.0f : range / 15.0f;
  Eigen::half scale_h(scale);
  scale = static_cast<float>(scale_h);
  if (scale == 0) scale = 1.0f;
  float inverse_scale = 1.0f / scale;
  if (std::isinf(inverse_scale)) scale = inverse_scale = 1.0f;
  scale_h = Eigen::half(scale);
  std::memset(dst, 0, static_cast<size_t>(dim / 2));
  double e_max = 0, v_max = 0;
  for (int64_t c = 0; c < dim; ++c) {
    const auto q = static_cast<uint8_t>(std::clamp<long>(round((x[c] - lo) * inverse_scale, c), 0, 15));
    dst[c / 2] |= static_cast<uint8_t>(c % 2 == 0 ? q : q << 4);
    const float back = scale * static_cast<float>(q) + lo;
    e_max = std::max(e_max, static_cast<double>(std::abs(x[c] - back)));
    v_max = std::max(v_max, static_cast<double>(std::abs(x[c])));
  }
  const uint16_t sb[2] = {Eigen::numext::bit_cast<uint16_t>(scale_h), Eigen::numext::bit_cast<uint16_t>(bias_h)};
  std::memcpy(dst + dim / 2, sb, 4);
  if (err) err->merge({e_max, v_max});
}

// x stochastically rounded to fp16 (bf16 = false) or bf16, as a 2-byte code: lo = x rounded
// toward zero, hi = the next code away from zero (codes of one sign are ordered by magnitude).
uint16_t stochastic_half_code(float x, bool bf16, float u) {
  if (!std::isfinite(x)) {
    return bf16 ? Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(x)) : Eigen::numext::bit_cast<uint16_t>(Eigen::half(x));
  }
  auto to_float = [bf16](uint16_t code) {
    return bf16 ? static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(code))
                : static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(code));
  };
  uint16_t code = bf16 ? Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(x)) : Eigen::numext::bit_cast<uint16_t>(Eigen::half(x));
  const float ax = std::abs(x);
  if (std::abs(to_float(code)) > ax) --code;  // rounded away from zero: one code toward zero
  const float lo = std::abs(to_float(code));
  if (lo == ax) return code;
  const float hi = std::abs(to_float(static_cast<uint16_t>(code + 1)));  // inf past the largest finite
  if (std::isinf(hi)) return u < 0.5f ? code : static_cast<uint16_t>(code + 1);
  const float f = (ax - lo) / (hi - lo);
  return u < f ? static_cast<uint16_t>(code + 1) : code;
}
}  // namespace

uint64_t stochastic_rounding_row_hash(uint64_t seed, int table, int64_t row, int64_t iteration) {
  const int64_t key[4] = {table, row, iteration, 0};
  return XXH64(key, sizeof(key), seed);
}

float stochastic_rounding_uniform(uint64_t row_hash, int64_t col) {
  // splitmix64_stateless (FBGEMM's stochastic_rounding.cuh, after Lemire's testingRNG)
  uint64_t z = row_hash + static_cast<uint64_t>(col) + UINT64_C(0x9E3779B97F4A7C15);
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  z ^= z >> 31;
  return std::ldexp(static_cast<float>(z >> 40), -24);
}

void encode_row(TableDataType t, const float* x, int64_t dim, uint8_t* dst, QuantError* err) {
  switch (t) {
    case TableDataType::fp32:
      std::memcpy(dst, x, static_cast<size_t>(dim) * sizeof(float));
      if (err) note(err, x, x, dim);
      return;
    case TableDataType::fp16:
    case TableDataType::bf16: {
      float back_max = 0, val_max = 0;
      for (int64_t c = 0; c < dim; ++c) {
        uint16_t code;
        float back;
        if (t == TableDataType::fp16) {
          const Eigen::half h(x[c]);
          code = Eigen::numext::bit_cast<uint16_t>(h);
          back = static_cast<float>(h);
        } else {
          const Eigen::bfloat16 b(x[c]);
          code = Eigen::numext::bit_cast<uint16_t>(b);
          back = static_cast<float>(b);
        }
        std::memcpy(dst + 2 * c, &code, 2);
        back_max = std::max(back_max, std::abs(x[c] - back));
        val_max = std::max(val_max, std::abs(x[c]));
      }
      if (err) err->merge({static_cast<double>(back_max), static_cast<double>(val_max)});
      return;
    }
    case TableDataType::int8: encode_int8(x, dim, dst, {}, err); return;
    case TableDataType::int4: encode_int4(x, dim, dst, {}, err); return;
  }
}

void encode_row_stochastic(TableDataType t, const float* x, int64_t dim, uint8_t* dst, const StochasticRoundingKey& key,
                           int64_t row, int64_t iteration, QuantError* err) {
  const uint64_t h = stochastic_rounding_row_hash(key.seed, key.table, key.row_offset + row, iteration);
  const CodeRounding round{&h, key.col_offset};
  switch (t) {
    case TableDataType::fp32: encode_row(t, x, dim, dst, err); return;
    case TableDataType::fp16:
    case TableDataType::bf16: {
      const bool bf16 = t == TableDataType::bf16;
      std::vector<float> back(static_cast<size_t>(dim));
      for (int64_t c = 0; c < dim; ++c) {
        const uint16_t code = stochastic_half_code(x[c], bf16, stochastic_rounding_uniform(h, key.col_offset + c));
        std::memcpy(dst + 2 * c, &code, 2);
      }
      if (err) {
        decode_row(t, dst, dim, back.data());
        note(err, x, back.data(), dim);
      }
      return;
    }
    case TableDataType::int8: encode_int8(x, dim, dst, round, err); return;
    case TableDataType::int4: encode_int4(x, dim, dst, round, err); return;
  }
}

void decode_row(TableDataType t, const uint8_t* src, int64_t dim, float* out) {
  switch (t) {
    case TableDataType::fp32: std::memcpy(out, src, static_cast<size_t>(dim) * sizeof(float)); return;
    case TableDataType::fp16:
      for (int64_t c = 0; c < dim; ++c) {
        uint16_t code;
        std::memcpy(&code, src + 2 * c, 2);
        out[c] = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(code));
      }
      return;
    case TableDataType::bf16:
      for (int64_t c = 0; c < dim; ++c) {
        uint16_t code;
        std::memcpy(&code, src + 2 * c, 2);
        out[c] = static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(code));
      }
      return;
    case TableDataType::int8: {
      float scale, bias;
      std::memcpy(&scale, src + dim, 4);
      std::memcpy(&bias, src + dim + 4, 4);
      for (int64_t c = 0; c < dim; ++c) out[c] = static_cast<float>(src[c]) * scale + bias;
      return;
    }
    case TableDataType::int4: {  // FusedNBitRowwiseQuantizedSBHalfToFloatOrHalfRef, bit_rate 4
      uint16_t sb[2];
      std::memcpy(sb, src + dim / 2, 4);
      const float scale = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(sb[0]));
      const float bias = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(sb[1]));
      for (int64_t c = 0; c < dim; ++c) {
        const int q = (src[c / 2] >> ((c % 2) * 4)) & 0xf;
        out[c] = scale * static_cast<float>(q) + bias;
      }
      return;
    }
  }
}

}  // namespace embedscope::engine
