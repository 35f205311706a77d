#pragma once
// The row update of a reduced-precision shard (apply_row_optimizer_encoded, kernels.h) as one
// function that compiles both for the device (nvcc: tbe_encoded_update.cu runs it, one thread a
// row) and for the host (g++: tests/engine/quant/encoded_update_math_test.cpp runs it against
// the CPU kernels without a GPU). Every operation is the CPU code's, in its order:
//   - fp32 arithmetic: on the device the explicit _rn intrinsics (no FMA contraction, IEEE
//     division and square root), on the host the plain operators (the x86-64 build has no FMA
//     to contract into), so both round each operation once, to nearest even;
//   - fp16 / bf16 conversions by integer bit manipulation (round to nearest even, the
//     algorithm of Eigen::half's float_to_half_rtne, F. Giesen's float_to_half_fast3_rtne, and of
//     Eigen::bfloat16's float_to_bfloat16_rtne), so that the host test checks the same bits
//     the device computes;
//   - stochastic rounding's random numbers: XXH64 of the 32-byte key (stochastic_rounding_row_hash,
//     quant/row_codec.h) and splitmix64 (stochastic_rounding_uniform), in 64-bit integers.
// Layouts and rounding rules: quant/row_codec.h. Internal to the engine.

#include <cstdint>
#include <cstring>

#include "embedscope/engine/workload/enums.h"

#if defined(__CUDACC__)
#define ES_HD __host__ __device__ __forceinline__
#else
#define ES_HD inline
#endif

namespace embedscope::engine::encoded {

// ---- fp32 operations, rounded once to nearest even ---------------------------------------------
ES_HD float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
ES_HD float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
ES_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
ES_HD float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
ES_HD float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return __builtin_sqrtf(a);
#endif
}
ES_HD float floor_f(float a) {
#if defined(__CUDA_ARCH__)
  return floorf(a);
#else
  return __builtin_floorf(a);
#endif
}
/// lrintf (round to nearest, ties to even) for |t| < 2^31.
ES_HD long rint_l(float t) {
#if defined(__CUDA_ARCH__)
  return static_cast<long>(__float2int_rn(t));
#else
  return __builtin_lrintf(t);
#endif
}
ES_HD uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
ES_HD float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
ES_HD float abs_f(float x) { return float_of(bits_of(x) & 0x7fffffffu); }
ES_HD bool is_finite(float x) { return (bits_of(x) & 0x7f800000u) != 0x7f800000u; }
ES_HD bool is_inf(float x) { return (bits_of(x) & 0x7fffffffu) == 0x7f800000u; }
ES_HD float min_f(float a, float b) { return b < a ? b : a; }  // std::min(a, b)
ES_HD float max_f(float a, float b) { return a < b ? b : a; }  // std::max(a, b)

// ---- 16-bit codes ------------------------------------------------------------------------------
/// float -> IEEE binary16 bits, round to nearest even (Eigen's float_to_half_rtne).
ES_HD uint16_t fp16_code(float x) {
  uint32_t f = bits_of(x);
  const uint32_t sign = f & 0x80000000u;
  f ^= sign;
  uint32_t o;
  if (f >= (127u + 16u) << 23) {  // >= 65536 (or inf / NaN): inf or NaN
    o = f > (255u << 23) ? 0x7e00u : 0x7c00u;
  } else if (f < (113u << 23)) {  // the result is subnormal or zero: let the fp32 adder round
    const uint32_t magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    o = bits_of(add(float_of(f), float_of(magic))) - magic;
  } else {
    const uint32_t mant_odd = (f >> 13) & 1u;
    f += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu;
    f += mant_odd;
    o = f >> 13;
  }
  return static_cast<uint16_t>(o | (sign >> 16));
}
/// IEEE binary16 bits -> float (exact).
ES_HD float fp16_value(uint16_t h) {
  const uint32_t shifted_exp = 0x7c00u << 13;
  uint32_t o = (static_cast<uint32_t>(h) & 0x7fffu) << 13;
  const uint32_t exp = shifted_exp & o;
  o += (127u - 15u) << 23;
  if (exp == shifted_exp) {
    o += (128u - 16u) << 23;  // inf / NaN
  } else if (exp == 0) {      // subnormal: renormalise (exact)
    o += 1u << 23;
    o = bits_of(sub(float_of(o), float_of(113u << 23)));
  }
  return float_of(o | (static_cast<uint32_t>(h) & 0x8000u) << 16);
}
/// float -> bfloat16 bits, round to nearest even (Eigen's float_to_bfloat16_rtne; NaN -> 0x7fc0 / 0xffc0).
ES_HD uint16_t bf16_code(float x) {
  const uint32_t u = bits_of(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u & 0x80000000u) ? 0xffc0u : 0x7fc0u;
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
ES_HD float bf16_value(uint16_t b) { return float_of(static_cast<uint32_t>(b) << 16); }
ES_HD uint16_t half_code(float x, bool bf16) { return bf16 ? bf16_code(x) : fp16_code(x); }
ES_HD float half_value(uint16_t c, bool bf16) { return bf16 ? bf16_value(c) : fp16_value(c); }
ES_HD uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
ES_HD void store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xff);
  p[1] = static_cast<uint8_t>(v >> 8);
}
ES_HD float load_f32(const uint8_t* p) {
  return float_of(static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
                  static_cast<uint32_t>(p[3]) << 24);
}
ES_HD void store_f32(uint8_t* p, float f) {
  const uint32_t u = bits_of(f);
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(u >> (8 * i));
}

