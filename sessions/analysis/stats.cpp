#include "embedscope/sessions/analysis/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace embedscope::sessions {

int64_t percentile_nearest_rank(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) throw std::invalid_argument("percentile of an empty sample");
  if (!(p > 0.0 && p <= 100.0)) throw std::invalid_argument("percentile must be in (0, 100]");
  const auto n = static_cast<double>(sorted.size());
  auto rank = static_cast<size_t>(std::ceil(p / 100.0 * n));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

Distribution summarize(std::vector<int64_t> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.count = static_cast<int64_t>(values.size());
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  d.min = values.front();
  d.max = values.back();
  d.p50 = percentile_nearest_rank(values, 50);
  d.p99 = percentile_nearest_rank(values, 99);
  return d;
}

}  // namespace embedscope::sessions
