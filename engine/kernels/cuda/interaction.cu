// DLRM's dot interaction on the GPU, forward and backward (cuda_dense_ops.h). The per-element
// arithmetic is dense_core.h's (dot_forward_element / dot_backward_element), shared with the
// host's DenseModel: one thread per output element, each computed as the host computes it.

#include <string>

#include "common.cuh"
#include "embedscope/engine/kernels/cuda_dense_ops.h"
#include "embedscope/engine/kernels/dense_core.h"

namespace embedscope::engine::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) dot_forward_kernel(int64_t B, int64_t F, int64_t d0,
                                                               const float* __restrict__ x0, float* __restrict__ r) {
  const int64_t in_w = (F + 1) * d0, out_w = dense_core::dot_out_width(F, d0);
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= B * out_w) return;
  const int64_t i = t / out_w, k = t % out_w;
  r[t] = dense_core::dot_forward_element(x0 + i * in_w, F, d0, k);
}

__global__ void __launch_bounds__(kThreads) dot_backward_kernel(int64_t B, int64_t F, int64_t d0,
                                                                const float* __restrict__ x0,
                                                                const float* __restrict__ dr, float* __restrict__ dx0) {
  const int64_t in_w = (F + 1) * d0, out_w = dense_core::dot_out_width(F, d0);
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= B * in_w) return;
  const int64_t i = t / in_w, j = t % in_w;
  dx0[t] = dense_core::dot_backward_element(x0 + i * in_w, dr + i * out_w, F, d0, j);
}

void check_dot_sizes(const char* fn, int64_t B, int64_t F, int64_t d0) {
  if (B < 0 || F < 0 || d0 < 1)
    throw std::invalid_argument(std::string(fn) + ": B=" + std::to_string(B) + " F=" + std::to_string(F) +
                                " d0=" + std::to_string(d0) + " (need B >= 0, F >= 0, d0 >= 1)");
}

std::string dot_shapes(int64_t B, int64_t F, int64_t d0) {
  return "B=" + std::to_string(B) + " F=" + std::to_string(F) + " d0=" + std::to_string(d0);
}

}  // namespace

void dot_interaction_forward_cuda(int64_t B, int64_t F, int64_t d0, const float* x0, float* r, void* stream) {
  check_dot_sizes("dot_interaction_forward_cuda", B, F, d0);
  const int64_t n = B * dense_core::dot_out_width(F, d0);
  if (n == 0) return;
  detail::launch("dot_interaction_forward", dot_shapes(B, F, d0), launch_1d(n, kThreads, kThreads),
                 detail::as_stream(stream), dot_forward_kernel, B, F, d0, x0, r);
}

void dot_interaction_backward_cuda(int64_t B, int64_t F, int64_t d0, const float* x0, const float* dr, float* dx0,
                                   void* stream) {
  check_dot_sizes("dot_interaction_backward_cuda", B, F, d0);
  const int64_t n = B * (F + 1) * d0;
  if (n == 0) return;
  detail::launch("dot_interaction_backward", dot_shapes(B, F, d0), launch_1d(n, kThreads, kThreads),
                 detail::as_stream(stream), dot_backward_kernel, B, F, d0, x0, dr, dx0);
}

}  // namespace embedscope::engine::cuda
