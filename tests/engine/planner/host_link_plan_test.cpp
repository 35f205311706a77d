// The planner's time estimate charges the host link of tables in host memory (placement host /
// host_cached) as the simulated executor does: plan_stats times the program's host_fetch,
// host_update and prefetch ops with host_copy_ns (RankStats::host_ns, prefetch_ns), the search's
// shard-level estimate uses the same host_link_ns, and plan --auto weighs it.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/workload/spec_error.h"

namespace es = embedscope::engine;
namespace ss = embedscope::sessions;

namespace {

const std::string kPlanHostLinkProfile = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/host_link.json";

// One table of 1,000 x 16 on rank 0 of 2 (table_wise), uniform ids, 2 a bag, 8 bags a rank: 32
// ids a batch at the shard; host_cached at load factor 0.25 (250 rows), lru.
es::WorkloadSpec plan_host_spec(es::PipelineKind pipeline, bool prefetch, const char* optimizer = "sgd",
                                int steps = 4) {
  nlohmann::json t = {{"name", "t"},       {"num_embeddings", 1000},  {"embedding_dim", 16},
                      {"feature_names", {"f"}}, {"placement", "host_cached"}, {"cache_load_factor", 0.25}};
  if (prefetch) t["prefetch_pipeline"] = true;
  const nlohmann::json j = {
      {"name", "plan_host_link"},
      {"tables", {t}},
      {"features", {{{"name", "f"}, {"pooling_factor", 2}, {"ids", "uniform"}}}},
      {"batch_size", 8},
      {"steps", steps},
      {"warmup_steps", 1},
      {"optimizer", {{"type", optimizer}}},
      {"pipeline", es::enum_name(pipeline)},
      {"devices", {{"count", 2}, {"backend", "simulated"}, {"hardware", kPlanHostLinkProfile}, {"memory_bytes", 1 << 30}}},
      {"sharding", {{"tables", {{"t", {{"type", "table_wise"}, {"ranks", {0}}}}}}}},
      {"dense", {{"num_dense_features", 4}, {"bottom_mlp", {1024, 1024, 16}}, {"top_mlp", {8, 1}}}}};
  return es::with_resolved_backend(es::parse_workload(j, "test"), "test");
}

// U = 1,000 (1 - 0.999^32) = 31.5094 distinct rows a batch; uniform ids: misses = U (1 - 250 /
// 1,000) = 23.632 (Che's approximation, cache_model.h), 23.632 x 64 B = 1,512.4 B.
double plan_distinct_rows() { return 1000.0 * (1.0 - std::pow(0.999, 32)); }

// The simulator runs the cold start (cost/cache_model.h) for ceil(T) + 2 = 11 iterations, T =
// ln 0.75 / (32 ln 0.999) = 8.99 batches until the 250 slots are full; the plan is the steady state.
constexpr int64_t kPlanColdIterations = 11;

// Sum of the simulated host-link spans (lane gpu_copy) per (rank, step), ns.
std::map<std::pair<int, int64_t>, int64_t> host_link_spans(const es::RunResult& r) {
  std::map<std::pair<int, int64_t>, int64_t> out;
  for (const auto& e : r.events)
    if (e.lane == ss::Lane::gpu_copy) out[{e.rank, e.step}] += e.end_ns - e.start_ns;
  return out;
}

}  // namespace

