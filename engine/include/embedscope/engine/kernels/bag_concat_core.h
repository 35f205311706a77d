#pragma once
// The bags of several parts made one: the ids and offsets the embedding backward's
// sparse-gradient accumulation reads (RankDevice::accumulate_update, sparse_grad_core.h) for a
// shard that several local slots read (a table read by two features of the rank), written once
// for the host and the GPU. With the device input dist each slot's ids and W x B + 1 offsets
// (from 0) are where kjt_permute wrote them (kjt_permute_core.h); the accumulation takes one ids
// array and one offsets array over all parts' bags (part-major), so the parts' ids are
// concatenated and each part's offsets rebased by the ids of the parts before it - what the host
// path builds from the slots' ids on the host (exec/threaded/rank_train.cpp
// device_accumulate_update). The CUDA kernel concat_bags_cuda (cuda_bag_concat.h,
// kernels/cuda/bag_concat.cu) computes each output element with source_of_id / offset_at below;
// the host stand-in of the device (exec/device/rank_device.cpp) runs concat().
//
// Header only, no CUDA header needed: EMBEDSCOPE_HD is `__host__ __device__` under nvcc.

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "embedscope/engine/kernels/dense_core.h"  // EMBEDSCOPE_HD

namespace embedscope::engine::bag_concat_core {

/// One part: `num_ids` ids and its bags' offsets (bags_per_part + 1 of them, from 0, the last
/// num_ids). Device memory for the kernel, host memory for concat().
struct Part {
  const int64_t* ids = nullptr;
  const int64_t* offsets = nullptr;
  int64_t num_ids = 0;
};

/// The part whose ids hold output id i: the p with bases[p] <= i < bases[p + 1], bases being the
/// parts' first output ids (P + 1 of them: bases[0] = 0, bases[P] = every id). Empty parts
/// (bases[p] == bases[p + 1]) hold none. i must be in [0, bases[P]).
EMBEDSCOPE_HD inline int64_t part_of_id(const int64_t* bases, int64_t P, int64_t i) {
  int64_t lo = 0, hi = P - 1;  // the last p with bases[p] <= i
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (bases[mid] <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/// Output offset j (0 <= j <= P x B) of P parts of B >= 1 bags each: part p = min(j / B, P - 1)'s
/// offset j - p B plus its base. The last offset (j = P B) is the last part's end, bases[P] when
/// the parts are consistent.
EMBEDSCOPE_HD inline int64_t offset_at(const int64_t* const* offsets, const int64_t* bases, int64_t P, int64_t B,
                                       int64_t j) {
  int64_t p = j / B;
  if (p > P - 1) p = P - 1;
  return bases[p] + offsets[p][j - p * B];
}

/// Throws std::invalid_argument naming the bad argument: bags_per_part or a part's num_ids < 0.
inline void check_shape(std::span<const Part> parts, int64_t bags_per_part) {
  if (bags_per_part < 0)
    throw std::invalid_argument("concat_bags: bags_per_part " + std::to_string(bags_per_part) + " must be >= 0");
  for (size_t p = 0; p < parts.size(); ++p)
    if (parts[p].num_ids < 0)
      throw std::invalid_argument("concat_bags: part " + std::to_string(p) + " has num_ids " +
                                  std::to_string(parts[p].num_ids) + " (must be >= 0)");
}

/// The host reference. Writes ids_out (the parts' ids in part order, sum of num_ids) and
/// offsets_out (P x bags_per_part + 1, from 0: offsets_out[p B + b] = the ids of parts before p
/// + parts[p].offsets[b]). No parts or no bags: offsets_out[0] = 0 (and every part must be
/// empty). Every id copied, nothing computed on it. Throws what check_shape throws, and
/// std::invalid_argument when a part's offsets do not run from 0 up to its num_ids (nothing
/// written then).
inline void concat(std::span<const Part> parts, int64_t bags_per_part, int64_t* ids_out, int64_t* offsets_out) {
  check_shape(parts, bags_per_part);
  const int64_t B = bags_per_part;
  for (size_t p = 0; p < parts.size(); ++p) {
    const Part& pt = parts[p];
    const bool empty_ok = B == 0 && pt.num_ids == 0;
    bool ok = empty_ok || (B > 0 && pt.offsets[0] == 0 && pt.offsets[B] == pt.num_ids);
    for (int64_t b = 0; ok && !empty_ok && b < B; ++b) ok = pt.offsets[b] <= pt.offsets[b + 1];
    if (!ok)
      throw std::invalid_argument("concat_bags: part " + std::to_string(p) + "'s " + std::to_string(B + 1) +
                                  " offsets do not run from 0 up to its num_ids " + std::to_string(pt.num_ids));
  }
  offsets_out[0] = 0;
  int64_t base = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    const Part& pt = parts[p];
    for (int64_t i = 0; i < pt.num_ids; ++i) ids_out[base + i] = pt.ids[i];
    for (int64_t b = 1; b <= B; ++b) offsets_out[static_cast<int64_t>(p) * B + b] = base + pt.offsets[b];
    base += pt.num_ids;
  }
}

}  // namespace embedscope::engine::bag_concat_core
