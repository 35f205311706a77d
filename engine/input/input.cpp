#include "embedscope/engine/input/input.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace embedscope::engine {

std::vector<int64_t> KJT::offsets() const {
  std::vector<int64_t> off(lengths.size() + 1, 0);
  std::partial_sum(lengths.begin(), lengths.end(), off.begin() + 1);
  return off;
}

int64_t KJT::feature_offset(int f) const {
  return std::accumulate(lengths.begin(), lengths.begin() + static_cast<int64_t>(f) * batch_size, int64_t{0});
}

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

namespace {
double unit(uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }
uint64_t seed_of(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0) {
  return mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d);
}
}  // namespace

// ---- Zipf (rejection-inversion) ---------------------------------------------------------
// Works on x in [1, n] with weight x^-alpha; returns x - 1.
ZipfSampler::ZipfSampler(int64_t n, double alpha) : n_(n), alpha_(alpha) {
  h_x1_ = h(1.5) - 1.0;
  h_n_ = h(static_cast<double>(n) + 0.5);
  s_ = 2.0 - h_inv(h(2.5) - std::pow(2.0, -alpha));
}

double ZipfSampler::h(double x) const {
  // integral of x^-alpha: (x^(1-alpha) - 1) / (1 - alpha), log(x) at alpha == 1
  const double e = 1.0 - alpha_;
  return std::abs(e) < 1e-12 ? std::log(x) : std::expm1(e * std::log(x)) / e;
}

double ZipfSampler::h_inv(double x) const {
  const double e = 1.0 - alpha_;
  if (std::abs(e) < 1e-12) return std::exp(x);
  double t = x * e;
  if (t < -1.0) t = -1.0;  // guard rounding at the domain edge
  return std::exp(std::log1p(t) / e);
}

int64_t ZipfSampler::operator()(std::mt19937_64& rng) const {
  if (n_ <= 1) return 0;
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  for (;;) {
    const double u = h_n_ + u01(rng) * (h_x1_ - h_n_);
    const double x = h_inv(u);
    double k = std::floor(x + 0.5);
    if (k < 1) k = 1;
    if (k > static_cast<double>(n_)) k = static_cast<double>(n_);
    if (k - x <= s_ || u >= h(k + 0.5) - std::pow(k, -alpha_)) return static_cast<int64_t>(k) - 1;
  }
}

// ---- permutation -------------------------------------------------------------------------
RowPermutation::RowPermutation(int64_t n, uint64_t seed) : n_(n), a_(1), c_(0) {
  if (n <= 1) return;
  uint64_t h = mix64(seed);
  a_ = static_cast<int64_t>(h % static_cast<uint64_t>(n));
  if (a_ == 0) a_ = 1;
  while (std::gcd(a_, n) != 1) a_ = a_ % (n - 1) + 1;
  c_ = static_cast<int64_t>(mix64(h) % static_cast<uint64_t>(n));
}

int64_t RowPermutation::operator()(int64_t k) const {
  __extension__ using wide = __int128;  // a k overflows 64 bits for n above 2^32
  return static_cast<int64_t>((static_cast<wide>(a_) * k + c_) % n_);
}

// ---- weights ------------------------------------------------------------------------------
float initial_weight(uint64_t seed, int table, int64_t row, int64_t col, int64_t num_embeddings) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(num_embeddings));
  const uint64_t h = mix64(seed_of(seed, 0x5eedULL + static_cast<uint64_t>(table), static_cast<uint64_t>(row)) +
                           static_cast<uint64_t>(col));
  return static_cast<float>((2.0 * unit(h) - 1.0) * bound);
}

void init_shard(uint64_t seed, int table, int64_t num_embeddings, int64_t row_offset, int64_t rows,
                int64_t col_offset, int64_t cols, float* out) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(num_embeddings));
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t base = seed_of(seed, 0x5eedULL + static_cast<uint64_t>(table), static_cast<uint64_t>(row_offset + r));
    for (int64_t c = 0; c < cols; ++c) {
      const uint64_t h = mix64(base + static_cast<uint64_t>(col_offset + c));
      out[r * cols + c] = static_cast<float>((2.0 * unit(h) - 1.0) * bound);
    }
  }
}

RowPermutation feature_row_permutation(const WorkloadSpec& spec, int feature, int64_t num_embeddings) {
  const auto& ids = spec.features[static_cast<size_t>(feature)].ids;
  const uint64_t pseed =
      ids.permute_seed != 0 ? ids.permute_seed : seed_of(spec.seed, 0x9e37ULL, static_cast<uint64_t>(feature));
  return RowPermutation(ids.permute ? num_embeddings : 1, pseed);
}

// ---- batches ------------------------------------------------------------------------------
BatchGenerator::BatchGenerator(const WorkloadSpec& spec) : spec_(spec), table_of_(FeatureIndex(spec).table_of_feature()) {
  for (size_t f = 0; f < spec.features.size(); ++f) {
    const auto& t = spec.tables[static_cast<size_t>(table_of_[f])];
    const auto& ids = spec.features[f].ids;
    zipf_.emplace_back(t.num_embeddings, ids.kind == IdDistributionKind::zipf ? ids.alpha : 1.0);
    perm_.push_back(feature_row_permutation(spec, static_cast<int>(f), t.num_embeddings));
    int key = t.written_index >= 0 ? t.written_index : table_of_[f];
    for (const auto& st : t.shared_tables)
      if (st.written_index >= 0 &&
          std::find(st.feature_names.begin(), st.feature_names.end(), spec.features[f].name) != st.feature_names.end())
        key = st.written_index;
    teacher_table_.push_back(static_cast<uint64_t>(key));
  }
}

