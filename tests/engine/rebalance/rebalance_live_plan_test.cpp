// `embedscope rebalance SESSION` on a session whose run rebalanced live (tester32 D1): the load
// of the analysed steps is charged to the plan in force over them (the starting plan with the
// session's plan_changes up to the window's first step), so the observed imbalance is the one
// the ranks' load counters give for those steps, the live moves are not proposed again, the
// written plan is the one the run ended with, a window spanning a move is cut to after it, and a
// table the live rebalance changed to row_wise (more shards than the starting plan) is analysed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "embedscope/engine/rebalance/plan_in_force.h"
#include "embedscope/engine/rebalance/policy.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/sessions/store/session.h"
#include "engine/rebalance/straggler_workload.h"
#include "support/cli_run.h"

using nlohmann::json;

namespace {
std::filesystem::path lp_scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("es_rebalance_live_plan_" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}
embedscope::test_support::CliResult lp_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, lp_scratch());
}

/// Runs `wl` to lp_scratch()/NAME.db and returns the path; `run --json` into *run_json.
std::filesystem::path lp_run(const json& wl, const std::string& name, json* run_json) {
  const auto file = lp_scratch() / (name + ".json"), db = lp_scratch() / (name + ".db");
  std::ofstream(file) << wl.dump(2);
  const auto r = lp_cli("run " + file.string() + " -o " + db.string() + " --force-overwrite --json");
  EXPECT_EQ(r.code, 0) << r.err;
  *run_json = json::parse(r.out);
  return db;
}

/// The ids each rank's load counters give over steps first..last (the plan-free truth).
std::vector<int64_t> lp_ids_per_rank(const std::filesystem::path& db, int64_t first, int64_t last, int world) {
  std::vector<int64_t> out(static_cast<size_t>(world), 0);
  for (const auto& c : embedscope::sessions::SessionReader(db.string()).load())
    if (c.step >= first && c.step <= last) out.at(static_cast<size_t>(c.rank)) += c.ids;
  return out;
}

/// The rank of each table_wise table of a plan JSON (to_json's "tables" array), by name.
std::map<std::string, int> lp_ranks(const json& plan) {
  std::map<std::string, int> out;
  for (const auto& t : plan.at("tables"))
    if (t.at("sharding_type") == "table_wise") out[t.at("name")] = t.at("shards").at(0).at("rank").get<int>();
  return out;
}
}  // namespace

