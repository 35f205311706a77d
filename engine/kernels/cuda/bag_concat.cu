// The bags of several parts made one on the GPU (cuda_bag_concat.h); host reference and the
// per-element functions: bag_concat_core.h. Every id copied, every offset one addition: exact.

#include <algorithm>
#include <string>

#include "common.cuh"
#include "embedscope/engine/kernels/cuda_bag_concat.h"

namespace embedscope::engine::cuda {

using detail::check;

namespace {

// One launch's parts, by value (kernel arguments: no device copy of the descriptors).
// bases[p]: the first output id of part p, relative to the launch's first (bases[0] = 0);
// bases[n] every id of the launch.
struct ConcatParts {
  int64_t n = 0;
  const int64_t* ids[kBagConcatMaxParts] = {};
  const int64_t* offsets[kBagConcatMaxParts] = {};
  int64_t bases[kBagConcatMaxParts + 1] = {};
};

// Elements [0, num_ids) are ids, then n x B offsets (+ 1, the end, when `last`). `id_base`: the
// launch's first output id (added to its offsets).
__global__ void __launch_bounds__(256)
    bag_concat_kernel(ConcatParts parts, int64_t B, bool last, int64_t id_base, int64_t* __restrict__ ids_out,
                      int64_t* __restrict__ offsets_out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t num_ids = parts.bases[parts.n];
  if (i < num_ids) {
    const int64_t p = bag_concat_core::part_of_id(parts.bases, parts.n, i);
    ids_out[i] = parts.ids[p][i - parts.bases[p]];
    return;
  }
  const int64_t j = i - num_ids;
  if (j < parts.n * B + (last ? 1 : 0))
    offsets_out[j] = id_base + bag_concat_core::offset_at(parts.offsets, parts.bases, parts.n, B, j);
}

}  // namespace

void concat_bags_cuda(std::span<const bag_concat_core::Part> parts, int64_t bags_per_part, int64_t* ids_out,
                      int64_t* offsets_out, void* stream) {
  bag_concat_core::check_shape(parts, bags_per_part);
  const cudaStream_t s = detail::as_stream(stream);
  const auto P = static_cast<int64_t>(parts.size());
  const int64_t B = bags_per_part;
  if (P == 0 || B == 0) {  // one offset, 0 (the parts hold no ids)
    check(cudaMemsetAsync(offsets_out, 0, sizeof(int64_t), s), "cudaMemsetAsync (offsets)");
    return;
  }
  int64_t id_base = 0;
  for (int64_t first = 0; first < P; first += kBagConcatMaxParts) {
    ConcatParts c;
    c.n = std::min<int64_t>(kBagConcatMaxParts, P - first);
    for (int64_t p = 0; p < c.n; ++p) {
      const bag_concat_core::Part& pt = parts[static_cast<size_t>(first + p)];
      c.ids[p] = pt.ids;
      c.offsets[p] = pt.offsets;
      c.bases[p + 1] = c.bases[p] + pt.num_ids;
    }
    const bool last = first + c.n == P;
    const int64_t elements = c.bases[c.n] + c.n * B + (last ? 1 : 0);
    const std::string shapes = "parts=" + std::to_string(P) + " from " + std::to_string(first) +
                               " bags_per_part=" + std::to_string(B) + " ids=" + std::to_string(c.bases[c.n]);
    detail::launch("bag_concat", shapes, launch_1d(elements, 256, 256), s, bag_concat_kernel, c, B, last, id_base,
                   ids_out + id_base, offsets_out + first * B);
    id_base += c.bases[c.n];
  }
}

}  // namespace embedscope::engine::cuda
