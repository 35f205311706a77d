#include "embedscope/engine/kernels/low_rank.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace embedscope::engine {

void low_rank_pooled_lookup(const float* a, int64_t /*num_rows*/, int64_t r, const float* b, int64_t dim,
                            const int64_t* ids, const int64_t* offsets, int64_t num_bags, const float* bag_scale,
                            float* out, int64_t out_stride) {
  std::vector<float> p(static_cast<size_t>(r));
  for (int64_t bag = 0; bag < num_bags; ++bag) {
    std::fill(p.begin(), p.end(), 0.0f);
    for (int64_t i = offsets[bag]; i < offsets[bag + 1]; ++i) {
      const float* row = a + ids[i] * r;
      for (int64_t k = 0; k < r; ++k) p[static_cast<size_t>(k)] += row[k];
    }
    if (bag_scale != nullptr && bag_scale[bag] != 1.0f)
      for (auto& v : p) v *= bag_scale[bag];
    float* o = out + bag * out_stride;
    std::fill_n(o, dim, 0.0f);
    for (int64_t k = 0; k < r; ++k) {
      const float pk = p[static_cast<size_t>(k)];
      const float* bk = b + k * dim;
      for (int64_t c = 0; c < dim; ++c) o[c] += pk * bk[c];
    }
  }
}

std::pair<SparseGrad, SparseGrad> low_rank_backward(const float* a, int64_t r, const float* b, int64_t dim,
                                                    const SparseGrad& grad) {
  SparseGrad da, db;
  da.dim = r;
  db.dim = dim;
  const size_t n = grad.rows.size();
  da.rows = grad.rows;
  da.values.assign(n * static_cast<size_t>(r), 0.0f);
  if (n == 0) return {std::move(da), std::move(db)};
  db.rows.resize(static_cast<size_t>(r));
  std::iota(db.rows.begin(), db.rows.end(), int64_t{0});
  db.values.assign(static_cast<size_t>(r * dim), 0.0f);
  for (size_t u = 0; u < n; ++u) {
    const float* g = grad.values.data() + u * static_cast<size_t>(dim);
    const float* ai = a + grad.rows[u] * r;
    float* dai = da.values.data() + u * static_cast<size_t>(r);
    for (int64_t k = 0; k < r; ++k) {
      const float* bk = b + k * dim;
      float* dbk = db.values.data() + k * dim;
      const float aik = ai[k];
      float s = 0.0f;
      for (int64_t c = 0; c < dim; ++c) {
        s += g[c] * bk[c];
        dbk[c] += aik * g[c];
      }
      dai[k] = s;
    }
  }
  return {std::move(da), std::move(db)};
}

void low_rank_row(const float* a, int64_t r, const float* b, int64_t dim, int64_t i, float* out) {
  std::fill_n(out, dim, 0.0f);
  for (int64_t k = 0; k < r; ++k) {
    const float aik = a[i * r + k];
    for (int64_t c = 0; c < dim; ++c) out[c] += aik * b[k * dim + c];
  }
}

}  // namespace embedscope::engine
