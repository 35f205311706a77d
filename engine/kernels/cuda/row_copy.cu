// copy_rows_cuda (cuda_row_copy.h): batched row copies between device memory and mapped pinned
// host memory. A block of 8 warps, a warp a row, lanes striding the row's columns.

#include <stdexcept>
#include <string>

#include "common.cuh"
#include "embedscope/engine/kernels/cuda_row_copy.h"

namespace embedscope::engine::cuda {

namespace {

constexpr int kLanes = 32;
constexpr int kRowsPerBlock = 8;

__global__ void __launch_bounds__(kLanes* kRowsPerBlock)
    copy_rows_kernel(int64_t n, int64_t dim, const float* __restrict__ src, const float* __restrict__ src_alt,
                     const int64_t* __restrict__ src_rows, float* __restrict__ dst, float* __restrict__ dst_alt,
                     const int64_t* __restrict__ dst_rows) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.y;
  if (i >= n) return;
  const int64_t s = src_rows ? src_rows[i] : i;
  const int64_t d = dst_rows ? dst_rows[i] : i;
  const float* from = s >= 0 ? src + s * dim : src_alt + (-1 - s) * dim;
  float* to = d >= 0 ? dst + d * dim : dst_alt + (-1 - d) * dim;
  for (int64_t c = threadIdx.x; c < dim; c += kLanes) to[c] = from[c];
}

}  // namespace

void copy_rows_cuda(int64_t n, int64_t dim, const float* src, const float* src_alt, const int64_t* src_rows, float* dst,
                    float* dst_alt, const int64_t* dst_rows, void* stream) {
  if (n < 0 || dim < 0)
    throw std::invalid_argument("copy_rows_cuda: negative size (n=" + std::to_string(n) + ", dim=" + std::to_string(dim) +
                                ")");
  if (n == 0 || dim == 0) return;
  LaunchConfig cfg;
  cfg.grid = {blocks_for(n, kRowsPerBlock), 1, 1};
  cfg.block = {kLanes, kRowsPerBlock, 1};
  detail::launch("copy_rows", "n=" + std::to_string(n) + " dim=" + std::to_string(dim), cfg, detail::as_stream(stream),
                 copy_rows_kernel, n, dim, src, src_alt, src_rows, dst, dst_alt, dst_rows);
}

}  // namespace embedscope::engine::cuda
