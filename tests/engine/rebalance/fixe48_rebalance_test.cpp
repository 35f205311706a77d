// tester48 F1, F6, F12: a table_wise -> row_wise change predicted from the ids observed per row
// (the session's id_histogram) rather than an even spread, and an even-spread row_wise losing a
// tie to column_wise; a low-rank table's move counted at its stored bytes; `rebalance`'s window
// leaving out a pipeline's drain steps (tester49 N2: all of them, as stats does). Every figure is hand-computed.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/input/input.h"
#include "embedscope/engine/rebalance/policy.h"
#include "embedscope/engine/rebalance/type_change.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"
#include "engine/rebalance/straggler_workload.h"
#include "support/cli_run.h"

using nlohmann::json;
using namespace embedscope::engine;
using namespace embedscope::engine::rebalance;

namespace {

/// Table t (rows[t] x 16 fp32) table_wise on rank ranks[t] of `world`; optimizer `opt`; the
/// policy may change hot tables to row_wise (and to column_wise with `column_wise`).
WorkloadSpec fx48_spec(int world, const std::vector<int>& ranks, const std::vector<int64_t>& rows, const char* opt,
                       bool column_wise = false) {
  json j = {{"name", "fixe48"},
            {"batch_size", 8},
            {"steps", 4},
            {"devices", {{"count", world}, {"memory_bytes", int64_t{1} << 30}}},
            {"optimizer", {{"type", opt}}},
            {"dense", nullptr},
            {"tables", json::array()},
            {"sharding", {{"default", "table_wise"}, {"tables", json::object()}}},
            {"rebalance", {{"every", 2}, {"row_wise_hot_tables", true}, {"column_wise_hot_tables", column_wise}}}};
  for (size_t t = 0; t < ranks.size(); ++t) {
    const std::string n = "t" + std::to_string(t);
    j["tables"].push_back({{"name", n}, {"num_embeddings", rows[t]}, {"embedding_dim", 16},
                           {"feature_names", {"f" + std::to_string(t)}}});
    j["sharding"]["tables"][n] = {{"type", "table_wise"}, {"ranks", {ranks[t]}}};
  }
  return parse_workload(j, "fixe48");
}

ObservedLoad fx48_load(const std::vector<int64_t>& ids) {
  ObservedLoad l;
  for (int64_t v : ids) l.ids.push_back({v});
  return l;
}

std::filesystem::path fx48_scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("es_fixe48_rb_" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

embedscope::test_support::CliResult fx48_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, fx48_scratch());
}

void fx48_sql(const std::filesystem::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(h);
  sqlite3_close(h);
}

}  // namespace

// The doc's examples: 100 ids over shards of rows {0-4, 5-9}; blocks [0, 5): 30 and [5, 10): 10
// weigh 3 : 1 -> {75, 25}; a block [3, 7) of 8 ids straddles the boundary, 2 rows on each side
// -> {50, 50}; no ids observed -> the even split by rows {50, 50}.
TEST(Fixe48RowWisePrediction, SharesFollowTheObservedRows) {
  TablePlan tp;
  tp.type = ShardingType::row_wise;
  tp.shards = {{0, 0, 5, 0, 16}, {1, 5, 5, 0, 16}};
  EXPECT_EQ(row_wise_predicted_ids(100, tp, {{0, 5, 30}, {5, 10, 10}}), (std::vector<int64_t>{75, 25}));
  EXPECT_EQ(row_wise_predicted_ids(100, tp, {{3, 7, 8}}), (std::vector<int64_t>{50, 50}));
  EXPECT_EQ(row_wise_predicted_ids(100, tp, {}), (std::vector<int64_t>{50, 50}));
  // 3 shards of {4, 3, 3} rows; 10 ids of which 7 in row 0 and 3 in rows 8..9: {7, 0, 3}
  tp.shards = {{0, 0, 4, 0, 16}, {1, 4, 3, 0, 16}, {2, 7, 3, 0, 16}};
  EXPECT_EQ(row_wise_predicted_ids(10, tp, {{0, 1, 7}, {8, 10, 3}}), (std::vector<int64_t>{7, 0, 3}));
}

