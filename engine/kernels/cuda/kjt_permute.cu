// kjt_permute on the GPU (cuda_kjt.h); host reference and index helpers: kjt_permute_core.h.
// Deterministic: every id is copied, positions come from scans of the lengths.

#include <cub/device/device_scan.cuh>

#include <string>

#include "common.cuh"
#include "embedscope/engine/kernels/cuda_kjt.h"
#include "embedscope/engine/kernels/kjt_permute_core.h"

namespace embedscope::engine::cuda {

using detail::check;
using detail::kWarp;

namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = kWarpsPerBlock * kWarp;

// perm_len[i] = lengths_in[received_index_of(i)]: the lengths in (slot, source, bag) order.
__global__ void __launch_bounds__(256) kjt_gather_lengths_kernel(int64_t W, int64_t P, int64_t B,
                                                                 const int64_t* __restrict__ lengths_in,
                                                                 int64_t* __restrict__ perm_len) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < W * P * B) perm_len[i] = lengths_in[kjt_permute_core::received_index_of(W, P, B, i)];
}

// offsets_out[k * (WB + 1) + j] = out_at[k * WB + j] - out_at[k * WB]: slot k's offsets from 0.
__global__ void __launch_bounds__(256) kjt_slot_offsets_kernel(int64_t P, int64_t WB, const int64_t* __restrict__ out_at,
                                                               int64_t* __restrict__ offsets_out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= P * (WB + 1)) return;
  const int64_t k = i / (WB + 1), j = i % (WB + 1);
  offsets_out[i] = out_at[k * WB + j] - out_at[k * WB];
}

// Bag i of the permuted order: its perm_len[i] ids from in_at[received_index_of(i)] to out_at[i].
// One warp per bag.
__global__ void __launch_bounds__(kThreads)
    kjt_copy_ids_kernel(int64_t W, int64_t P, int64_t B, const int64_t* __restrict__ perm_len,
                        const int64_t* __restrict__ in_at, const int64_t* __restrict__ out_at,
                        const int64_t* __restrict__ ids_in, int64_t num_ids, int64_t* __restrict__ ids_out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (i >= W * P * B) return;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const int64_t src = in_at[kjt_permute_core::received_index_of(W, P, B, i)], dst = out_at[i], len = perm_len[i];
  for (int64_t j = lane; j < len; j += kWarp)
    if (src + j < num_ids && dst + j < num_ids) ids_out[dst + j] = ids_in[src + j];
}

}  // namespace

void kjt_permute_cuda(int64_t W, int64_t P, int64_t B, const int64_t* lengths_in, const int64_t* ids_in,
                      int64_t num_ids, int64_t* ids_out, int64_t* offsets_out, GrowOnlyWorkspace& workspace,
                      void* stream) {
  kjt_permute_core::check_shape(W, P, B, num_ids);
  const cudaStream_t s = detail::as_stream(stream);
  const int64_t N = W * P * B, WB = W * B;
  if (P == 0) return;
  if (N == 0) {  // W or B is 0: every slot's one offset is 0
    check(cudaMemsetAsync(offsets_out, 0, static_cast<size_t>(P) * sizeof(int64_t), s), "cudaMemsetAsync (offsets)");
    return;
  }
  const std::string shapes = "world=" + std::to_string(W) + " slots=" + std::to_string(P) +
                             " batch_size=" + std::to_string(B) + " ids=" + std::to_string(num_ids);
  size_t scan_bytes = 0;
  check(cub::DeviceScan::InclusiveSum(nullptr, scan_bytes, static_cast<const int64_t*>(nullptr),
                                      static_cast<int64_t*>(nullptr), N, s),
        "cub::DeviceScan::InclusiveSum (size)");
  const size_t n8 = static_cast<size_t>(N + 1) * sizeof(int64_t);
  ScratchLayout sizing;
  for (int i = 0; i < 3; ++i) sizing.take(n8);
  sizing.take(scan_bytes);
  ScratchLayout placed(static_cast<char*>(workspace.reserve(sizing.need())));
  auto* perm_len = reinterpret_cast<int64_t*>(placed.take(n8));
  auto* in_at = reinterpret_cast<int64_t*>(placed.take(n8));
  auto* out_at = reinterpret_cast<int64_t*>(placed.take(n8));
  void* temp = placed.take(scan_bytes);
  detail::launch("kjt_gather_lengths", shapes, launch_1d(N, 256, 256), s, kjt_gather_lengths_kernel, W, P, B,
                 lengths_in, perm_len);
  check(cudaMemsetAsync(in_at, 0, sizeof(int64_t), s), "cudaMemsetAsync");
  check(cub::DeviceScan::InclusiveSum(temp, scan_bytes, lengths_in, in_at + 1, N, s), "cub::DeviceScan::InclusiveSum");
  check(cudaMemsetAsync(out_at, 0, sizeof(int64_t), s), "cudaMemsetAsync");
  check(cub::DeviceScan::InclusiveSum(temp, scan_bytes, perm_len, out_at + 1, N, s), "cub::DeviceScan::InclusiveSum");
  detail::launch("kjt_slot_offsets", shapes, launch_1d(P * (WB + 1), 256, 256), s, kjt_slot_offsets_kernel, P, WB,
                 out_at, offsets_out);
  detail::launch("kjt_copy_ids", shapes, launch_1d(N, kWarpsPerBlock, kThreads), s, kjt_copy_ids_kernel, W, P, B,
                 perm_len, in_at, out_at, ids_in, num_ids, ids_out);
}

}  // namespace embedscope::engine::cuda
