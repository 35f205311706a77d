#include "embedscope/engine/quant/row_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <Eigen/Core>

namespace embedscope::engine {

int64_t row_bytes(TableDataType t, int64_t dim) {
  if (dim < 0) throw std::invalid_argument("row_bytes: dim must be >= 0");
  switch (t) {
    case TableDataType::fp32: return 4 * dim;
    case TableDataType::fp16:
    case TableDataType::bf16: return 2 * dim;
    case TableDataType::int8: return dim + 8;
  }
  return 4 * dim;
}

double row_unit_roundoff(TableDataType t) {
  switch (t) {
    case TableDataType::fp32: return std::ldexp(1.0, -24);
    case TableDataType::fp16: return std::ldexp(1.0, -11);
    case TableDataType::bf16: return std::ldexp(1.0, -8);
    case TableDataType::int8: return 1.0 / 255.0;
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
}  // namespace

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
    case TableDataType::int8: {
      // FloatToFused8BitRowwiseQuantizedSBFloatRef (fbgemm/src/QuantUtils.cc)
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
        const long q = std::lrintf((x[c] - lo) * inverse_scale);
        dst[c] = static_cast<uint8_t>(std::clamp<long>(q, 0, 255));
        const float back = static_cast<float>(dst[c]) * scale + bias;
        e_max = std::max(e_max, static_cast<double>(std::abs(x[c] - back)));
        v_max = std::max(v_max, static_cast<double>(std::abs(x[c])));
      }
      std::memcpy(dst + dim, &scale, 4);
      std::memcpy(dst + dim + 4, &bias, 4);
      if (err) err->merge({e_max, v_max});
      return;
    }
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
  }
}

}  // namespace embedscope::engine
