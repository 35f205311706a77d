#pragma once
// The sparse-gradient accumulation of the embedding backward on the GPU (issue 14: "move the
// host parts of the step to the GPU ... sparse-gradient accumulation"; built with
// EMBEDSCOPE_WITH_CUDA, link embedscope::engine_cuda). Host API only: no CUDA header needed.
// CPU reference: accumulate_sparse_grad + merge_sparse_grads (kernels.h); the per-element
// arithmetic and its order are sparse_grad_core.h's, which the host stand-in runs too.

#include <cstddef>
#include <cstdint>

#include "embedscope/engine/kernels/workspace.h"

namespace embedscope::engine::cuda {

/// FBGEMM's sort + segment reduce, without the optimizer: the problem of sparse_grad_core.h
/// (num_bags bags of grad, bags_per_part per part; ids[offsets[b] .. offsets[b + 1]), offsets from
/// 0, num_ids = offsets[num_bags]) reduced to one gradient row per distinct row of a shard of
/// num_rows rows. Steps, all on `stream` (a cudaStream_t; nullptr: the legacy default stream):
/// keys row_key(id) with positions, CUB's stable radix sort of (key, position), run-length
/// encoding and an exclusive scan of the run lengths, then one warp per run writing
/// column_grad(run, c) for its columns (lane, lane + 32, ...): each value one thread's sum in
/// sorted (id, part, bag) order, so bit-equal to the CPU code.
///
/// Outputs (device memory of the caller, num_ids entries each, so that the host never needs the
/// count): rows_out[u] the u-th distinct row ascending for u < count, -1 after it;
/// values_out[u * dim + c] its gradient (zeros after count); offsets_out[u] = u for u <=
/// num_ids (num_ids + 1 entries: one bag per row, the form tbe_backward_update takes, which skips
/// the -1 rows); *count_out (one int64 on the device) the number of distinct rows in
/// [0, num_rows). Nothing is waited for. Scratch (keys, positions, bags, runs, CUB's storage)
/// from `workspace` (grown with GrowOnlyWorkspace's policy: no allocation once the largest batch
/// has been seen; its block must only be used on `stream`).
/// Throws std::invalid_argument for negative sizes, bags_per_part < 1, num_bags not a multiple
/// of it, grad_stride < dim or num_ids > 2^31 - 1; CudaError / LaunchError for failed calls.
void accumulate_sparse_grad_cuda(int64_t num_rows, int64_t dim, const int64_t* ids, const int64_t* offsets,
                                 int64_t num_bags, int64_t bags_per_part, int64_t num_ids, const float* bag_scale,
                                 const float* grad, int64_t grad_stride, int64_t* rows_out, int64_t* offsets_out,
                                 float* values_out, int64_t* count_out, GrowOnlyWorkspace& workspace,
                                 void* stream = nullptr);

}  // namespace embedscope::engine::cuda