// 4 ranks; t0 (1000 rows, 800 ids) on rank 0, t1..t3 (100 ids each) on ranks 1..3: {800, 100,
// 100, 100}, 2.91. t0's ids fell 600 / 100 / 50 / 50 over its row quarters (the row_wise shards
// of 250 rows): row_wise predicts {600, 100, 50, 50} for its shards, loads {600, 200, 150, 150}:
// 600 x 4 / 1100 = 2.18, not the even spread's {200, 300, 300, 300} (1.09). No whole move of
// t1..t3 lowers rank 0, so that is the proposal.
TEST(Fixe48RowWisePrediction, ProposalUsesTheSessionsRowRecord) {
  const WorkloadSpec s = fx48_spec(4, {0, 1, 2, 3}, {1000, 100, 100, 100}, "sgd");
  ObservedLoad load = fx48_load({800, 100, 100, 100});
  load.row_counts = {{{0, 250, 600}, {250, 500, 100}, {500, 750, 50}, {750, 1000, 50}}, {}, {}, {}};
  const Proposal p = propose(s, plan_sharding(s), load, 0);
  ASSERT_TRUE(p.worth_it());
  ASSERT_EQ(p.changes.size(), 1u);
  EXPECT_EQ(p.changes[0].to_type, ShardingType::row_wise);
  EXPECT_TRUE(p.changes[0].rows_observed);
  EXPECT_EQ(p.load_after, (std::vector<int64_t>{600, 200, 150, 150}));
  EXPECT_NEAR(p.imbalance_after, 2400.0 / 1100.0, 1e-12);
  // the same without the record: the even spread, said as such
  const Proposal q = propose(s, plan_sharding(s), fx48_load({800, 100, 100, 100}), 0);
  ASSERT_EQ(q.changes.size(), 1u);
  EXPECT_FALSE(q.changes[0].rows_observed);
  EXPECT_EQ(q.load_after, (std::vector<int64_t>{200, 300, 300, 300}));
}

// Both splits allowed, the skewed record of the test above: row_wise predicts a maximum of 600,
// column_wise (4 blocks of 4 columns, 200 ids' worth each; blocks 1..3 to ranks 1..3, all at 100)
// {200, 300, 300, 300}: column_wise wins on the maximum (tester48 F1: row_wise had won the tie of
// the even spread and gave 1.79 observed where column_wise gave 1.02).
TEST(Fixe48RowWisePrediction, ColumnWiseWinsWhenTheRowsAreSkewed) {
  const WorkloadSpec s = fx48_spec(4, {0, 1, 2, 3}, {1000, 100, 100, 100}, "sgd", true);
  ObservedLoad load = fx48_load({800, 100, 100, 100});
  load.row_counts = {{{0, 250, 600}, {250, 500, 100}, {500, 750, 50}, {750, 1000, 50}}, {}, {}, {}};
  const Proposal p = propose(s, plan_sharding(s), load, 0);
  ASSERT_EQ(p.changes.size(), 1u);
  EXPECT_EQ(p.changes[0].to_type, ShardingType::column_wise);
  EXPECT_EQ(p.load_after, (std::vector<int64_t>{200, 300, 300, 300}));
}

