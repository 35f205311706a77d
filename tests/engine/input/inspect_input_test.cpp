// `embedscope inspect-input`: the skew of a Zipf-generated Criteo file and of the synthetic
// generator, checked against counts the test makes itself from the generator's values.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "criteo_support.h"
#include "embedscope/engine/input/input.h"
#include "embedscope/engine/input/input_stats.h"
#include "support/cli_run.h"

using namespace embedscope::engine;
using namespace embedscope::engine::criteo_test;
namespace ts = embedscope::test_support;
using nlohmann::json;

namespace {
/// Share of `lookups` on the hottest `k` rows of `count` (row -> lookups).
double top_share(const std::map<int64_t, int64_t>& count, int64_t k) {
  std::vector<int64_t> c;
  int64_t total = 0;
  for (const auto& [row, n] : count) c.push_back(n), total += n;
  std::sort(c.rbegin(), c.rend());
  int64_t sum = 0;
  for (size_t i = 0; i < c.size() && static_cast<int64_t>(i) < k; ++i) sum += c[i];
  return total > 0 ? static_cast<double>(sum) / static_cast<double>(total) : 0.0;
}

json inspect(const std::string& args, const Scratch& dir) {
  const auto r = ts::run_cli(EMBEDSCOPE_CLI, "inspect-input " + args + " --json", dir.dir);
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(r.out);
}
}  // namespace

TEST(InspectInput, SkewOfAZipfFileMatchesTheGeneratorsCounts) {
  Scratch dir("inspect_zipf");
  ts::CriteoFixtureOptions o;
  o.lines = 2 * 2 * 200;  // 2 steps x 2 ranks x 200
  o.alpha = 1.2;
  o.distinct = 3000;
  o.empty_share = 0.05;
  const auto records = ts::write_criteo_fixture(dir / "zipf.tsv", o);
  WorkloadSpec spec = criteo_spec({dir / "zipf.tsv"}, 2, 200, 800);
  spec.steps = 2;
  std::ofstream(dir / "w.json") << to_json(spec).dump();
  const json j = inspect(dir / "w.json", dir);
  EXPECT_EQ(j["input"], "criteo_tsv");
  EXPECT_EQ(j["samples"], 800);
  ASSERT_EQ(j["features"].size(), 26u);
  for (size_t f = 0; f < 26; ++f) {
    const int64_t n = spec.tables[f].num_embeddings;  // criteo_kaggle: table f serves feature f
    std::map<int64_t, int64_t> count;
    int64_t present = 0;
    for (const auto& r : records)
      if (r.cat[f]) ++count[static_cast<int64_t>(*r.cat[f] % static_cast<uint64_t>(n))], ++present;
    const json& got = j["features"][f];
    SCOPED_TRACE(got["feature"].get<std::string>());
    const int64_t k1 = std::max<int64_t>(1, (n + 99) / 100), k10 = std::max<int64_t>(1, (n + 9) / 10);
    EXPECT_EQ(got["top1_rows"], k1);
    EXPECT_EQ(got["top10_rows"], k10);
    EXPECT_NEAR(got["top1_share"].get<double>(), top_share(count, k1), 1e-12);
    EXPECT_NEAR(got["top10_share"].get<double>(), top_share(count, k10), 1e-12);
    EXPECT_EQ(got["distinct_ids"], static_cast<int64_t>(count.size()));
    EXPECT_EQ(got["bags"], 800);
    EXPECT_EQ(got["ids"], present);
    EXPECT_NEAR(got["ids_per_bag_mean"].get<double>(), static_cast<double>(present) / 800.0, 1e-12);
    EXPECT_EQ(got["ids_per_bag_max"], 1);
    EXPECT_EQ(got["ids_per_bag_p99"], 800 - present >= 792 ? 0 : 1);  // nearest rank 792 of 800 sorted lengths
    EXPECT_EQ(got["out_of_range_ids"], 0);
  }
  // the Zipf skew is visible: t_cat_2 (800 rows): its 8 hottest rows take far more than 1%
  EXPECT_GT(j["features"][2]["top1_share"].get<double>(), 0.2);

  // raw: the values are the ids, so nearly all are out of range (all but value 17, rank 0)
  spec.input.categorical = CategoricalMapping::raw;
  std::ofstream(dir / "raw.json") << to_json(spec).dump();
  const json raw = inspect(dir / "raw.json", dir);
  for (size_t f = 0; f < 26; ++f) {
    int64_t outside = 0;
    for (const auto& r : records) outside += r.cat[f] && *r.cat[f] >= static_cast<uint64_t>(spec.tables[f].num_embeddings);
    EXPECT_EQ(raw["features"][f]["out_of_range_ids"], outside) << f;
  }
}

