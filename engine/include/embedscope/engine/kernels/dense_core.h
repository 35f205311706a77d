#pragma once
// The per-element arithmetic of the dense part's loss and optimizer, written once for the host
// and the GPU (issue 14: "move the host parts of the step to the GPU"). DenseModel
// (model/dense.cpp) calls these on the host; the CUDA kernels bce_with_logits_cuda and
// sgd_step_cuda (cuda_dense_ops.h, kernels/cuda/loss_sgd.cu) call the same functions per element,
// so the host tests of these functions test the kernels' arithmetic.
//
// Rounding: every product and sum is rounded on its own (no fused multiply-add): on the device
// through the __*_rn intrinsics, which nvcc never contracts; on the host the compiler does not
// contract across the separate statements used below. So sgd_update is bit-identical on both;
// bce_with_logits_term differs only by the last-place differences of the device's exp / log1p
// (CUDA's double exp and log1p: at most 1-2 ulp) from the host's libm.
//
// Header only, no CUDA header needed: EMBEDSCOPE_HD is `__host__ __device__` under nvcc and
// empty otherwise.

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define EMBEDSCOPE_HD __host__ __device__
#else
#define EMBEDSCOPE_HD
#endif

namespace embedscope::engine::dense_core {

/// a * b rounded to double (no fusing with a later add).
EMBEDSCOPE_HD inline double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
/// a + b rounded to double.
EMBEDSCOPE_HD inline double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

/// One sample's binary cross-entropy with logits (torch.nn.BCEWithLogitsLoss, numerically
/// stable form) and its gradient for a mean over `batch` samples.
struct BceTerm {
  double loss = 0;    ///< max(z, 0) - z y + log1p(exp(-|z|)), in double (not yet divided by batch)
  float dlogit = 0;   ///< (sigmoid(z) - y) / batch, rounded to float
};

/// The BCE term of logit z and label y (0 or 1; any real is accepted) for a batch of `batch`
/// samples (>= 1; the caller skips empty batches). Computed in double from the float inputs.
/// max(z, 0) follows std::max (a NaN logit gives a NaN loss and gradient, which the trainer's
/// divergence check reports).
EMBEDSCOPE_HD inline BceTerm bce_with_logits_term(float logit, float label, int64_t batch) {
  const double z = logit, y = label;
  const double pos = z < 0.0 ? 0.0 : z;  // std::max(z, 0.0): z when z is NaN
  const double zy = mul_rn(z, y);
  const double soft = log1p(exp(-fabs(z)));
  BceTerm t;
  t.loss = add_rn(pos - zy, soft);
  const double sig = 1.0 / add_rn(1.0, exp(-z));
  t.dlogit = static_cast<float>((sig - y) / static_cast<double>(batch));
  return t;
}

/// One parameter of plain SGD: p - lr * g, the product rounded to float before the subtraction
/// (as `p -= lr * g` on the host without FMA).
EMBEDSCOPE_HD inline float sgd_update(float p, float g, float lr) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(p, __fmul_rn(lr, g));
#else
  const float step = lr * g;
  return p - step;
#endif
}

/// a * b rounded to float (no fusing with a later add).
EMBEDSCOPE_HD inline float mulf_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
/// a + b rounded to float.
EMBEDSCOPE_HD inline float addf_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// ---- DLRM's dot interaction ----------------------------------------------------------------
// A sample's interaction input x0 is F + 1 entities of d0 floats each (e_0 = the bottom MLP's
// output, e_{f+1} = pooled embedding f), row-major: row[e * d0 + c]. Its output r has
// dot_out_width(F, d0) floats: r[c] = e_0[c] for c < d0, then r[d0 + a (a - 1) / 2 + b] =
// <e_a, e_b> for a = 1..F, b = 0..a-1 (TorchRec's DLRM with the upper triangle in this order).

/// d0 + (F + 1) F / 2: the width of the dot interaction's output per sample.
EMBEDSCOPE_HD inline int64_t dot_out_width(int64_t F, int64_t d0) { return d0 + (F + 1) * F / 2; }

/// r[k] of one sample (k < dot_out_width(F, d0)); row: (F + 1) * d0 floats. The dot product
/// is summed in fp32 in column order from 0, each product rounded on its own.
EMBEDSCOPE_HD inline float dot_forward_element(const float* row, int64_t F, int64_t d0, int64_t k) {
  if (k < d0) return row[k];
  int64_t p = k - d0, a = 1;
  while (a <= F && p >= a) p -= a++;  // pair (a, b = p)
  const float* ea = row + a * d0;
  const float* eb = row + p * d0;
  float s = 0.0f;
  for (int64_t c = 0; c < d0; ++c) s = addf_rn(s, mulf_rn(ea[c], eb[c]));
  return s;
}

/// d x0[j] of one sample (j < (F + 1) * d0) given the sample's input row and the gradient g of
/// its output (dot_out_width(F, d0) floats): g[j] for entity 0's own copy, plus, over the pairs
/// (a, b) holding entity e = j / d0 in pair order, g_pair * (the other entity's column c). The
/// order is that of the host loop over pairs, so host and device agree bit for bit.
EMBEDSCOPE_HD inline float dot_backward_element(const float* row, const float* g, int64_t F, int64_t d0, int64_t j) {
  const int64_t e = j / d0, c = j % d0;
  float s = 0.0f;
  if (e == 0) s = addf_rn(s, g[c]);
  for (int64_t b = 0; b < e; ++b)  // pairs (e, b): before every pair (a > e, e)
    s = addf_rn(s, mulf_rn(g[d0 + e * (e - 1) / 2 + b], row[b * d0 + c]));
  for (int64_t a = e + 1; a <= F; ++a) s = addf_rn(s, mulf_rn(g[d0 + a * (a - 1) / 2 + e], row[a * d0 + c]));
  return s;
}

}  // namespace embedscope::engine::dense_core