// tester48 F6: a low-rank table moves its factors, not full rows. 1000 x 16, low_rank_dim 4,
// rowwise_adagrad: A 1000 x 4 + B 4 x 16 floats = 16,256 B, state one float a row of A and of B
// (1000 + 4) = 4,016 B: 20,272 (the full-rank figure was 1000 x 64 + 1000 x 4 = 68,000). Adam
// with fp16 state: 64,000 B of weights + 2 x 16,000 values x 2 B = 128,000 (not 192,000).
TEST(Fixe48MoveBytes, StoredBytesOfLowRankAndReducedState) {
  WorkloadSpec s = fx48_spec(2, {0}, {1000}, "rowwise_adagrad");
  s.tables[0].low_rank_dim = 4;
  EXPECT_EQ(table_wise_move_bytes(s, 0), 20272);
  WorkloadSpec a = fx48_spec(2, {0}, {1000}, "adam");
  a.tables[0].optimizer_state_type = OptimizerStateType::fp16;
  EXPECT_EQ(table_wise_move_bytes(a, 0), 128000);
}

// 2 ranks; t0 (low-rank 4, 20,272 B) and t1 (full, 68,000 B) on rank 0, 1000 ids each; t2 on
// rank 1, none: {2000, 0}. A budget of 30,000 B admits moving t0 (the fewer bytes of the two
// equal moves): {1000, 1000}. Counted at full rank, both were refused ("66.4 KiB > 29.3 KiB").
TEST(Fixe48MoveBytes, ByteBudgetAdmitsALowRankTableThatFits) {
  WorkloadSpec s = fx48_spec(2, {0, 0, 1}, {1000, 1000, 1000}, "rowwise_adagrad");
  s.rebalance.row_wise_hot_tables = false;
  s.tables[0].low_rank_dim = 4;
  const Proposal p = propose(s, plan_sharding(s), fx48_load({1000, 1000, 0}), 30000);
  ASSERT_EQ(p.moves.size(), 1u);
  EXPECT_EQ(p.moves[0].table, 0);
  EXPECT_EQ(p.moves[0].bytes, 20272);
  EXPECT_EQ(p.bytes_moved, 20272);
  EXPECT_EQ(p.load_after, (std::vector<int64_t>{1000, 1000}));
}

