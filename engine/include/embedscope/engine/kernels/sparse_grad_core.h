#pragma once
// The sparse-gradient accumulation of the embedding backward (accumulate_sparse_grad +
// merge_sparse_grads, kernels.h), written once for the host and the GPU (issue 14: "move the host
// parts of the step to the GPU ... sparse-gradient accumulation"). The CUDA kernel
// accumulate_sparse_grad_cuda (cuda_sparse_grad.h, kernels/cuda/sparse_grad.cu) sorts the
// (id, position) pairs with CUB and calls column_grad per (distinct row, column); the host
// stand-in of the device (exec/device/rank_device.cpp) runs accumulate_sorted below, which sorts
// the same pairs with std::stable_sort and calls the same column_grad. So the host tests of this
// header test the kernel's arithmetic and order.
//
// The problem: `num_bags` bags of pooled-output gradients (grad: num_bags x grad_stride floats),
// bag b reading ids[offsets[b] .. offsets[b + 1]) (offsets from 0), cut into parts of
// `bags_per_part` consecutive bags (part p = bags [p * bags_per_part, (p + 1) * bags_per_part):
// the slots of one shard - the features reading one table - each with the W x B bags of every
// rank). The gradient of a distinct row r, column c:
//   G[r][c] = sum over parts p in order of ( sum over the occurrences (b, i) of r in part p, in
//             bag order, of scale(b) * grad[b * grad_stride + c] ),
// every product and sum rounded to fp32 on its own (no FMA), each sum starting from +0.0f: the
// CPU code's order exactly (accumulate_sparse_grad sorts (id, bag) pairs and adds s * g per
// occurrence; merge_sparse_grads adds the parts' rows, in part order, to a zero row). Sorting the
// (id, position) pairs by id, stably (positions grow with the bag), gives occurrences in id, then
// part, then bag order; column_grad closes a part's partial sum when the part changes. With one
// part the result is that part's sum (0 + x == x for every x the partial can hold: a sum started
// at +0.0f is never -0.0f).
//
// Header only, no CUDA header needed: EMBEDSCOPE_HD is `__host__ __device__` under nvcc.

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "embedscope/engine/kernels/dense_core.h"  // EMBEDSCOPE_HD, mulf_rn, addf_rn

namespace embedscope::engine::sparse_grad_core {

using dense_core::addf_rn;
using dense_core::mulf_rn;

/// The sort key of an occurrence of `id` in a shard of `num_rows` rows: the id itself when it is
/// in [0, num_rows), else num_rows (such occurrences sort last and give no row: the input
/// pipeline rejects them before; the CPU reference would write outside the table).
EMBEDSCOPE_HD inline uint64_t row_key(int64_t id, int64_t num_rows) {
  return static_cast<uint64_t>(id >= 0 && id < num_rows ? id : num_rows);
}

/// G[row][c] of the file comment for one distinct row and one column: its occurrences are
/// sorted positions sorted_pos[start .. start + count) (ascending within the row), occurrence
/// position p in bag bag_of[p]; scale(b) = bag_scale[b], or 1 when bag_scale is nullptr.
/// Cost: count multiply-adds, one thread per (row, column) on the GPU.
EMBEDSCOPE_HD inline float column_grad(const int32_t* sorted_pos, const int32_t* bag_of, int64_t start, int64_t count,
                                       int64_t bags_per_part, const float* bag_scale, const float* grad,
                                       int64_t grad_stride, int64_t c) {
  float total = 0.0f, partial = 0.0f;
  int64_t part = -1;
  for (int64_t j = start; j < start + count; ++j) {
    const int64_t bag = bag_of[sorted_pos[j]];
    const int64_t p = bag / bags_per_part;
    if (p != part) {
      if (part >= 0) total = addf_rn(total, partial);
      partial = 0.0f;
      part = p;
    }
    const float s = bag_scale != nullptr ? bag_scale[bag] : 1.0f;
    partial = addf_rn(partial, mulf_rn(s, grad[bag * grad_stride + c]));
  }
  return addf_rn(total, partial);
}

/// The result of accumulate_sorted: `rows` distinct rows, ascending (ids outside the table
/// dropped), `values` rows.size() x dim.
struct Accumulated {
  std::vector<int64_t> rows;
  std::vector<float> values;
};

/// The whole accumulation on the host, as the kernel does it: positions p = i (ids[i], offsets
/// from 0) keyed by row_key, stably sorted by key (CUB's radix sort is stable too), runs of equal
/// keys, then column_grad per (run, column). Throws std::invalid_argument for negative counts,
/// bags_per_part < 1, num_bags not a multiple of bags_per_part, offsets[0] != 0, decreasing
/// offsets, grad_stride < dim or more than 2^31 - 1 ids.
inline Accumulated accumulate_sorted(int64_t num_rows, int64_t dim, const int64_t* ids, const int64_t* offsets,
                                     int64_t num_bags, int64_t bags_per_part, const float* bag_scale,
                                     const float* grad, int64_t grad_stride) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("accumulate_sorted: " + what); };
  if (num_rows < 0 || dim < 0 || num_bags < 0) fail("negative num_rows, dim or num_bags");
  if (bags_per_part < 1 || num_bags % bags_per_part != 0)
    fail("num_bags " + std::to_string(num_bags) + " is not a multiple of bags_per_part " +
         std::to_string(bags_per_part));
  if (grad_stride < dim) fail("grad_stride " + std::to_string(grad_stride) + " < dim " + std::to_string(dim));
  Accumulated out;
  if (num_bags == 0) return out;
  if (offsets[0] != 0) fail("offsets[0] is " + std::to_string(offsets[0]) + ", not 0");
  const int64_t n = offsets[num_bags];
  if (n > INT32_MAX) fail(std::to_string(n) + " ids > 2^31 - 1");
  std::vector<uint64_t> key(static_cast<size_t>(n));
  std::vector<int32_t> bag_of(static_cast<size_t>(n)), pos(static_cast<size_t>(n));
  for (int64_t b = 0; b < num_bags; ++b) {
    if (offsets[b + 1] < offsets[b]) fail("offsets decrease at bag " + std::to_string(b));
    for (int64_t i = offsets[b]; i < offsets[b + 1]; ++i) {
      key[static_cast<size_t>(i)] = row_key(ids[i], num_rows);
      bag_of[static_cast<size_t>(i)] = static_cast<int32_t>(b);
    }
  }
  std::iota(pos.begin(), pos.end(), 0);
  std::stable_sort(pos.begin(), pos.end(),
                   [&](int32_t a, int32_t b) { return key[static_cast<size_t>(a)] < key[static_cast<size_t>(b)]; });
  for (int64_t s = 0; s < n;) {
    const uint64_t k = key[static_cast<size_t>(pos[static_cast<size_t>(s)])];
    int64_t e = s + 1;
    while (e < n && key[static_cast<size_t>(pos[static_cast<size_t>(e)])] == k) ++e;
    if (k == static_cast<uint64_t>(num_rows)) break;  // ids outside the table: the last run
    out.rows.push_back(static_cast<int64_t>(k));
    for (int64_t c = 0; c < dim; ++c)
      out.values.push_back(column_grad(pos.data(), bag_of.data(), s, e - s, bags_per_part, bag_scale, grad,
                                       grad_stride, c));
    s = e;
  }
  return out;
}

}  // namespace embedscope::engine::sparse_grad_core
