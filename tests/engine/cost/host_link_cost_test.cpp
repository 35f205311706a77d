// Tables in host memory in the cost model and the simulated executor: the cache model
// (cost/cache_model.h) by hand, the host-link ops of the step program (host_fetch, host_update,
// prefetch) with their bytes, their times over the profile's host link (host_copy_ns), and the
// prefetch running under the dense part of the step before on the simulated timeline.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/cache_model.h"
#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/sessions/store/session.h"

namespace es = embedscope::engine;
namespace ss = embedscope::sessions;

namespace {

const std::string kHostLinkProfile = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/host_link.json";

// One table of 1,000 x 16 on rank 0 of 2, uniform ids, 2 a bag, 8 bags a rank: 32 ids a batch at
// the shard. host_cached at load factor 0.25 (250 rows) unless `placement` says otherwise.
es::WorkloadSpec host_link_spec(es::PipelineKind pipeline, bool prefetch, const char* placement = "host_cached",
                                int steps = 4) {
  nlohmann::json t = {{"name", "t"}, {"num_embeddings", 1000}, {"embedding_dim", 16}, {"feature_names", {"f"}},
                      {"placement", placement}};
  if (std::string(placement) == "host_cached") {
    t["cache_load_factor"] = 0.25;
    if (prefetch) t["prefetch_pipeline"] = true;
  }
  const nlohmann::json j = {
      {"name", "host_link"},
      {"tables", {t}},
      {"features", {{{"name", "f"}, {"pooling_factor", 2}, {"ids", "uniform"}}}},
      {"batch_size", 8},
      {"steps", steps},
      {"warmup_steps", 1},
      {"pipeline", es::enum_name(pipeline)},
      {"devices", {{"count", 2}, {"backend", "simulated"}, {"hardware", kHostLinkProfile}, {"memory_bytes", 1 << 30}}},
      {"sharding", {{"tables", {{"t", {{"type", "table_wise"}, {"ranks", {0}}}}}}}},
      {"dense", {{"num_dense_features", 4}, {"bottom_mlp", {1024, 1024, 16}}, {"top_mlp", {8, 1}}}}};
  return es::with_resolved_backend(es::parse_workload(j, "test"), "test");
}

// U = 1,000 (1 - (1 - 1/1,000)^32): the expected distinct rows of 32 uniform ids over 1,000 rows
double distinct_32_of_1000() { return 1000.0 * (1.0 - std::pow(0.999, 32)); }

// The cold start of that cache (cost/cache_model.h): q = 1 - 0.999^32 a row a batch, the cache of
// 250 fills when 1,000 (1 - (1 - q)^T) = 250, T = ln 0.75 / (32 ln 0.999) = 8.9856 batches; the
// lookup after b batches misses U (1 - q)^b before T, 0.75 U from then on; its misses evict
// D(b) + misses - 250 rows (D(b) = 1,000 (1 - (1 - q)^b) seen so far), clamped to [0, misses].
double cold_fill_batches() { return std::log(0.75) / (32.0 * std::log(0.999)); }
double cold_misses(int64_t b) {
  const double U = distinct_32_of_1000();
  return static_cast<double>(b) < cold_fill_batches() ? U * std::pow(0.999, 32.0 * static_cast<double>(b)) : 0.75 * U;
}
double cold_evictions(int64_t b) {
  if (static_cast<double>(b) >= cold_fill_batches()) return cold_misses(b);
  const double seen = 1000.0 * (1.0 - std::pow(0.999, 32.0 * static_cast<double>(b)));
  return std::clamp(seen + cold_misses(b) - 250.0, 0.0, cold_misses(b));
}

const es::ProgramOp* op_of(const es::StepProgram& p, const std::string& name) {
  for (const auto& op : p.ops)
    if (op.name == name) return &op;
  return nullptr;
}

}  // namespace