// By hand, over the test profile's host link (1 B a ns, 1 us a copy): host_fetch 1,512 B ->
// 1,000 + 1,512 = 2,512 ns; host_update (sgd: no state) writes back the dirty rows the misses
// evicted, 1,512 B -> 2,512 ns: rank 0's host term is 5,024 ns, rank 1's 0, and it is in the
// rank's total and the critical path. rowwise_adagrad adds one fp32 state value a row both ways:
// update h2d U x 4 = 126.04 -> 126 B, d2h 126.04 + 1,512.4 = 1,638.4 -> 1,638 B: 2,638 ns.
// Over h100_sxm's PCIe Gen5 (50 GB/s, 10 us a copy): 10,000 + 1,512 / 50 = 10,030 ns a copy.
TEST(PlanHostLink, StatsChargeTheHostLinkByHand) {
  const double U = plan_distinct_rows();
  ASSERT_EQ(std::llround(0.75 * U * 64), 1512);
  const es::WorkloadSpec s = plan_host_spec(es::PipelineKind::base, false);
  const es::ShardingPlan plan = es::plan_sharding(s);
  const es::HardwareProfile hw = es::load_hardware_profile(kPlanHostLinkProfile);
  const es::PlanStats st = es::plan_stats(s, plan, hw);
  ASSERT_EQ(st.ranks.size(), 2u);
  const es::RankStats& r0 = st.ranks[0];
  EXPECT_EQ(r0.host_ns, 2 * (1000 + 1512));
  EXPECT_EQ(r0.prefetch_ns, 0);
  EXPECT_EQ(st.ranks[1].host_ns, 0);
  EXPECT_EQ(r0.total_ns(), r0.fwd_compute_ns + r0.fwd_comms_ns + r0.bwd_compute_ns + r0.bwd_comms_ns + 5024);
  int64_t m[5] = {0, 0, 0, 0, 0};
  for (const auto& r : st.ranks) {
    m[0] = std::max(m[0], r.fwd_compute_ns);
    m[1] = std::max(m[1], r.fwd_comms_ns);
    m[2] = std::max(m[2], r.bwd_compute_ns);
    m[3] = std::max(m[3], r.bwd_comms_ns);
  }
  EXPECT_EQ(st.critical_path_ns, m[0] + m[1] + m[2] + m[3] + 5024);
  const nlohmann::json j = es::to_json(st);
  EXPECT_EQ(j["ranks"][0]["host_ns"].get<int64_t>(), 5024);
  EXPECT_EQ(j["ranks"][0]["prefetch_ns"].get<int64_t>(), 0);
  const std::string text = es::to_text(st);
  EXPECT_NE(text.find(" host "), std::string::npos) << text;
  EXPECT_NE(text.find("0.005"), std::string::npos) << text;  // 5,024 ns in ms
  // rowwise_adagrad: the state rows there and back
  const es::WorkloadSpec a = plan_host_spec(es::PipelineKind::base, false, "rowwise_adagrad");
  EXPECT_EQ(es::plan_stats(a, es::plan_sharding(a), hw).ranks[0].host_ns, (1000 + 1512) + (1000 + 1638));
  // h100_sxm's host link
  EXPECT_EQ(es::plan_stats(s, plan, es::load_hardware_profile("h100_sxm")).ranks[0].host_ns, 2 * 10030);
  EXPECT_EQ(es::host_link_ns(1512, 0, es::load_hardware_profile("h100_sxm")), 10030);
  EXPECT_EQ(es::host_link_ns(126, 1638, hw), 2638);
}

