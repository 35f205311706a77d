#pragma once
// Low-rank tables (model/low_rank.h: E = A B, A rows x r, B r x dim, fp32) on the GPU: the
// products around the A-row lookup (tbe_forward) and A's and B's gradients (built with
// EMBEDSCOPE_WITH_CUDA; link embedscope::engine_cuda). Conventions as cuda_dense_ops.h: device
// pointers, `stream` a cudaStream_t as void*, launches through the checked launcher. Each output
// is a sum in k / c / u order with the products rounded before the additions (no FMA), the order
// of the host kernels (kernels/low_rank.h), so the results are theirs bit for bit. Not yet run on
// a GPU (issue 16).

#include <cstdint>

namespace embedscope::engine::cuda {

/// out[i][c] = sum_k p[i][k] b[k][c] for i < n, c < dim (p: n x r, b: r x dim, out: n x dim).
/// Asynchronous on `stream`; n == 0 launches nothing. Throws std::invalid_argument for negative
/// sizes.
void low_rank_project_cuda(int64_t n, int64_t r, int64_t dim, const float* p, const float* b, float* out,
                           void* stream = nullptr);

/// The gradients of low_rank_backward (kernels/low_rank.h) from g (n x dim, the gradient of the
/// full rows a_rows[u] of A): da[u][k] = sum_c g[u][c] b[k][c] (n x r) and
/// db[k][c] = sum_u a[row_ids[u]][k] g[u][c] (r x dim), from A (rows x r) and B before the
/// update. Asynchronous on `stream`; n == 0 writes zeros to db. Throws std::invalid_argument for
/// negative sizes.
void low_rank_backward_cuda(int64_t n, int64_t r, int64_t dim, const float* a, const int64_t* row_ids, const float* b,
                            const float* g, float* da, float* db, void* stream = nullptr);

}  // namespace embedscope::engine::cuda
