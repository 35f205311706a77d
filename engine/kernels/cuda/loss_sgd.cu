// The dense part's BCE-with-logits loss and SGD step on the GPU (cuda_dense_ops.h). The
// per-element arithmetic is dense_core.h's, shared with the host's DenseModel.

#include <climits>
#include <stdexcept>
#include <string>

#include "common.cuh"
#include "embedscope/engine/kernels/cuda_dense_ops.h"
#include "embedscope/engine/kernels/dense_core.h"

namespace embedscope::engine::cuda {

namespace {

constexpr int kLossThreads = 256;  // one block: a power of two for the tree below
constexpr int kSgdThreads = 256;

// One block: thread t handles samples t, t + 256, ... (its partial sum in that order), then the
// partial sums are added by a fixed tree, so the result does not depend on scheduling.
__global__ void __launch_bounds__(kLossThreads) bce_with_logits_kernel(int64_t B, const float* __restrict__ logits,
                                                                       const float* __restrict__ labels,
                                                                       float* __restrict__ dlogits,
                                                                       double* __restrict__ loss) {
  __shared__ double part[kLossThreads];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < B; i += kLossThreads) {
    const dense_core::BceTerm t = dense_core::bce_with_logits_term(logits[i], labels[i], B);
    dlogits[i] = t.dlogit;
    s = dense_core::add_rn(s, t.loss);
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = kLossThreads / 2; w > 0; w /= 2) {
    if (static_cast<int>(threadIdx.x) < w) part[threadIdx.x] = dense_core::add_rn(part[threadIdx.x], part[threadIdx.x + w]);
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = B > 0 ? part[0] / static_cast<double>(B) : 0.0;
}

__global__ void __launch_bounds__(kSgdThreads) sgd_step_kernel(int64_t n, float lr, const float* __restrict__ grad,
                                                               float* __restrict__ params) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) params[i] = dense_core::sgd_update(params[i], grad[i], lr);
}

}  // namespace

void bce_with_logits_cuda(int64_t B, const float* logits, const float* labels, float* dlogits, double* loss,
                          void* stream) {
  if (B < 0 || B > INT_MAX)
    throw std::invalid_argument("bce_with_logits_cuda: batch size B=" + std::to_string(B) + " outside [0, 2^31 - 1]");
  LaunchConfig cfg;  // one block of kLossThreads, also for B == 0 (it writes the zero loss)
  cfg.grid = {1, 1, 1};
  cfg.block = {kLossThreads, 1, 1};
  detail::launch("bce_with_logits", "B=" + std::to_string(B), cfg, detail::as_stream(stream), bce_with_logits_kernel,
                 B, logits, labels, dlogits, loss);
}

void sgd_step_cuda(int64_t n, float lr, const float* grad, float* params, void* stream) {
  if (n < 0) throw std::invalid_argument("sgd_step_cuda: parameter count n=" + std::to_string(n) + " is negative");
  if (n == 0) return;
  detail::launch("sgd_step", "n=" + std::to_string(n), launch_1d(n, kSgdThreads, kSgdThreads),
                 detail::as_stream(stream), sgd_step_kernel, n, lr, grad, params);
}

}  // namespace embedscope::engine::cuda
