// A rebalance proposal's communication, by the planner's cost model on the session's network
// (rebalance/comm_cost.h): a hot table split row_wise on a 200 kB/s link adds a reduce-scatter
// of its pooled output and the matching all-gather of its gradient, 62.44 ms each; `rebalance`
// says so and calls the split slower (it predicted 0.03 ms saved and the run was 131 ms a step
// slower), and the live policy does not make it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/rebalance/comm_cost.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"
#include "support/cli_run.h"

using nlohmann::json;
namespace es = embedscope::engine;
namespace rb = embedscope::engine::rebalance;

namespace {
std::filesystem::path reb63_scratch() {
  static const auto dir = embedscope::test_support::fresh_scratch("es_reb63_" + std::to_string(getpid()));
  return dir;
}
embedscope::test_support::CliResult reb63_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, reb63_scratch());
}

// The hot-table workload: "hot" 5,000 x 16 with 4 Zipf(1.05) ids a bag (1,024 of the 2,560 ids
// a step, 40%), t0..t5 2,000 x 16 with one id a bag; 4 ranks of 64 samples, table_wise (hot
// alone on rank 0, t0..t5 on ranks 1, 2, 3, 1, 2, 3); every link 200 kB/s and 1 ms a collective.
json hot_workload(int steps) {
  json tables = json::array(), features = json::array();
  tables.push_back({{"name", "hot"}, {"num_embeddings", 5000}, {"embedding_dim", 16}, {"feature_names", {"f_hot"}}});
  features.push_back({{"name", "f_hot"}, {"pooling_factor", 4},
                      {"ids", {{"distribution", "zipf"}, {"alpha", 1.05}, {"permute", true}}}});
  for (int i = 0; i < 6; ++i) {
    const std::string t = "t" + std::to_string(i), f = "f" + std::to_string(i);
    tables.push_back({{"name", t}, {"num_embeddings", 2000}, {"embedding_dim", 16}, {"feature_names", {f}}});
    features.push_back({{"name", f}, {"pooling_factor", 1}, {"ids", "zipf"}});
  }
  const json link = {{"bandwidth_bytes_per_s", 200000}, {"latency_ns", 1000000}};
  return {{"name", "hot4"}, {"tables", tables}, {"features", features}, {"batch_size", 64}, {"steps", steps},
          {"warmup_steps", 1}, {"seed", 1}, {"devices", {{"count", 4}}},
          {"sharding", {{"default", "table_wise"}}},
          {"network", {{"intra_node", link}, {"inter_node", link}}}};
}
}  // namespace

