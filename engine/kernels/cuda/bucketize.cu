// Row-wise input bucketizing on the device (cuda_kernels.h); CPU reference: bucketize_kjt
// (bucketize.h). Three passes, deterministic: count the kept ids of each (slot, bag), scan the
// counts into output offsets, write the kept ids in input order (warp ballot compaction).

#include <cub/device/device_scan.cuh>

#include <optional>
#include <string>
#include <vector>

#include "common.cuh"

namespace embedscope::engine::cuda {

using detail::check;
using detail::kFullMask;
using detail::kWarp;

namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = kWarpsPerBlock * kWarp;

__device__ __forceinline__ bool kept(const BucketSlot& sl, int64_t id) {
  return !sl.row_wise || (id >= sl.row_begin && id < sl.row_begin + sl.num_rows);
}

// lengths[s * B + b] = kept ids of feature slots[s].feature, bag b. One warp per (slot, bag).
__global__ void __launch_bounds__(kThreads)
    bucketize_count_kernel(const BucketSlot* __restrict__ slots, int64_t batch_size, int64_t num_pairs,
                           const int64_t* __restrict__ values, const int64_t* __restrict__ offsets,
                           int64_t* __restrict__ lengths) {
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (pair >= num_pairs) return;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const BucketSlot sl = slots[pair / batch_size];
  const int64_t bag = sl.feature * batch_size + pair % batch_size;
  int64_t n = 0;
  for (int64_t i = offsets[bag] + lane; i < offsets[bag + 1]; i += kWarp) n += kept(sl, values[i]) ? 1 : 0;
#pragma unroll
  for (int d = kWarp / 2; d > 0; d /= 2) n += __shfl_xor_sync(kFullMask, n, d);
  if (lane == 0) lengths[pair] = n;
}

// Writes the kept ids (rebased for row_wise slots) of (slot, bag) from out_offsets[pair], in
// input order: each round of 32 ids compacts by ballot. Ids at or past `capacity` are dropped
// (the host reports the overflow). One warp per (slot, bag).
__global__ void __launch_bounds__(kThreads)
    bucketize_write_kernel(const BucketSlot* __restrict__ slots, int64_t batch_size, int64_t num_pairs,
                           const int64_t* __restrict__ values, const int64_t* __restrict__ offsets,
                           const int64_t* __restrict__ out_offsets, int64_t* __restrict__ ids, int64_t capacity) {
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (pair >= num_pairs) return;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const BucketSlot sl = slots[pair / batch_size];
  const int64_t bag = sl.feature * batch_size + pair % batch_size;
  const int64_t begin = offsets[bag], end = offsets[bag + 1];
  int64_t out = out_offsets[pair];
  for (int64_t i0 = begin; i0 < end; i0 += kWarp) {  // uniform trip count: the ballot sees the whole warp
    const int64_t i = i0 + lane;
    const int64_t id = i < end ? values[i] : 0;
    const bool keep = i < end && kept(sl, id);
    const unsigned mask = __ballot_sync(kFullMask, keep);
    const int64_t at = out + __popc(mask & ((1u << lane) - 1u));
    if (keep && at < capacity) ids[at] = sl.row_wise ? id - sl.row_begin : id;
    out += __popc(mask);
  }
}

// splits[s] = out_offsets[(s + 1) * B] - out_offsets[s * B]. One thread per slot.
__global__ void bucketize_splits_kernel(int64_t num_slots, int64_t batch_size, const int64_t* __restrict__ out_offsets,
                                        int64_t* __restrict__ splits) {
  const int64_t s = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s < num_slots) splits[s] = out_offsets[(s + 1) * batch_size] - out_offsets[s * batch_size];
}

}  // namespace

