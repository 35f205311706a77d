#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "embedscope/engine/input/id_histogram.h"
#include "embedscope/engine/input/input.h"

using namespace embedscope::engine;

TEST(Zipf, FrequenciesMatchThePowerLaw) {
  const int64_t n = 100;
  const double alpha = 1.15;
  ZipfSampler z(n, alpha);
  std::mt19937_64 rng(3);
  std::vector<int64_t> count(static_cast<size_t>(n), 0);
  const int draws = 200000;
  for (int i = 0; i < draws; ++i) {
    const int64_t k = z(rng);
    ASSERT_GE(k, 0);
    ASSERT_LT(k, n);
    ++count[static_cast<size_t>(k)];
  }
  double norm = 0;
  for (int64_t k = 1; k <= n; ++k) norm += std::pow(static_cast<double>(k), -alpha);
  for (int64_t k : {0, 1, 4, 49}) {
    const double expected = std::pow(static_cast<double>(k + 1), -alpha) / norm;
    const double got = static_cast<double>(count[static_cast<size_t>(k)]) / draws;
    EXPECT_NEAR(got, expected, 0.05 * expected + 0.001) << "rank " << k;
  }
  EXPECT_EQ(ZipfSampler(1, 1.0)(rng), 0);
}

TEST(RowPermutation, IsABijection) {
  for (int64_t n : {1, 2, 10, 97, 1000}) {
    RowPermutation p(n, 42);
    std::set<int64_t> seen;
    for (int64_t k = 0; k < n; ++k) seen.insert(p(k));
    EXPECT_EQ(static_cast<int64_t>(seen.size()), n);
    EXPECT_EQ(*seen.begin(), 0);
    EXPECT_EQ(*seen.rbegin(), n - 1);
  }
}

namespace {
WorkloadSpec small_spec(InvalidIdPolicy policy) {
  WorkloadSpec s;
  s.name = "s";
  s.tables = {{"t", 10, 4, Pooling::sum, {"f", "g"}}};
  s.features = {FeatureSpec{"f", {false, 2, 5}, {}}, FeatureSpec{"g", {true, 1, 1}, {}}};
  s.batch_size = 3;
  s.devices.count = 2;
  s.invalid_ids = policy;
  return s;
}
}  // namespace

TEST(BatchGenerator, DeterministicShapesAndLabels) {
  WorkloadSpec s = small_spec(InvalidIdPolicy::error);
  s.tables[0].num_embeddings = 1000;
  s.features[0].ids.kind = IdDistributionKind::zipf;
  s.dense = DenseSpec{4, {4}, Interaction::cat, 1, 1, {1}};
  BatchGenerator g(s);
  Batch a = g.make(5, 1), b = g.make(5, 1), c = g.make(5, 0);
  EXPECT_EQ(a.kjt.values, b.kjt.values);
  EXPECT_EQ(a.dense, b.dense);
  EXPECT_NE(a.kjt.values, c.kjt.values);
  EXPECT_EQ(a.kjt.lengths.size(), 6u);
  EXPECT_EQ(a.kjt.lengths[3], 1);  // feature g is fixed at 1
  EXPECT_EQ(a.dense.size(), 12u);
  for (int64_t l : a.kjt.lengths) EXPECT_LE(l, 5);
  for (float y : a.labels) EXPECT_TRUE(y == 0.0f || y == 1.0f);
  EXPECT_EQ(a.kjt.offsets().back(), static_cast<int64_t>(a.kjt.values.size()));
  EXPECT_EQ(a.kjt.feature_offset(1), a.kjt.lengths[0] + a.kjt.lengths[1] + a.kjt.lengths[2]);
  // the teacher gives both classes over a few batches
  double pos = 0, total = 0;
  for (int it = 0; it < 50; ++it)
    for (float y : g.make(it, 0).labels) { pos += y; total += 1; }
  EXPECT_GT(pos / total, 0.1);
  EXPECT_LT(pos / total, 0.6);
}

TEST(InitialWeights, ShardsMatchTheWholeTable) {
  std::vector<float> whole(20 * 6), part(7 * 2);
  init_shard(9, 2, 20, 0, 20, 0, 6, whole.data());
  init_shard(9, 2, 20, 5, 7, 3, 2, part.data());
  for (int r = 0; r < 7; ++r)
    for (int c = 0; c < 2; ++c) EXPECT_EQ(part[static_cast<size_t>(r * 2 + c)], whole[static_cast<size_t>((5 + r) * 6 + 3 + c)]);
  for (float v : whole) EXPECT_LE(std::abs(v), 1.0f / std::sqrt(20.0f));
  EXPECT_EQ(initial_weight(9, 2, 5, 3, 20), whole[5 * 6 + 3]);
}

