#pragma once
// The dense part's loss and optimizer on the GPU (built with EMBEDSCOPE_WITH_CUDA; link
// embedscope::engine_cuda). Host API only, no CUDA header needed; conventions as
// cuda_kernels.h: device pointers, `stream` a cudaStream_t as void* (nullptr: the legacy default
// stream), launches through the checked launcher (LaunchError naming the kernel and its
// shapes), other runtime errors as CudaError. The arithmetic per element is dense_core.h's,
// shared with the host (DenseModel), so the host tests of dense_core test these kernels' math.

#include <cstdint>

namespace embedscope::engine::cuda {

/// Binary cross-entropy with logits over a batch, forward and backward, on the device:
///   dlogits[i] = (sigmoid(logits[i]) - labels[i]) / B                 (float, B values)
///   *loss      = (1 / B) * sum_i max(z, 0) - z y + log1p(exp(-|z|))   (double, one value)
/// per element dense_core::bce_with_logits_term. logits, labels, dlogits: B floats; loss: one
/// double, all device memory. The sum runs in one block (256 threads, each a strided partial
/// sum, then a fixed tree): deterministic, but in another order than the host's loop (the
/// difference is in the last places of a double). B == 0 writes *loss = 0 and nothing else.
/// Asynchronous on `stream`. Throws std::invalid_argument for B < 0 or B > 2^31 - 1.
void bce_with_logits_cuda(int64_t B, const float* logits, const float* labels, float* dlogits, double* loss,
                          void* stream = nullptr);

/// Plain SGD on n fp32 parameters on the device: params[i] = params[i] - lr * grad[i]
/// (dense_core::sgd_update: the product rounded before the subtraction, no FMA, so the result is
/// bit-identical to the host loop). params, grad: n floats of device memory. Asynchronous on
/// `stream`; n == 0 launches nothing. Throws std::invalid_argument for n < 0.
void sgd_step_cuda(int64_t n, float lr, const float* grad, float* params, void* stream = nullptr);

/// DLRM's dot interaction forward on the device (kernels/cuda/interaction.cu): x0 is B rows of
/// F + 1 entities of d0 floats (the bottom MLP's output, then the F pooled embeddings); r gets
/// B rows of dense_core::dot_out_width(F, d0) = d0 + (F + 1) F / 2 floats: entity 0 copied,
/// then <e_a, e_b> for a = 1..F, b < a (dense_core::dot_forward_element per element, bit for bit
/// the host loop of DenseModel). Device memory; asynchronous on `stream`. Throws
/// std::invalid_argument for B < 0, F < 0 or d0 < 1.
void dot_interaction_forward_cuda(int64_t B, int64_t F, int64_t d0, const float* x0, float* r, void* stream = nullptr);

/// Backward of dot_interaction_forward_cuda: dx0 (B x (F + 1) d0 floats, overwritten) from x0
/// and the gradient dr of r (B x dot_out_width(F, d0)); dense_core::dot_backward_element per
/// element. Device memory; asynchronous on `stream`. Errors as the forward.
void dot_interaction_backward_cuda(int64_t B, int64_t F, int64_t d0, const float* x0, const float* dr, float* dx0,
                                   void* stream = nullptr);

}  // namespace embedscope::engine::cuda