int64_t bucketize_kjt_cuda(const int64_t* values, const int64_t* offsets, int64_t num_features, int64_t batch_size,
                           std::span<const BucketSlot> slots, int64_t* lengths, int64_t* ids, int64_t ids_capacity,
                           int64_t* splits, void* stream_ptr, GrowOnlyWorkspace* workspace,
                           const BucketSlot* device_slots) {
  if (batch_size < 0) throw std::invalid_argument("bucketize_kjt_cuda: batch_size " + std::to_string(batch_size) + " < 0");
  for (size_t s = 0; s < slots.size(); ++s)
    if (slots[s].feature < 0 || slots[s].feature >= num_features)
      throw std::invalid_argument("bucketize_kjt_cuda: slot " + std::to_string(s) + " feature " +
                                  std::to_string(slots[s].feature) + " outside the KJT's " +
                                  std::to_string(num_features) + " features");
  const cudaStream_t stream = detail::as_stream(stream_ptr);
  const int64_t num_slots = static_cast<int64_t>(slots.size());
  const int64_t num_pairs = num_slots * batch_size;
  const std::string shapes = "slots=" + std::to_string(num_slots) + " features=" + std::to_string(num_features) +
                             " batch_size=" + std::to_string(batch_size);
  if (num_pairs == 0) {
    if (num_slots > 0) check(cudaMemsetAsync(splits, 0, slots.size() * sizeof(int64_t), stream), "cudaMemsetAsync");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    return 0;
  }
  size_t scan_bytes = 0;
  check(cub::DeviceScan::InclusiveSum(nullptr, scan_bytes, static_cast<const int64_t*>(nullptr),
                                      static_cast<int64_t*>(nullptr), num_pairs, stream),
        "cub::DeviceScan::InclusiveSum (size)");
  // the slots' scratch only when the caller has no copy of them on the device
  const size_t slot_bytes = device_slots ? 0 : slots.size() * sizeof(BucketSlot);
  const size_t off_bytes = static_cast<size_t>(num_pairs + 1) * sizeof(int64_t);
  ScratchLayout sizing;
  sizing.take(slot_bytes);
  sizing.take(off_bytes);
  sizing.take(scan_bytes);
  // the workspace's block, or one of the stream-ordered pool for this call
  std::optional<detail::Scratch> own;
  char* base = nullptr;
  if (workspace) {
    base = static_cast<char*>(workspace->reserve(sizing.need()));
  } else {
    own.emplace(sizing.need(), stream);
    base = own->as<char>();
  }
  ScratchLayout placed(base);
  auto* slot_scratch = reinterpret_cast<BucketSlot*>(placed.take(slot_bytes));
  const BucketSlot* d_slots = device_slots ? device_slots : slot_scratch;
  auto* out_offsets = reinterpret_cast<int64_t*>(placed.take(off_bytes));
  void* temp = placed.take(scan_bytes);
  if (!device_slots)
    check(cudaMemcpyAsync(slot_scratch, slots.data(), slots.size() * sizeof(BucketSlot), cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync (slots)");
  const LaunchConfig per_pair = launch_1d(num_pairs, kWarpsPerBlock, kThreads);
  detail::launch("bucketize_count", shapes, per_pair, stream, bucketize_count_kernel, d_slots, batch_size, num_pairs,
                 values, offsets, lengths);
  check(cudaMemsetAsync(out_offsets, 0, sizeof(int64_t), stream), "cudaMemsetAsync");
  check(cub::DeviceScan::InclusiveSum(temp, scan_bytes, lengths, out_offsets + 1, num_pairs, stream),
        "cub::DeviceScan::InclusiveSum");
  detail::launch("bucketize_write", shapes, per_pair, stream, bucketize_write_kernel, d_slots, batch_size, num_pairs,
                 values, offsets, out_offsets, ids, ids_capacity);
  detail::launch("bucketize_splits", shapes, launch_1d(num_slots, 256, 256), stream, bucketize_splits_kernel,
                 num_slots, batch_size, out_offsets, splits);
  int64_t total = 0;
  check(cudaMemcpyAsync(&total, out_offsets + num_pairs, sizeof total, cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync (total)");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  if (total > ids_capacity)
    throw std::length_error("bucketize_kjt_cuda (" + shapes + "): " + std::to_string(total) +
                            " ids do not fit ids_capacity " + std::to_string(ids_capacity));
  return total;
}

}  // namespace embedscope::engine::cuda