namespace {
KJT bad_kjt() {
  KJT k;
  k.batch_size = 3;
  k.num_features = 2;
  k.lengths = {2, 0, 1, 1, 1, 1};
  k.values = {3, 12, -1, 4, 10, 5};  // feature f: {3, 12}, {}, {-1}; feature g: {4}, {10}, {5}
  return k;
}
}  // namespace

TEST(InvalidIds, ErrorNamesFeatureCountAndExamples) {
  KJT k = bad_kjt();
  try {
    apply_invalid_id_policy(small_spec(InvalidIdPolicy::error), k, 1);
    FAIL();
  } catch (const InvalidIdsError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 1: feature 'f': 2 id(s) outside [0, 10)"), std::string::npos) << m;
    EXPECT_NE(m.find("e.g. 12, -1"), std::string::npos) << m;
  }
}

TEST(InvalidIds, ClampAndDrop) {
  KJT k = bad_kjt();
  auto fixed = apply_invalid_id_policy(small_spec(InvalidIdPolicy::clamp), k, 0);
  EXPECT_EQ(fixed, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(k.values, (std::vector<int64_t>{3, 9, 0, 4, 9, 5}));
  k = bad_kjt();
  fixed = apply_invalid_id_policy(small_spec(InvalidIdPolicy::drop), k, 0);
  EXPECT_EQ(fixed, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(k.values, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(k.lengths, (std::vector<int64_t>{1, 0, 0, 1, 0, 1}));
}

TEST(IdHistogram, CountsIdsPerRowBucketByHand) {
  // table t (1000 rows: 256 buckets) serves f and g; table u (3 rows: 3 buckets) serves h
  WorkloadSpec s;
  s.name = "h";
  s.tables = {{"t", 1000, 4, Pooling::sum, {"f", "g"}}, {"u", 3, 4, Pooling::sum, {"h"}}};
  s.features = {FeatureSpec{"f", {}, {}}, FeatureSpec{"g", {}, {}}, FeatureSpec{"h", {}, {}}};
  EXPECT_EQ(IdHistogram::buckets_of(1000), 256);
  EXPECT_EQ(IdHistogram::buckets_of(3), 3);
  // bucket b of 1000 rows starts at ceil(b * 1000 / 256): 0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, ...
  EXPECT_EQ(IdHistogram::bucket_begin(1000, 1), 4);
  EXPECT_EQ(IdHistogram::bucket_begin(1000, 3), 12);
  EXPECT_EQ(IdHistogram::bucket_begin(1000, 255), 997);
  EXPECT_EQ(IdHistogram::bucket_begin(1000, 256), 1000);
  IdHistogram h(s);
  KJT k;
  k.batch_size = 2;
  k.num_features = 3;
  // f: bags [0, 3] and [999]; g: [4] and []; h: [2, 2] and [0]
  k.lengths = {2, 1, 1, 0, 2, 1};
  k.values = {0, 3, 999, 4, 2, 2, 0};
  h.add(s, k);
  h.add(s, k);  // a second step adds up
  EXPECT_EQ(h.count(0, 0), 4);    // rows 0 and 3 (row 3: floor(3 * 256 / 1000) = 0), twice
  EXPECT_EQ(h.count(0, 1), 2);    // row 4: floor(4 * 256 / 1000) = 1
  EXPECT_EQ(h.count(0, 255), 2);  // row 999
  EXPECT_EQ(h.count(1, 2), 4);
  EXPECT_EQ(h.count(1, 0), 2);
  EXPECT_EQ(h.count(1, 1), 0);
  const auto rec = h.buckets(3);
  ASSERT_EQ(rec.size(), 5u);  // only non-empty buckets
  EXPECT_EQ(rec[1].rank, 3);
  EXPECT_EQ(rec[1].bucket, 1);
  EXPECT_EQ(rec[1].row_begin, 4);
  EXPECT_EQ(rec[1].row_end, 8);
  EXPECT_EQ(rec[2].row_begin, 997);
  EXPECT_EQ(rec[2].row_end, 1000);
  EXPECT_EQ(rec[4].table, 1);
  EXPECT_EQ(rec[4].row_begin, 2);
  EXPECT_EQ(rec[4].row_end, 3);
  EXPECT_EQ(rec[4].ids, 4);
  k.num_features = 2;
  EXPECT_THROW(h.add(s, k), std::invalid_argument);
}
