// What a rebalance's verdict weighs, against hand-computed numbers (tester60b F12, F1, F6, F8,
// F4, F2): the embedding work that moves with a shard (lookups and their backward and fused
// optimizer update, engine/rebalance/shard_work.h); the step medians of a live move over every
// step each plan ran; the lookup_time trigger and observed-after on each rank's median step; a
// plan for a fresh run checked against the memory estimate alone; the `why` line of a table that
// bounds a worthwhile proposal; and the unit named "ids" where no table is split by columns.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/rebalance/policy.h"
#include "embedscope/engine/rebalance/reshard.h"
#include "embedscope/engine/rebalance/shard_work.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/analysis/rebalance_effect.h"
#include "engine/rebalance/policy_fixtures.h"
#include "engine/rebalance/straggler_workload.h"
#include "support/cli_run.h"

using namespace embedscope::engine;
using namespace embedscope::engine::rebalance;
using nlohmann::json;
namespace ss = embedscope::sessions;

namespace {

std::filesystem::path sc_scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("es_straggler_cost_" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}
embedscope::test_support::CliResult sc_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, sc_scratch());
}
void sc_sql(const std::filesystem::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(h);
  sqlite3_close(h);
}
std::filesystem::path sc_run(const std::string& name, const json& wl) {
  const auto path = sc_scratch() / (name + ".json");
  std::ofstream(path) << wl.dump(2);
  const auto db = sc_scratch() / (name + ".db");
  const auto r = sc_cli("run " + path.string() + " -o " + db.string() + " --force-overwrite");
  EXPECT_EQ(r.code, 0) << r.err;
  return db;
}

/// tables t0..t{n-1} table_wise on `ranks`, `rows` x 16 fp32 each, sgd.
WorkloadSpec sc_tables_on(int world, const std::vector<int>& ranks, const std::vector<int64_t>& rows) {
  json j = {{"name", "straggler_cost"},
            {"batch_size", 8},
            {"steps", 4},
            {"devices", {{"count", world}, {"memory_bytes", int64_t{1} << 30}}},
            {"optimizer", {{"type", "sgd"}}},
            {"dense", nullptr},
            {"tables", json::array()},
            {"sharding", {{"default", "table_wise"}, {"tables", json::object()}}}};
  for (size_t t = 0; t < ranks.size(); ++t) {
    const std::string n = "t" + std::to_string(t);
    j["tables"].push_back({{"name", n}, {"num_embeddings", rows[t]}, {"embedding_dim", 16}, {"feature_names", {"f" + std::to_string(t)}}});
    j["sharding"]["tables"][n] = {{"type", "table_wise"}, {"ranks", {ranks[t]}}};
  }
  return parse_workload(j, "straggler_cost");
}

}  // namespace

// ---- F12: the work that moves with a shard ----

// Rank 3 holds h0 (192 ids, 1920 ns lookup) and h1 (576 ids, 5760 ns), update 76,800 ns: split by
// ids 19,200 / 57,600; rank 0 holds t0 (96 ids, 960 ns), update 3000 ns: all of it.
TEST(ShardWork, TheUpdateIsSplitOverARanksShardsByTheirIds) {
  const WorkloadSpec s = sc_tables_on(4, {0, 3, 3}, {1000, 100, 100});
  const ShardingPlan plan = plan_sharding(s);
  const auto work = shard_work_ns(plan, {{96}, {192}, {576}}, {{960}, {1920}, {5760}}, {3000, 0, 0, 76800});
  ASSERT_EQ(work.size(), 3u);
  EXPECT_EQ(work[0][0], 960 + 3000);
  EXPECT_EQ(work[1][0], 1920 + 19200);
  EXPECT_EQ(work[2][0], 5760 + 57600);
  EXPECT_EQ(work_per_rank(plan, plan, work), (std::vector<int64_t>{3960, 0, 0, 84480}));
  ShardingPlan moved = plan;  // t2 to rank 1: its work goes with it
  moved.tables[2].shards[0].rank = 1;
  EXPECT_EQ(work_per_rank(plan, moved, work), (std::vector<int64_t>{3960, 63360, 0, 21120}));
  // a rank that looked nothing up splits its update evenly over its shards
  const auto idle = shard_work_ns(plan, {{0}, {0}, {0}}, {{0}, {0}, {0}}, {0, 0, 0, 1000});
  EXPECT_EQ(idle[1][0], 500);
  EXPECT_EQ(idle[2][0], 500);
  EXPECT_THROW(shard_work_ns(plan, {{1}}, {{1}}, {0, 0, 0, 0}), std::invalid_argument);
  EXPECT_THROW(shard_work_ns(plan, {{1}, {1}, {1}}, {{1}, {1}, {1}}, {0}), std::invalid_argument);
}