// plan and simulate agree: the plan is the steady state (the cache model's steady hit rate),
// and for every step of the simulated run after the cold start (kPlanColdIterations) the
// simulated gpu_copy spans sum to the plan's host_ns + prefetch_ns. base: host_fetch + host_update = 5,024 ns, and the simulated step is longer than
// the same run with the table on the device by at least the fetch (the lookup waits for it) and
// at most the plan's host term. sparse_dist with prefetch: prefetch 2,512 ns, hidden under the
// dense part (a 1.07 M parameter MLP, about 11 us), so host_ns is host_update's 2,512 ns alone.
TEST(PlanHostLink, PlanAndSimulateAgree) {
  const es::HardwareProfile hw = es::load_hardware_profile(kPlanHostLinkProfile);
  es::TrainerOptions o;
  o.keep_events = true;
  {
    const es::WorkloadSpec s = plan_host_spec(es::PipelineKind::base, false, "sgd", 15);
    const es::ShardingPlan plan = es::plan_sharding(s);
    const es::PlanStats st = es::plan_stats(s, plan, hw);
    const es::RunResult r = es::run_training(s, plan, o);
    ASSERT_EQ(r.ended, es::RunEnd::complete) << r.error;
    const auto spans = host_link_spans(r);
    ASSERT_EQ(spans.size(), 16u);  // rank 0, every step (warmup included)
    int steady = 0;
    for (const auto& [k, ns] : spans) {
      EXPECT_EQ(k.first, 0);
      if (k.second + 1 < 9) {  // the caches still fill (T = 8.99): more fetched, less written back
        EXPECT_NE(ns, st.ranks[0].host_ns) << "step " << k.second;
        continue;
      }
      ++steady;
      EXPECT_EQ(ns, st.ranks[0].host_ns + st.ranks[0].prefetch_ns) << "step " << k.second;
    }
    EXPECT_EQ(steady, 7);  // iterations 9 .. 15
    es::WorkloadSpec d = s;
    d.tables[0].placement = es::TablePlacement::device;
    const es::RunResult rd = es::run_training(d, plan, o);
    ASSERT_EQ(rd.ended, es::RunEnd::complete) << rd.error;
    ASSERT_EQ(rd.step_time_ns.size(), r.step_time_ns.size());
    for (size_t i = kPlanColdIterations - 1; i < r.step_time_ns.size(); ++i) {  // iteration i + 1
      const int64_t extra = r.step_time_ns[i] - rd.step_time_ns[i];
      EXPECT_GE(extra, 2512) << "step " << i;
      EXPECT_LE(extra, st.ranks[0].host_ns) << "step " << i;
    }
  }
  {
    const es::WorkloadSpec s = plan_host_spec(es::PipelineKind::sparse_dist, true, "sgd", 15);
    const es::ShardingPlan plan = es::plan_sharding(s);
    const es::PlanStats st = es::plan_stats(s, plan, hw);
    EXPECT_EQ(st.ranks[0].prefetch_ns, 2512);
    EXPECT_EQ(st.ranks[0].host_ns, 2512);
    EXPECT_NE(es::to_text(st).find("host (prefetch)"), std::string::npos);
    const es::RunResult r = es::run_training(s, plan, o);
    ASSERT_EQ(r.ended, es::RunEnd::complete) << r.error;
    const auto spans = host_link_spans(r);
    ASSERT_EQ(spans.size(), 16u);  // rank 0, steps -1 (warmup) .. 14
    const int64_t last = spans.rbegin()->first.second;
    EXPECT_EQ(spans.rbegin()->second, 2512);  // the last prefetches nothing
    int steady = 0;
    for (const auto& [k, ns] : spans) {
      if (k.second + 1 < kPlanColdIterations || k.second == last) continue;
      ++steady;
      EXPECT_EQ(ns, st.ranks[0].host_ns + st.ranks[0].prefetch_ns) << "step " << k.second;
    }
    EXPECT_EQ(steady, 4);
  }
}