// Uniform ids: Che's T solves R (1 - (1 - q)^T) = C, so hits = U C / R: misses = U (1 - 250 / 1,000)
// = 0.75 x 31.5094 = 23.632; lfu keeps C equally named rows: the same; host misses every row, U.
// Two rows of Zipf(1) (p = 2/3, 1/3), one id a batch, one slot: T solves (1/3)^T + (2/3)^T = 1,
// T = 1, hits = 2/3 x 2/3 + 1/3 x 1/3 = 5/9 (exact for LRU of one slot: the sum of p^2).
TEST(CacheModel, ByHand) {
  const es::WorkloadSpec s = host_link_spec(es::PipelineKind::base, false);
  const es::Shard whole{0, 0, 1000, 0, 16};
  const double U = distinct_32_of_1000();
  es::CacheEstimate e = es::estimate_cache(s, s.tables[0], whole, {{0, 32.0}});
  EXPECT_NEAR(e.ids, 32.0, 1e-12);
  EXPECT_NEAR(e.distinct_rows, U, 1e-9);
  EXPECT_NEAR(e.misses, 0.75 * U, 1e-6);
  EXPECT_NEAR(e.miss_rate(), 0.75, 1e-8);
  es::TableSpec lfu = s.tables[0];
  lfu.cache_policy = es::CachePolicy::lfu;
  EXPECT_NEAR(es::estimate_cache(s, lfu, whole, {{0, 32.0}}).misses, 0.75 * U, 1e-6);
  es::TableSpec host = s.tables[0];
  host.placement = es::TablePlacement::host;
  EXPECT_NEAR(es::estimate_cache(s, host, whole, {{0, 32.0}}).misses, U, 1e-9);
  es::TableSpec all = s.tables[0];
  all.cache_load_factor = 1.0;
  EXPECT_EQ(es::estimate_cache(s, all, whole, {{0, 32.0}}).misses, 0.0);
  es::WorkloadSpec z = s;
  z.features[0].ids.kind = es::IdDistributionKind::zipf;
  z.features[0].ids.alpha = 1.0;
  z.tables[0].num_embeddings = 2;
  z.tables[0].cache_load_factor = 0.5;  // one slot
  e = es::estimate_cache(z, z.tables[0], es::Shard{0, 0, 2, 0, 16}, {{0, 1.0}});
  EXPECT_NEAR(e.distinct_rows, 1.0, 1e-12);
  EXPECT_NEAR(e.misses, 4.0 / 9.0, 1e-9);
  // skew helps: Zipf(1.15) over the 1,000 rows misses less than uniform ids at the same size
  z = s;
  z.features[0].ids.kind = es::IdDistributionKind::zipf;
  EXPECT_LT(es::estimate_cache(z, z.tables[0], whole, {{0, 32.0}}).miss_rate(), 0.75);
  EXPECT_THROW(es::estimate_cache(s, s.tables[0], whole, {{3, 1.0}}), es::SpecError);
}

