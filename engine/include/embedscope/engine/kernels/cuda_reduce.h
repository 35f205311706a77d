#pragma once
// The reduction of the intra-device communicator (comm/local/local_comm.h) on a GPU: dst += src
// elementwise in fp32 (reduce-scatter and all-reduce between ranks on one GPU); and the scaled
// 2-D copies that pack and unpack the table_wise / column_wise and row-split dists
// (dist_pack_core.h). In
// embedscope_engine_cuda (kernels/cuda/reduce.cu), compiled in every CUDA build; a header of its
// own so that cuda_kernels.h's many includers are not rebuilt for it.

#include <cstdint>

namespace embedscope::engine::cuda {

/// dst[i] += src[i] for 0 <= i < n (device pointers, fp32, round to nearest), one thread per
/// element, on `stream` (a cudaStream_t as void*; nullptr: the legacy default stream).
/// Asynchronous. Nothing for n <= 0; throws LaunchError (cuda_kernels.h) when the launch fails.
void add_f32_cuda(float* dst, const float* src, int64_t n, void* stream);

/// dist_pack_core::scale_copy_2d (dist_pack_core.h) on device pointers: dst[r * dst_stride + c]
/// = src[r * src_stride + c] * s (fp32, round to nearest, no FMA) for r < rows, c < width
/// (strides and width in floats), one thread per element, on `stream` (as add_f32_cuda). The
/// packing of the table_wise / column_wise gradient dist (1 / W scaling of the pooled-embedding
/// gradients fused in). Asynchronous; nothing for rows or width 0; std::invalid_argument for a
/// negative size or a stride below width; LaunchError when the launch fails.
void scale_copy_2d_cuda(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                        int64_t dst_stride, float s, void* stream);

/// dist_pack_core::add_scale_rows_2d on device pointers (row_scale: device memory, `rows` floats,
/// or nullptr): the row_wise / table_row_wise output dist's unpacking of the reduced sums into
/// the pooled output with the mean scaling, one thread per element, on `stream`. Asynchronous;
/// nothing for rows or width 0; std::invalid_argument for a negative size or a stride below
/// width; LaunchError when the launch fails.
void add_scale_rows_2d_cuda(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                            int64_t dst_stride, const float* row_scale, bool accumulate, void* stream);

/// dist_pack_core::scale_copy_rows_2d on device pointers (row_scale as above): the row_wise /
/// table_row_wise gradient dist's packing (1 / W and the mean scale fused in). As
/// add_scale_rows_2d_cuda otherwise.
void scale_copy_rows_2d_cuda(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                             int64_t dst_stride, float s, const float* row_scale, void* stream);

}  // namespace embedscope::engine::cuda
