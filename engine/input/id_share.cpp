// Expected id shares of row ranges (input/id_share.h).
#include "embedscope/engine/input/id_share.h"
#include "embedscope/engine/input/realized_share.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "embedscope/engine/input/hashing.h"
#include "embedscope/engine/input/input.h"

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

namespace {
// The hottest ranks' rows of one permuted Zipf feature, ascending, and their mass's prefix sums.
struct HotRows {
  std::vector<int64_t> rows;
  std::vector<double> prefix;  // prefix[i]: mass of rows[0, i)
};
}  // namespace

namespace {
// The buckets of a hashed table's kHashedExact most likely ids, ascending and merged, with their
// mass's prefix sums, and the mass of the ids left out.
struct HashedRows {
  std::vector<int64_t> rows;
  std::vector<double> prefix;  // prefix[i]: mass of rows[0, i)
  double rest = 0;             // mass of the ids beyond the exact ones
};

constexpr int64_t kHashedExact = int64_t{1} << 16;

// realized_id_share of a hashed table: the ids in [0, num_embeddings) drawn as BatchGenerator
// draws them (Zipf rank k -> id k, or perm(k) when permuted; uniform: every id 1/n), each put in
// its bucket hashed_row(id, hash_size); the kHashedExact likeliest ids exactly, the rest's mass
// spread evenly over the buckets (its expectation over the hash).
double hashed_id_share(const WorkloadSpec& spec, const TableSpec& t, int feature, int64_t row_offset, int64_t num_rows) {
  const IdDistribution& d = spec.features[static_cast<size_t>(feature)].ids;
  const int64_t n = t.num_embeddings, H = t.hash_size;
  const bool zipf = d.kind == IdDistributionKind::zipf;
  const bool permute = zipf && d.permute;
  const RowPermutation perm = feature_row_permutation(spec, feature, n);
  const int64_t p0 = permute ? perm(0) : 0, p1 = permute && n > 1 ? perm(1) : 1;
  // (at most 64 tables a thread, 1 MiB each, then the cache starts over)
  thread_local std::map<std::tuple<int64_t, int64_t, double, int64_t, int64_t>, HashedRows> cache;
  const std::tuple<int64_t, int64_t, double, int64_t, int64_t> key{n, H, zipf ? d.alpha : 0.0, p0, p1};
  if (cache.size() >= 64 && cache.find(key) == cache.end()) cache.clear();
  HashedRows& h = cache[key];
  if (h.prefix.empty()) {
    const double total = zipf ? zipf_mass(n, d.alpha) : static_cast<double>(n);
    const int64_t exact = std::min(n, kHashedExact);
    std::vector<std::pair<int64_t, double>> rm;
    rm.reserve(static_cast<size_t>(exact));
    double in_exact = 0;
    for (int64_t k = 0; k < exact; ++k) {
      const double mass = (zipf ? std::pow(static_cast<double>(k + 1), -d.alpha) : 1.0) / total;
      rm.emplace_back(hashed_row(permute ? perm(k) : k, H), mass);
      in_exact += mass;
    }
    std::sort(rm.begin(), rm.end());
    h.prefix.push_back(0);
    for (const auto& [row, mass] : rm) {
      if (!h.rows.empty() && h.rows.back() == row) {
        h.prefix.back() += mass;
        continue;
      }
      h.rows.push_back(row);
      h.prefix.push_back(h.prefix.back() + mass);
    }
    h.rest = std::max(0.0, 1.0 - in_exact);
  }
  const auto lo = std::lower_bound(h.rows.begin(), h.rows.end(), row_offset) - h.rows.begin();
  const auto hi = std::lower_bound(h.rows.begin(), h.rows.end(), row_offset + num_rows) - h.rows.begin();
  const double in_exact = h.prefix[static_cast<size_t>(hi)] - h.prefix[static_cast<size_t>(lo)];
  return std::clamp(in_exact + h.rest * static_cast<double>(num_rows) / static_cast<double>(H), 0.0, 1.0);
}
}  // namespace

double realized_id_share(const WorkloadSpec& spec, const TableSpec& t, int feature, int64_t row_offset,
                         int64_t num_rows) {
  constexpr int64_t kHot = 4096;
  const FeatureSpec& f = spec.features[static_cast<size_t>(feature)];
  const IdDistribution& d = f.ids;
  if (t.hash_size > 0 && t.num_embeddings > 0) {
    if (num_rows <= 0) return 0.0;
    return hashed_id_share(spec, t, feature, row_offset, num_rows);
  }
  if (d.kind != IdDistributionKind::zipf || !d.permute || t.hash_size > 0 || t.num_embeddings <= 1)
    return shard_id_share(t, f, row_offset, num_rows);
  if (num_rows <= 0) return 0.0;
  const int64_t n = t.num_embeddings;
  const RowPermutation perm = feature_row_permutation(spec, feature, n);
  // the affine permutation k -> (a k + c) mod n is fixed by its first two values
  // (at most 1,024 permutations a thread, 64 KiB each: a long-lived process planning many
  // workloads starts over rather than grow)
  thread_local std::map<std::tuple<int64_t, double, int64_t, int64_t>, HotRows> cache;
  const std::tuple<int64_t, double, int64_t, int64_t> key{n, d.alpha, perm(0), perm(1)};
  if (cache.size() >= 1024 && cache.find(key) == cache.end()) cache.clear();
  HotRows& h = cache[key];
  if (h.prefix.empty()) {
    const double H = zipf_mass(n, d.alpha);
    std::vector<std::pair<int64_t, double>> rm;
    for (int64_t k = 0; k < std::min(kHot, n); ++k)
      rm.emplace_back(perm(k), std::pow(static_cast<double>(k + 1), -d.alpha) / H);  // ZipfSampler: P(k) ~ (k+1)^-alpha
    std::sort(rm.begin(), rm.end());
    h.prefix.push_back(0);
    for (const auto& [row, mass] : rm) {
      h.rows.push_back(row);
      h.prefix.push_back(h.prefix.back() + mass);
    }
  }
  const auto lo = std::lower_bound(h.rows.begin(), h.rows.end(), row_offset) - h.rows.begin();
  const auto hi = std::lower_bound(h.rows.begin(), h.rows.end(), row_offset + num_rows) - h.rows.begin();
  const double in_hot = h.prefix[static_cast<size_t>(hi)] - h.prefix[static_cast<size_t>(lo)];
  const auto cold_rows = n - static_cast<int64_t>(h.rows.size());
  const double cold_mass = std::max(0.0, 1.0 - h.prefix.back());
  const double cold_here = cold_rows > 0 ? static_cast<double>(num_rows - (hi - lo)) / static_cast<double>(cold_rows) : 0;
  return std::clamp(in_hot + cold_mass * cold_here, 0.0, 1.0);
}

}  // namespace embedscope::engine