// The program of rank 0 (base): host_fetch of the lookup's misses before the lookup, 23.632 rows
// x 64 B = 1,512.4 -> 1,512 B; host_update: sgd has no state, so h2d 0 and d2h the dirty rows
// evicted, the misses again (1,512 B). Over the test host link (1 B a ns, 1 us a copy): 2,512 ns
// each, and the simulated lookup starts when host_fetch ends. A host table moves every row: U x 64
// = 2,016.6 -> 2,017 B in host_fetch, and host_update fetches and writes back the same rows.
TEST(HostLinkCost, HostFetchAndUpdateByHand) {
  const double U = distinct_32_of_1000();
  const es::WorkloadSpec s = host_link_spec(es::PipelineKind::base, false, "host_cached", 11);  // 12 iterations
  const es::ShardingPlan plan = es::plan_sharding(s);
  const es::StepProgram p = es::build_step_program(s, plan, 0, 1);  // the steady state
  const es::ProgramOp* fetch = op_of(p, "host_fetch");
  const es::ProgramOp* update = op_of(p, "host_update");
  ASSERT_NE(fetch, nullptr);
  ASSERT_NE(update, nullptr);
  EXPECT_EQ(fetch->lane, ss::Lane::gpu_copy);
  EXPECT_EQ(fetch->bytes_h2d, std::llround(0.75 * U * 64));
  EXPECT_EQ(fetch->bytes_h2d, 1512);
  EXPECT_EQ(fetch->bytes_d2h, 0);
  EXPECT_EQ(update->bytes_h2d, 0);
  EXPECT_EQ(update->bytes_d2h, 1512);
  const es::ProgramOp* lookup = op_of(p, "lookup");
  EXPECT_NE(std::find(lookup->waits_for.begin(), lookup->waits_for.end(), fetch->id), lookup->waits_for.end());
  const es::HardwareProfile hw = es::load_hardware_profile(kHostLinkProfile);
  EXPECT_EQ(hw.host_link.bus_bandwidth_bytes_per_s, 1e9);
  EXPECT_EQ(es::host_copy_ns(*fetch, hw), 1000 + 1512);
  EXPECT_EQ(es::host_copy_ns(*update, hw), 1000 + 1512);
  // rank 1 holds no table in host memory: no host-link op
  for (const auto& op : es::build_step_program(s, plan, 1, 1).ops) EXPECT_NE(op.lane, ss::Lane::gpu_copy) << op.name;
  // the simulated run: the caches start empty, so iteration b's host_fetch moves the cold start's
  // misses (cold_misses: 2,017 B in iteration 0, 1,953 B in 1, ..., 1,512 B from iteration 9 on,
  // T = 8.99), lasts 1 us + its bytes, and the lookup starts after it; host_update writes back
  // only the rows evicted (none until iteration 8)
  EXPECT_EQ(std::llround(64 * cold_misses(0)), 2017);
  EXPECT_EQ(std::llround(64 * cold_misses(1)), 1953);
  EXPECT_EQ(std::llround(64 * cold_misses(9)), 1512);
  EXPECT_EQ(std::llround(64 * cold_evictions(7)), 0);
  EXPECT_EQ(std::llround(64 * cold_evictions(8)), 22);  // 225.96 seen + 24.39 misses - 250 = 0.35 rows
  es::TrainerOptions o;
  o.keep_events = true;
  const es::RunResult r = es::run_training(s, plan, o);
  ASSERT_EQ(r.ended, es::RunEnd::complete) << r.error;
  int fetches = 0;
  for (const auto& e : r.events) {
    if (e.rank != 0 || std::string(e.name) != "host_fetch") continue;
    ++fetches;
    const int64_t b = e.step + 1;  // the iteration (1 warmup step)
    EXPECT_EQ(e.lane, ss::Lane::gpu_copy);
    EXPECT_EQ(e.bytes, std::llround(64 * cold_misses(b))) << "iteration " << b;
    EXPECT_EQ(e.end_ns - e.start_ns, 1000 + e.bytes);
    for (const auto& l : r.events)
      if (l.rank == 0 && l.step == e.step && std::string(l.name) == "lookup") { EXPECT_GE(l.start_ns, e.end_ns); }
  }
  EXPECT_EQ(fetches, 12);  // every step, warmup included
  int updates = 0;
  for (const auto& e : r.events)
    if (e.rank == 0 && std::string(e.name) == "host_update") {
      ++updates;
      EXPECT_EQ(e.bytes, std::llround(64 * cold_evictions(e.step + 1))) << "iteration " << e.step + 1;
    }
  EXPECT_EQ(updates, 4);  // iterations 8 .. 11 (nothing to write back before)
  // the session's load counters of rank 0's shard carry the same expectation each step: from
  // iteration 9 on 23.632 -> 24 misses, U - misses = 31.509 - 24 -> 8 hits, 24 rows fetched,
  // 1,512 B each way; before, the cold start's
  const auto path = std::filesystem::temp_directory_path() / ("host_link_" + std::to_string(::getpid()) + ".db");
  es::TrainerOptions so;
  so.session_path = path.string();
  so.session_overwrite = true;
  ASSERT_EQ(es::run_training(s, plan, so).ended, es::RunEnd::complete);
  {
    ss::SessionReader reader(path.string());
    int counters = 0;
    for (const auto& c : reader.load()) {
      if (c.rank != 0 || c.table != 0) continue;
      ++counters;
      const int64_t b = c.step + 1;
      EXPECT_EQ(c.cache_misses, std::llround(cold_misses(b))) << "iteration " << b;
      EXPECT_EQ(c.cache_hits, 32 - c.cache_misses);
      EXPECT_EQ(c.rows_fetched, c.cache_misses);
      EXPECT_EQ(c.bytes_h2d, std::llround(64 * cold_misses(b)));
      EXPECT_EQ(c.bytes_d2h, std::llround(64 * cold_evictions(b)));
      if (b >= 9) {
        EXPECT_EQ(c.cache_misses, 24);
        EXPECT_EQ(c.cache_hits, 8);
        EXPECT_EQ(c.bytes_d2h, 1512);
      }
    }
    EXPECT_EQ(counters, 12);
  }
  std::filesystem::remove(path);
  // placement host
  const es::WorkloadSpec h = host_link_spec(es::PipelineKind::base, false, "host");
  const es::StepProgram q = es::build_step_program(h, es::plan_sharding(h), 0, 1);
  EXPECT_EQ(op_of(q, "host_fetch")->bytes_h2d, std::llround(U * 64));
  EXPECT_EQ(op_of(q, "host_fetch")->bytes_h2d, 2017);
  EXPECT_EQ(op_of(q, "host_update")->bytes_h2d, 2017);
  EXPECT_EQ(op_of(q, "host_update")->bytes_d2h, 2017);
}

