#include "embedscope/engine/input/hashing.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <xxhash.h>

namespace embedscope::engine {

int64_t hashed_row(int64_t id, int64_t hash_size) {
  if (hash_size <= 0) throw std::invalid_argument("hashed_row: hash_size must be > 0");
  const uint64_t h = XXH64(&id, sizeof(id), kIdHashSeed);
  return static_cast<int64_t>(h % static_cast<uint64_t>(hash_size));
}

std::vector<int64_t> apply_hashing(const WorkloadSpec& spec, KJT& kjt) {
  std::vector<int64_t> collisions(spec.tables.size(), 0);
  const std::vector<int> table_of = FeatureIndex(spec).table_of_feature();
  // per hashed table: (row, id) of every id of its features, for the collision count
  std::vector<std::vector<std::pair<int64_t, int64_t>>> seen(spec.tables.size());
  const int64_t B = kjt.batch_size;
  int64_t pos = 0;
  for (int f = 0; f < kjt.num_features; ++f) {
    int64_t n = 0;
    for (int64_t b = 0; b < B; ++b) n += kjt.lengths[static_cast<size_t>(f * B + b)];
    const int t = table_of[static_cast<size_t>(f)];
    const int64_t h = t >= 0 ? spec.tables[static_cast<size_t>(t)].hash_size : 0;
    if (h > 0)
      for (int64_t i = pos; i < pos + n; ++i) {
        int64_t& id = kjt.values[static_cast<size_t>(i)];
        const int64_t row = hashed_row(id, h);
        seen[static_cast<size_t>(t)].emplace_back(row, id);
        id = row;
      }
    pos += n;
  }
  for (size_t t = 0; t < seen.size(); ++t) {
    auto& v = seen[t];
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());  // distinct (row, id)
    for (size_t i = 0; i < v.size();) {
      size_t j = i;
      while (j < v.size() && v[j].first == v[i].first) ++j;
      if (j - i > 1) collisions[t] += static_cast<int64_t>(j - i);
      i = j;
    }
  }
  return collisions;
}

}  // namespace embedscope::engine