TEST(InspectInput, SyntheticInputCountsTheGeneratorsBatches) {
  Scratch dir("inspect_synth");
  const json j = inspect("--preset tiny --steps 5", dir);
  EXPECT_EQ(j["input"], "synthetic");
  const WorkloadSpec spec = [] {
    WorkloadSpec s = load_preset("tiny");
    s.steps = 5;
    return s;
  }();
  BatchGenerator gen(spec);
  std::vector<std::map<int64_t, int64_t>> count(spec.features.size());
  std::vector<int64_t> max_len(spec.features.size(), 0);
  for (int64_t it = 0; it < 5; ++it)
    for (int r = 0; r < 2; ++r) {
      const Batch b = gen.make(it, r);
      const auto off = b.kjt.offsets();
      for (size_t f = 0; f < spec.features.size(); ++f)
        for (int64_t s = 0; s < b.kjt.batch_size; ++s) {
          const size_t bag = f * static_cast<size_t>(b.kjt.batch_size) + static_cast<size_t>(s);
          max_len[f] = std::max(max_len[f], b.kjt.lengths[bag]);
          for (int64_t i = off[bag]; i < off[bag + 1]; ++i) ++count[f][b.kjt.values[static_cast<size_t>(i)]];
        }
    }
  ASSERT_EQ(j["features"].size(), spec.features.size());
  for (size_t f = 0; f < spec.features.size(); ++f) {
    const json& got = j["features"][f];
    const int64_t n = spec.tables[static_cast<size_t>(spec.table_of_feature(f))].num_embeddings;
    EXPECT_EQ(got["feature"], spec.features[f].name);
    EXPECT_EQ(got["distinct_ids"], static_cast<int64_t>(count[f].size()));
    EXPECT_EQ(got["ids_per_bag_max"], max_len[f]);
    EXPECT_NEAR(got["top10_share"].get<double>(), top_share(count[f], std::max<int64_t>(1, (n + 9) / 10)), 1e-12);
  }
  // fixed pooling factors: f_a has 2 ids in every bag
  EXPECT_EQ(j["features"][1]["ids_per_bag_mean"], 2.0);
  EXPECT_EQ(j["features"][1]["ids_per_bag_p99"], 2);
  // the text form names the columns
  const auto text = ts::run_cli(EMBEDSCOPE_CLI, "inspect-input --preset tiny --steps 5", dir.dir);
  EXPECT_EQ(text.code, 0);
  EXPECT_NE(text.out.find("top 10%"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("tiny: synthetic input; 10 batches ((warmup 0 + steps 5) x 2 devices) of 8 samples = 80 samples"),
            std::string::npos)
      << text.out;
}

TEST(InspectInput, AMissingFileIsBadInput) {
  Scratch dir("inspect_missing");
  WorkloadSpec spec = criteo_spec({dir / "none.tsv"}, 2, 4, 100);
  std::ofstream(dir / "w.json") << to_json(spec).dump();
  const auto r = ts::run_cli(EMBEDSCOPE_CLI, "inspect-input " + (dir / "w.json"), dir.dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find((dir / "none.tsv") + ": cannot open: No such file or directory"), std::string::npos) << r.err;
}

// A sample of a large run (the workbench's load view counts at most kInputFigureIds): the first
// max_batches batches, iteration by iteration, count as a run that stops there (tester33 D2).
TEST(InspectInput, MaxBatchesCountsTheFirstBatchesOnly) {
  WorkloadSpec spec = load_preset("tiny");
  spec.warmup_steps = 0;
  spec.steps = 5;
  const InputInspection sample = inspect_input(spec, 4);  // iterations 0 and 1 of both ranks
  EXPECT_EQ(sample.batches, 4);
  EXPECT_EQ(sample.run_batches, 10);
  EXPECT_EQ(sample.samples, 4 * spec.batch_size);
  WorkloadSpec two = spec;
  two.steps = 2;
  const InputInspection whole = inspect_input(two);
  EXPECT_EQ(whole.batches, 4);
  EXPECT_EQ(whole.run_batches, 4);
  ASSERT_EQ(sample.features.size(), whole.features.size());
  for (size_t f = 0; f < whole.features.size(); ++f) {
    EXPECT_EQ(sample.features[f].ids, whole.features[f].ids) << f;
    EXPECT_EQ(sample.features[f].distinct_ids, whole.features[f].distinct_ids) << f;
    EXPECT_EQ(sample.features[f].ids_per_bag_max, whole.features[f].ids_per_bag_max) << f;
  }
  EXPECT_GT(inspect_input(spec).features[0].ids, sample.features[0].ids);  // the run has more
  EXPECT_EQ(inspect_input(spec, 100).batches, 10);                          // never more than the run
}
