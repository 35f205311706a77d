// The sparse-gradient accumulation on the GPU (cuda_sparse_grad.h): sort (key, position) pairs
// with CUB, run-length encode, then one warp per distinct row calling sparse_grad_core.h's
// column_grad per column (the arithmetic the host stand-in runs; CPU reference:
// accumulate_sparse_grad + merge_sparse_grads, kernels.h).

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common.cuh"
#include "sort_group.cuh"
#include "embedscope/engine/kernels/cuda_sparse_grad.h"
#include "embedscope/engine/kernels/sparse_grad_core.h"

namespace embedscope::engine::cuda {

using detail::check;
using detail::SortGroup;
using detail::kWarp;

namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = kWarpsPerBlock * kWarp;

// keys[i] = row_key(ids[i]), pos[i] = i, bag_of[i] = bag, for the ids of each bag (one warp per bag).
__global__ void __launch_bounds__(kThreads)
    sparse_grad_linearize_kernel(int64_t num_rows, int64_t num_bags, const int64_t* __restrict__ ids,
                                 const int64_t* __restrict__ offsets, int64_t num_ids, uint64_t* __restrict__ keys,
                                 int32_t* __restrict__ pos, int32_t* __restrict__ bag_of) {
  const int64_t bag = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (bag >= num_bags) return;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  for (int64_t i = offsets[bag] + lane; i < offsets[bag + 1]; i += kWarp) {
    if (i < 0 || i >= num_ids) continue;
    keys[i] = sparse_grad_core::row_key(ids[i], num_rows);
    pos[i] = static_cast<int32_t>(i);
    bag_of[i] = static_cast<int32_t>(bag);
  }
}

// One warp per u < num_ids: run u's row and its gradient columns (column_grad), or -1 and zeros
// for u past the runs of rows in the table; offsets_out[u] = u; u == 0 also writes the count.
__global__ void __launch_bounds__(kThreads)
    sparse_grad_reduce_kernel(int64_t num_rows, int64_t dim, int64_t num_ids, int64_t bags_per_part,
                              const int32_t* __restrict__ num_runs, const uint64_t* __restrict__ unique_keys,
                              const int32_t* __restrict__ run_counts, const int32_t* __restrict__ run_starts,
                              const int32_t* __restrict__ sorted_pos, const int32_t* __restrict__ bag_of,
                              const float* __restrict__ bag_scale, const float* __restrict__ grad, int64_t grad_stride,
                              int64_t* __restrict__ rows_out, int64_t* __restrict__ offsets_out,
                              float* __restrict__ values_out, int64_t* __restrict__ count_out) {
  const int64_t u = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (u >= num_ids) return;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const int64_t runs = *num_runs;
  const bool valid = u < runs && unique_keys[u] < static_cast<uint64_t>(num_rows);
  float* v = values_out + u * dim;
  if (lane == 0) {
    rows_out[u] = valid ? static_cast<int64_t>(unique_keys[u]) : -1;
    offsets_out[u] = u;
    if (u == 0) {
      offsets_out[num_ids] = num_ids;
      *count_out = runs > 0 && unique_keys[runs - 1] >= static_cast<uint64_t>(num_rows) ? runs - 1 : runs;
    }
  }
  if (!valid) {
    for (int64_t c = lane; c < dim; c += kWarp) v[c] = 0.0f;
    return;
  }
  const int64_t start = run_starts[u], count = run_counts[u];
  for (int64_t c = lane; c < dim; c += kWarp)
    v[c] = sparse_grad_core::column_grad(sorted_pos, bag_of, start, count, bags_per_part, bag_scale, grad, grad_stride, c);
}

}  // namespace

void accumulate_sparse_grad_cuda(int64_t num_rows, int64_t dim, const int64_t* ids, const int64_t* offsets,
                                 int64_t num_bags, int64_t bags_per_part, int64_t num_ids, const float* bag_scale,
                                 const float* grad, int64_t grad_stride, int64_t* rows_out, int64_t* offsets_out,
                                 float* values_out, int64_t* count_out, GrowOnlyWorkspace& workspace, void* stream) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("accumulate_sparse_grad_cuda: " + what); };
  if (num_rows < 0 || dim < 0 || num_bags < 0 || num_ids < 0) fail("negative num_rows, dim, num_bags or num_ids");
  if (bags_per_part < 1 || num_bags % bags_per_part != 0)
    fail("num_bags " + std::to_string(num_bags) + " is not a multiple of bags_per_part " + std::to_string(bags_per_part));
  if (grad_stride < dim) fail("grad_stride " + std::to_string(grad_stride) + " < dim " + std::to_string(dim));
  if (num_ids > INT32_MAX) fail("num_ids " + std::to_string(num_ids) + " > 2^31 - 1");
  const cudaStream_t s = detail::as_stream(stream);
  if (num_ids == 0 || num_bags == 0) {
    check(cudaMemsetAsync(count_out, 0, sizeof(int64_t), s), "cudaMemsetAsync (count)");
    if (offsets_out) check(cudaMemsetAsync(offsets_out, 0, sizeof(int64_t), s), "cudaMemsetAsync (offsets)");
    return;
  }
  const std::string shapes = "rows=" + std::to_string(num_rows) + " dim=" + std::to_string(dim) +
                             " bags=" + std::to_string(num_bags) + " ids=" + std::to_string(num_ids);
  SortGroup g(num_ids, static_cast<uint64_t>(num_rows), s);  // keys are in [0, num_rows]
  g.place(static_cast<char*>(workspace.reserve(g.bytes())));
  detail::launch("sparse_grad_linearize", shapes, launch_1d(num_bags, kWarpsPerBlock, kThreads), s,
                 sparse_grad_linearize_kernel, num_rows, num_bags, ids, offsets, num_ids, g.keys_in, g.pos_in, g.bag_of);
  g.sort_and_group(s);
  detail::launch("sparse_grad_reduce", shapes, launch_1d(num_ids, kWarpsPerBlock, kThreads), s,
                 sparse_grad_reduce_kernel, num_rows, dim, num_ids, bags_per_part, g.num_runs, g.unique_keys,
                 g.run_counts, g.run_starts, g.pos_out, g.bag_of, bag_scale, grad, grad_stride, rows_out, offsets_out,
                 values_out, count_out);
}

}  // namespace embedscope::engine::cuda
