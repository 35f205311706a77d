// copy_rows (kernels/row_copy.h): the CPU reference of the batched row copies.
#include "embedscope/engine/kernels/row_copy.h"

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace embedscope::engine {

namespace {
template <class T>
T* row_of(T* base, T* alt, int64_t idx, int64_t dim, int64_t i, const char* which) {
  if (idx >= 0) return base + idx * dim;
  if (!alt)
    throw std::invalid_argument(fmt::format("copy_rows: {}_rows[{}] = {} names the {}_alt rows, which are null", which, i,
                                            idx, which));
  return alt + (-1 - idx) * dim;
}
}  // namespace

void copy_rows(int64_t n, int64_t dim, const float* src, const float* src_alt, const int64_t* src_rows, float* dst,
               float* dst_alt, const int64_t* dst_rows) {
  if (n < 0 || dim < 0) throw std::invalid_argument(fmt::format("copy_rows: negative size (n={}, dim={})", n, dim));
  if (n == 0 || dim == 0) return;
  for (int64_t i = 0; i < n; ++i) {
    const float* from = row_of(src, src_alt, src_rows ? src_rows[i] : i, dim, i, "src");
    float* to = row_of(dst, dst_alt, dst_rows ? dst_rows[i] : i, dim, i, "dst");
    std::memcpy(to, from, sizeof(float) * static_cast<size_t>(dim));
  }
}

}  // namespace embedscope::engine