// sparse_dist with prefetch_pipeline: a steady step has no host_fetch; its prefetch of batch +1
// (1,512 B, 2,512 ns) starts when batch +1's ids arrive, under dense_forward_backward (a bottom
// MLP of 4 -> 1024 -> 1024 -> 16, about 1.07 M parameters: 6 x 8 x 1.07 M flops at 5e12 flop/s,
// about 10 us), and the embedding backward waits for it. The steady step is shorter than without
// prefetch by the host_fetch it hides (at most its 2,512 ns).
TEST(HostLinkCost, PrefetchRunsUnderTheStepBefore) {
  // 16 iterations: the caches fill by iteration 9; the cold start's programs run to 8.99 + 2 -> 11
  const es::WorkloadSpec with = host_link_spec(es::PipelineKind::sparse_dist, true, "host_cached", 15);
  const es::WorkloadSpec without = host_link_spec(es::PipelineKind::sparse_dist, false, "host_cached", 15);
  const es::ShardingPlan plan = es::plan_sharding(with);
  const es::StepProgram p = es::build_step_program(with, plan, 0, 1);
  EXPECT_EQ(op_of(p, "host_fetch"), nullptr);
  const es::ProgramOp* pf = op_of(p, "prefetch");
  ASSERT_NE(pf, nullptr);
  EXPECT_EQ(pf->bytes_h2d, 1512);
  EXPECT_EQ(pf->batch, 1);
  es::TrainerOptions o;
  o.keep_events = true;
  const es::RunResult a = es::run_training(with, plan, o);
  const es::RunResult b = es::run_training(without, plan, o);
  ASSERT_EQ(a.ended, es::RunEnd::complete) << a.error;
  ASSERT_EQ(b.ended, es::RunEnd::complete) << b.error;
  bool overlapped = false;
  for (const auto& e : a.events) {
    if (e.rank != 0 || std::string(e.name) != "prefetch") continue;
    // iteration b prefetches batch b + 1: the lookup after b + 1 lookups
    EXPECT_EQ(e.end_ns - e.start_ns, 1000 + std::llround(64 * cold_misses(e.step + 2))) << "step " << e.step;
    for (const auto& d : a.events)
      if (d.rank == 0 && d.step == e.step && std::string(d.name) == "dense_forward_backward")
        overlapped |= e.start_ns < d.end_ns && e.end_ns > d.start_ns;
  }
  EXPECT_TRUE(overlapped) << "the prefetch runs under the dense part";
  ASSERT_EQ(a.step_time_ns.size(), b.step_time_ns.size());
  // steady steps (after the cold start; not the last, which prefetches nothing)
  for (size_t i = 11; i + 1 < a.step_time_ns.size(); ++i) {
    EXPECT_LT(a.step_time_ns[i], b.step_time_ns[i]) << "step " << i;
    EXPECT_GE(a.step_time_ns[i], b.step_time_ns[i] - 2512) << "step " << i;
  }
}

