#include "embedscope/engine/kernels/kernels.h"

#include "embedscope/engine/quant/row_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <vector>

namespace embedscope::engine {

namespace {
// Compiled for AVX2 and baseline x86-64; the loader picks the best (GCC target_clones).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ES_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ES_CLONES
#endif

ES_CLONES void add_row(float* __restrict out, const float* __restrict row, int64_t dim) {
  for (int64_t c = 0; c < dim; ++c) out[c] += row[c];
}
ES_CLONES void add_scaled_row(float* __restrict out, const float* __restrict row, float s,
                              int64_t dim) {
  for (int64_t c = 0; c < dim; ++c) out[c] += s * row[c];
}

// Gathers prefetch the row this many ids (or sparse-grad rows) ahead, across bag boundaries:
// enough to cover DRAM latency for 256-512 byte rows without overflowing the core's
// outstanding-miss queues (caffe2/FBGEMM use the same distance).
constexpr int64_t kPrefetchIds = 16;

// Prefetches floats [p, p + n) for writing.
inline void prefetch_row(const float* p, int64_t n) {
  for (int64_t c = 0; c < n; c += 16) __builtin_prefetch(p + c, /*rw=*/1);
}

// Sums the rows of one bag over columns [c0, c0 + W) in registers, in id order, and stores
// the sum to out[c0 .. c0 + W). With `prefetch`, also prefetches the whole row
// kPrefetchIds ids ahead (ids[.. ids_end) is the batch).
template <int64_t W>
[[gnu::always_inline]] inline void pool_columns(const float* __restrict weights, int64_t dim,
                                                const int64_t* ids, int64_t begin, int64_t end,
                                                int64_t ids_end, int64_t c0, bool prefetch,
                                                float* __restrict out) {
  float acc[W] = {};
  for (int64_t i = begin; i < end; ++i) {
    if (prefetch) {
      const float* next = weights + ids[std::min(i + kPrefetchIds, ids_end - 1)] * dim;
      for (int64_t c = 0; c < dim; c += 16) __builtin_prefetch(next + c);
    }
    const float* __restrict row = weights + ids[i] * dim + c0;
    for (int64_t c = 0; c < W; ++c) acc[c] += row[c];
  }
  for (int64_t c = 0; c < W; ++c) out[c0 + c] = acc[c];
}
}  // namespace

ES_CLONES void pooled_lookup(const float* weights, int64_t num_rows, int64_t dim,
                             const int64_t* ids, const int64_t* offsets, int64_t num_bags,
                             const float* bag_scale, float* out, int64_t out_stride) {
  (void)num_rows;
  const int64_t ids_end = offsets[num_bags];
  for (int64_t b = 0; b < num_bags; ++b) {
    float* __restrict o = out + b * out_stride;
    const int64_t begin = offsets[b], end = offsets[b + 1];
    // Column blocks of 64, 32, 16, 8 floats summed in registers, then a tail of < 8 columns.
    // Every column is summed in id order starting from 0, so the result does not depend on
    // the blocking. The first block prefetches whole rows; later blocks find them in cache.
    int64_t c0 = 0;
    for (; c0 + 64 <= dim; c0 += 64)
      pool_columns<64>(weights, dim, ids, begin, end, ids_end, c0, c0 == 0, o);
    if (c0 + 32 <= dim) {
      pool_columns<32>(weights, dim, ids, begin, end, ids_end, c0, c0 == 0, o);
      c0 += 32;
    }
    if (c0 + 16 <= dim) {
      pool_columns<16>(weights, dim, ids, begin, end, ids_end, c0, c0 == 0, o);
      c0 += 16;
    }
    if (c0 + 8 <= dim) {
      pool_columns<8>(weights, dim, ids, begin, end, ids_end, c0, c0 == 0, o);
      c0 += 8;
    }
    for (; c0 < dim; ++c0)
      pool_columns<1>(weights, dim, ids, begin, end, ids_end, c0, c0 == 0, o);
    if (bag_scale != nullptr && bag_scale[b] != 1.0f) {
      const float s = bag_scale[b];
      for (int64_t c = 0; c < dim; ++c) o[c] *= s;
    }
  }
}

SparseGrad accumulate_sparse_grad(int64_t dim, const int64_t* ids, const int64_t* offsets,
                                  int64_t num_bags, const float* bag_scale,
                                  const float* grad_out, int64_t grad_stride) {
  SparseGrad g;
  g.dim = dim;
  const int64_t base = offsets[0];  // offsets may point into a larger KJT
  const int64_t n = offsets[num_bags] - base;
  if (n == 0) return g;
  // (id, bag) pairs sorted by id, then by position: a deterministic segment reduce.
  std::vector<std::pair<int64_t, int64_t>> occ(static_cast<size_t>(n));
  for (int64_t b = 0; b < num_bags; ++b)
    for (int64_t i = offsets[b]; i < offsets[b + 1]; ++i) occ[static_cast<size_t>(i - base)] = {ids[i], b};
  std::sort(occ.begin(), occ.end());
  size_t distinct = 0;
  for (size_t i = 0; i < occ.size(); ++i)
    if (i == 0 || occ[i].first != occ[i - 1].first) ++distinct;
  g.rows.resize(distinct);
  g.values.assign(distinct * static_cast<size_t>(dim), 0.0f);
  size_t u = 0;
  for (size_t i = 0; i < occ.size(); ++i) {
    if (i > 0 && occ[i].first != occ[i - 1].first) ++u;
    g.rows[u] = occ[i].first;
    const int64_t b = occ[i].second;
    const float s = bag_scale ? bag_scale[b] : 1.0f;
    add_scaled_row(g.values.data() + u * static_cast<size_t>(dim), grad_out + b * grad_stride, s,
                   dim);
  }
  return g;
}

SparseGrad merge_sparse_grads(std::span<const SparseGrad> parts, int64_t dim) {
  SparseGrad g;
  g.dim = dim;
  std::vector<int64_t> all;
  for (const auto& p : parts) all.insert(all.end(), p.rows.begin(), p.rows.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  g.rows = all;
  g.values.assign(all.size() * static_cast<size_t>(dim), 0.0f);
  for (const auto& p : parts) {
    size_t u = 0;
    for (size_t i = 0; i < p.rows.size(); ++i) {
      while (g.rows[u] != p.rows[i]) ++u;  // both sorted; p.rows is a subset
      add_row(g.values.data() + u * static_cast<size_t>(dim),
              p.values.data() + i * static_cast<size_t>(dim), dim);
    }
  }
  return g;
}

std::pair<int64_t, int64_t> optimizer_state_floats(OptimizerType type, int64_t rows, int64_t dim) {
  switch (type) {
    case OptimizerType::sgd: return {0, 0};
    case OptimizerType::rowwise_adagrad: return {rows, 0};
    case OptimizerType::adam: return {rows * dim, rows * dim};
  }
  return {0, 0};
}

int64_t optimizer_state_value_bytes(OptimizerStateType st) { return st == OptimizerStateType::fp32 ? 4 : 2; }

int64_t optimizer_state_bytes(OptimizerType type, int64_t rows, int64_t dim, OptimizerStateType st) {
  const auto [a, b] = optimizer_state_floats(type, rows, dim);
  return (a + b) * optimizer_state_value_bytes(st);
}

OptimizerStateBuffers make_optimizer_state(OptimizerType type, int64_t rows, int64_t dim, OptimizerStateType st) {
  const auto [a, b] = optimizer_state_floats(type, rows, dim);
  OptimizerStateBuffers s;
  s.type = st;
  if (st == OptimizerStateType::fp32) {
    s.momentum1.assign(static_cast<size_t>(a), 0.0f);
    s.momentum2.assign(static_cast<size_t>(b), 0.0f);
  } else {  // the 2-byte code of 0.0 is 0 in both fp16 and bf16
    s.packed1.assign(static_cast<size_t>(a * 2), 0);
    s.packed2.assign(static_cast<size_t>(b * 2), 0);
  }
  return s;
}

namespace {
// The update of row r (its fp32 values at w) by the gradient g (dim values): the formulas of
// apply_row_optimizer (kernels.h). The state is indexed by the shard row r.
inline void update_row(const OptimizerSpec& opt, int64_t iteration, float* __restrict w, int64_t r, int64_t dim,
                       RowOptimizerState& state, const float* __restrict g) {
  const float lr = static_cast<float>(opt.learning_rate);
  const float eps = static_cast<float>(opt.eps);
  switch (opt.type) {
    case OptimizerType::sgd:
      for (int64_t c = 0; c < dim; ++c) w[c] -= lr * g[c];
      break;
    case OptimizerType::rowwise_adagrad: {
      float sq = 0.0f;
      for (int64_t c = 0; c < dim; ++c) sq += g[c] * g[c];
      float& m = state.momentum1[static_cast<size_t>(r)];
      m += sq / static_cast<float>(dim);
      const float step = lr / (std::sqrt(m) + eps);
      for (int64_t c = 0; c < dim; ++c) w[c] -= step * g[c];
      break;
    }
    case OptimizerType::adam: {
      const float b1 = static_cast<float>(opt.beta1), b2 = static_cast<float>(opt.beta2);
      const float c1 = 1.0f - static_cast<float>(std::pow(opt.beta1, iteration));
      const float c2 = 1.0f - static_cast<float>(std::pow(opt.beta2, iteration));
      float* m1 = state.momentum1.data() + r * dim;
      float* m2 = state.momentum2.data() + r * dim;
      for (int64_t c = 0; c < dim; ++c) {
        m1[c] = b1 * m1[c] + (1.0f - b1) * g[c];
        m2[c] = b2 * m2[c] + (1.0f - b2) * g[c] * g[c];
        w[c] -= lr * (m1[c] / c1) / (std::sqrt(m2[c] / c2) + eps);
      }
      break;
    }
  }
}
}  // namespace

namespace {
// update_row with a reduced-precision state (RowOptimizerState::type fp16 / bf16): row r's
// state decoded into tmp1 / tmp2 (n1 / n2 values), updated there as row 0 of a one-row view,
// and encoded back in place.
class ReducedStateRow {
 public:
  ReducedStateRow(const OptimizerSpec& opt, int64_t dim, const RowOptimizerState& st)
      : code_(st.type == OptimizerStateType::fp16 ? TableDataType::fp16 : TableDataType::bf16), st_(st) {
    const auto [a, b] = optimizer_state_floats(opt.type, 1, dim);
    n1_ = a;
    n2_ = b;
    tmp1_.resize(static_cast<size_t>(n1_));
    tmp2_.resize(static_cast<size_t>(n2_));
  }
  void update(const OptimizerSpec& opt, int64_t iteration, float* w, int64_t r, int64_t dim, const float* g) {
    uint8_t* p1 = st_.packed1.data() + r * n1_ * 2;
    uint8_t* p2 = st_.packed2.data() + r * n2_ * 2;
    if (n1_ > 0) decode_row(code_, p1, n1_, tmp1_.data());
    if (n2_ > 0) decode_row(code_, p2, n2_, tmp2_.data());
    RowOptimizerState view;
    view.momentum1 = tmp1_;
    view.momentum2 = tmp2_;
    update_row(opt, iteration, w, 0, dim, view, g);
    if (n1_ > 0) encode_row(code_, tmp1_.data(), n1_, p1);
    if (n2_ > 0) encode_row(code_, tmp2_.data(), n2_, p2);
  }

 private:
  TableDataType code_;
  const RowOptimizerState& st_;
  int64_t n1_ = 0, n2_ = 0;
  std::vector<float> tmp1_, tmp2_;
};
}  // namespace

void apply_row_optimizer(const OptimizerSpec& opt, int64_t iteration, float* weights,
                         int64_t dim, RowOptimizerState state, const SparseGrad& grad) {
  const size_t n = grad.rows.size();
  if (state.type != OptimizerStateType::fp32) {
    ReducedStateRow rs(opt, dim, state);
    for (size_t u = 0; u < n; ++u)
      rs.update(opt, iteration, weights + grad.rows[u] * dim, grad.rows[u], dim,
                grad.values.data() + u * static_cast<size_t>(dim));
    return;
  }
  for (size_t u = 0; u < n; ++u) {
    const int64_t r = grad.rows[u];
    if (u + kPrefetchIds < n) {  // the rows are scattered over the shard: prefetch ahead
      const int64_t next = grad.rows[u + kPrefetchIds];
      prefetch_row(weights + next * dim, dim);
      if (opt.type == OptimizerType::rowwise_adagrad)
        prefetch_row(state.momentum1.data() + next, 1);
      if (opt.type == OptimizerType::adam) {
        prefetch_row(state.momentum1.data() + next * dim, dim);
        prefetch_row(state.momentum2.data() + next * dim, dim);
      }
    }
    update_row(opt, iteration, weights + r * dim, r, dim, state, grad.values.data() + u * static_cast<size_t>(dim));
  }
}

void pooled_lookup_encoded(TableDataType type, const uint8_t* rows, int64_t num_rows, int64_t dim,
                           const int64_t* ids, const int64_t* offsets, int64_t num_bags,
                           const float* bag_scale, float* out, int64_t out_stride) {
  if (type == TableDataType::fp32) {
    pooled_lookup(reinterpret_cast<const float*>(rows), num_rows, dim, ids, offsets, num_bags, bag_scale, out,
                  out_stride);
    return;
  }
  const int64_t stride = row_bytes(type, dim);
  std::vector<float> row(static_cast<size_t>(dim));
  for (int64_t b = 0; b < num_bags; ++b) {
    float* o = out + b * out_stride;
    std::fill_n(o, dim, 0.0f);
    for (int64_t i = offsets[b]; i < offsets[b + 1]; ++i) {
      decode_row(type, rows + ids[i] * stride, dim, row.data());
      add_row(o, row.data(), dim);
    }
    if (bag_scale != nullptr && bag_scale[b] != 1.0f) {
      const float s = bag_scale[b];
      for (int64_t c = 0; c < dim; ++c) o[c] *= s;
    }
  }
}

void apply_row_optimizer_encoded(const OptimizerSpec& opt, int64_t iteration, TableDataType type, uint8_t* rows,
                                 int64_t dim, RowOptimizerState state, const SparseGrad& grad, QuantError* err,
                                 const StochasticRoundingKey* sr) {
  if (type == TableDataType::fp32) {
    apply_row_optimizer(opt, iteration, reinterpret_cast<float*>(rows), dim, state, grad);
    return;
  }
  const int64_t stride = row_bytes(type, dim);
  std::vector<float> w(static_cast<size_t>(dim));
  std::optional<ReducedStateRow> rs;
  if (state.type != OptimizerStateType::fp32) rs.emplace(opt, dim, state);
  for (size_t u = 0; u < grad.rows.size(); ++u) {
    const int64_t r = grad.rows[u];
    uint8_t* at = rows + r * stride;
    decode_row(type, at, dim, w.data());
    const float* g = grad.values.data() + u * static_cast<size_t>(dim);
    if (rs) rs->update(opt, iteration, w.data(), r, dim, g);
    else update_row(opt, iteration, w.data(), r, dim, state, g);
    if (sr) encode_row_stochastic(type, w.data(), dim, at, *sr, r, iteration, err);
    else encode_row(type, w.data(), dim, at, err);
  }
}

}  // namespace embedscope::engine
