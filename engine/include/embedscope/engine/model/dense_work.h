#pragma once
// What one dense forward/backward does, by kind of code (issue 15, dense44): the BLAS GEMMs,
// the dot interaction's per-element products, and the element-wise passes (bias and ReLU,
// copies, zero-filled buffers, the DCN-v2 cross layers' element products, the loss). The cost
// model times each kind at its own rate (cost/cost_model.h compute_ns); DenseModel::work gives
// the counts from the model's layout (model/dense.h), the one definition.

#include <cstdint>

namespace embedscope::engine {

/// One GEMM: m x k times k x n, fp32 (BLAS sgemm's m, n, k as called).
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  /// 2 m n k floating-point operations (a multiply and an add per term).
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
  bool operator==(const GemmShape&) const = default;
};

/// The work of one dense forward/backward on a batch, in three counts, each >= 0.
struct DenseWork {
  int64_t gemm_flops = 0;       ///< 2 m n k summed over the GEMMs (DenseModel::gemms)
  /// The dot interaction's multiply-adds (per-element code, kernels/dense_core.h): forward
  /// B x d0 x (F + 1) F / 2 (one d0-long product per pair), backward B x (F + 1) d0 x F (each
  /// input element sums the F pairs holding its entity). 0 for cat, DCN-v2 and no dense part.
  int64_t interaction_ops = 0;
  /// Floats written by the element-wise code outside the GEMMs and the interaction's products:
  /// buffers zero-filled when allocated, copies, bias + ReLU, ReLU masks, bias-gradient sums,
  /// the DCN-v2 layers' element products, the loss (DenseModel::work lists them).
  int64_t elementwise_ops = 0;
  bool empty() const { return gemm_flops == 0 && interaction_ops == 0 && elementwise_ops == 0; }
  bool operator==(const DenseWork&) const = default;
};

}  // namespace embedscope::engine