// The straggler (3 steps; ranks 0..2 one cold table of 32 ids a step, rank 3 four hot tables of
// 192) at 10 lookup ns an id, the update (backward_fused_optimizer) 1000 ns a step on ranks 0..2
// and 76,800 ns (100 ns an id) on rank 3. Work a step: ranks 0..2 320 + 1000 = 1320 ns, rank 3
// 7680 + 76,800 = 84,480 ns; each hot table 1920 + 19,200 = 21,120 ns. The proposal moves three
// hot tables, one to each of ranks 0..2: at most 1320 + 21,120 = 22,440 ns, a saving of 62,040 ns
// a step - where the lookups alone save (2304 - 672) / 3 x 10 = 5440 ns. Steps of 100.00, 100.02,
// 100.04 ms: batches of 1 (3 steps), se sd / sqrt(3) = 20,000 / sqrt(3), the noise of a 3-step mean
// 2 x sqrt(2) x 20,000 / sqrt(3) = 32,660 ns: the lookups alone are within it, the work clears it.
TEST(RebalanceGain, CountsTheUpdateThatMovesWithTheShards) {
  const auto db = sc_run("sc_work", embedscope::test_support::straggler_workload("sc_work"));
  sc_sql(db, "DELETE FROM op_blocks; UPDATE load_counters SET lookup_ns = ids * 10;"
             "UPDATE steps SET end_ns = start_ns + 100000000 + 20000 * step WHERE step >= 0;"
             "UPDATE ops SET end_ns = start_ns + CASE WHEN lane_key / 256 = 3 THEN 76800 ELSE 1000 END "
             "WHERE name_id = (SELECT id FROM strings WHERE value = 'backward_fused_optimizer')");
  auto r = sc_cli("rebalance " + db.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json p = json::parse(r.out);
  EXPECT_EQ(p["gain_basis"], "lookup_and_update");
  EXPECT_EQ(p["update_ns_measured"], (std::vector<int64_t>{3000, 3000, 3000, 230400}));
  EXPECT_EQ(p["work_ns_before"], (std::vector<int64_t>{3960, 3960, 3960, 253440}));
  EXPECT_EQ(p["work_ns_after_predicted"], (std::vector<int64_t>{67320, 67320, 67320, 63360}));
  EXPECT_NEAR(p["work_ns_saved_per_step_predicted"].get<double>(), 62040.0, 1e-6);
  EXPECT_NEAR(p["lookup_ns_saved_per_step_predicted"].get<double>(), 5440.0, 1e-6);
  EXPECT_NEAR(p["step_noise"]["mean_diff_se_ns"].get<double>(), std::sqrt(2.0) * 20000 / std::sqrt(3.0), 1e-3);
  EXPECT_EQ(p["verdict"], "worth_it");  // lookups alone: 5440 <= 32,660, "within_step_noise"
  r = sc_cli("rebalance " + db.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("a step: rank 3 0.08 ms (lookup 0.01 ms + update 0.08 ms), at most 0.02 ms on any rank after the "
                       "moves: about 0.06 ms a step saved"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("verdict      worth it"), std::string::npos) << r.out;
  // without update ops the gain is the lookups', said so
  sc_sql(db, "DELETE FROM ops WHERE name_id = (SELECT id FROM strings WHERE value = 'backward_fused_optimizer')");
  const json q = json::parse(sc_cli("rebalance " + db.string() + " --json").out);
  EXPECT_EQ(q["gain_basis"], "lookup");
  EXPECT_EQ(q["verdict"], "within_step_noise");
  EXPECT_NE(sc_cli("rebalance " + db.string()).out.find("work         no backward_fused_optimizer op recorded"),
            std::string::npos);
}

// ---- F1: the step medians over every step each plan ran ----

namespace {
ss::StepMetric step_of(int64_t step, double ms) {
  ss::StepMetric m;
  m.step = step;
  m.rank = 0;
  m.start_ns = step * 1'000'000'000;
  m.end_ns = m.start_ns + std::llround(ms * 1e6);
  return m;
}
}  // namespace

// The tester's live run: slowest-rank steps 39.19, 43.34 | move after step 1 | 93.99, 98.53,
// 77.75, 36.59, 37.04, 24.17, 21.75, 21.14 ms. Before (2 steps): nearest-rank p50 39.19; after
// (8 steps, sorted 21.14 21.75 24.17 36.59 37.04 77.75 93.99 98.53): the 4th, 36.59 ms - faster,
// amortised 31.19 / (39.19 - 36.59) = 12.0 steps. The window's 2 steps after (93.99, 98.53)
// read "got slower".
TEST(RebalanceEffectSteps, MediansCoverEveryStepEachPlanRan) {
  std::vector<ss::StepMetric> steps;
  const double ms[] = {39.19, 43.34, 93.99, 98.53, 77.75, 36.59, 37.04, 24.17, 21.75, 21.14};
  for (int64_t s = 0; s < 10; ++s) steps.push_back(step_of(s, ms[s]));
  ss::RebalanceRecord r;
  r.step = 1;
  r.window_steps = 2;
  r.after_steps = 2;
  r.moves = 4;
  r.duration_ns = 31'190'000;
  r.outcome = "complete";
  const auto e = ss::rebalance_effects({r}, steps);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].step_p50_before_ns, 39'190'000);
  EXPECT_EQ(e[0].step_p50_after_ns, 36'590'000);
  EXPECT_EQ(e[0].before_first, 0);
  EXPECT_EQ(e[0].before_last, 1);
  EXPECT_EQ(e[0].after_first, 2);
  EXPECT_EQ(e[0].after_last, 9);
  EXPECT_NEAR(e[0].amortised_after_steps, 31.19 / 2.60, 1e-9);
  EXPECT_EQ(ss::rebalance_slowdown_text(e[0]), "");
  // a second rebalance after step 5: the first's steps after end there, the second's before start at 2
  ss::RebalanceRecord r2 = r;
  r2.step = 5;
  const auto two = ss::rebalance_effects({r2, r}, steps);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].after_first, 2);
  EXPECT_EQ(two[1].after_last, 5);
  EXPECT_EQ(two[1].step_p50_after_ns, 77'750'000);  // 36.59 77.75 93.99 98.53: the 2nd
  EXPECT_EQ(two[0].before_first, 2);
  EXPECT_EQ(two[0].before_last, 5);
  EXPECT_EQ(two[0].after_first, 6);
  EXPECT_EQ(two[0].after_last, 9);
  EXPECT_EQ(two[0].step_p50_after_ns, 21'750'000);  // 21.14 21.75 24.17 37.04: the 2nd
}

