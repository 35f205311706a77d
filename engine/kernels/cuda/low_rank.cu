// Low-rank tables on the GPU (cuda_low_rank.h): one thread per output value, each a sum in the
// host kernels' order (kernels/cpu/low_rank.cpp) with products rounded first (__fmul_rn /
// __fadd_rn: no FMA contraction), so the values are the host's bit for bit.

#include <stdexcept>
#include <string>

#include "common.cuh"
#include "embedscope/engine/kernels/cuda_low_rank.h"

namespace embedscope::engine::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) low_rank_project_kernel(int64_t n, int64_t r, int64_t dim,
                                                                    const float* __restrict__ p,
                                                                    const float* __restrict__ b,
                                                                    float* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * dim) return;
  const int64_t row = i / dim, c = i % dim;
  float s = 0.0f;
  for (int64_t k = 0; k < r; ++k) s = __fadd_rn(s, __fmul_rn(p[row * r + k], b[k * dim + c]));
  out[i] = s;
}

__global__ void __launch_bounds__(kThreads) low_rank_da_kernel(int64_t n, int64_t r, int64_t dim,
                                                               const float* __restrict__ b,
                                                               const float* __restrict__ g, float* __restrict__ da) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * r) return;
  const int64_t u = i / r, k = i % r;
  float s = 0.0f;
  for (int64_t c = 0; c < dim; ++c) s = __fadd_rn(s, __fmul_rn(g[u * dim + c], b[k * dim + c]));
  da[i] = s;
}

__global__ void __launch_bounds__(kThreads) low_rank_db_kernel(int64_t n, int64_t r, int64_t dim,
                                                               const float* __restrict__ a,
                                                               const int64_t* __restrict__ row_ids,
                                                               const float* __restrict__ g, float* __restrict__ db) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= r * dim) return;
  const int64_t k = i / dim, c = i % dim;
  float s = 0.0f;
  for (int64_t u = 0; u < n; ++u) s = __fadd_rn(s, __fmul_rn(a[row_ids[u] * r + k], g[u * dim + c]));
  db[i] = s;
}

void check_sizes(const char* what, int64_t n, int64_t r, int64_t dim) {
  if (n < 0 || r < 0 || dim < 0)
    throw std::invalid_argument(std::string(what) + ": negative size (n=" + std::to_string(n) + ", r=" +
                                std::to_string(r) + ", dim=" + std::to_string(dim) + ")");
}

}  // namespace

void low_rank_project_cuda(int64_t n, int64_t r, int64_t dim, const float* p, const float* b, float* out, void* stream) {
  check_sizes("low_rank_project_cuda", n, r, dim);
  if (n == 0 || dim == 0) return;
  detail::launch("low_rank_project", "n=" + std::to_string(n) + " r=" + std::to_string(r) + " dim=" + std::to_string(dim),
                 launch_1d(n * dim, kThreads, kThreads), detail::as_stream(stream), low_rank_project_kernel, n, r, dim,
                 p, b, out);
}

void low_rank_backward_cuda(int64_t n, int64_t r, int64_t dim, const float* a, const int64_t* row_ids, const float* b,
                            const float* g, float* da, float* db, void* stream) {
  check_sizes("low_rank_backward_cuda", n, r, dim);
  const std::string shapes = "n=" + std::to_string(n) + " r=" + std::to_string(r) + " dim=" + std::to_string(dim);
  if (n > 0 && r > 0)
    detail::launch("low_rank_da", shapes, launch_1d(n * r, kThreads, kThreads), detail::as_stream(stream),
                   low_rank_da_kernel, n, r, dim, b, g, da);
  if (r > 0 && dim > 0)
    detail::launch("low_rank_db", shapes, launch_1d(r * dim, kThreads, kThreads), detail::as_stream(stream),
                   low_rank_db_kernel, n, r, dim, a, row_ids, g, db);
}

}  // namespace embedscope::engine::cuda
