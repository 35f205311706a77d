#pragma once
// kjt_permute of the KJT input dist (issue 14: "KJT permute ... on the GPU"), written once for
// the host and the GPU. After the ids and lengths all-to-alls a rank holds, from each of the W
// source ranks, for each of its P local slots, B bags: lengths in (source, slot, bag) order and
// the ids in that order too (each source sends slot 0's bags, then slot 1's, ...). The lookup
// reads them per slot: slot k's W x B bags source-major, so kjt_permute regroups the ids into
// (slot, source, bag) order and builds each slot's W * B + 1 offsets (from 0) by a scan of the
// lengths in that order. The CPU backend does the same on the host (exec/threaded/rank_input.cpp
// finish_input); the CUDA kernel kjt_permute_cuda (cuda_kjt.h, kernels/cuda/kjt_permute.cu) uses
// the index helpers below; the host stand-in of the device (exec/device/rank_device.cpp) runs
// permute() below.
//
// Header only, no CUDA header needed: EMBEDSCOPE_HD is `__host__ __device__` under nvcc.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "embedscope/engine/kernels/dense_core.h"  // EMBEDSCOPE_HD

namespace embedscope::engine::kjt_permute_core {

/// The index of bag (k, s, b) - slot k, source s, bag b - in the received (source, slot, bag)
/// order: (s * P + k) * B + b.
EMBEDSCOPE_HD inline int64_t received_index(int64_t P, int64_t B, int64_t k, int64_t s, int64_t b) {
  return (s * P + k) * B + b;
}

/// The received index of the bag at position i of the permuted (slot, source, bag) order.
EMBEDSCOPE_HD inline int64_t received_index_of(int64_t W, int64_t P, int64_t B, int64_t i) {
  const int64_t WB = W * B;
  const int64_t k = i / WB, r = i % WB;
  return received_index(P, B, k, r / B, r % B);
}

/// Throws std::invalid_argument naming the bad argument: W, P, B or num_ids < 0.
inline void check_shape(int64_t W, int64_t P, int64_t B, int64_t num_ids) {
  if (W < 0 || P < 0 || B < 0 || num_ids < 0)
    throw std::invalid_argument("kjt_permute: world " + std::to_string(W) + ", slots " + std::to_string(P) +
                                ", batch_size " + std::to_string(B) + " and num_ids " + std::to_string(num_ids) +
                                " must be >= 0");
}

/// The host reference. lengths_in: W * P * B lengths in (source, slot, bag) order; ids_in:
/// num_ids ids in that order (their sum). Writes ids_out (num_ids, in (slot, source, bag) order:
/// slot k's ids from sum over slots k' < k of their ids) and offsets_out (P x (W * B + 1): slot
/// k's at k * (W * B + 1), from 0, offsets_out[k * (W*B + 1) + s * B + b] = the first of bag (s,
/// b)'s ids in slot k's ids). Every id copied, nothing computed on it: bit-equal whatever the
/// order of the copies. Throws std::invalid_argument for a negative shape or length, or lengths
/// whose sum is not num_ids (nothing written then).
inline void permute(int64_t W, int64_t P, int64_t B, const int64_t* lengths_in, const int64_t* ids_in, int64_t num_ids,
                    int64_t* ids_out, int64_t* offsets_out) {
  check_shape(W, P, B, num_ids);
  const int64_t N = W * P * B, WB = W * B;
  int64_t total = 0;
  for (int64_t i = 0; i < N; ++i) {
    if (lengths_in[i] < 0)
      throw std::invalid_argument("kjt_permute: length " + std::to_string(i) + " is " + std::to_string(lengths_in[i]));
    total += lengths_in[i];
  }
  if (total != num_ids)
    throw std::invalid_argument("kjt_permute: the lengths add up to " + std::to_string(total) + " ids, not num_ids " +
                                std::to_string(num_ids));
  // where each received (source, slot) block starts in ids_in: a scan in the received order
  std::vector<int64_t> block_start(static_cast<size_t>(W * P) + 1, 0);
  for (int64_t sk = 0; sk < W * P; ++sk) {
    int64_t n = 0;
    for (int64_t b = 0; b < B; ++b) n += lengths_in[sk * B + b];
    block_start[static_cast<size_t>(sk) + 1] = block_start[static_cast<size_t>(sk)] + n;
  }
  int64_t out = 0;
  for (int64_t k = 0; k < P; ++k) {
    int64_t* off = offsets_out + k * (WB + 1);
    off[0] = 0;
    for (int64_t s = 0; s < W; ++s) {
      int64_t in = block_start[static_cast<size_t>(s * P + k)];
      for (int64_t b = 0; b < B; ++b) {
        const int64_t len = lengths_in[received_index(P, B, k, s, b)];
        for (int64_t j = 0; j < len; ++j) ids_out[out + j] = ids_in[in + j];
        in += len;
        out += len;
        off[s * B + b + 1] = off[s * B + b] + len;
      }
    }
  }
}

}  // namespace embedscope::engine::kjt_permute_core
