// Expected id shares of row ranges (input/id_share.h).
#include "embedscope/engine/input/id_share.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace embedscope::engine {

double zipf_mass(int64_t n, double alpha) {
  constexpr int64_t kExact = 4096;
  // the exact prefix sums of one alpha, computed once per thread (a plan search asks for
  // thousands of row ranges of a few alphas)
  thread_local std::map<double, std::vector<double>> prefix_by_alpha;
  auto& prefix = prefix_by_alpha[alpha];
  if (prefix.empty()) {
    prefix.resize(kExact + 1, 0.0);
    for (int64_t k = 1; k <= kExact; ++k)
      prefix[static_cast<size_t>(k)] = prefix[static_cast<size_t>(k - 1)] + std::pow(static_cast<double>(k), -alpha);
  }
  if (n <= 0) return 0.0;
  double s = prefix[static_cast<size_t>(std::min(n, kExact))];
  if (n > kExact) {
    const double a = static_cast<double>(kExact) + 0.5, b = static_cast<double>(n) + 0.5;
    s += std::abs(alpha - 1.0) < 1e-12 ? std::log(b / a)
                                        : (std::pow(b, 1.0 - alpha) - std::pow(a, 1.0 - alpha)) / (1.0 - alpha);
  }
  return s;
}

double row_range_share(const FeatureSpec& f, int64_t num_embeddings, int64_t row_offset, int64_t num_rows) {
  if (num_embeddings <= 0 || num_rows <= 0) return 0.0;
  if (f.ids.kind == IdDistributionKind::zipf && !f.ids.permute) {
    const double total = zipf_mass(num_embeddings, f.ids.alpha);
    return (zipf_mass(row_offset + num_rows, f.ids.alpha) - zipf_mass(row_offset, f.ids.alpha)) / total;
  }
  return static_cast<double>(num_rows) / static_cast<double>(num_embeddings);
}

double shard_id_share(const TableSpec& t, const FeatureSpec& f, int64_t row_offset, int64_t num_rows) {
  if (t.hash_size > 0) {
    if (num_rows <= 0) return 0.0;
    return static_cast<double>(num_rows) / static_cast<double>(t.hash_size);
  }
  return row_range_share(f, t.num_embeddings, row_offset, num_rows);
}

}  // namespace embedscope::engine
