#pragma once
// Reduced-precision copies of fp32 values (TorchRec qcomms' CommType FP16 / BF16): rounding,
// 2-byte codes and back, and the error they introduce. Used by the collectives that send in
// fp16 / bf16 (comm/gloo_process_group.h) and by the unsharded reference (reference.h), which rounds at the same
// points. Eigen::half / Eigen::bfloat16 do the rounding (round to nearest even).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "embedscope/engine/workload/enums.h"

namespace embedscope::engine {

/// Quantization error of the values a rank sent through fp16 / bf16 collectives.
struct QuantError {
  double max_abs_error = 0;  ///< max |x - dequantize(quantize(x))|
  double max_abs_value = 0;  ///< max |x|
  /// Norm-wise relative error max_abs_error / max_abs_value (0 when nothing was quantized).
  double relative() const { return max_abs_value > 0 ? max_abs_error / max_abs_value : 0.0; }
  void merge(const QuantError& o);
};

/// `v` rounded to precision `p` (round to nearest even, as Eigen::half / Eigen::bfloat16 and
/// PyTorch's .to(torch.bfloat16) do) and back to fp32; fp32 returns v unchanged.
float round_to_precision(float v, CommPrecision p);
/// Bytes per element on the wire: 4 (fp32), 2 (fp16, bf16).
size_t precision_bytes(CommPrecision p);
/// The dtype name in collective records: float32, float16, bfloat16.
const char* precision_dtype(CommPrecision p);

/// n floats as 2-byte codes of precision p (fp16 or bf16; fp32 is not a 2-byte precision and
/// throws std::invalid_argument), with the error of every value merged into *err (if not null).
std::vector<uint16_t> quantize(const float* x, size_t n, CommPrecision p, QuantError* err);
/// n 2-byte codes of precision p (fp16 or bf16) back to fp32 into out[0..n).
void dequantize(const uint16_t* q, size_t n, CommPrecision p, float* out);

}  // namespace embedscope::engine
