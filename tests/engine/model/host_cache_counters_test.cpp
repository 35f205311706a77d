// One definition of a host_cached table's counters in the measured and the simulated run
// (tester42 F27): rows fetched a step are the distinct rows the step's lookup (ONE lookup of the
// shard over all its features, as FBGEMM looks up a TBE) and its prefetch miss and move host ->
// device - FBGEMM's unique misses; an update's reads of rows the cache could not keep are bytes
// (H2D, and D2H for the write back), not rows fetched (model/host_cache.h, cost/cache_model.h).
// The cache model by hand for a table whose batches have more distinct rows than it has slots,
// lfu's steady top-C set, Zipf ids hashed into buckets; the simulated executor's load counters
// against those hand values; and the same small workload measured on 2 CPU ranks against the
// simulation (deterministic counts: seeded ids, no timings).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/cache_model.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/sessions/store/session.h"

namespace es = embedscope::engine;
namespace ss = embedscope::sessions;

namespace {

// tester42 F27's workload, trimmed: t_b 100 x 6 host_cached lru 0.2 (20 slots) serving f_b0 and
// f_b1 (3 uniform ids a bag each), t_c 1,000 x 12 hashed into 100 buckets, host_cached lfu 0.05
// (5 slots), f_c 2 Zipf(1.1) ids a bag; adam; 2 ranks of 8 samples, table_wise: t_b gets 2 x 16
// x 3 = 96 ids a step, t_c 32. `backend`: "cpu" or "simulated" (the round-number host link).
es::WorkloadSpec f27_spec(const std::string& backend, int steps) {
  nlohmann::json devices = {{"count", 2}, {"backend", backend}, {"memory_bytes", 64 << 20}};
  if (backend == "simulated") devices["hardware"] = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/host_link.json";
  const nlohmann::json j = {
      {"name", "f27"},
      {"tables",
       {{{"name", "t_b"}, {"num_embeddings", 100}, {"embedding_dim", 6}, {"feature_names", {"f_b0", "f_b1"}},
         {"placement", "host_cached"}, {"cache_policy", "lru"}, {"cache_load_factor", 0.2}},
        {{"name", "t_c"}, {"num_embeddings", 1000}, {"embedding_dim", 12}, {"feature_names", {"f_c"}},
         {"hash_size", 100}, {"placement", "host_cached"}, {"cache_policy", "lfu"}, {"cache_load_factor", 0.05}}}},
      {"features",
       {{{"name", "f_b0"}, {"pooling_factor", 3}, {"ids", "uniform"}},
        {{"name", "f_b1"}, {"pooling_factor", 3}, {"ids", "uniform"}},
        {{"name", "f_c"}, {"pooling_factor", 2}, {"ids", {{"distribution", "zipf"}, {"alpha", 1.1}, {"permute", true}}}}}},
      {"batch_size", 8},
      {"steps", steps},
      {"warmup_steps", 0},
      {"seed", 1},
      {"optimizer", {{"type", "adam"}, {"learning_rate", 0.01}}},
      {"devices", devices},
      {"sharding", {{"tables", {{"t_b", {{"type", "table_wise"}, {"ranks", {1}}}}, {"t_c", {{"type", "table_wise"}, {"ranks", {0}}}}}}}},
      {"dense", {{"num_dense_features", 4}, {"bottom_mlp", {8}}, {"interaction", "cat"}, {"top_mlp", {16, 1}}}}};
  return es::with_resolved_backend(es::parse_workload(j, "test"), "test");
}

// t_b's steady state by hand (cache_model.h): 96 uniform ids over 100 rows, q = 1 - 0.99^96 =
// 0.618953, U = 100 q = 61.8953 distinct rows; Che for uniform ids: hits = U C / R = 12.3791,
// misses = 49.5162; the 12.38 hits are locked, so 20 - 12.38 = 7.6209 misses find a slot and
// 41.8953 do not (read again by the update and written straight back). adam: a row 24 B, its
// state 48 B. H2D = 49.5162 x 24 (lookup) + 61.8953 x 48 (state) + 41.8953 x 24 (update's reads)
// = 5164.85 B; D2H = 61.8953 x 48 + (7.6209 evicted + 41.8953) x 24 = 4159.36 B.
constexpr double kTbU = 61.8953, kTbMisses = 49.5162, kTbNotInserted = 41.8953;
constexpr double kTbH2d = 5164.85, kTbD2h = 4159.36;

TEST(HostCacheCounters, TheModelByHandForBatchesWiderThanTheCache) {
  const es::WorkloadSpec s = f27_spec("simulated", 4);
  const es::TableSpec& t = s.tables[0];
  const es::Shard whole{1, 0, 100, 0, 6};
  const es::CacheEstimate e = es::estimate_cache(s, t, whole, {{0, 48.0}, {1, 48.0}});
  EXPECT_NEAR(e.distinct_rows, 100.0 * (1.0 - std::pow(0.99, 96)), 1e-9);
  EXPECT_NEAR(e.distinct_rows, kTbU, 1e-4);
  EXPECT_NEAR(e.misses, kTbMisses, 1e-4);
  EXPECT_NEAR(e.not_inserted, kTbNotInserted, 1e-4);
  EXPECT_NEAR(e.evictions, e.misses - e.not_inserted, 1e-9);  // 7.6209: every inserted miss evicts a dirty row
  const es::HostTraffic h = es::host_traffic(t, es::OptimizerType::adam, 6, e, false);
  EXPECT_NEAR(h.lookup_h2d, kTbMisses * 24, 1e-2);
  EXPECT_NEAR(h.lookup_h2d + h.update_h2d, kTbH2d, 1e-2);
  EXPECT_NEAR(h.update_d2h, kTbD2h, 1e-2);
  // lfu's steady state keeps its top C rows: no miss is inserted, none evicts; all are read again
  es::TableSpec lfu = t;
  lfu.cache_policy = es::CachePolicy::lfu;
  const es::CacheEstimate l = es::estimate_cache(s, lfu, whole, {{0, 48.0}, {1, 48.0}});
  EXPECT_NEAR(l.misses, kTbMisses, 1e-4);  // uniform: C equally named rows, the same hits
  EXPECT_NEAR(l.not_inserted, l.misses, 1e-12);
  EXPECT_EQ(l.evictions, 0.0);
  // a batch that fits (C - hits >= misses) keeps every miss: 32 ids, 1,000 rows, 250 slots
  es::TableSpec wide = t;
  wide.num_embeddings = 1000;
  wide.cache_load_factor = 0.25;
  const es::CacheEstimate w = es::estimate_cache(s, wide, {1, 0, 1000, 0, 6}, {{0, 32.0}});
  EXPECT_EQ(w.not_inserted, 0.0);
  EXPECT_NEAR(w.evictions, w.misses, 1e-12);
}

// Zipf ids hashed keep their skew (cache_model.h): Zipf(1) over 4 ids hashed into 2 buckets, one
// table_wise shard (stride 1): bucket 1 holds rank 1 (mass 1) and bucket 2 rank 2 (1/2), each
// plus half the ranks beyond 2: (1/3 + 1/4) / 2 = 7/24; of 25/12 in all: 31/50 = 0.62 and 0.38.
// One id a batch, one slot, lfu: the hot bucket stays, 0.38 of the batches miss (uniform: 0.5).
TEST(HostCacheCounters, ZipfIdsHashedIntoBucketsKeepTheirSkew) {
  es::WorkloadSpec s = f27_spec("simulated", 4);
  es::TableSpec& t = s.tables[1];
  t.num_embeddings = 4;
  t.hash_size = 2;
  t.cache_load_factor = 0.5;
  s.features[2].ids.alpha = 1.0;
  const es::CacheEstimate e = es::estimate_cache(s, t, {0, 0, 2, 0, 12}, {{2, 1.0}});
  EXPECT_NEAR(e.distinct_rows, 1.0, 1e-12);
  EXPECT_NEAR(e.misses, 0.38, 1e-9);
  s.features[2].ids.kind = es::IdDistributionKind::uniform;
  EXPECT_NEAR(es::estimate_cache(s, t, {0, 0, 2, 0, 12}, {{2, 1.0}}).misses, 0.5, 1e-9);
}

// The simulated executor's load counters of t_b in a steady step are the hand values above,
// rounded: 50 misses, 62 - 50 = 12 hits, 50 rows fetched (not 50 + the update's 42 reads),
// 5,165 B in and 4,159 B out.
TEST(HostCacheCounters, SimulatedLoadCountersByHand) {
  const es::WorkloadSpec s = f27_spec("simulated", 8);
  const auto path = std::filesystem::temp_directory_path() / ("hc_counters_" + std::to_string(::getpid()) + ".db");
  es::TrainerOptions so;
  so.session_path = path.string();
  so.session_overwrite = true;
  ASSERT_EQ(es::run_training(s, es::plan_sharding(s), so).ended, es::RunEnd::complete);
  {
    ss::SessionReader reader(path.string());
    int seen = 0;
    for (const auto& c : reader.load()) {
      if (c.table != 0 || c.step < 4) continue;  // t_b after the cold start (T = 0.23 batches: 3 iterations)
      ++seen;
      EXPECT_EQ(c.rank, 1);
      EXPECT_EQ(c.ids, 96);
      EXPECT_EQ(c.cache_misses, 50);
      EXPECT_EQ(c.cache_hits, 12);
      EXPECT_EQ(c.rows_fetched, 50);
      EXPECT_EQ(c.bytes_h2d, std::llround(kTbH2d));
      EXPECT_EQ(c.bytes_d2h, std::llround(kTbD2h));
    }
    EXPECT_EQ(seen, 4);
  }
  std::filesystem::remove(path);
}

// The same workload measured on 2 CPU ranks and simulated, 60 steps from empty caches: the same
// quantities within a few per cent (the model is an expectation, the run one seeded sample).
// Before the fix the run fetched 100 rows a step of t_b (two lookups a step, one a feature, and
// the update's reads of uncached rows) against the model's 50, and the model put t_c's lfu hit
// rate at 6.9 % (hashed ids taken as uniform) against 19.2 % measured.
TEST(HostCacheCounters, SimulatedAndMeasuredCountTheSameRows) {
  es::TrainerOptions opt;
  opt.trace = false;
  const es::WorkloadSpec cpu = f27_spec("cpu", 60), sim = f27_spec("simulated", 60);
  const es::RunResult m = es::run_training(cpu, es::plan_sharding(cpu), opt);
  ASSERT_EQ(m.ended, es::RunEnd::complete) << m.error;
  // the simulated executor adds its expected counters up as it writes them into a session
  const auto path = std::filesystem::temp_directory_path() / ("hc_agree_" + std::to_string(::getpid()) + ".db");
  opt.session_path = path.string();
  opt.session_overwrite = true;
  const es::RunResult p = es::run_training(sim, es::plan_sharding(sim), opt);
  std::filesystem::remove(path);
  ASSERT_EQ(p.ended, es::RunEnd::complete) << p.error;
  ASSERT_EQ(m.table_storage.size(), 2u);
  ASSERT_EQ(p.table_storage.size(), 2u);
  for (size_t t = 0; t < 2; ++t) {
    const auto& a = m.table_storage[t];
    const auto& b = p.table_storage[t];
    SCOPED_TRACE(a.name);
    auto hit_rate = [](const es::RunResult::TableStorage& x) {
      return static_cast<double>(x.cache_hits) / static_cast<double>(x.cache_hits + x.cache_misses);
    };
    auto near = [](int64_t x, int64_t y, double rel) {
      return std::abs(static_cast<double>(x - y)) <= rel * static_cast<double>(y);
    };
    EXPECT_NEAR(hit_rate(b), hit_rate(a), 0.03);
    EXPECT_TRUE(near(b.rows_fetched, a.rows_fetched, 0.1)) << b.rows_fetched << " simulated, " << a.rows_fetched << " measured";
    EXPECT_TRUE(near(b.bytes_h2d, a.bytes_h2d, 0.1)) << b.bytes_h2d << " simulated, " << a.bytes_h2d << " measured";
    EXPECT_TRUE(near(b.bytes_d2h, a.bytes_d2h, 0.1)) << b.bytes_d2h << " simulated, " << a.bytes_d2h << " measured";
    // measured: a step's rows fetched are its unique misses (no prefetch here)
    EXPECT_EQ(a.rows_fetched, a.cache_misses);
    EXPECT_EQ(b.rows_fetched, b.cache_misses);
  }
}

}  // namespace
