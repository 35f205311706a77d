// InputStats: per-feature figures of a workload's input (input_stats.h).
#include "embedscope/engine/input/input_stats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "embedscope/engine/input/hashing.h"
#include "embedscope/engine/input/source.h"

namespace embedscope::engine {

InputStats::InputStats(const WorkloadSpec& spec)
    : row_count_(spec.features.size()),
      length_count_(spec.features.size()),
      out_of_range_(spec.features.size(), 0),
      stored_count_(spec.features.size()),
      table_collisions_(spec.tables.size(), 0) {
  const FeatureIndex index(spec);
  for (const auto& t : spec.tables)
    if (t.hash_size > 0) hashing_ = spec;
  for (size_t f = 0; f < spec.features.size(); ++f) {
    FeatureInputStats s;
    s.feature = spec.features[f].name;
    const int t = index.table_of_feature()[f];
    if (t >= 0) {
      s.table = spec.tables[static_cast<size_t>(t)].name;
      s.num_embeddings = spec.tables[static_cast<size_t>(t)].num_embeddings;
      s.hash_size = spec.tables[static_cast<size_t>(t)].hash_size;
    }
    base_.push_back(std::move(s));
  }
}

void InputStats::add(const KJT& kjt) {
  if (static_cast<size_t>(kjt.num_features) != base_.size())
    throw std::invalid_argument(fmt::format("InputStats::add: the batch has {} features, the workload {}", kjt.num_features,
                                            base_.size()));
  const int64_t B = kjt.batch_size;
  size_t pos = 0;
  for (size_t f = 0; f < base_.size(); ++f) {
    const int64_t n = base_[f].num_embeddings, hash_size = base_[f].hash_size;
    auto& rows = row_count_[f];
    auto& stored = stored_count_[f];
    auto& lengths = length_count_[f];
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = kjt.lengths[f * static_cast<size_t>(B) + static_cast<size_t>(b)];
      ++lengths[len];
      for (int64_t i = 0; i < len; ++i) {
        const int64_t id = kjt.values[pos++];
        if (id < 0 || id >= n)
          ++out_of_range_[f];
        else {
          ++rows[id];
          if (hash_size > 0) ++stored[hashed_row(id, hash_size)];
        }
      }
    }
  }
  ++batches_;
  if (hashing_) {  // the collisions as a run counts them: on the batch as the rank hashes it
    KJT hashed = kjt;
    const std::vector<int64_t> c = apply_hashing(*hashing_, hashed);
    for (size_t t = 0; t < c.size() && t < table_collisions_.size(); ++t) table_collisions_[t] += c[t];
  }
}

namespace {
// Share of the lookups (row -> count) on the hottest k rows; 0 without lookups.
double share_on_hottest(std::vector<int64_t>& counts, int64_t k) {
  std::sort(counts.begin(), counts.end(), std::greater<>());
  int64_t sum = 0, lookups = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    lookups += counts[i];
    if (static_cast<int64_t>(i) < k) sum += counts[i];
  }
  return lookups > 0 ? static_cast<double>(sum) / static_cast<double>(lookups) : 0.0;
}
}  // namespace