// ---- F6: lookup_time's trigger and observed-after on each rank's median step ----

// The tester's steps 3..5 (lookup ns per rank): summed 218,808 / 268,261 / 235,559 / 653,721 ->
// 1.90, which fired the policy on rank 3's one slow step (513,058); each rank's median step
// (68,909 / 89,628 / 82,593 / 71,644) x 3 -> 89,628 / 78,193.5 = 1.146.
TEST(RebalanceRobustTrigger, OneSlowStepDoesNotFireLookupTime) {
  std::vector<std::vector<int64_t>> rows(3, std::vector<int64_t>(4, 1000));
  rows.push_back({64981, 89628, 57918, 513058});
  rows.push_back({83847, 86952, 95048, 69019});
  rows.push_back({68909, 91681, 82593, 71644});
  EXPECT_EQ(window_rank_load({rows.begin() + 3, rows.end()}, true),
            (std::vector<int64_t>{68909 * 3, 89628 * 3, 82593 * 3, 71644 * 3}));
  EXPECT_EQ(window_rank_load({rows.begin() + 3, rows.end()}, false),
            (std::vector<int64_t>{217737, 268261, 235559, 653721}));
  EXPECT_EQ(window_rank_load({{10, 1}, {20, 3}}, true), (std::vector<int64_t>{30, 4}));  // 2 steps: the sum
  EXPECT_EQ(window_rank_load({{10}, {20}, {40}, {30}}, true), (std::vector<int64_t>{100}));  // (20 + 30) / 2 x 4
  RebalanceSpec policy;
  policy.trigger = RebalanceTrigger::when;
  policy.window = 3;
  policy.imbalance_above = 1.5;
  policy.balance = RebalanceBalance::ids;  // a count: summed, fires at 1.90
  const auto ids = should_rebalance(policy, 5, 2, rows);
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(*ids, "imbalance 1.90 > 1.50 over steps 3..5");
  policy.balance = RebalanceBalance::lookup_time;
  EXPECT_FALSE(should_rebalance(policy, 5, 2, rows).has_value());
  policy.imbalance_above = 1.1;
  const auto t = should_rebalance(policy, 5, 2, rows);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(*t, "imbalance 1.15 > 1.10 over steps 3..5 (each rank's median step)");
  // observed after a rebalance after step 2 (window 3): the same statistic, 1.146; summed 1.90
  std::vector<std::vector<int64_t>> per_rank(4);
  for (const auto& row : rows)
    for (size_t r = 0; r < 4; ++r) per_rank[r].push_back(row[r]);
  ss::RebalanceRecord rec;
  rec.step = 2;
  rec.window_steps = 3;
  const auto robust = merge_rebalances({{rec}}, per_rank, true);
  EXPECT_NEAR(robust[0].imbalance_after, 89628.0 / 78193.5, 1e-9);
  EXPECT_EQ(robust[0].after_steps, 3);
  EXPECT_NEAR(merge_rebalances({{rec}}, per_rank, false)[0].imbalance_after, 653721.0 / (1375278.0 / 4), 1e-9);
}

