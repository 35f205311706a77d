#pragma once
// The dense part's matrix-product precision (workload dense.precision, enums.h DensePrecision):
// how a GEMM input is rounded, and the bytes an activation takes. PyTorch AMP's semantics: the
// inputs of each matrix product are rounded to the precision, the product accumulates in fp32,
// and the weights, gradients and optimizer state stay fp32 (the master weights). The cpu backend
// emulates it (model/dense.cpp: the inputs rounded here, then OpenBLAS sgemm on the rounded fp32
// values; outputs fp32), which is exact up to the summation order: a product of two rounded
// inputs (at most 2 x 11 significant bits) is exact in fp32, as on a tensor core.

#include <cstdint>

#include "embedscope/engine/workload/enums.h"

namespace embedscope::engine {

/// `v` rounded to precision `p`, returned as the fp32 value it stands for; round to nearest, ties
/// to even, everywhere:
///   fp32: v unchanged (bit for bit);
///   tf32: 10 explicit mantissa bits (fp32's 8-bit exponent): the low 13 bits of the fp32 pattern
///         rounded off (NVIDIA's TF32; cuBLAS's own conversion on the GPU may truncate instead);
///   bf16: 7 mantissa bits, fp32's exponent: the low 16 bits rounded off (Eigen::bfloat16);
///   fp16: IEEE binary16 (Eigen::half): 10 mantissa bits, normal range 2^-14 .. 65504,
///         subnormals down to 2^-24, beyond 65504 (65520 and up) inf.
/// NaN stays NaN, +-inf stays; tf32 / bf16 overflow to inf past their largest finite value.
/// Examples: bf16(1 + 2^-8) = 1 (a tie, to even), bf16(1 + 3 x 2^-9) = 1 + 2^-7;
/// tf32(1 + 2^-11) = 1, tf32(1 + 3 x 2^-12) = 1 + 2^-10; fp16(1e-8) = 0, fp16(70000) = inf.
float round_dense_value(float v, DensePrecision p);

/// dst[i] = round_dense_value(src[i], p) for i in [0, n); src == dst is allowed. n >= 0.
void round_dense_values(const float* src, int64_t n, DensePrecision p, float* dst);

/// Bytes an activation saved for the backward pass takes at precision `p`: 4 for fp32 and tf32
/// (TF32 is a compute mode: the tensors stay fp32), 2 for bf16 and fp16 (autocast's outputs of
/// matrix products are half precision, and so are the element-wise results computed from them).
int64_t dense_activation_value_bytes(DensePrecision p);

}  // namespace embedscope::engine