// The straggler (h0..h3 on rank 3; per step ranks 0..2 look up 32 ids, rank 3 768) rebalanced
// live every 2 steps over 6 steps: after step 1 three hot tables go to ranks 0..2 (32 + 192 = 224
// ids a step there, 192 on rank 3); after step 3 nothing is worth moving.
TEST(RebalanceLivePlan, AfterTheMoveChargesTheFinalPlanAndProposesNothing) {
  json wl = embedscope::test_support::straggler_workload("lp_every2");
  wl["steps"] = 6;
  wl["rebalance"] = {{"every", 2}};
  json run;
  const auto db = lp_run(wl, "lp_every2", &run);
  ASSERT_EQ(run.at("plan_changes").size(), 3u);
  EXPECT_EQ(run.at("plan_changes")[0].at("step"), 2);
  // the tool's window 3..5 (--window 3): 3 steps under the plan in force from step 2
  const auto plan = lp_scratch() / "lp_every2_plan.json";
  auto r = lp_cli("rebalance " + db.string() + " --window 3 --json --plan-out " + plan.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const json p = json::parse(r.out);
  EXPECT_EQ(p.at("first_step"), 3);
  EXPECT_EQ(p.at("plan_from_step"), 2);
  EXPECT_EQ(p.at("plan_source"), "live_rebalance");
  EXPECT_EQ(p.at("window_note"), "");
  // hand-checked: 3 x 224 on the ranks that took a hot table, 3 x 192 on rank 3; and it is what
  // the ranks' counters say (the starting plan charged 96, 96, 96, 2304: 3.56 "observed")
  EXPECT_EQ(p.at("load_before"), json({672, 672, 672, 576}));
  EXPECT_EQ(p.at("load_before").get<std::vector<int64_t>>(), lp_ids_per_rank(db, 3, 5, 4));
  EXPECT_NEAR(p.at("imbalance_before").get<double>(), 672.0 * 4 / 2592, 1e-12);
  EXPECT_TRUE(p.at("moves").empty());
  EXPECT_TRUE(p.at("changes").empty());
  EXPECT_FALSE(p.at("worth_it").get<bool>());
  // the plan written is the one the run ended with (run --json's final_sharding), not the start
  std::ifstream in(plan);
  const json written = json::parse(in);
  EXPECT_EQ(lp_ranks(written), lp_ranks(run.at("final_sharding")));
  EXPECT_NE(lp_ranks(run.at("final_sharding")), lp_ranks(run.at("sharding")));
  // the text names the plan
  r = lp_cli("rebalance " + db.string() + " --window 3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("plan         the one in force from step 2 (after the live rebalance after step 1)"), std::string::npos)
      << r.out;
}

// A window over every step (--window 6) spans the move: it is cut to steps 2..5, and says so.
TEST(RebalanceLivePlan, AWindowSpanningTheMoveStartsAfterIt) {
  json wl = embedscope::test_support::straggler_workload("lp_span");
  wl["steps"] = 6;
  wl["rebalance"] = {{"every", 2}};
  json run;
  const auto db = lp_run(wl, "lp_span", &run);
  auto r = lp_cli("rebalance " + db.string() + " --window 6 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json p = json::parse(r.out);
  EXPECT_EQ(p.at("window_first_step_asked"), 0);
  EXPECT_EQ(p.at("first_step"), 2);
  EXPECT_EQ(p.at("last_step"), 5);
  EXPECT_EQ(p.at("load_before"), json({896, 896, 896, 768}));
  EXPECT_TRUE(p.at("moves").empty());
  EXPECT_NE(p.at("window_note").get<std::string>().find("span the live rebalance after step 1: counted steps 2..5 only"),
            std::string::npos)
      << p.at("window_note");
  r = lp_cli("rebalance " + db.string() + " --window 6");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("window       steps 0..5 span the live rebalance after step 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(--window 4 or less"), std::string::npos) << r.out;
}

// One super-hot table (h0, 40 ids a bag: 1280 ids a step on rank 3 against 32 on the others)
// that no whole move balances: the live rebalance after step 1 changes it to row_wise (4 shards
// where the starting plan has 1; its shards' ids predicted from the ranks' gathered id histograms,
// tester48 F1) and moves c1 to rank 3, the one after step 3 moves c2 to rank 1, and `rebalance
// --window 4` (steps 2..5, cut to 4..5) analyses the steps under that mixed plan - before, exit 2
// "load_counters: table 3 shard 1 is not in the session's plan".
TEST(RebalanceLivePlan, ARowWiseChangedSessionIsAnalysed) {
  json wl = embedscope::test_support::straggler_workload("lp_rowwise");
  for (int i = 0; i < 3; ++i) {  // keep c0..c2 and h0
    wl["tables"].erase(4);
    wl["features"].erase(4);
  }
  wl["steps"] = 6;
  wl["features"][3]["pooling_factor"] = 40;
  wl["rebalance"] = {{"every", 2}, {"row_wise_hot_tables", true}};
  json run;
  const auto db = lp_run(wl, "lp_rowwise", &run);
  std::set<int64_t> steps;
  bool row_wise = false;
  for (const auto& c : run.at("plan_changes")) {
    row_wise |= c.at("to_type") == "row_wise" && c.at("table") == "h0" && c.at("step") == 2;
    steps.insert(c.at("step").get<int64_t>());
  }
  ASSERT_TRUE(row_wise) << run.at("plan_changes").dump();
  ASSERT_EQ(steps, std::set<int64_t>({2, 4})) << run.at("plan_changes").dump();
  auto r = lp_cli("rebalance " + db.string() + " --window 4 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json p = json::parse(r.out);
  EXPECT_EQ(p.at("window_first_step_asked"), 2);
  EXPECT_EQ(p.at("first_step"), 4);
  EXPECT_EQ(p.at("plan_from_step"), 4);
  // every rank's ids, as its counters say (h0's ids spread over the 4 row shards), 2 x 1376 in all
  const auto truth = lp_ids_per_rank(db, 4, 5, 4);
  EXPECT_EQ(p.at("load_before").get<std::vector<int64_t>>(), truth);
  int64_t sum = 0;
  for (int64_t v : truth) sum += v;
  EXPECT_EQ(sum, 2 * (3 * 32 + 1280));
  // the plan in force (nothing more proposed): h0 row_wise on the 4 ranks, c1 on rank 3, c2 on rank 1
  EXPECT_TRUE(p.at("moves").empty());
  std::map<std::string, json> tables;
  for (const auto& t : p.at("plan").at("tables")) tables[t.at("name")] = t;
  EXPECT_EQ(tables.at("h0").at("sharding_type"), "row_wise");
  EXPECT_EQ(tables.at("h0").at("shards").size(), 4u);
  EXPECT_EQ(tables.at("c1").at("shards").at(0).at("rank"), 3);
  EXPECT_EQ(tables.at("c2").at("shards").at(0).at("rank"), 1);
}

// The trigger's reason reads "every step" for every 1 (was "every 1 steps", tester32 D12), in
// the live run's rebalances and in `rebalance`'s policy line; "every 2 steps" otherwise.
TEST(RebalanceLivePlan, EveryOneStepReadsEveryStep) {
  embedscope::engine::RebalanceSpec every;
  every.trigger = embedscope::engine::RebalanceTrigger::every;
  every.every = 1;
  const std::vector<std::vector<int64_t>> ids(3, std::vector<int64_t>{1, 1});
  EXPECT_EQ(embedscope::engine::rebalance::should_rebalance(every, 0, -1, ids).value_or(""), "every step");
  every.every = 2;
  EXPECT_EQ(embedscope::engine::rebalance::should_rebalance(every, 1, -1, ids).value_or(""), "every 2 steps");
  json wl = embedscope::test_support::straggler_workload("lp_every1");
  wl["rebalance"] = {{"every", 1}};
  json run;
  const auto db = lp_run(wl, "lp_every1", &run);
  ASSERT_FALSE(run.at("rebalances").empty());
  EXPECT_EQ(run.at("rebalances")[0].at("reason"), "every step");
  const auto r = lp_cli("rebalance " + db.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out).at("policy"), "every step");
}

namespace {
/// The session's `shards` rows of a plan (table, type, shard index, rank, rows, columns).
std::vector<embedscope::sessions::ShardRecord> lp_records(const embedscope::engine::ShardingPlan& plan) {
  std::vector<embedscope::sessions::ShardRecord> out;
  for (const auto& tp : plan.tables)
    for (size_t i = 0; i < tp.shards.size(); ++i) {
      embedscope::sessions::ShardRecord r;
      r.table = tp.table;
      r.sharding_type = embedscope::engine::to_string(tp.type);
      r.shard_index = static_cast<int32_t>(i);
      r.rank = tp.shards[i].rank;
      r.row_offset = tp.shards[i].row_offset;
      r.num_rows = tp.shards[i].num_rows;
      r.col_offset = tp.shards[i].col_offset;
      r.num_cols = tp.shards[i].num_cols;
      out.push_back(r);
    }
  return out;
}
}  // namespace

// plan_at_step on the straggler's greedy plan (h0 = table 3 and h1 = table 4 on rank 3): a move
// of h0 to rank 0 from step 2, h1 split row_wise (125 rows a rank) from step 4; and the errors of
// a damaged plan_changes (a rank outside the world, a table outside the workload).
TEST(RebalanceLivePlan, PlanAtStepAppliesTheChangesUpToTheStep) {
  namespace es = embedscope::engine;
  const es::WorkloadSpec spec = es::parse_workload(embedscope::test_support::straggler_workload("u"), "u.json");
  const es::ShardingPlan start = es::plan_sharding(spec);
  ASSERT_EQ(start.tables[3].shards[0].rank, 3);
  ASSERT_EQ(start.tables[4].shards[0].rank, 3);
  std::vector<embedscope::sessions::PlanChangeRecord> changes;
  for (int r = 0; r < 4; ++r) {  // (any order)
    embedscope::sessions::PlanChangeRecord c;
    c.step = 4, c.table = 4, c.shard_index = r, c.from_rank = 3, c.to_rank = r, c.from_type = "table_wise";
    c.to_type = "row_wise", c.row_offset = 125 * r, c.num_rows = 125, c.col_offset = 0, c.num_cols = 8;
    changes.push_back(c);
  }
  embedscope::sessions::PlanChangeRecord move;
  move.step = 2, move.table = 3, move.shard_index = 0, move.from_rank = 3, move.to_rank = 0;
  changes.push_back(move);
  const auto initial = lp_records(start);
  const es::ShardingPlan at1 = es::rebalance::plan_at_step(spec, start, initial, changes, 1, "u.db");
  EXPECT_EQ(at1.tables[3].shards[0].rank, 3);
  const es::ShardingPlan at3 = es::rebalance::plan_at_step(spec, start, initial, changes, 3, "u.db");
  EXPECT_EQ(at3.tables[3].shards[0].rank, 0);
  EXPECT_EQ(at3.tables[4].type, es::ShardingType::table_wise);
  const es::ShardingPlan at9 = es::rebalance::plan_at_step(spec, start, initial, changes, 9, "u.db");
  EXPECT_EQ(at9.tables[3].shards[0].rank, 0);
  ASSERT_EQ(at9.tables[4].type, es::ShardingType::row_wise);
  ASSERT_EQ(at9.tables[4].shards.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(at9.tables[4].shards[static_cast<size_t>(r)].rank, r);
    EXPECT_EQ(at9.tables[4].shards[static_cast<size_t>(r)].row_offset, 125 * r);
    EXPECT_EQ(at9.tables[4].shards[static_cast<size_t>(r)].num_rows, 125);
  }
  EXPECT_EQ(at9.tables[0].shards[0].rank, start.tables[0].shards[0].rank);  // untouched
  EXPECT_EQ(es::rebalance::plan_first_step(changes, 1), 0);
  EXPECT_EQ(es::rebalance::plan_first_step(changes, 3), 2);
  EXPECT_EQ(es::rebalance::plan_first_step(changes, 9), 4);
  auto bad = changes;
  bad.back().to_rank = 7;
  try {
    es::rebalance::plan_at_step(spec, start, initial, bad, 2, "u.db");
    ADD_FAILURE() << "rank 7 of 4 accepted";
  } catch (const es::SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("u.db: plan in force from step 2"), std::string::npos) << e.what();
  }
  bad = changes;
  bad.back().table = 99;
  try {
    es::rebalance::plan_at_step(spec, start, initial, bad, 2, "u.db");
    ADD_FAILURE() << "table 99 accepted";
  } catch (const es::SpecError& e) {
    EXPECT_EQ(std::string(e.what()), "u.db: plan_changes: step 2: table 99 is not in the session's workload");
  }
}
