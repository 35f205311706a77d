#pragma once
// A Criteo-shaped workload for the input tests (criteo_kaggle's 26 features, dense part and
// MLPs, with its tables cut to `max_rows` rows so the unsharded reference stays small), and the
// batches a Criteo file should give, built from the generator's records without the reader
// (a test's independent parse: modulo num_embeddings, log(1 + x), x < 0 -> 0).

#include <cmath>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "embedscope/engine/input/input.h"
#include "embedscope/engine/workload/presets.h"
#include "support/criteo_fixture.h"

namespace embedscope::engine::criteo_test {

inline WorkloadSpec criteo_spec(const std::vector<std::string>& paths, int world, int64_t batch, int64_t max_rows) {
  WorkloadSpec s = load_preset("criteo_kaggle");
  for (auto& t : s.tables) t.num_embeddings = std::min(t.num_embeddings, max_rows);
  s.input.kind = InputKind::criteo_tsv;
  s.input.paths = paths;
  s.devices.count = world;
  s.devices.memory_bytes = int64_t{256} << 20;
  s.batch_size = batch;
  s.steps = 3;
  s.warmup_steps = 0;
  s.collective_timeout_ms = 20000;
  return s;
}

/// The local batch of (iteration, rank): samples [it G + r B, it G + (r+1) B) of `records`
/// (G = B x world), categorical values mod num_embeddings (or raw), dense log1p(max(x, 0)).
inline Batch expected_batch(const WorkloadSpec& s, const std::vector<test_support::CriteoRecord>& records, int64_t it,
                            int rank, bool raw = false) {
  const int64_t B = s.batch_size, G = B * s.devices.count;
  Batch batch;
  batch.kjt.batch_size = B;
  batch.kjt.num_features = 26;
  batch.kjt.lengths.assign(static_cast<size_t>(26 * B), 0);
  const size_t first = static_cast<size_t>(it * G + rank * B);
  for (int f = 0; f < 26; ++f) {
    const int64_t n = s.tables[static_cast<size_t>(s.table_of_feature(static_cast<size_t>(f)))].num_embeddings;
    for (int64_t b = 0; b < B; ++b) {
      const auto& c = records.at(first + static_cast<size_t>(b)).cat[static_cast<size_t>(f)];
      if (!c) continue;
      batch.kjt.lengths[static_cast<size_t>(f * B + b)] = 1;
      batch.kjt.values.push_back(raw ? static_cast<int64_t>(*c) : static_cast<int64_t>(*c % static_cast<uint64_t>(n)));
    }
  }
  for (int64_t b = 0; b < B; ++b) {
    const auto& r = records.at(first + static_cast<size_t>(b));
    for (const auto& d : r.dense) batch.dense.push_back(d && *d > 0 ? static_cast<float>(std::log(1.0 + static_cast<double>(*d))) : 0.0f);
    batch.labels.push_back(static_cast<float>(r.label));
  }
  return batch;
}

/// A fresh scratch folder under the system temp directory, removed by the destructor.
struct Scratch {
  std::filesystem::path dir;
  explicit Scratch(const std::string& name)
      : dir(std::filesystem::temp_directory_path() / ("es_" + name + "_" + std::to_string(getpid()))) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~Scratch() { std::filesystem::remove_all(dir); }
  std::string operator/(const std::string& f) const { return (dir / f).string(); }
};

}  // namespace embedscope::engine::criteo_test
