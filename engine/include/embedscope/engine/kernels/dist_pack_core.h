#pragma once
// The packing of the table_wise / column_wise gradient dist on a device (issue 14: "dist packing
// ... on the GPU"), written once for the host and the GPU: the pooled embeddings' gradients of a
// slot (B x cols of a feature's B x dim block, from its column col_offset), scaled by 1 / W (the
// gradient of the global-batch mean loss), into the send buffer (B x cols, contiguous). The CUDA
// kernel scale_copy_2d_cuda (cuda_reduce.h, kernels/cuda/reduce.cu) calls scaled() per element;
// the host stand-in of the device (exec/device/rank_device.cpp) runs scale_copy_2d below. The CPU
// backend computes the same product in place (dpooled[i] *= 1 / W, exec/threaded/rank_train.cpp)
// before its memcpy: one fp32 multiplication rounded to nearest (no FMA), so all three are
// bit-equal.
//
// Header only, no CUDA header needed: EMBEDSCOPE_HD is `__host__ __device__` under nvcc.

#include <cstdint>
#include <stdexcept>
#include <string>

#include "embedscope/engine/kernels/dense_core.h"  // EMBEDSCOPE_HD, mulf_rn

namespace embedscope::engine::dist_pack_core {

/// One element: x * s rounded to nearest (fp32).
EMBEDSCOPE_HD inline float scaled(float x, float s) { return dense_core::mulf_rn(x, s); }

/// Throws std::invalid_argument naming the bad argument: rows, width < 0, strides < width.
inline void check_scale_copy_2d(int64_t rows, int64_t width, int64_t src_stride, int64_t dst_stride) {
  if (rows < 0 || width < 0)
    throw std::invalid_argument("scale_copy_2d: rows " + std::to_string(rows) + " and width " + std::to_string(width) +
                                " must be >= 0");
  if (rows > 0 && width > 0 && (src_stride < width || dst_stride < width))
    throw std::invalid_argument("scale_copy_2d: strides (src " + std::to_string(src_stride) + ", dst " +
                                std::to_string(dst_stride) + " floats) must be >= width " + std::to_string(width));
}

/// dst[r * dst_stride + c] = scaled(src[r * src_stride + c], s) for r < rows, c < width (strides
/// and width in floats; dst and src do not overlap). Nothing for rows or width 0. Throws what
/// check_scale_copy_2d throws.
inline void scale_copy_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                          int64_t dst_stride, float s) {
  check_scale_copy_2d(rows, width, src_stride, dst_stride);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c) dst[r * dst_stride + c] = scaled(src[r * src_stride + c], s);
}

// The row-split dists (row_wise, table_row_wise / grid_shard) on a device: the reduced partial
// sums of a block (B x cols) added into its columns of the feature's pooled output (B x dim,
// holding the bags' hot-row sums or nothing) and divided by the full bag length for mean pooling
// (row_wise.cpp: out += in, then rows *= 1 / len; table_row_wise.cpp: (row + block) * sc); and
// backward the gradients (B x cols of a feature's B x dim block) scaled by 1 / W and then by the
// bag's mean scale, as the host path's dpooled *= 1 / W followed by scale_rows_mean. Each element
// one or two fp32 operations rounded to nearest (no FMA), in the host path's order, so the GPU
// kernels (add_scale_rows_2d_cuda, scale_copy_rows_2d_cuda), the stand-in (these loops) and the
// cpu backend are bit-equal.

/// One element of the forward: (base + x) * row_scale when scaled, else base + x.
EMBEDSCOPE_HD inline float added_scaled(float base, float x, bool scaled_row, float row_scale) {
  const float v = dense_core::addf_rn(base, x);
  return scaled_row ? dense_core::mulf_rn(v, row_scale) : v;
}

/// dst[r * dst_stride + c] = added_scaled(accumulate ? dst[...] : 0.0f, src[r * src_stride + c],
/// row_scale != nullptr, row_scale[r]) for r < rows, c < width (strides and width in floats; dst
/// and src do not overlap; row_scale: `rows` floats or nullptr for none). `accumulate` false: dst
/// is not read (0 + x, as the host's += into a zeroed buffer). Throws what check_scale_copy_2d
/// throws (with this function's name).
inline void add_scale_rows_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                              int64_t dst_stride, const float* row_scale, bool accumulate) {
  check_scale_copy_2d(rows, width, src_stride, dst_stride);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c) {
      float& d = dst[r * dst_stride + c];
      d = added_scaled(accumulate ? d : 0.0f, src[r * src_stride + c], row_scale != nullptr,
                       row_scale ? row_scale[r] : 1.0f);
    }
}

/// One element of the backward: (x * s) * row_scale when scaled, else x * s.
EMBEDSCOPE_HD inline float twice_scaled(float x, float s, bool scaled_row, float row_scale) {
  const float v = dense_core::mulf_rn(x, s);
  return scaled_row ? dense_core::mulf_rn(v, row_scale) : v;
}

/// dst[r * dst_stride + c] = twice_scaled(src[r * src_stride + c], s, row_scale != nullptr,
/// row_scale[r]) for r < rows, c < width (as scale_copy_2d, then each row times its scale;
/// row_scale: `rows` floats or nullptr). Throws what check_scale_copy_2d throws.
inline void scale_copy_rows_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                               int64_t dst_stride, float s, const float* row_scale) {
  check_scale_copy_2d(rows, width, src_stride, dst_stride);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c)
      dst[r * dst_stride + c] =
          twice_scaled(src[r * src_stride + c], s, row_scale != nullptr, row_scale ? row_scale[r] : 1.0f);
}

}  // namespace embedscope::engine::dist_pack_core