// ---- stochastic rounding's random numbers --------------------------------------------------------
ES_HD uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
ES_HD uint64_t xxh_round(uint64_t acc, uint64_t input) {
  acc += input * 0xC2B2AE3D27D4EB4FULL;
  acc = rotl64(acc, 31);
  return acc * 0x9E3779B185EBCA87ULL;
}
ES_HD uint64_t xxh_merge(uint64_t acc, uint64_t val) {
  acc ^= xxh_round(0, val);
  return acc * 0x9E3779B185EBCA87ULL + 0x85EBCA77C2B2AE63ULL;
}
/// XXH64 of the 32 bytes (a, b, c, d) as little-endian uint64 with `seed` (one stripe, no tail).
ES_HD uint64_t xxh64_4words(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t seed) {
  constexpr uint64_t P1 = 0x9E3779B185EBCA87ULL, P2 = 0xC2B2AE3D27D4EB4FULL, P3 = 0x165667B19E3779F9ULL;
  uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
  v1 = xxh_round(v1, a);
  v2 = xxh_round(v2, b);
  v3 = xxh_round(v3, c);
  v4 = xxh_round(v4, d);
  uint64_t h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
  h = xxh_merge(h, v1);
  h = xxh_merge(h, v2);
  h = xxh_merge(h, v3);
  h = xxh_merge(h, v4);
  h += 32;
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}
/// stochastic_rounding_row_hash (quant/row_codec.h).
ES_HD uint64_t row_hash(uint64_t seed, int table, int64_t row, int64_t iteration) {
  return xxh64_4words(static_cast<uint64_t>(static_cast<int64_t>(table)), static_cast<uint64_t>(row),
                      static_cast<uint64_t>(iteration), 0, seed);
}
/// stochastic_rounding_uniform (quant/row_codec.h): the top 24 bits of splitmix64(h + col) x 2^-24.
ES_HD float uniform(uint64_t h, int64_t col) {
  uint64_t z = h + static_cast<uint64_t>(col) + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return mul(static_cast<float>(static_cast<uint32_t>(z >> 40)), 5.9604644775390625e-08f);  // exact
}
/// stochastic_half_code (row_codec.cpp): x stochastically rounded to fp16 / bf16.
ES_HD uint16_t stochastic_half(float x, bool bf16, float u) {
  uint16_t code = half_code(x, bf16);
  if (!is_finite(x)) return code;
  const float ax = abs_f(x);
  if (abs_f(half_value(code, bf16)) > ax) --code;
  const float lo = abs_f(half_value(code, bf16));
  if (lo == ax) return code;
  const float hi = abs_f(half_value(static_cast<uint16_t>(code + 1), bf16));
  if (is_inf(hi)) return u < 0.5f ? code : static_cast<uint16_t>(code + 1);
  const float f = div(sub(ax, lo), sub(hi, lo));
  return u < f ? static_cast<uint16_t>(code + 1) : code;
}

// ---- one row ---------------------------------------------------------------------------------------
/// What every row of one update shares. c1 / c2: adam's bias corrections
/// 1 - float(pow(beta, iteration)) as the CPU computes them (in double, then rounded).
struct UpdateArgs {
  int32_t opt_type = 0;     ///< OptimizerType
  int32_t data_type = 0;    ///< TableDataType of the rows
  int32_t state_type = 0;   ///< OptimizerStateType
  int32_t stochastic = 0;   ///< 1: stochastic rounding keyed by (seed, table, row_offset + r, col_offset + c, iteration)
  float lr = 0, eps = 0, b1 = 0, b2 = 0, one_minus_b1 = 0, one_minus_b2 = 0, c1 = 1, c2 = 1;
  int64_t dim = 0;          ///< columns of the shard
  int64_t row_bytes = 0;    ///< row_bytes(data_type, dim)
  int64_t iteration = 0;    ///< from 1
  uint64_t seed = 0;
  int32_t table = 0;
  int32_t reserved = 0;
  int64_t row_offset = 0, col_offset = 0;
};