// ---- F8: a plan for a fresh run is checked against the estimate alone ----

// t1 (1 MiB) from rank 0 to rank 1 fits rank 1's estimate after the move (+1 MiB of 1.5 MiB
// spare) but not while it runs (+2 MiB: the new shard and the received rows): a live move is
// refused, a plan for `run --plan` (which never holds both) is not.
TEST(RebalanceFreshRun, APlanForAFreshRunSkipsTheMovesTransientMemory) {
  WorkloadSpec s = sc_tables_on(2, {0, 0, 1}, {16384, 16384, 49152});
  const ShardingPlan cur = plan_sharding(s);
  const int64_t mib = int64_t{1} << 20;
  s.devices.memory_bytes = estimate_memory(s, cur)[1].total() + mib + mib / 2;
  const auto load = embedscope::test_support::table_load({300, 300, 0});
  const Proposal live = propose(s, cur, load, 0);
  EXPECT_TRUE(live.moves.empty());
  ASSERT_EQ(live.refused.size(), 1u);
  EXPECT_EQ(live.refused[0].cause, "memory during the move");
  const Proposal fresh = propose(s, cur, load, 0, 0.0, MoveMemory::fresh_run);
  ASSERT_EQ(fresh.moves.size(), 1u);
  EXPECT_EQ(fresh.moves[0].table, 1);
  EXPECT_EQ(fresh.moves[0].to, 1);
  EXPECT_TRUE(fresh.refused.empty());
  for (const auto& e : estimate_memory(s, fresh.plan)) EXPECT_LE(e.total(), s.devices.memory_bytes) << e.rank;
}

// ---- F4 and F2: the why line of a worthwhile proposal; "ids" without column_wise tables ----

// The straggler with three hot tables (h3 left out): per step ranks 0..2 32 ids, rank 3 3 x 192 =
// 576. Over 3 steps: 96 / 96 / 96 / 1728, mean 504; each hot table 576 > 504, so the best whole
// moves reach 576 / 504 = 1.14 (one hot table a rank, the cold ones together: 288).
TEST(RebalanceWhy, ATableThatBoundsAWorthwhileProposalGetsItsWhyLine) {
  json wl = embedscope::test_support::straggler_workload("sc_why");
  wl["tables"].erase(6);
  wl["features"].erase(6);
  const auto db = sc_run("sc_why", wl);
  auto r = sc_cli("rebalance " + db.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json p = json::parse(r.out);
  EXPECT_EQ(p["load_before"], (std::vector<int64_t>{96, 96, 96, 1728}));
  EXPECT_NEAR(p["imbalance_after_predicted"].get<double>(), 576.0 / 504.0, 1e-9);
  EXPECT_EQ(p["load_unit"], "ids");
  const std::string why = p["why_not"];
  EXPECT_NE(why.find("table \"h0\" alone has 576 of the load, more than the mean rank load 504: no whole-table move "
                     "brings the maximum below it (ids max/mean 1.14 at best here); splitting it can: "
                     "--split-hot-tables row_wise|column_wise|both here"),
            std::string::npos)
      << why;
  // what splitting reaches: the --split-hot-tables both proposal's prediction
  const json both = json::parse(sc_cli("rebalance " + db.string() + " --split-hot-tables both --json").out);
  const double reach = both["imbalance_after_predicted"];
  ASSERT_LT(reach, 576.0 / 504.0) << both.dump();
  EXPECT_NEAR(p["split_reach_predicted"].get<double>(), reach, 1e-12);
  EXPECT_NE(why.find(fmt::format(". With --split-hot-tables both the proposal predicts ids max/mean {:.2f} instead of 1.14",
                                 reach)),
            std::string::npos)
      << why;
  r = sc_cli("rebalance " + db.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("why          table \"h0\" alone has 576"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ids looked up in steps 0..2 (3 step(s))"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("imbalance    ids max/mean 3.43 observed; 1.14 predicted"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("column-weighted"), std::string::npos) << r.out;  // no table is split by columns
  EXPECT_EQ(r.out.find("unit         "), std::string::npos) << r.out;
}
