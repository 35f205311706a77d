// fit_zipf and token_counts (input/zipf_fit.h).

#include "embedscope/engine/input/zipf_fit.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>

namespace embedscope::engine {

ZipfFit fit_zipf(const std::vector<int64_t>& counts, int64_t first_rank, int64_t last_rank) {
  std::vector<int64_t> c;
  ZipfFit f;
  for (int64_t v : counts)
    if (v > 0) {
      c.push_back(v);
      f.total += v;
    }
  std::sort(c.begin(), c.end(), std::greater<>());
  f.distinct = static_cast<int64_t>(c.size());
  if (first_rank < 1) throw std::invalid_argument("fit_zipf: first_rank must be >= 1, got " + std::to_string(first_rank));
  const int64_t last = last_rank <= 0 || last_rank > f.distinct ? f.distinct : last_rank;
  if (last - first_rank + 1 < 2)
    throw std::invalid_argument("fit_zipf: the fit needs at least two ranks with a nonzero count, got ranks " +
                                std::to_string(first_rank) + ".." + std::to_string(last) + " of " +
                                std::to_string(f.distinct) + " distinct ids");
  f.first_rank = first_rank;
  f.last_rank = last;
  const auto n = static_cast<double>(last - first_rank + 1);
  double sx = 0, sy = 0;
  for (int64_t r = first_rank; r <= last; ++r) {
    sx += std::log(static_cast<double>(r));
    sy += std::log(static_cast<double>(c[static_cast<size_t>(r - 1)]));
  }
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0, syy = 0;
  for (int64_t r = first_rank; r <= last; ++r) {
    const double dx = std::log(static_cast<double>(r)) - mx;
    const double dy = std::log(static_cast<double>(c[static_cast<size_t>(r - 1)])) - my;
    sxx += dx * dx;
    sxy += dx * dy;
    syy += dy * dy;
  }
  const double slope = sxy / sxx;
  f.alpha = -slope;
  f.log_c = my - slope * mx;
  f.r_squared = syy > 0 ? (sxy * sxy) / (sxx * syy) : 1.0;
  return f;
}

std::vector<int64_t> token_counts(const std::vector<int64_t>& ids, int64_t vocab_size) {
  std::vector<int64_t> out(static_cast<size_t>(vocab_size), 0);
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size)
      throw std::out_of_range("token_counts: id " + std::to_string(id) + " outside [0, " + std::to_string(vocab_size) + ")");
    ++out[static_cast<size_t>(id)];
  }
  return out;
}

}  // namespace embedscope::engine