ES_HD void decode(const UpdateArgs& a, const uint8_t* src, float* out) {
  const int64_t dim = a.dim;
  switch (static_cast<TableDataType>(a.data_type)) {
    case TableDataType::fp32:
      for (int64_t c = 0; c < dim; ++c) out[c] = load_f32(src + 4 * c);
      return;
    case TableDataType::fp16:
    case TableDataType::bf16: {
      const bool bf = static_cast<TableDataType>(a.data_type) == TableDataType::bf16;
      for (int64_t c = 0; c < dim; ++c) out[c] = half_value(load_u16(src + 2 * c), bf);
      return;
    }
    case TableDataType::int8: {
      const float scale = load_f32(src + dim), bias = load_f32(src + dim + 4);
      for (int64_t c = 0; c < dim; ++c) out[c] = add(mul(static_cast<float>(src[c]), scale), bias);
      return;
    }
    case TableDataType::int4: {
      const float scale = fp16_value(load_u16(src + dim / 2)), bias = fp16_value(load_u16(src + dim / 2 + 2));
      for (int64_t c = 0; c < dim; ++c) {
        const int q = (src[c / 2] >> ((c % 2) * 4)) & 0xf;
        out[c] = add(mul(scale, static_cast<float>(q)), bias);
      }
      return;
    }
  }
}

// A code: round to nearest (lrintf) or stochastic (floor(t) + (u < t - floor(t))), clamped to [0, qmax].
ES_HD long code_of(const UpdateArgs& a, uint64_t h, float t, int64_t c, long qmax) {
  long q;
  if (a.stochastic) {
    const float fl = floor_f(t);
    q = static_cast<long>(fl) + (uniform(h, a.col_offset + c) < sub(t, fl) ? 1 : 0);
  } else {
    q = rint_l(t);
  }
  return q < 0 ? 0 : q > qmax ? qmax : q;
}

/// Encodes w[0, dim) into `dst` (encode_row / encode_row_stochastic of row_codec.cpp) for local
/// row r; err (nullable): {max |w - decoded|, max |w|}.
ES_HD void encode(const UpdateArgs& a, const float* w, uint8_t* dst, int64_t r, float* err) {
  const int64_t dim = a.dim;
  const uint64_t h = a.stochastic ? row_hash(a.seed, a.table, a.row_offset + r, a.iteration) : 0;
  float e_max = 0, v_max = 0;
  switch (static_cast<TableDataType>(a.data_type)) {
    case TableDataType::fp32:
      for (int64_t c = 0; c < dim; ++c) {
        store_f32(dst + 4 * c, w[c]);
        v_max = max_f(v_max, abs_f(w[c]));
      }
      break;
    case TableDataType::fp16:
    case TableDataType::bf16: {
      const bool bf = static_cast<TableDataType>(a.data_type) == TableDataType::bf16;
      for (int64_t c = 0; c < dim; ++c) {
        const uint16_t code = a.stochastic ? stochastic_half(w[c], bf, uniform(h, a.col_offset + c)) : half_code(w[c], bf);
        store_u16(dst + 2 * c, code);
        e_max = max_f(e_max, abs_f(sub(w[c], half_value(code, bf))));
        v_max = max_f(v_max, abs_f(w[c]));
      }
      break;
    }
    case TableDataType::int8: {  // FloatToFused8BitRowwiseQuantizedSBFloatRef
      float lo = dim > 0 ? w[0] : 0.0f, hi = lo;
      for (int64_t c = 1; c < dim; ++c) {
        lo = min_f(lo, w[c]);
        hi = max_f(hi, w[c]);
      }
      const float range = sub(hi, lo);
      const float scale = div(range, 255.0f), bias = lo;
      const float inverse_scale = div(255.0f, add(range, 1e-8f));
      for (int64_t c = 0; c < dim; ++c) {
        const auto q = static_cast<uint8_t>(code_of(a, h, mul(sub(w[c], lo), inverse_scale), c, 255));
        dst[c] = q;
        const float back = add(mul(static_cast<float>(q), scale), bias);
        e_max = max_f(e_max, abs_f(sub(w[c], back)));
        v_max = max_f(v_max, abs_f(w[c]));
      }
      store_f32(dst + dim, scale);
      store_f32(dst + dim + 4, bias);
      break;
    }
    case TableDataType::int4: {  // FloatOrHalfToFusedNBitRowwiseQuantizedSBHalfRef, bit_rate 4
      float lo = dim > 0 ? w[0] : 0.0f, hi = lo;
      for (int64_t c = 1; c < dim; ++c) {
        lo = min_f(lo, w[c]);
        hi = max_f(hi, w[c]);
      }
      const uint16_t bias_h = fp16_code(lo);
      lo = fp16_value(bias_h);
      const float range = sub(hi, lo);
      float scale = range == 0 ? 1.0f : div(range, 15.0f);
      uint16_t scale_h = fp16_code(scale);
      scale = fp16_value(scale_h);
      if (scale == 0) scale = 1.0f;
      float inverse_scale = div(1.0f, scale);
      if (is_inf(inverse_scale)) scale = inverse_scale = 1.0f;
      scale_h = fp16_code(scale);
      for (int64_t c = 0; c < dim / 2; ++c) dst[c] = 0;
      for (int64_t c = 0; c < dim; ++c) {
        const auto q = static_cast<uint8_t>(code_of(a, h, mul(sub(w[c], lo), inverse_scale), c, 15));
        dst[c / 2] = static_cast<uint8_t>(dst[c / 2] | (c % 2 == 0 ? q : q << 4));
        const float back = add(mul(scale, static_cast<float>(q)), lo);
        e_max = max_f(e_max, abs_f(sub(w[c], back)));
        v_max = max_f(v_max, abs_f(w[c]));
      }
      store_u16(dst + dim / 2, scale_h);
      store_u16(dst + dim / 2 + 2, bias_h);
      break;
    }
  }
  if (err) {
    err[0] = e_max;
    err[1] = v_max;
  }
}

