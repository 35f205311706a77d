#pragma once
// The sort-and-group step shared by the TBE backward (tbe.cu) and the device sparse-gradient
// accumulation (sparse_grad.cu): (id, position) pairs radix-sorted by id, equal ids run-length
// encoded, the run counts scanned into run starts (as FBGEMM's backward groups its gradients).
// Included by .cu files only.

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "common.cuh"
#include "embedscope/engine/kernels/workspace.h"

namespace embedscope::engine::cuda::detail {

/// The bits [0, end_bit) a radix sort of keys in [0, max_key] has to look at; >= 1.
inline int sort_end_bit(uint64_t max_key) {
  int end_bit = 1;
  while (end_bit < 64 && (max_key >> end_bit) != 0) ++end_bit;
  return end_bit;
}

/// Bytes of CUB temporary storage for `num_ids` items: cub::DeviceRadixSort::SortPairs (uint64
/// keys on bits [0, end_bit), int32 values), cub::DeviceRunLengthEncode::Encode (uint64 keys,
/// int32 counts) and cub::DeviceScan::ExclusiveSum (int32), the largest of the three (they run one
/// after another in the same storage). Size queries only: nothing is launched. Throws CudaError.
inline size_t sort_group_temp_bytes(int64_t num_ids, int end_bit, cudaStream_t s) {
  size_t sort_bytes = 0, rle_bytes = 0, scan_bytes = 0;
  check(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const uint64_t*>(nullptr),
                                        static_cast<uint64_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                        static_cast<int32_t*>(nullptr), num_ids, 0, end_bit, s),
        "cub::DeviceRadixSort::SortPairs (size)");
  check(cub::DeviceRunLengthEncode::Encode(nullptr, rle_bytes, static_cast<const uint64_t*>(nullptr),
                                           static_cast<uint64_t*>(nullptr), static_cast<int32_t*>(nullptr),
                                           static_cast<int32_t*>(nullptr), num_ids, s),
        "cub::DeviceRunLengthEncode::Encode (size)");
  check(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<const int32_t*>(nullptr),
                                      static_cast<int32_t*>(nullptr), num_ids, s),
        "cub::DeviceScan::ExclusiveSum (size)");
  return std::max({sort_bytes, rle_bytes, scan_bytes});
}

/// The scratch of the sort-and-group step for `num_ids` (id, position) pairs, laid out in
/// 256-byte aligned pieces (ScratchLayout): keys in / out and unique keys (uint64), positions in /
/// out, each position's bag, run counts and run starts (int32), the run count, then CUB's storage.
/// `bytes` sizes it; the constructor places it at `base` (a block of at least that many bytes).
struct SortGroup {
  uint64_t *keys_in = nullptr, *keys_out = nullptr, *unique_keys = nullptr;
  int32_t *pos_in = nullptr, *pos_out = nullptr, *bag_of = nullptr, *run_counts = nullptr, *run_starts = nullptr;
  int32_t* num_runs = nullptr;
  void* temp = nullptr;
  int64_t num_ids = 0;
  int end_bit = 1;
  size_t temp_bytes = 0;

  /// keys in [0, max_key]; throws CudaError (CUB's size queries)
  SortGroup(int64_t num_ids, uint64_t max_key, cudaStream_t s)
      : num_ids(num_ids), end_bit(sort_end_bit(max_key)), temp_bytes(sort_group_temp_bytes(num_ids, end_bit, s)) {}
  /// Bytes of the block place() needs.
  size_t bytes() const {
    SortGroup sized = *this;  // sizing writes null pointers: not into this one
    ScratchLayout sizing;
    sized.lay_out(sizing);
    return sizing.need();
  }
  /// Sets the pointers to their pieces of `base` (at least bytes() long).
  void place(char* base) {
    ScratchLayout l(base);
    lay_out(l);
  }
  /// After a linearize kernel has written keys_in, pos_in and bag_of: sorts the pairs by key
  /// (keys_out, pos_out), run-length encodes the sorted keys (unique_keys, run_counts, *num_runs)
  /// and scans the counts into run_starts, on stream s. Throws CudaError.
  void sort_and_group(cudaStream_t s) const {
    size_t b = temp_bytes;
    check(cub::DeviceRadixSort::SortPairs(temp, b, keys_in, keys_out, pos_in, pos_out, num_ids, 0, end_bit, s),
          "cub::DeviceRadixSort::SortPairs");
    // counts past *num_runs are not written by Encode: zeroed so that the scan reads defined
    // values (their starts are never used)
    check(cudaMemsetAsync(run_counts, 0, static_cast<size_t>(num_ids) * sizeof(int32_t), s),
          "cudaMemsetAsync (run counts)");
    b = temp_bytes;
    check(cub::DeviceRunLengthEncode::Encode(temp, b, keys_out, unique_keys, run_counts, num_runs, num_ids, s),
          "cub::DeviceRunLengthEncode::Encode");
    b = temp_bytes;
    check(cub::DeviceScan::ExclusiveSum(temp, b, run_counts, run_starts, num_ids, s), "cub::DeviceScan::ExclusiveSum");
  }

 private:
  void lay_out(ScratchLayout& l) {
    const size_t n = static_cast<size_t>(num_ids);
    keys_in = reinterpret_cast<uint64_t*>(l.take(n * 8));
    keys_out = reinterpret_cast<uint64_t*>(l.take(n * 8));
    unique_keys = reinterpret_cast<uint64_t*>(l.take(n * 8));
    pos_in = reinterpret_cast<int32_t*>(l.take(n * 4));
    pos_out = reinterpret_cast<int32_t*>(l.take(n * 4));
    bag_of = reinterpret_cast<int32_t*>(l.take(n * 4));
    run_counts = reinterpret_cast<int32_t*>(l.take(n * 4));
    run_starts = reinterpret_cast<int32_t*>(l.take(n * 4));
    num_runs = reinterpret_cast<int32_t*>(l.take(sizeof(int32_t)));
    temp = l.take(temp_bytes);
  }
};

}  // namespace embedscope::engine::cuda::detail
