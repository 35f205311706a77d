#pragma once
// The rate at which the cost model times the dense op's GEMMs for each dense.precision
// (workload/enums.h DensePrecision), from a hardware profile (hardware_profile.h):
//   fp32:        dense_flops_per_s x dense_efficiency (CUDA cores: PyTorch's default, no TF32);
//   tf32:        dense_tf32_flops_per_s x dense_tf32_efficiency (tensor cores);
//   bf16, fp16:  dense_bf16_flops_per_s x dense_bf16_efficiency (tensor cores; the two run at the
//                same rate on A100 / H100 / H200, NVIDIA's datasheets).
// A profile without the precision's rate (a calibration's cpu profile, `this_machine`, a file
// without the optional fields) times it at its fp32 rate - the engine's cpu ranks compute every
// precision with fp32 sgemm on rounded inputs (model/dense.h) - and the run and plan say so
// (dense_precision_text). cost_model.h math_seconds uses the rate for the GEMM term.

#include <string>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/workload/enums.h"

namespace embedscope::engine {

/// A GEMM rate of a profile: peak x efficiency is what the cost model divides GEMM flops by.
struct DenseGemmRate {
  double peak_flops_per_s = 0;  ///< the profile's peak for the precision (or fp32's, see fell_back), flop/s
  double efficiency = 0;        ///< the fraction of it achieved, (0, 1]
  /// true: the profile gives no rate for the precision and the fp32 rate stands in for it.
  bool fell_back = false;
  double flops_per_s() const { return peak_flops_per_s * efficiency; }
};

/// The rate of precision `p` on GPU profile `g`, as the header says. Example (h100_sxm): fp32
/// 67e12 x 0.5, tf32 494.7e12 x 0.6, bf16 and fp16 989.4e12 x 0.6; on a profile without
/// dense_bf16_flops_per_s, bf16 is {dense_flops_per_s, dense_efficiency, fell_back true}.
DenseGemmRate dense_gemm_rate(const GpuProfile& g, DensePrecision p);

/// One line for people: how the dense part runs at precision `p`, and on a simulated profile
/// `hw` (nullptr: a real run) at what rate its GEMMs are timed. Examples:
///   "fp32 (fp32 GEMMs)" (no profile), "fp32 (GEMMs timed at 67 TFLOP/s x 0.5, fp32)";
///   "bf16 (AMP: GEMM inputs rounded to bf16, fp32 accumulation and weights; emulated on the CPU
///    with fp32 sgemm)" (no profile);
///   "bf16 (AMP: ...; GEMMs timed at h100_sxm's bf16 tensor-core rate 989.4 TFLOP/s x 0.6)";
///   "bf16 (AMP: ...; GEMMs timed at the fp32 rate 0.02 TFLOP/s x 1: profile this_machine gives
///    no bf16 rate)".
std::string dense_precision_text(DensePrecision p, const HardwareProfile* hw);

}  // namespace embedscope::engine
