#include "embedscope/engine/input/id_histogram.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace embedscope::engine {

IdHistogram::IdHistogram(const WorkloadSpec& spec) : table_of_feature_(spec.features.size(), -1) {
  const FeatureIndex index(spec);  // O(n log n) in tables and features
  for (size_t t = 0; t < spec.tables.size(); ++t) {
    rows_.push_back(spec.tables[t].rows());
    counts_.emplace_back(static_cast<size_t>(buckets_of(spec.tables[t].rows())), 0);
    for (const int i : index.features_of_table()[t])
      if (i >= 0) table_of_feature_[static_cast<size_t>(i)] = static_cast<int>(t);
  }
}

void IdHistogram::add(const WorkloadSpec& spec, const KJT& kjt) {
  if (kjt.num_features != static_cast<int>(spec.features.size()))
    throw std::invalid_argument("id histogram: the batch has " + std::to_string(kjt.num_features) +
                                " features, the workload " + std::to_string(spec.features.size()));
  int64_t pos = 0;
  for (int f = 0; f < kjt.num_features; ++f) {
    int64_t n = 0;
    for (int64_t b = 0; b < kjt.batch_size; ++b) n += kjt.lengths[static_cast<size_t>(f * kjt.batch_size + b)];
    const int t = table_of_feature_[static_cast<size_t>(f)];
    if (t >= 0) {
      const int64_t rows = rows_[static_cast<size_t>(t)];
      auto& counts = counts_[static_cast<size_t>(t)];
      for (int64_t i = pos; i < pos + n; ++i) {
        const int64_t id = kjt.values[static_cast<size_t>(i)];
        if (id >= 0 && id < rows) ++counts[static_cast<size_t>(sessions::id_bucket_of_row(rows, id))];
      }
    }
    pos += n;
  }
}

std::vector<sessions::IdHistogramBucket> IdHistogram::add_changed(const IdHistogram& more, int32_t rank) {
  if (more.rows_ != rows_) throw std::invalid_argument("id histogram: the two histograms count different tables");
  std::vector<sessions::IdHistogramBucket> out;
  for (size_t t = 0; t < counts_.size(); ++t)
    for (size_t b = 0; b < counts_[t].size(); ++b) {
      const int64_t n = more.counts_[t][b];
      if (n == 0) continue;
      counts_[t][b] += n;
      out.push_back({rank, static_cast<int32_t>(t), static_cast<int32_t>(b), bucket_begin(rows_[t], static_cast<int64_t>(b)),
                     bucket_begin(rows_[t], static_cast<int64_t>(b) + 1), counts_[t][b]});
    }
  return out;
}

IdHistogram IdHistogram::zeroed() const {
  IdHistogram z = *this;
  for (auto& c : z.counts_) std::fill(c.begin(), c.end(), 0);
  return z;
}

std::vector<sessions::IdHistogramBucket> IdHistogram::buckets(int32_t rank) const {
  std::vector<sessions::IdHistogramBucket> out;
  for (size_t t = 0; t < counts_.size(); ++t)
    for (size_t b = 0; b < counts_[t].size(); ++b)
      if (counts_[t][b] > 0)
        out.push_back({rank, static_cast<int32_t>(t), static_cast<int32_t>(b),
                       bucket_begin(rows_[t], static_cast<int64_t>(b)), bucket_begin(rows_[t], static_cast<int64_t>(b) + 1),
                       counts_[t][b]});
  return out;
}

}  // namespace embedscope::engine