// tester48 F12: the straggler (ranks 0..2 32 ids a step, rank 3 768) under the semi_sync
// pipeline, 3 measured steps: its last step drains the pipeline and looks nothing up. --window 1
// reads a step that looked something up: {32, 32, 32, 768}, 768 x 4 / 864 = 3.56 - not the drain
// step's "1.00" of no load; the left-out steps are said. A session of no lookups at all is
// refused, not called balanced. tester49 N2: the window ends at the last step stats counts, step 0
// (steps 1-2 drain semi_sync; before, step 1, which looks up a batch but which stats leaves out),
// and tester49 F4: step 0 holds one batch's lookups (the fill's batch 0 is a warm-up's, step -1).
TEST(Fixe48RebalanceWindow, DrainStepsWithoutLookupsAreLeftOut) {
  json wl = embedscope::test_support::straggler_workload("fx48_ss");
  wl["pipeline"] = "semi_sync";
  const auto path = fx48_scratch() / "fx48_ss.json";
  std::ofstream(path) << wl.dump(2);
  const auto db = fx48_scratch() / "fx48_ss.db";
  auto r = fx48_cli("run " + path.string() + " -o " + db.string() + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  r = fx48_cli("rebalance " + db.string() + " --window 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json p = json::parse(r.out);
  EXPECT_EQ(p["first_step"], 0);
  EXPECT_EQ(p["last_step"], 0);
  EXPECT_EQ(p["load_before"], json({32, 32, 32, 768}));
  EXPECT_NEAR(p["imbalance_before"].get<double>(), 768.0 * 4 / 864, 1e-12);
  r = fx48_cli("rebalance " + db.string() + " --window 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("window       steps 1..2 drain the semi_sync pipeline: left out, as stats leaves them out of "
                       "its counts (the window ends at step 0, the last counted step)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("ids max/mean 3.56 observed"), std::string::npos) << r.out;
  fx48_sql(db, "UPDATE load_counters SET ids = 0");
  r = fx48_cli("rebalance " + db.string() + " --window 1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("no ids were looked up in steps 0..0: nothing to balance"), std::string::npos) << r.err;
}

namespace {

/// The straggler with h0 at 60 ids a bag and every table placed by hand: c0, h1 on rank 0; c1, h2
/// on 1; c2, h3 on 2; h0 alone on 3. Per step h0 looks up 4 ranks x 8 x 60 = 1920 ids, every
/// other rank 4 x 8 x (1 + 6) = 224. `h1` overrides h1's sharding (null: table_wise on rank 0).
json fx48_hot_workload(const std::string& name, const json& h1 = nullptr) {
  json wl = embedscope::test_support::straggler_workload(name);
  wl["features"][3]["pooling_factor"] = 60;
  wl["sharding"] = {{"tables", json::object()}};
  const char* names[] = {"c0", "c1", "c2", "h0", "h1", "h2", "h3"};
  const int ranks[] = {0, 1, 2, 3, 0, 1, 2};
  for (int t = 0; t < 7; ++t) wl["sharding"]["tables"][names[t]] = {{"type", "table_wise"}, {"ranks", {ranks[t]}}};
  if (!h1.is_null()) wl["sharding"]["tables"]["h1"] = h1;
  return wl;
}

std::filesystem::path fx48_run(const std::string& name, const json& wl) {
  const auto path = fx48_scratch() / (name + ".json");
  std::ofstream(path) << wl.dump(2);
  const auto db = fx48_scratch() / (name + ".db");
  const auto r = fx48_cli("run " + path.string() + " -o " + db.string() + " --force-overwrite");
  EXPECT_EQ(r.code, 0) << r.err;
  return db;
}

}  // namespace

// tester48 F2: over 3 steps h0 alone looks up 5760 of 7776 ids (the mean rank load 1944): no
// whole move helps, and the verdict says why and what would; --split-hot-tables row_wise asks for
// the split, predicted from the session's id_histogram (F1).
TEST(Fixe48RebalanceWhy, AHotTableAloneSaysWhyAndWhatHelps) {
  const auto db = fx48_run("fx48_hot", fx48_hot_workload("fx48_hot"));
  auto r = fx48_cli("rebalance " + db.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("why          table \"h0\" alone has 5760 of the load, more than the mean rank load 1944: moved "
                       "whole it only moves the straggler (rank 3 now); splitting it can: --split-hot-tables "
                       "row_wise|column_wise|both here"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("verdict      not worth it: keep the current plan"), std::string::npos) << r.out;
  r = fx48_cli("rebalance " + db.string() + " --split-hot-tables row_wise --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json p = json::parse(r.out);
  EXPECT_TRUE(p["worth_it"].get<bool>());
  EXPECT_EQ(p["why_not"], "");
  ASSERT_EQ(p["changes"].size(), 1u) << r.out;
  EXPECT_EQ(p["changes"][0]["table"], "h0");
  EXPECT_EQ(p["changes"][0]["to_type"], "row_wise");
  EXPECT_EQ(p["changes"][0]["prediction"], "id_histogram");
}

// tester48 F8 (b, c): two sessions that differ only in h1's hot_rows [0, 1, 2] differ in compare;
// the hot-row advice for a block of rows 0..1 (1000 ids set by hand in the id_histogram: over 3
// steps 1000 > 3 x 2 x 4 x 9 = 216) says both rows are replicated already.
TEST(Fixe48RebalanceWhy, HotRowsAlreadyReplicatedAreSaidAndCompared) {
  const auto a = fx48_run("fx48_hra", fx48_hot_workload("fx48_hr", json{{"type", "row_wise"}}));
  const auto b = fx48_run("fx48_hrb", fx48_hot_workload("fx48_hr", json{{"type", "row_wise"}, {"hot_rows", {0, 1, 2}}}));
  auto r = fx48_cli("compare " + a.string() + " " + b.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("differs: sharding/tables/h1/hot_rows not set"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("differs: sharding/tables/h1/hot_rows 3 rows (0..2)"), std::string::npos) << r.out;
  fx48_sql(b, "DELETE FROM id_histogram WHERE table_index = 4 AND bucket = 0; INSERT INTO id_histogram(rank, table_index, "
              "bucket, row_begin, row_end, ids) VALUES (0, 4, 0, 0, 2, 1000)");
  r = fx48_cli("rebalance " + b.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("2 of these 2 rows are replicated already (the workload's hot_rows): nothing to add"),
            std::string::npos)
      << r.out;
  r = fx48_cli("rebalance " + b.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json p = json::parse(r.out);
  ASSERT_EQ(p["hot_rows"].size(), 1u) << r.out;
  EXPECT_EQ(p["hot_rows"][0]["rows"], 2);
  EXPECT_EQ(p["hot_rows"][0]["rows_replicated_already"], 2);
}

namespace {

/// The hot workload of fx48_hot_workload live: "every": 2 with row_wise_hot_tables, so the policy
/// fires after step 1. With `confine`, every id of h0 (feature 3, 500 rows) is taken modulo 125:
/// all of them fall in rows 0..124, the row_wise shard of rank 0.
RunResult fx48_live_hot(bool confine) {
  json wl = fx48_hot_workload("fx48_live");
  wl["rebalance"] = {{"every", 2}, {"row_wise_hot_tables", true}};
  const WorkloadSpec s = parse_workload(wl, "fx48_live");
  BatchGenerator gen(s);
  TrainerOptions opt;
  opt.batch_source = [&gen, confine](int64_t it, int rank) -> std::optional<Batch> {
    Batch b = gen.make(it, rank);
    if (!confine) return b;
    int64_t pos = 0;
    for (int f = 0; f < b.kjt.num_features; ++f) {
      int64_t n = 0;
      for (int64_t i = 0; i < b.kjt.batch_size; ++i) n += b.kjt.lengths[static_cast<size_t>(f * b.kjt.batch_size + i)];
      if (f == 3)
        for (int64_t i = pos; i < pos + n; ++i) b.kjt.values[static_cast<size_t>(i)] %= 125;
      pos += n;
    }
    return b;
  };
  return run_training(s, plan_sharding(s), opt);
}

}  // namespace

// tester48 F1, live: h0 (1920 ids a step) alone on rank 3, the other ranks 224 a step. Its ids
// spread over its rows, the live policy changes it to row_wise (about a quarter on each rank). With every id in rows 0..124, the ranks' gathered id histograms say that the
// row_wise split would put all 1920 on rank 0 ({2144, 224, 224, 0}: worse than 1920), so nothing
// is worth moving - where the even spread had predicted {704, 704, 704, 480} and moved it for no gain.
TEST(Fixe48LiveRowWise, TheGatheredHistogramKeepsAUselessSplitFromBeingMade) {
  const RunResult spread = fx48_live_hot(false);
  ASSERT_EQ(spread.ended, RunEnd::complete) << spread.error;
  ASSERT_EQ(spread.rebalances.size(), 1u);
  EXPECT_GE(spread.rebalances[0].moves, 1);  // h0 split, with whole moves of the cold tables around it
  bool h0_row_wise = false;
  for (const auto& c : spread.plan_changes) h0_row_wise |= c.table_name == "h0" && c.to_type == "row_wise";
  EXPECT_TRUE(h0_row_wise);
  const RunResult confined = fx48_live_hot(true);
  ASSERT_EQ(confined.ended, RunEnd::complete) << confined.error;
  ASSERT_EQ(confined.rebalances.size(), 1u);
  EXPECT_EQ(confined.rebalances[0].step, 1);
  EXPECT_EQ(confined.rebalances[0].moves, 0);
  EXPECT_TRUE(confined.plan_changes.empty());
  EXPECT_DOUBLE_EQ(confined.rebalances[0].imbalance_before, 1920.0 * 4 / (1920 + 3 * 224));
}
