// dst += src on the GPU (cuda_reduce.h): the intra-device communicator's reduction.
#include "common.cuh"
#include "embedscope/engine/kernels/cuda_reduce.h"
#include "embedscope/engine/kernels/dist_pack_core.h"

namespace embedscope::engine::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) add_f32_kernel(int64_t n, float* __restrict__ dst,
                                                           const float* __restrict__ src) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = __fadd_rn(dst[i], src[i]);
}

__global__ void __launch_bounds__(kThreads) scale_copy_2d_kernel(int64_t rows, int64_t width,
                                                                 const float* __restrict__ src, int64_t src_stride,
                                                                 float* __restrict__ dst, int64_t dst_stride, float s) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * width) return;
  const int64_t r = i / width, c = i % width;
  dst[r * dst_stride + c] = dist_pack_core::scaled(src[r * src_stride + c], s);
}

__global__ void __launch_bounds__(kThreads) add_scale_rows_2d_kernel(int64_t rows, int64_t width,
                                                                     const float* __restrict__ src, int64_t src_stride,
                                                                     float* __restrict__ dst, int64_t dst_stride,
                                                                     const float* __restrict__ row_scale,
                                                                     bool accumulate) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * width) return;
  const int64_t r = i / width, c = i % width;
  float* d = dst + r * dst_stride + c;
  *d = dist_pack_core::added_scaled(accumulate ? *d : 0.0f, src[r * src_stride + c], row_scale != nullptr,
                                    row_scale ? row_scale[r] : 1.0f);
}

__global__ void __launch_bounds__(kThreads) scale_copy_rows_2d_kernel(int64_t rows, int64_t width,
                                                                      const float* __restrict__ src, int64_t src_stride,
                                                                      float* __restrict__ dst, int64_t dst_stride,
                                                                      float s, const float* __restrict__ row_scale) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * width) return;
  const int64_t r = i / width, c = i % width;
  dst[r * dst_stride + c] =
      dist_pack_core::twice_scaled(src[r * src_stride + c], s, row_scale != nullptr, row_scale ? row_scale[r] : 1.0f);
}

}  // namespace

void add_scale_rows_2d_cuda(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                            int64_t dst_stride, const float* row_scale, bool accumulate, void* stream) {
  dist_pack_core::check_scale_copy_2d(rows, width, src_stride, dst_stride);
  if (rows == 0 || width == 0) return;
  const int64_t n = rows * width;
  detail::launch("add_scale_rows_2d", "rows=" + std::to_string(rows) + " width=" + std::to_string(width),
                 launch_1d(n, kThreads, kThreads), detail::as_stream(stream), add_scale_rows_2d_kernel, rows, width,
                 src, src_stride, dst, dst_stride, row_scale, accumulate);
}

void scale_copy_rows_2d_cuda(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                             int64_t dst_stride, float s, const float* row_scale, void* stream) {
  dist_pack_core::check_scale_copy_2d(rows, width, src_stride, dst_stride);
  if (rows == 0 || width == 0) return;
  const int64_t n = rows * width;
  detail::launch("scale_copy_rows_2d", "rows=" + std::to_string(rows) + " width=" + std::to_string(width),
                 launch_1d(n, kThreads, kThreads), detail::as_stream(stream), scale_copy_rows_2d_kernel, rows, width,
                 src, src_stride, dst, dst_stride, s, row_scale);
}

void scale_copy_2d_cuda(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                        int64_t dst_stride, float s, void* stream) {
  dist_pack_core::check_scale_copy_2d(rows, width, src_stride, dst_stride);
  if (rows == 0 || width == 0) return;
  const int64_t n = rows * width;
  detail::launch("scale_copy_2d", "rows=" + std::to_string(rows) + " width=" + std::to_string(width),
                 launch_1d(n, kThreads, kThreads), detail::as_stream(stream), scale_copy_2d_kernel, rows, width, src,
                 src_stride, dst, dst_stride, s);
}

void add_f32_cuda(float* dst, const float* src, int64_t n, void* stream) {
  if (n <= 0) return;
  detail::launch("add_f32", "n=" + std::to_string(n), launch_1d(n, kThreads, kThreads), detail::as_stream(stream),
                 add_f32_kernel, n, dst, src);
}

}  // namespace embedscope::engine::cuda
