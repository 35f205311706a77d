#pragma once
// CPU kernels of low-rank tables (model/low_rank.h: E = A B, A rows x r, B r x dim, fp32).
// No CUDA kernels: low-rank tables run on the cpu backend only.

#include <cstdint>
#include <utility>

#include "embedscope/engine/kernels/kernels.h"

namespace embedscope::engine {

/// Pooled lookup of a low-rank shard: for each bag b, p = bag_scale[b] * sum_{i in bag} A[ids[i]]
/// (r values, summed in fp32 in id order), then out[b * out_stride + c] = sum_k p[k] B[k][c]
/// for c in [0, dim). offsets has num_bags + 1 entries (absolute into ids); bag_scale nullptr
/// means 1; ids must be in [0, num_rows). Cost: sum(len) x r + num_bags x r x dim multiply-adds,
/// reads sum(len) x 4r bytes of A rows and 4 r dim of B (instead of 4 dim a row).
void low_rank_pooled_lookup(const float* a, int64_t num_rows, int64_t r, const float* b, int64_t dim,
                            const int64_t* ids, const int64_t* offsets, int64_t num_bags, const float* bag_scale,
                            float* out, int64_t out_stride);

/// Gradients of A and B from the gradient of the full rows. `grad` is what the backward of an
/// ordinary table gives (accumulate_sparse_grad: G_i = sum over the bags b that read row i of
/// scale_b dpooled_b, dim values a row). Since pooled_b = sum_i s_b A_i B:
///   dA_i = G_i B^T (r values; rows as grad.rows),  dB = sum_i A_i^T G_i (r x dim, dense),
/// computed from A and B before the update. Returns {dA, dB}; dB has rows 0..r-1 (every row of
/// B), empty when grad has no rows. Cost: 2 x rows x r x dim multiply-adds.
std::pair<SparseGrad, SparseGrad> low_rank_backward(const float* a, int64_t r, const float* b, int64_t dim,
                                                    const SparseGrad& grad);

/// Row i of E = A B: out[c] = sum_k A[i][k] B[k][c], c in [0, dim).
void low_rank_row(const float* a, int64_t r, const float* b, int64_t dim, int64_t i, float* out);

}  // namespace embedscope::engine