// The cold start by hand (cache_model.h): the 1,000-row table, 250 slots, 32 uniform ids a batch.
// T = 8.9856 batches until full; the lookup after b batches misses U (1 - q)^b before T (every
// row named before is still cached) and the steady 0.75 U from then on, lru and lfu alike (lfu
// keeps its steady top-C figure once full); no evictions while it fills (22 B in batch 8: 0.35
// rows). A cache of every row (load 1) never fills: T infinite, batch 4 misses U (1 - q)^4 and the
// steady state none. Placement host has no cache: U whatever the batch.
TEST(CacheModel, ColdStartByHand) {
  const es::WorkloadSpec s = host_link_spec(es::PipelineKind::base, false);
  const es::Shard whole{0, 0, 1000, 0, 16};
  const double U = distinct_32_of_1000();
  const es::CacheEstimate steady = es::estimate_cache(s, s.tables[0], whole, {{0, 32.0}});
  EXPECT_NEAR(steady.fill_batches, cold_fill_batches(), 1e-6);
  EXPECT_NEAR(steady.fill_batches, 8.9856, 1e-4);
  EXPECT_NEAR(steady.evictions, steady.misses, 1e-12);
  es::TableSpec lfu = s.tables[0];
  lfu.cache_policy = es::CachePolicy::lfu;
  for (int64_t b : {0, 1, 4, 8, 9, 20}) {
    const es::CacheEstimate e = es::estimate_cache(s, s.tables[0], whole, {{0, 32.0}}, b);
    EXPECT_NEAR(e.distinct_rows, U, 1e-9);
    EXPECT_NEAR(e.misses, cold_misses(b), 1e-6) << b;
    EXPECT_NEAR(e.evictions, cold_evictions(b), 1e-6) << b;
    EXPECT_NEAR(es::estimate_cache(s, lfu, whole, {{0, 32.0}}, b).misses, cold_misses(b), 1e-6) << b;
  }
  EXPECT_NEAR(es::estimate_cache(s, s.tables[0], whole, {{0, 32.0}}, 0).misses, 31.5089, 1e-4);
  EXPECT_NEAR(es::estimate_cache(s, s.tables[0], whole, {{0, 32.0}}, 4).misses, 27.7215, 1e-4);
  EXPECT_NEAR(es::estimate_cache(s, s.tables[0], whole, {{0, 32.0}}, 8).evictions, 0.3464, 1e-4);
  EXPECT_EQ(es::estimate_cache(s, s.tables[0], whole, {{0, 32.0}}, 7).evictions, 0.0);
  es::TableSpec all = s.tables[0];
  all.cache_load_factor = 1.0;
  const es::CacheEstimate full = es::estimate_cache(s, all, whole, {{0, 32.0}}, 4);
  EXPECT_TRUE(std::isinf(full.fill_batches));
  EXPECT_NEAR(full.misses, U * std::pow(0.999, 128), 1e-9);
  EXPECT_EQ(full.evictions, 0.0);
  EXPECT_EQ(es::estimate_cache(s, all, whole, {{0, 32.0}}).misses, 0.0);
  es::TableSpec host = s.tables[0];
  host.placement = es::TablePlacement::host;
  EXPECT_NEAR(es::estimate_cache(s, host, whole, {{0, 32.0}}, 3).misses, U, 1e-9);
}