Batch BatchGenerator::make(int64_t iteration, int rank) const {
  const int64_t B = spec_.batch_size;
  const int F = static_cast<int>(spec_.features.size());
  Batch batch;
  KJT& kjt = batch.kjt;
  kjt.batch_size = B;
  kjt.num_features = F;
  kjt.lengths.resize(static_cast<size_t>(F * B));
  std::vector<double> teacher(static_cast<size_t>(B), 0.0);
  for (int f = 0; f < F; ++f) {
    const FeatureSpec& fs = spec_.features[static_cast<size_t>(f)];
    const int t = table_of_[static_cast<size_t>(f)];
    const int64_t n = spec_.tables[static_cast<size_t>(t)].num_embeddings;
    std::mt19937_64 rng(seed_of(spec_.seed, static_cast<uint64_t>(iteration), static_cast<uint64_t>(rank),
                                static_cast<uint64_t>(f) + 1));
    std::poisson_distribution<int64_t> poisson(fs.pooling_factor.mean > 0 ? fs.pooling_factor.mean : 1.0);
    std::uniform_int_distribution<int64_t> uniform(0, n - 1);
    const bool permute = fs.ids.permute && fs.ids.kind == IdDistributionKind::zipf;
    for (int64_t b = 0; b < B; ++b) {
      int64_t len = static_cast<int64_t>(fs.pooling_factor.mean);
      if (!fs.pooling_factor.fixed)
        len = fs.pooling_factor.mean > 0 ? std::min(poisson(rng), fs.pooling_factor.max) : 0;
      kjt.lengths[static_cast<size_t>(f * B + b)] = len;
      double score = 0;
      for (int64_t i = 0; i < len; ++i) {
        int64_t id = fs.ids.kind == IdDistributionKind::zipf ? zipf_[static_cast<size_t>(f)](rng) : uniform(rng);
        if (permute) id = perm_[static_cast<size_t>(f)](id);
        kjt.values.push_back(id);
        // teacher: a fixed +-1 score per (table, row)
        score += (mix64(seed_of(spec_.seed, 0x7eacULL, teacher_table_[static_cast<size_t>(f)], static_cast<uint64_t>(id))) & 1)
                     ? 1.0
                     : -1.0;
      }
      if (len > 0) teacher[static_cast<size_t>(b)] += score / std::sqrt(static_cast<double>(len));
    }
  }
  std::mt19937_64 rng(seed_of(spec_.seed, static_cast<uint64_t>(iteration), static_cast<uint64_t>(rank), 0));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int nd = spec_.dense ? spec_.dense->num_dense_features : 0;
  batch.dense.resize(static_cast<size_t>(B * nd));
  for (int64_t b = 0; b < B; ++b) {
    double lin = 0;
    for (int j = 0; j < nd; ++j) {
      const float x = normal(rng);
      batch.dense[static_cast<size_t>(b * nd + j)] = x;
      lin += x * ((j % 2) ? 0.5 : -0.5);
    }
    teacher[static_cast<size_t>(b)] = teacher[static_cast<size_t>(b)] / std::sqrt(static_cast<double>(F)) + lin;
  }
  // About a quarter of the labels are positive (Criteo's click rate is ~26%): the teacher's
  // score is ~N(0, 1 + nd/4), and its 75th percentile is 0.674 standard deviations.
  const double threshold = 0.674 * std::sqrt(1.0 + 0.25 * nd);
  batch.labels.resize(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) batch.labels[static_cast<size_t>(b)] = teacher[static_cast<size_t>(b)] > threshold ? 1.0f : 0.0f;
  return batch;
}

std::vector<int64_t> apply_invalid_id_policy(const WorkloadSpec& spec, KJT& kjt, int rank, const std::string& origin) {
  const int64_t B = kjt.batch_size;
  std::vector<int64_t> fixed(static_cast<size_t>(kjt.num_features), 0);
  std::vector<int64_t> out_values;
  bool changed = false;
  int64_t pos = 0;
  const std::vector<int> table_of = FeatureIndex(spec).table_of_feature();  // O(n log n), not a scan per feature
  for (int f = 0; f < kjt.num_features; ++f) {
    const int64_t n = spec.tables[static_cast<size_t>(table_of[static_cast<size_t>(f)])].num_embeddings;
    std::vector<int64_t> examples;
    int64_t bad = 0;
    for (int64_t b = 0; b < B; ++b) {
      int64_t& len = kjt.lengths[static_cast<size_t>(f * B + b)];
      int64_t kept = 0;
      for (int64_t i = 0; i < len; ++i) {
        int64_t id = kjt.values[static_cast<size_t>(pos + i)];
        if (id < 0 || id >= n) {
          ++bad;
          if (examples.size() < 5) examples.push_back(id);
          if (spec.invalid_ids == InvalidIdPolicy::drop) { changed = true; continue; }
          id = id < 0 ? 0 : n - 1;
        }
        out_values.push_back(id);
        ++kept;
      }
      pos += len;
      len = kept;
    }
    if (bad > 0 && spec.invalid_ids == InvalidIdPolicy::error)
      throw InvalidIdsError(fmt::format(
          "{}rank {}: feature '{}': {} id(s) outside [0, {}) (num_embeddings of table '{}'), e.g. {}; set "
          "\"invalid_ids\" to \"clamp\" or \"drop\" to continue with them",
          origin.empty() ? std::string() : origin + ", ", rank, spec.features[static_cast<size_t>(f)].name, bad, n,
          spec.tables[static_cast<size_t>(table_of[static_cast<size_t>(f)])].name,
          fmt::join(examples, ", ")));
    fixed[static_cast<size_t>(f)] = bad;
    if (bad > 0) changed = true;
  }
  if (changed) kjt.values = std::move(out_values);
  return fixed;
}

}  // namespace embedscope::engine
