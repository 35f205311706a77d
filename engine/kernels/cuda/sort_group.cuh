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

}  // namespace embedscope::engine::cuda::detail