// A prefetch needs room for about two batches (cache_model.h host_traffic, tester35 D2: the model
// prefetched every miss where the run prefetched 4 rows of 15): C 25 slots, U 18 rows a batch,
// 15 misses, S 2 rows both batches name: H = 3 cached rows, 1 of them outside the batch in
// flight, so 25 - 18 - 1 = 6 rows prefetched (6 x 32 B) and 9 fetched by the lookup; with 100
// slots every miss; with 18 none.
TEST(CacheModel, PrefetchTakesOnlyTheSlotsTwoBatchesLeave) {
  es::TableSpec t;
  t.name = "t";
  t.num_embeddings = 500;
  t.embedding_dim = 8;
  t.placement = es::TablePlacement::host_cached;
  t.prefetch_pipeline = true;
  es::CacheEstimate e;
  e.distinct_rows = 18;
  e.misses = 15;
  e.shared_rows = 2;
  e.slots = 25;
  es::HostTraffic h = es::host_traffic(t, es::OptimizerType::sgd, 8, e, true);
  EXPECT_DOUBLE_EQ(h.prefetch_h2d, 6 * 32.0);
  EXPECT_DOUBLE_EQ(h.lookup_h2d, 9 * 32.0);
  e.slots = 100;
  h = es::host_traffic(t, es::OptimizerType::sgd, 8, e, true);
  EXPECT_DOUBLE_EQ(h.prefetch_h2d, 15 * 32.0);
  EXPECT_DOUBLE_EQ(h.lookup_h2d, 0.0);
  e.slots = 18;
  h = es::host_traffic(t, es::OptimizerType::sgd, 8, e, true);
  EXPECT_DOUBLE_EQ(h.prefetch_h2d, 0.0);
  EXPECT_DOUBLE_EQ(h.lookup_h2d, 15 * 32.0);
  h = es::host_traffic(t, es::OptimizerType::sgd, 8, e, false);  // not prefetched: the lookup fetches them all
  EXPECT_DOUBLE_EQ(h.lookup_h2d, 15 * 32.0);
}

// tester55 F1: `embedscope program --iteration 0` showed the steady state's host-link bytes for a
// host_cached table, although the caches start empty and the simulated run moves the cold
// start's. The public build_step_program with cold_start gives iteration b the cold start's
// misses (2,017 B at 0, 1,953 B at 1, the steady 1,512 B from 9 on; no write-back before 8), and
// cold_start_iterations says how many iterations are built so: ceil(8.99) + 2 = 11 of 12.
TEST(HostLinkCost, ColdStartProgramsOfThePublicBuilder) {
  const es::WorkloadSpec s = host_link_spec(es::PipelineKind::base, false, "host_cached", 11);  // 12 iterations
  const es::ShardingPlan plan = es::plan_sharding(s);
  EXPECT_EQ(es::cold_start_iterations(s, plan), 11);
  for (const int64_t b : {0, 1, 9}) {
    const es::StepProgram p = es::build_step_program(s, plan, 0, b, true);
    const es::ProgramOp* fetch = op_of(p, "host_fetch");
    ASSERT_NE(fetch, nullptr);
    EXPECT_EQ(fetch->bytes_h2d, std::llround(64 * cold_misses(b))) << "iteration " << b;
  }
  EXPECT_EQ(op_of(es::build_step_program(s, plan, 0, 0, true), "host_fetch")->bytes_h2d, 2017);
  EXPECT_EQ(op_of(es::build_step_program(s, plan, 0, 0, false), "host_fetch")->bytes_h2d, 1512);  // the steady state
  const es::ProgramOp* update = op_of(es::build_step_program(s, plan, 0, 0, true), "host_update");
  EXPECT_TRUE(update == nullptr || update->bytes_d2h == 0);  // nothing evicted yet
  // a workload without host_cached tables has no cold start
  const es::WorkloadSpec h = host_link_spec(es::PipelineKind::base, false, "host", 11);
  EXPECT_EQ(es::cold_start_iterations(h, es::plan_sharding(h)), 0);
}