// One state value of row r: fp32 (a float array) or a 2-byte code (fp16 / bf16), index i.
ES_HD float state_get(const UpdateArgs& a, void* base, int64_t i) {
  if (static_cast<OptimizerStateType>(a.state_type) == OptimizerStateType::fp32) return static_cast<float*>(base)[i];
  return half_value(load_u16(static_cast<uint8_t*>(base) + 2 * i),
                    static_cast<OptimizerStateType>(a.state_type) == OptimizerStateType::bf16);
}
ES_HD void state_set(const UpdateArgs& a, void* base, int64_t i, float v) {
  if (static_cast<OptimizerStateType>(a.state_type) == OptimizerStateType::fp32) {
    static_cast<float*>(base)[i] = v;
    return;
  }
  store_u16(static_cast<uint8_t*>(base) + 2 * i,
            half_code(v, static_cast<OptimizerStateType>(a.state_type) == OptimizerStateType::bf16));
}

/// apply_row_optimizer_encoded (kernels.h) for local row r: decode the row into w (dim floats of
/// scratch), the optimizer formula of update_row (kernels.cpp) on it with the state decoded
/// to fp32 (the step uses the updated fp32 value; the state is stored rounded to nearest), and
/// the row encoded again. state1 / state2: the shard's momentum1 / momentum2 (fp32 floats or
/// 2-byte codes; rowwise_adagrad one value a row, adam dim values a row; sgd none). g: the row's
/// gradient (dim floats). err (nullable): encode's.
ES_HD void update_row(const UpdateArgs& a, uint8_t* rows, void* state1, void* state2, int64_t r, const float* g, float* w,
                      float* err) {
  const int64_t dim = a.dim;
  uint8_t* at = rows + r * a.row_bytes;
  decode(a, at, w);
  switch (static_cast<OptimizerType>(a.opt_type)) {
    case OptimizerType::sgd:
      for (int64_t c = 0; c < dim; ++c) w[c] = sub(w[c], mul(a.lr, g[c]));
      break;
    case OptimizerType::rowwise_adagrad: {
      float sq = 0.0f;
      for (int64_t c = 0; c < dim; ++c) sq = add(sq, mul(g[c], g[c]));
      const float m = add(state_get(a, state1, r), div(sq, static_cast<float>(dim)));
      state_set(a, state1, r, m);
      const float step = div(a.lr, add(sqrt_rn(m), a.eps));
      for (int64_t c = 0; c < dim; ++c) w[c] = sub(w[c], mul(step, g[c]));
      break;
    }
    case OptimizerType::adam:
      for (int64_t c = 0; c < dim; ++c) {
        const int64_t i = r * dim + c;
        const float m1 = add(mul(a.b1, state_get(a, state1, i)), mul(a.one_minus_b1, g[c]));
        const float m2 = add(mul(a.b2, state_get(a, state2, i)), mul(mul(a.one_minus_b2, g[c]), g[c]));
        state_set(a, state1, i, m1);
        state_set(a, state2, i, m2);
        w[c] = sub(w[c], div(mul(a.lr, div(m1, a.c1)), add(sqrt_rn(div(m2, a.c2)), a.eps)));
      }
      break;
  }
  encode(a, w, at, r, err);
}

}  // namespace embedscope::engine::encoded
