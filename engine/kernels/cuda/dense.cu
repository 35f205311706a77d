// Dense layers with cuBLAS (cuda_kernels.h); CPU reference: linear_forward / linear_backward
// (dense.h). Row-major matrices are passed to column-major cuBLAS as their transposes:
//   y^T[out x B]  = W[out x in] x^T[in x B]     sgemm(T, N, out, B, in, w, in, x, in, y, out)
//   dw^T[in x out] = x^T[in x B] dy[B x out]    sgemm(N, T, in, out, B, x, in, dy, out, dw, in)
//   dx^T[in x B]  = W^T[in x out] dy^T[out x B] sgemm(N, N, in, B, out, w, in, dy, out, dx, in)

#include <cublas_v2.h>

#include <climits>
#include <string>

#include "common.cuh"

namespace embedscope::engine::cuda {

using detail::check;

namespace {

constexpr int kThreads = 256;

void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string(what) + ": " + cublasGetStatusName(s) + ": " + cublasGetStatusString(s));
}

cublasHandle_t handle_of(const Blas& b) { return static_cast<cublasHandle_t>(b.handle()); }

__global__ void __launch_bounds__(kThreads) bias_relu_kernel(int64_t n, int64_t out, const float* __restrict__ b,
                                                             bool relu, float* __restrict__ y) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = __fadd_rn(y[i], b[i % out]);
  if (relu && v < 0) v = 0;
  y[i] = v;
}

__global__ void __launch_bounds__(kThreads) relu_mask_kernel(int64_t n, const float* __restrict__ y,
                                                             float* __restrict__ dy) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n && y[i] <= 0) dy[i] = 0;
}

// db[o] = sum over i in batch order of dy[i * out + o]; one thread per column (coalesced rows).
__global__ void __launch_bounds__(kThreads) bias_grad_kernel(int64_t B, int64_t out, const float* __restrict__ dy,
                                                             float* __restrict__ db) {
  const int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= out) return;
  float s = 0.0f;
  for (int64_t i = 0; i < B; ++i) s = __fadd_rn(s, dy[i * out + o]);
  db[o] = s;
}

void check_sizes(const char* fn, int64_t B, int64_t in, int64_t out) {
  for (int64_t v : {B, in, out})
    if (v < 0 || v > INT_MAX)
      throw std::invalid_argument(std::string(fn) + ": sizes B=" + std::to_string(B) + " in=" + std::to_string(in) +
                                  " out=" + std::to_string(out) + " outside [0, 2^31 - 1]");
}

std::string shapes_of(int64_t B, int64_t in, int64_t out) {
  return "B=" + std::to_string(B) + " in=" + std::to_string(in) + " out=" + std::to_string(out);
}

}  // namespace

Blas::Blas(void* stream) : stream_(stream) {
  cublasHandle_t h = nullptr;
  check_blas(cublasCreate(&h), "cublasCreate");
  handle_ = h;
  check_blas(cublasSetStream(h, detail::as_stream(stream)), "cublasSetStream");
  check_blas(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
}

Blas::~Blas() {
  if (handle_ != nullptr) cublasDestroy(static_cast<cublasHandle_t>(handle_));
}

void linear_forward_cuda(Blas& blas, int64_t B, int64_t in, int64_t out, const float* x, const float* w,
                         const float* b, bool relu, float* y) {
  check_sizes("linear_forward_cuda", B, in, out);
  if (B == 0 || out == 0) return;
  const float one = 1.0f, zero = 0.0f;
  check_blas(cublasSgemm(handle_of(blas), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(B),
                         static_cast<int>(in), &one, w, static_cast<int>(in), x, static_cast<int>(in), &zero, y,
                         static_cast<int>(out)),
             "cublasSgemm (linear forward)");
  detail::launch("linear_bias_relu", shapes_of(B, in, out), launch_1d(B * out, kThreads, kThreads),
                 detail::as_stream(blas.stream()), bias_relu_kernel, B * out, out, b, relu, y);
}

void linear_backward_cuda(Blas& blas, int64_t B, int64_t in, int64_t out, const float* x, const float* w,
                          const float* y, bool relu, float* dy, float* dw, float* db, float* dx) {
  check_sizes("linear_backward_cuda", B, in, out);
  const cudaStream_t stream = detail::as_stream(blas.stream());
  const std::string shapes = shapes_of(B, in, out);
  if (B == 0) {  // no samples: zero gradients of the parameters, as the CPU BLAS with k = 0
    check(cudaMemsetAsync(dw, 0, static_cast<size_t>(out * in) * sizeof(float), stream), "cudaMemsetAsync (dw)");
    check(cudaMemsetAsync(db, 0, static_cast<size_t>(out) * sizeof(float), stream), "cudaMemsetAsync (db)");
    return;
  }
  if (relu)
    detail::launch("linear_relu_mask", shapes, launch_1d(B * out, kThreads, kThreads), stream, relu_mask_kernel,
                   B * out, y, dy);
  const float one = 1.0f, zero = 0.0f;
  if (out > 0 && in > 0)
    check_blas(cublasSgemm(handle_of(blas), CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(in), static_cast<int>(out),
                           static_cast<int>(B), &one, x, static_cast<int>(in), dy, static_cast<int>(out), &zero, dw,
                           static_cast<int>(in)),
               "cublasSgemm (linear backward, dw)");
  detail::launch("linear_bias_grad", shapes, launch_1d(out, kThreads, kThreads), stream, bias_grad_kernel, B, out, dy,
                 db);
  if (dx != nullptr && in > 0) {
    if (out == 0) {
      check(cudaMemsetAsync(dx, 0, static_cast<size_t>(B * in) * sizeof(float), stream), "cudaMemsetAsync (dx)");
      return;
    }
    check_blas(cublasSgemm(handle_of(blas), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(in), static_cast<int>(B),
                           static_cast<int>(out), &one, w, static_cast<int>(in), dy, static_cast<int>(out), &zero, dx,
                           static_cast<int>(in)),
               "cublasSgemm (linear backward, dx)");
  }
}

}  // namespace embedscope::engine::cuda
