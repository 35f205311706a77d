// The prefetch pipeline of host_cached tables (TableSpec::prefetch_pipeline; FBGEMM's prefetch
// pipeline, TorchRec's CacheParams.prefetch_pipeline): HostRowStore::prefetch by hand (the trace
// of model/host_cache.h's example), the spec's errors, the step program's prefetch op, the span
// the cpu executor records, and training that stays bit for bit that of the device placement
// (and within the reference's tolerance) under sparse_dist and semi_sync, lru and lfu.

#include <gtest/gtest.h>

#include <vector>

#include <fmt/format.h>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/model/host_cache.h"
#include "embedscope/engine/program/step_program.h"
#include "engine/parity_check.h"
#include "engine/workload/spec_test_support.h"

namespace es = embedscope::engine;
using namespace embedscope::engine::parity;
using embedscope::sessions::Lane;

namespace {

es::DeviceArena prefetch_arena() {
  return es::DeviceArena(0, es::AllocatorConfig{es::AllocatorKind::direct, 64 << 20, 0, true});
}

// 8 rows x 1: row r = {r}
std::vector<float> prefetch_rows() { return {0, 1, 2, 3, 4, 5, 6, 7}; }

struct Looked {
  int64_t hits = 0, misses = 0, fetched = 0, prefetched = 0;
};

// Batches {0,1} {2,3} {4,5} {0,2} on a cache of 4 slots (lru), with and without a prefetch of
// each batch before the lookup of the one ahead of it (g0 p1 g1 p2 g2 p3 g3), hand-traced in
// model/host_cache.h: without, g0 g1 miss 2 each (free slots), g2 misses 4 and 5 (evicting 0, 1),
// g3 hits 2 and misses 0: 1 hit of 8. With: g0 misses 2; p1 fetches 2, 3 into the free slots;
// g1 hits both; p2 fetches 4 and 5 over 0 and 1 (2 and 3, g1's, locked); g2 hits; p3 pins 2
// (cached) and fetches 0 over 3 (4 and 5, g2's, locked); g3 hits: 6 of 8. 7 rows fetched either way.
Looked run_batches(bool with_prefetch, std::vector<std::vector<int64_t>>* slots_after = nullptr) {
  auto arena = prefetch_arena();
  std::vector<float> host = prefetch_rows();
  es::HostRowStore store(es::TablePlacement::host_cached, es::CachePolicy::lru, es::OptimizerType::sgd, 8, 1, 4, &arena);
  const std::vector<std::vector<int64_t>> batches = {{0, 1}, {2, 3}, {4, 5}, {0, 2}};
  Looked out;
  std::vector<int64_t> local;
  for (size_t i = 0; i < batches.size(); ++i) {
    auto rows = store.gather(host.data(), batches[i].data(), 2, local);
    for (size_t k = 0; k < 2; ++k)  // the lookup reads the rows' true values, cached or not
      EXPECT_EQ(rows.data()[local[k]], static_cast<float>(batches[i][k])) << "batch " << i;
    es::HostTransferCounters c = store.take_counters();
    out.hits += c.cache_hits;
    out.misses += c.cache_misses;
    out.fetched += c.rows_fetched;
    if (with_prefetch && i + 1 < batches.size()) {
      store.prefetch(host.data(), batches[i + 1].data(), 2);
      c = store.take_counters();
      EXPECT_EQ(c.cache_hits + c.cache_misses, 0) << "a prefetch is not a lookup";
      EXPECT_EQ(c.prefetch_bytes_h2d, c.prefetched_rows * 4);
      out.fetched += c.rows_fetched;
      out.prefetched += c.prefetched_rows;
    }
    if (slots_after) {
      std::vector<int64_t> s;
      for (int64_t k = 0; k < 4; ++k) s.push_back(store.row_in_slot(k));
      slots_after->push_back(s);
    }
  }
  return out;
}

TEST(HostPrefetch, TheNextBatchsLookupsAllHit) {
  const Looked without = run_batches(false);
  EXPECT_EQ(without.hits, 1);
  EXPECT_EQ(without.misses, 7);
  EXPECT_EQ(without.fetched, 7);
  EXPECT_EQ(without.prefetched, 0);
  std::vector<std::vector<int64_t>> slots;
  const Looked with = run_batches(true, &slots);
  EXPECT_EQ(with.hits, 6);
  EXPECT_EQ(with.misses, 2);  // batch 0's, before any prefetch
  EXPECT_EQ(with.fetched, 7);
  EXPECT_EQ(with.prefetched, 5);  // 2, 3; 4, 5; 0
  ASSERT_EQ(slots.size(), 4u);
  EXPECT_EQ(slots[0], (std::vector<int64_t>{0, 1, 2, 3}));  // after g0 and p1
  EXPECT_EQ(slots[1], (std::vector<int64_t>{4, 5, 2, 3}));  // after g1 and p2: 0 and 1 evicted, 2 and 3 locked
  EXPECT_EQ(slots[2], (std::vector<int64_t>{4, 5, 2, 0}));  // after g2 and p3: 3 evicted, 4 and 5 locked
}

// Pins: a prefetched row is not a victim before its lookup, even for a lookup of other rows in
// between; the pin ends at the lookup that uses it. 2 slots, lru: p{0,1} pins both; a lookup of
// {2} finds no victim (reads row 2 for itself only), so 0 and 1 stay; g{0,1} hits both and unpins.
TEST(HostPrefetch, PinnedRowsStayUntilTheirLookup) {
  auto arena = prefetch_arena();
  std::vector<float> host = prefetch_rows();
  es::HostRowStore store(es::TablePlacement::host_cached, es::CachePolicy::lru, es::OptimizerType::sgd, 8, 1, 2, &arena);
  const int64_t ab[] = {0, 1, 1}, c[] = {2};
  store.prefetch(host.data(), ab, 3);
  EXPECT_TRUE(store.pinned(0));
  EXPECT_TRUE(store.pinned(1));
  std::vector<int64_t> local;
  store.gather(host.data(), c, 1, local);
  EXPECT_EQ(store.row_in_slot(0), 0);
  EXPECT_EQ(store.row_in_slot(1), 1);
  EXPECT_EQ(store.slot_of(2), -1);
  auto t = store.take_counters();
  EXPECT_EQ(t.prefetched_rows, 2);
  EXPECT_EQ(t.cache_misses, 1);
  store.gather(host.data(), ab, 3, local);
  t = store.take_counters();
  EXPECT_EQ(t.cache_hits, 2);
  EXPECT_EQ(t.cache_misses, 0);
  EXPECT_FALSE(store.pinned(0));
  EXPECT_FALSE(store.pinned(1));
  // and a dirty row a prefetch evicts is written back first: update row 0 (sgd lr 1, grad 1: 0 -> -1)
  es::OptimizerSpec sgd;
  sgd.type = es::OptimizerType::sgd;
  sgd.learning_rate = 1.0;
  es::SparseGrad g;
  g.dim = 1;
  g.rows = {0};
  g.values = {1.0f};
  store.update(sgd, 0, host.data(), es::RowOptimizerState{}, g);
  EXPECT_TRUE(store.dirty(store.slot_of(0)));
  const int64_t de[] = {3, 4};
  store.prefetch(host.data(), de, 2);  // 0 and 1 were g{0,1}'s, the batch in flight: locked, so 3 and 4 find no victim
  EXPECT_EQ(store.slot_of(3), -1);
  EXPECT_EQ(store.slot_of(4), -1);
  EXPECT_EQ(store.take_counters().prefetched_rows, 0);
  store.prefetch(host.data(), de, 2);  // no lookup since the last prefetch: 3 and 4 replace 0 (dirty: written back) and 1
  EXPECT_GE(store.slot_of(3), 0);
  EXPECT_GE(store.slot_of(4), 0);
  EXPECT_EQ(host[0], -1.0f);
  t = store.take_counters();
  EXPECT_EQ(t.prefetched_rows, 2);
  EXPECT_EQ(t.bytes_d2h, 4);  // row 0 written back
  EXPECT_THROW(es::HostRowStore(es::TablePlacement::host, es::CachePolicy::lru, es::OptimizerType::sgd, 8, 1, 0, &arena)
                   .prefetch(host.data(), de, 2),
               std::invalid_argument);
}

std::string prefetch_spec_error(const char* patch) {
  return spec_testing::parse_error(spec_testing::base_spec().patch(nlohmann::json::parse(patch)));
}

TEST(HostPrefetch, SpecErrorsNameTheField) {
  EXPECT_EQ(prefetch_spec_error(R"([{"op": "add", "path": "/tables/0/prefetch_pipeline", "value": true}])"),
            "test.json: /tables/0/prefetch_pipeline: only allowed with placement \"host_cached\", not \"device\"");
  EXPECT_EQ(prefetch_spec_error(R"([{"op": "add", "path": "/tables/0/placement", "value": "host_cached"},
                                    {"op": "add", "path": "/tables/0/prefetch_pipeline", "value": true}])"),
            "test.json: /tables/0/prefetch_pipeline: needs pipeline sparse_dist or semi_sync (table \"t0\"; /pipeline is "
            "base): only they receive a batch's ids a step before its lookup");
  EXPECT_EQ(prefetch_spec_error(R"([{"op": "add", "path": "/tables/0/placement", "value": "host_cached"},
                                    {"op": "add", "path": "/pipeline", "value": "sparse_dist"},
                                    {"op": "add", "path": "/tables/0/prefetch_pipeline", "value": "yes"}])"),
            "test.json: /tables/0/prefetch_pipeline: must be a boolean, got string");
  EXPECT_EQ(prefetch_spec_error(R"([{"op": "add", "path": "/tables/0/placement", "value": "host_cached"},
                                    {"op": "add", "path": "/pipeline", "value": "semi_sync"},
                                    {"op": "add", "path": "/tables/0/prefetch_pipeline", "value": true}])"),
            "<no error>");
}