// plan --auto weighs the host link: a 100,000 x 64 host_cached table (5% cached) with 2,048
// uniform ids a step misses about 1,926 rows (493 KB) a step, fetched and then written back
// dirty: over 1 B a ns about 1 ms a step on one rank when table_wise, half of it on each of 2
// ranks when row_wise (each shard 1,024 ids of 50,000 rows, ~968 misses, 248 KB each way). Without the host
// term the search keeps it table_wise (row_wise only adds output-dist bytes); with it, row_wise.
TEST(PlanHostLink, AutoSplitsAHostTableWhoseCopiesDominate) {
  es::WorkloadSpec s = plan_host_spec(es::PipelineKind::base, false);
  s.sharding.per_table.clear();
  s.tables[0].num_embeddings = 100000;
  s.tables[0].embedding_dim = 64;
  s.tables[0].cache_load_factor = 0.05;
  s.batch_size = 256;
  s.features[0].pooling_factor.mean = 4;
  const es::HardwareProfile hw = es::load_hardware_profile(kPlanHostLinkProfile);
  es::PlanSearchOptions opt;
  opt.sharding_types = {es::ShardingType::table_wise, es::ShardingType::row_wise};
  const es::PlanSearchResult r = es::plan_search(s, hw, opt);
  ASSERT_EQ(r.plan.tables.size(), 1u);
  EXPECT_EQ(r.plan.tables[0].type, es::ShardingType::row_wise) << r.proposer;
  ASSERT_EQ(r.stats.ranks.size(), 2u);
  for (const auto& rk : r.stats.ranks) {
    EXPECT_GT(rk.host_ns, 450000) << rk.rank;  // 2 x (248 KB at 1 B a ns + 1 us)
    EXPECT_LT(rk.host_ns, 550000) << rk.rank;
  }
  // the same table forced table_wise: its rank carries all of it
  es::PlanSearchOptions tw;
  tw.sharding_types = {es::ShardingType::table_wise};
  const es::PlanSearchResult t = es::plan_search(s, hw, tw);
  EXPECT_GT(std::max(t.stats.ranks[0].host_ns, t.stats.ranks[1].host_ns), 900000);
  EXPECT_GT(t.stats.critical_path_ns, r.stats.critical_path_ns);
}

// The search's shard-level estimate (search.h) carries the host term too, so the LPT partitioner
// spreads host traffic: two host_cached tables a1, a2 of ~1 ms of copies a step each (as above),
// a device table b of ~0.2 ms of lookups (102,400 ids x 512 B at 0.5 TB/s, twice) and a small c,
// table_wise on 2 ranks. By compute alone b goes first onto one rank and c, a1, a2 all fit
// under it on the other (and greedy by bytes does the same: b 51.2 MB and c 2.56 MB before the
// 1.28 MB caches of a1 and a2), so a1 and a2 would share a host link (2 ms); with the host term
// a1 and a2 go first, one a rank.
TEST(PlanHostLink, AutoSpreadsHostTablesOverRanks) {
  nlohmann::json tables = nlohmann::json::array(), features = nlohmann::json::array();
  for (const std::string n : {"a1", "a2", "b", "c"}) {
    const bool host = n[0] == 'a';
    nlohmann::json t = {{"name", n},
                        {"num_embeddings", host ? 100000 : (n == "b" ? 100000 : 40000)},
                        {"embedding_dim", n == "b" ? 128 : (host ? 64 : 16)},
                        {"feature_names", {"f_" + n}}};
    if (host) {
      t["placement"] = "host_cached";
      t["cache_load_factor"] = 0.05;
    }
    tables.push_back(t);
    features.push_back({{"name", "f_" + n}, {"pooling_factor", n == "b" ? 200 : (host ? 4 : 1)}, {"ids", "uniform"}});
  }
  const nlohmann::json j = {
      {"name", "plan_host_spread"},
      {"tables", tables},
      {"features", features},
      {"batch_size", 256},
      {"steps", 4},
      {"devices", {{"count", 2}, {"backend", "simulated"}, {"hardware", kPlanHostLinkProfile}, {"memory_bytes", 1 << 30}}},
      {"dense", {{"num_dense_features", 4}, {"bottom_mlp", {16, 16}}, {"interaction", "cat"}, {"top_mlp", {8, 1}}}}};
  const es::WorkloadSpec s = es::with_resolved_backend(es::parse_workload(j, "test"), "test");
  const es::HardwareProfile hw = es::load_hardware_profile(kPlanHostLinkProfile);
  es::PlanSearchOptions tw;
  tw.sharding_types = {es::ShardingType::table_wise};
  const es::PlanSearchResult r = es::plan_search(s, hw, tw);
  ASSERT_EQ(r.plan.tables.size(), 4u);
  EXPECT_NE(r.plan.tables[0].shards[0].rank, r.plan.tables[1].shards[0].rank) << r.proposer;
  for (const auto& rk : r.stats.ranks) EXPECT_LT(rk.host_ns, 1200000) << rk.rank;  // one table's copies each
}