std::vector<FeatureInputStats> InputStats::result() const {
  std::vector<FeatureInputStats> out = base_;
  for (size_t f = 0; f < out.size(); ++f) {
    FeatureInputStats& s = out[f];
    const std::map<int64_t, int64_t> lengths(length_count_[f].begin(), length_count_[f].end());
    for (const auto& [len, bags] : lengths) {
      s.bags += bags;
      s.ids += len * bags;
      s.ids_per_bag_max = len;
    }
    s.ids_per_bag_mean = s.bags > 0 ? static_cast<double>(s.ids) / static_cast<double>(s.bags) : 0.0;
    const int64_t rank99 = (s.bags * 99 + 99) / 100;  // ceil(0.99 bags): nearest rank
    int64_t seen = 0;
    for (const auto& [len, bags] : lengths) {
      seen += bags;
      if (seen >= rank99) {
        s.ids_per_bag_p99 = len;
        break;
      }
    }
    s.out_of_range = out_of_range_[f];
    std::vector<int64_t> counts;
    counts.reserve(row_count_[f].size());
    int64_t lookups = 0;
    for (const auto& [row, c] : row_count_[f]) {
      counts.push_back(c);
      lookups += c;
    }
    s.distinct_ids = static_cast<int64_t>(counts.size());
    std::sort(counts.begin(), counts.end(), std::greater<>());
    auto share_of_top = [&](int64_t k) {
      int64_t sum = 0;
      for (size_t i = 0; i < counts.size() && static_cast<int64_t>(i) < k; ++i) sum += counts[i];
      return lookups > 0 ? static_cast<double>(sum) / static_cast<double>(lookups) : 0.0;
    };
    s.hot_rows_1 = std::max<int64_t>(1, (s.num_embeddings + 99) / 100);
    s.hot_rows_10 = std::max<int64_t>(1, (s.num_embeddings + 9) / 10);
    s.top1_share = share_of_top(s.hot_rows_1);
    s.top10_share = share_of_top(s.hot_rows_10);
    if (s.hash_size > 0) {
      std::vector<int64_t> stored;
      stored.reserve(stored_count_[f].size());
      for (const auto& [row, c] : stored_count_[f]) stored.push_back(c);
      s.distinct_stored_rows = static_cast<int64_t>(stored.size());
      s.stored_hot_rows_1 = std::max<int64_t>(1, (s.hash_size + 99) / 100);
      s.stored_hot_rows_10 = std::max<int64_t>(1, (s.hash_size + 9) / 10);
      s.stored_top1_share = share_on_hottest(stored, s.stored_hot_rows_1);
      s.stored_top10_share = share_on_hottest(stored, s.stored_hot_rows_10);
      const FeatureIndex index(*hashing_);
      const int t = index.table_of_feature()[f];
      s.collisions = t >= 0 ? table_collisions_[static_cast<size_t>(t)] : 0;
      s.collisions_per_batch = batches_ > 0 ? static_cast<double>(s.collisions) / static_cast<double>(batches_) : 0.0;
    }
  }
  return out;
}

InputInspection inspect_input(const WorkloadSpec& spec, int64_t max_batches, bool measured_only) {
  const std::unique_ptr<BatchSource> source = make_batch_source(spec);
  return inspect_batches(spec, *source, max_batches, measured_only);
}

InputInspection inspect_batches(const WorkloadSpec& spec, BatchSource& source, int64_t max_batches, bool measured_only) {
  InputStats stats(spec);
  // the generator makes any batch on its own; a file source reads in order (its skipped lines too)
  const bool random_access = spec.input.kind == InputKind::synthetic;
  InputInspection out;
  const int64_t iterations = spec.warmup_steps + spec.steps;
  const int64_t first = measured_only ? spec.warmup_steps : 0;  // the first iteration counted
  out.run_batches = (iterations - first) * spec.devices.count;
  const int64_t wanted = max_batches > 0 ? std::min(max_batches, out.run_batches) : out.run_batches;
  for (int64_t it = 0; it < iterations && out.batches < wanted; ++it)
    for (int r = 0; r < spec.devices.count && out.batches < wanted; ++r) {
      if (it < first && random_access) {  // not counted, so not made
        ++out.warmup_batches_left_out;
        continue;
      }
      const Batch b = source.make(it, r);
      out.skipped_lines += b.skipped_lines;
      if (it < first) {
        ++out.warmup_batches_left_out;
        continue;
      }
      stats.add(b.kjt);
      ++out.batches;
    }
  out.features = stats.result();
  out.samples = out.batches * spec.batch_size;
  return out;
}

}  // namespace embedscope::engine