// A cache of 0.6 of each shard's rows: room for the batch in flight (locked while the next one
// is prefetched, as FBGEMM locks it) and the next batch's misses (t3: 30 slots, about 15
// distinct rows a batch).
es::WorkloadSpec prefetching(es::WorkloadSpec s, es::CachePolicy policy) {
  for (auto& t : s.tables) {
    t.placement = es::TablePlacement::host_cached;
    t.cache_load_factor = 0.6;
    t.cache_policy = policy;
    t.prefetch_pipeline = true;
  }
  return s;
}

// The program: under sparse_dist a steady step prefetches batch +1 on the host link (after its
// input dist), the embedding backward waits for it, and the step's own lookup needs no host_fetch
// (its batch was prefetched the step before); the first step's lookup still fetches. semi_sync
// prefetches batch +2.
TEST(HostPrefetch, TheProgramHasAPrefetchOpOnTheHostLink) {
  for (es::PipelineKind pipeline : {es::PipelineKind::sparse_dist, es::PipelineKind::semi_sync}) {
    es::WorkloadSpec s = prefetching(parity_spec(es::ShardingType::table_wise, 2, es::Pooling::sum, es::OptimizerType::sgd),
                                     es::CachePolicy::lru);
    s.pipeline = pipeline;
    s.steps = 4;
    const es::ShardingPlan plan = es::plan_sharding(s);
    const int ahead = pipeline == es::PipelineKind::sparse_dist ? 1 : 2;
    for (int64_t it : {int64_t{0}, int64_t{1}}) {
      const es::StepProgram p = es::build_step_program(s, plan, 0, it);
      const auto copies = p.lane(Lane::gpu_copy);
      const es::ProgramOp* pf = nullptr;
      int fetches = 0;
      for (const auto* op : copies) {
        if (op->name == "prefetch") pf = op;
        if (op->name == "host_fetch") ++fetches;
        EXPECT_EQ(op->category, embedscope::sessions::OpCategory::memcpy);
      }
      ASSERT_NE(pf, nullptr) << to_string(pipeline) << " iteration " << it;
      EXPECT_EQ(pf->batch, ahead);
      EXPECT_GT(pf->bytes_h2d, 0);
      // it waits for its batch's ids; the embedding backward waits for it
      const es::ProgramOp& ids = p.ops[static_cast<size_t>(pf->waits_for.back())];
      EXPECT_EQ(ids.name, "input_dist/ids");
      EXPECT_EQ(ids.batch, ahead);
      for (const auto& op : p.ops) {
        if (op.name == "backward_fused_optimizer") {
          EXPECT_NE(std::find(op.waits_for.begin(), op.waits_for.end(), pf->id), op.waits_for.end());
        }
      }
      // the lookup of a prefetched batch fetches nothing (every table prefetches)
      // (the first semi_sync step looks up two batches, neither prefetched)
      const int unprefetched = it > 0 ? 0 : pipeline == es::PipelineKind::semi_sync ? 2 : 1;
      EXPECT_EQ(fetches, unprefetched) << to_string(pipeline) << " iteration " << it;
      const std::string text = es::to_text(p);
      EXPECT_NE(text.find("prefetch"), std::string::npos);
      EXPECT_NE(text.find("host link: "), std::string::npos) << text;
      EXPECT_EQ(es::to_json(p)["ops"][static_cast<size_t>(pf->id)]["bytes_h2d"], pf->bytes_h2d);
    }
  }
}

