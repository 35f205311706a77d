// The dense op's GEMM rate per dense.precision (cost/dense_gemm_rate.h).
#include "embedscope/engine/cost/dense_gemm_rate.h"

#include <fmt/format.h>

namespace embedscope::engine {

DenseGemmRate dense_gemm_rate(const GpuProfile& g, DensePrecision p) {
  const DenseGemmRate fp32{g.dense_flops_per_s, g.dense_efficiency, false};
  switch (p) {
    case DensePrecision::fp32: return fp32;
    case DensePrecision::tf32:
      if (g.dense_tf32_flops_per_s > 0 && g.dense_tf32_efficiency > 0)
        return {g.dense_tf32_flops_per_s, g.dense_tf32_efficiency, false};
      break;
    case DensePrecision::bf16:
    case DensePrecision::fp16:
      if (g.dense_bf16_flops_per_s > 0 && g.dense_bf16_efficiency > 0)
        return {g.dense_bf16_flops_per_s, g.dense_bf16_efficiency, false};
      break;
  }
  return {fp32.peak_flops_per_s, fp32.efficiency, true};
}

std::string dense_precision_text(DensePrecision p, const HardwareProfile* hw) {
  const char* name = to_string(p);
  std::string what = p == DensePrecision::fp32
                         ? std::string("fp32 GEMMs")
                         : fmt::format("AMP: GEMM inputs rounded to {}, fp32 accumulation and weights", name);
  if (hw == nullptr) {
    if (p != DensePrecision::fp32) what += "; emulated on the CPU with fp32 sgemm";
    return fmt::format("{} ({})", name, what);
  }
  const DenseGemmRate r = dense_gemm_rate(hw->gpu, p);
  const std::string rate = fmt::format("{:g} TFLOP/s x {:g}", r.peak_flops_per_s * 1e-12, r.efficiency);
  if (p == DensePrecision::fp32) return fmt::format("fp32 (GEMMs timed at {}, fp32)", rate);
  if (r.fell_back)
    return fmt::format("{} ({}; GEMMs timed at the fp32 rate {}: profile {} gives no {} rate)", name, what, rate,
                       hw->name, p == DensePrecision::tf32 ? "tf32" : "bf16 / fp16");
  return fmt::format("{} ({}; GEMMs timed at {}'s {} tensor-core rate {})", name, what, hw->name, name, rate);
}

}  // namespace embedscope::engine