// By hand (alpha-beta, one latency a collective, a member's time latency + max(sent, received) /
// bandwidth): backward under table_wise is the gradient all-to-all, rank 0 receiving its hot
// table's gradient from 3 peers, 3 x 64 x 16 x 4 = 12,288 B, and sending t's... the largest
// member n = 24,576 B (ranks 1-3: two tables' gradients, 3 x 2 x 64 x 16 x 4): 1 + 122.88 =
// 123.88 ms. Row_wise hot adds the all-gather of its pooled gradient: each rank sends its 64 x 16 x
// 4 = 4,096 B to 3 peers (12,288 B) and receives as much: 1 + 61.44 = 62.44 ms, while the t
// tables' all-to-all keeps n = 24,576 B: 186.32 ms. Forward gains the reduce-scatter, 62.44 ms
// (the same 12,288 B a member), and larger lengths and ids all-to-alls. Bytes: the reduce-scatter
// and the all-gather send 4 x 12,288 = 49,152 B each where the all-to-alls sent 12,288 B of hot's
// output and gradient (+36,864 B each), and every rank now sends hot's 64 lengths to each of 3
// peers (4 x 3 x 64 x 8 = 6,144 B where 3 x 64 x 8 = 1,536 B went to rank 0: +4,608 B).
TEST(Reb63CommCost, RowWiseSplitAddsTheReduceScatterAndAllGather) {
  const es::WorkloadSpec spec = es::parse_workload(hot_workload(4), "hot4");
  const es::ShardingPlan tw = es::plan_sharding(spec);
  ASSERT_EQ(tw.tables[0].shards.at(0).rank, 0);
  // the proposal's plan: hot row_wise over the 4 ranks (1,250 rows each), t0..t5 where they were
  es::ShardingPlan rw = tw;
  rw.tables[0].type = es::ShardingType::row_wise;
  rw.tables[0].shards.clear();
  for (int r = 0; r < 4; ++r) rw.tables[0].shards.push_back({r, 1250 * r, 1250, 0, 16});
  const rb::CommChange c = rb::comm_change(spec, tw, rw);
  EXPECT_TRUE(c.network_emulated);
  EXPECT_EQ(c.profile, "h100_sxm");
  EXPECT_NEAR(1e-6 * static_cast<double>(c.before.bwd_comms_ns), 123.88, 0.05);
  EXPECT_NEAR(1e-6 * static_cast<double>(c.after.bwd_comms_ns), 123.88 + 62.44, 0.05);
  // forward: the reduce-scatter's 62.44 ms at least, the lengths and ids all-to-alls on top
  EXPECT_GE(c.after.fwd_comms_ns - c.before.fwd_comms_ns, 62'440'000 - 50'000);
  EXPECT_LE(c.after.fwd_comms_ns - c.before.fwd_comms_ns, 62'440'000 + 40'000'000);
  EXPECT_GE(c.added_ns(), 124'880'000 - 100'000);
  // bytes: +36,864 output, +36,864 gradient, +4,608 lengths, and the ids' and split checks' change
  EXPECT_GE(c.added_bytes(), 2 * 36'864 + 4'608 - 2'048);
  EXPECT_LE(c.added_bytes(), 2 * 36'864 + 4'608 + 8'192);
  // back to table_wise: the same communication removed
  const rb::CommChange back = rb::comm_change(spec, rw, tw);
  EXPECT_EQ(back.added_ns(), -c.added_ns());
  EXPECT_EQ(back.added_bytes(), -c.added_bytes());
  EXPECT_TRUE(rb::comm_time_applies(spec));
  es::WorkloadSpec plain = spec;
  plain.network = {};
  EXPECT_FALSE(rb::comm_time_applies(plain));  // cpu ranks on an unlimited link: the model's time does not apply
}

// `rebalance --split-hot-tables row_wise` of a session on the slow link: the ids balance (1.60 ->
// about 1.16) but the split adds ~125 ms of communication a step: verdict "slower", never "the load
// balances ... run the new plan", and the JSON carries the added bytes and time.
TEST(Reb63CommCost, RebalanceCallsASlowerSplitSlower) {
  const auto wl = reb63_scratch() / "net.json";
  std::ofstream(wl) << hot_workload(4).dump(2);
  const auto db = reb63_scratch() / "net.db";
  auto r = reb63_cli("run " + wl.string() + " -o " + db.string());
  ASSERT_EQ(r.code, 0) << r.err;
  r = reb63_cli("rebalance " + db.string() + " --split-hot-tables row_wise --json");
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["changes"].size(), 1u) << j.dump(1);
  EXPECT_EQ(j["changes"][0]["table"], "hot");
  EXPECT_NEAR(j["imbalance_before"].get<double>(), 1.60, 1e-9);
  EXPECT_TRUE(j["worth_it"].get<bool>());  // the load balances ...
  EXPECT_EQ(j["verdict"], "slower");        // ... and the step does not
  EXPECT_FALSE(j["predicted_faster"].get<bool>());
  EXPECT_TRUE(j["comm"]["timed"].get<bool>());
  EXPECT_GE(j["comm"]["comm_ns_added_per_step_predicted"].get<int64_t>(), 124'000'000);
  EXPECT_GE(j["comm"]["bytes_sent_added_per_step_predicted"].get<int64_t>(), 2 * 36'864);
  EXPECT_GE(j["step_ns_change_predicted"].get<double>(), 120e6);
  r = reb63_cli("rebalance " + db.string() + " --split-hot-tables row_wise");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("verdict      slower: the load balances (ids max/mean 1.60 -> "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("keep the current plan"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("run the new plan"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("comm         bytes sent a step (every rank) "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the session's network: intra-node 200000 B/s, 1 ms; inter-node 200000 B/s, 1 ms"),
            std::string::npos)
      << r.out;
}

// The live policy on the same link: "every 2" with row_wise_hot_tables fires after step 1 and
// would split hot (1.60 -> ~1.16); the model says the step gets slower, so it refuses (cause
// "slower", recorded with the firing) and the plan stays table_wise (no plan change).
TEST(Reb63CommCost, LivePolicyDoesNotMakeASlowerSplit) {
  json w = hot_workload(4);
  w["rebalance"] = {{"every", 2}, {"row_wise_hot_tables", true}};
  const auto wl = reb63_scratch() / "live.json";
  std::ofstream(wl) << w.dump(2);
  const auto db = reb63_scratch() / "live.db";
  auto r = reb63_cli("run " + wl.string() + " -o " + db.string());
  ASSERT_EQ(r.code, 0) << r.err;
  r = reb63_cli("stats " + db.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json s = json::parse(r.out);
  ASSERT_TRUE(s.contains("rebalances")) << s.dump(1).substr(0, 2000);
  ASSERT_GE(s["rebalances"].size(), 1u);
  for (const auto& f : s["rebalances"]) EXPECT_EQ(f["moves"].get<int>(), 0) << f;
  const json& refused = s["rebalances"][0]["refused"];
  ASSERT_EQ(refused.size(), 1u) << s["rebalances"][0];
  EXPECT_EQ(refused[0]["table"], "hot");
  const std::string why = refused[0]["reason"].get<std::string>();
  // 3/4 of hot's 320,000 B leave rank 0 (sgd: no optimizer state)
  EXPECT_EQ(why.rfind("table \"hot\" (234.4 KiB) from rank 0 to row_wise over 4 ranks", 0), 0u) << why;
  EXPECT_NE(why.find(": the moves (max/mean 1.60 -> "), std::string::npos) << why;
  EXPECT_NE(why.find("of communication a step"), std::string::npos) << why;
  EXPECT_NE(why.find("a step slower; not made"), std::string::npos) << why;
}