// Training with prefetch: tables, loss and dense parameters bit for bit those of the device
// placement (itself checked against the reference), under sparse_dist and semi_sync, lru and lfu,
// table_wise and row_wise; the lookups hit more than without prefetch, what the prefetches
// fetched is counted, and the session has a `prefetch` span per step with those bytes.
TEST(HostPrefetch, TrainsExactlyAsOnTheDeviceAndHitsMore) {
  for (es::ShardingType type : {es::ShardingType::table_wise, es::ShardingType::row_wise})
    for (es::PipelineKind pipeline : {es::PipelineKind::sparse_dist, es::PipelineKind::semi_sync})
      for (es::CachePolicy policy : {es::CachePolicy::lru, es::CachePolicy::lfu}) {
        const std::string what = fmt::format("{} {} {}", to_string(type), to_string(pipeline), to_string(policy));
        es::WorkloadSpec dev = parity_spec(type, 2, es::Pooling::sum, es::OptimizerType::rowwise_adagrad);
        dev.pipeline = pipeline;
        dev.steps = 6;
        const es::ShardingPlan plan = es::plan_sharding(dev);
        es::TrainerOptions topt;
        topt.keep_tables = true;
        topt.trace = false;
        const es::RunResult on_device = es::run_training(dev, plan, topt);
        ASSERT_EQ(on_device.ended, es::RunEnd::complete) << on_device.error;
        es::WorkloadSpec no_pf = prefetching(dev, policy);
        for (auto& t : no_pf.tables) t.prefetch_pipeline = false;
        const es::RunResult plain = es::run_training(no_pf, plan, topt);
        ASSERT_EQ(plain.ended, es::RunEnd::complete) << plain.error;
        const es::WorkloadSpec s = prefetching(dev, policy);
        const es::RunResult run = check_parity(s, {}, false, &plan);  // against the reference too
        ASSERT_EQ(run.ended, es::RunEnd::complete) << what << ": " << run.error;
        ASSERT_EQ(run.tables.size(), on_device.tables.size());
        for (size_t t = 0; t < run.tables.size(); ++t) EXPECT_EQ(run.tables[t], on_device.tables[t]) << what << " table " << t;
        EXPECT_EQ(run.loss, on_device.loss) << what;
        EXPECT_EQ(run.dense_params, on_device.dense_params) << what;
        // t3: 50 rows x 16, Zipf ids, cache 0.6 of its shard's rows
        const auto& t3 = run.table_storage[3];
        const auto& p3 = plain.table_storage[3];
        EXPECT_TRUE(t3.prefetch_pipeline);
        EXPECT_GT(t3.prefetched_rows, 0) << what;
        EXPECT_EQ(t3.prefetch_bytes_h2d, t3.prefetched_rows * 16 * 4) << what;
        EXPECT_LE(t3.prefetched_rows, t3.rows_fetched);
        EXPECT_EQ(p3.prefetched_rows, 0);
        EXPECT_EQ(t3.cache_hits + t3.cache_misses, p3.cache_hits + p3.cache_misses) << what << ": the same lookups";
        EXPECT_GT(t3.cache_hits, p3.cache_hits) << what << ": prefetch raises the lookups' hits";
        // the spans (as the session gets them): one prefetch per rank and step with a batch ahead,
        // with the bytes it fetched
        es::TrainerOptions eopt;
        eopt.keep_events = true;
        const es::RunResult traced = es::run_training(s, plan, eopt);
        ASSERT_EQ(traced.ended, es::RunEnd::complete) << traced.error;
        int64_t spans = 0, bytes = 0;
        for (const auto& e : traced.events)
          if (std::string(e.name) == "prefetch") {
            ++spans;
            bytes += e.bytes;
            EXPECT_EQ(e.category, embedscope::sessions::OpCategory::memcpy);
            EXPECT_EQ(e.lane, Lane::compute);  // the cpu rank's compute worker does the copies
          }
        const int64_t ahead = pipeline == es::PipelineKind::sparse_dist ? 1 : 2;
        EXPECT_EQ(spans, plan.world_size * (s.warmup_steps + s.steps - ahead)) << what;
        int64_t measured = 0;
        for (const auto& ts : traced.table_storage) measured += ts.prefetch_bytes_h2d;
        EXPECT_GE(bytes, measured) << what << " (the spans' bytes include the warmup's)";
        EXPECT_GT(measured, 0) << what;
      }
}

}  // namespace
