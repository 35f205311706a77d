#include "embedscope/engine/quant/quant.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <Eigen/Core>

namespace embedscope::engine {

void QuantError::merge(const QuantError& o) {
  max_abs_error = std::max(max_abs_error, o.max_abs_error);
  max_abs_value = std::max(max_abs_value, o.max_abs_value);
}

float round_to_precision(float v, CommPrecision p) {
  switch (p) {
    case CommPrecision::fp16: return static_cast<float>(Eigen::half(v));
    case CommPrecision::bf16: return static_cast<float>(Eigen::bfloat16(v));
    case CommPrecision::fp32: break;
  }
  return v;
}

size_t precision_bytes(CommPrecision p) { return p == CommPrecision::fp32 ? 4 : 2; }

const char* precision_dtype(CommPrecision p) {
  return p == CommPrecision::fp16 ? "float16" : p == CommPrecision::bf16 ? "bfloat16" : "float32";
}

// n floats -> 2-byte codes of precision p (fp16 / bf16), accumulating the error.
std::vector<uint16_t> quantize(const float* x, size_t n, CommPrecision p, QuantError* err) {
  if (p == CommPrecision::fp32) throw std::invalid_argument("quantize: fp32 has no 2-byte code");
  std::vector<uint16_t> q(n);
  QuantError e;
  for (size_t i = 0; i < n; ++i) {
    float back;
    if (p == CommPrecision::fp16) {
      const Eigen::half h(x[i]);
      q[i] = Eigen::numext::bit_cast<uint16_t>(h);
      back = static_cast<float>(h);
    } else {
      const Eigen::bfloat16 b(x[i]);
      q[i] = Eigen::numext::bit_cast<uint16_t>(b);
      back = static_cast<float>(b);
    }
    e.max_abs_error = std::max(e.max_abs_error, static_cast<double>(std::abs(x[i] - back)));
    e.max_abs_value = std::max(e.max_abs_value, static_cast<double>(std::abs(x[i])));
  }
  if (err) err->merge(e);
  return q;
}
void dequantize(const uint16_t* q, size_t n, CommPrecision p, float* out) {
  for (size_t i = 0; i < n; ++i)
    out[i] = p == CommPrecision::fp16 ? static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(q[i]))
                                      : static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(q[i]));
}

}  // namespace embedscope::engine
