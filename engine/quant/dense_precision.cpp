// Rounding of the dense part's GEMM inputs (quant/dense_precision.h).
#include "embedscope/engine/quant/dense_precision.h"

#include <Eigen/Core>

#include <bit>
#include <cmath>
#include <cstdint>

namespace embedscope::engine {

namespace {
// fp32 with its low `drop` bits rounded off, to nearest even: add half an ulp of the kept part
// (less one, plus the kept part's lowest bit), then clear them. A carry into the exponent is
// the correct rounding up (and gives inf past the largest finite value).
float round_off_low_bits(float v, int drop) {
  if (std::isnan(v)) return v;
  uint32_t u = std::bit_cast<uint32_t>(v);
  const uint32_t keep_lsb = (u >> drop) & 1u;
  u += (uint32_t{1} << (drop - 1)) - 1u + keep_lsb;
  u &= ~((uint32_t{1} << drop) - 1u);
  return std::bit_cast<float>(u);
}
}  // namespace

float round_dense_value(float v, DensePrecision p) {
  switch (p) {
    case DensePrecision::fp32: return v;
    case DensePrecision::tf32: return round_off_low_bits(v, 13);
    case DensePrecision::bf16: return round_off_low_bits(v, 16);
    case DensePrecision::fp16: return static_cast<float>(Eigen::half(v));
  }
  return v;
}

void round_dense_values(const float* src, int64_t n, DensePrecision p, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = round_dense_value(src[i], p);
}

int64_t dense_activation_value_bytes(DensePrecision p) {
  return p == DensePrecision::bf16 || p == DensePrecision::fp16 ? 2 : 4;
}

}  // namespace embedscope::engine
