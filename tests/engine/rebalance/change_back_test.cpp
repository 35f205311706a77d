// A row_wise or column_wise table that has cooled goes back to table_wise (issue 17): the
// policy's proposal against hand-computed loads and bytes (when it goes back, when it stays
// split because it is still hot or because the change would raise the maximum load, and a
// change back at an equal imbalance), then live: a run whose plan starts with t3 split and its
// ids cooled joins t3 on one rank at the first rebalance, and trains as the unsharded reference
// (parity_check.h's tolerances) - for column_wise with rowwise_adagrad the joined accumulator
// of a row is the column-weighted mean of its blocks' (the reference regroups the same way).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/rebalance/policy.h"
#include "embedscope/engine/rebalance/type_change.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/model/units.h"
#include "engine/parity_check.h"
#include "support/cli_run.h"

using namespace embedscope::engine;
using namespace embedscope::engine::parity;

namespace {

/// 4 ranks; t0 (1000 rows x 16 fp32, sgd) `t0_type` (row_wise over every rank, or column_wise in
/// blocks on ranks 0 and 1), t1.. (100 rows x 4: too narrow to split by columns) table_wise on
/// ranks[i]; the changes of t0's type allowed.
WorkloadSpec back_spec(const char* t0_type, const std::vector<int>& ranks) {
  const bool rw = std::string(t0_type) == "row_wise";
  using nlohmann::json;
  json j = {{"name", "change_back"},
            {"batch_size", 8},
            {"steps", 4},
            {"devices", {{"count", 4}, {"memory_bytes", int64_t{1} << 30}}},
            {"optimizer", {{"type", "sgd"}}},
            {"dense", nullptr},
            {"tables", json::array()},
            {"sharding", {{"default", "table_wise"}, {"tables", json::object()}}},
            {"rebalance", {{"every", 2}, {"row_wise_hot_tables", rw}, {"column_wise_hot_tables", !rw}}}};
  j["tables"].push_back({{"name", "t0"}, {"num_embeddings", 1000}, {"embedding_dim", 16}, {"feature_names", {"f0"}}});
  j["sharding"]["tables"]["t0"] = rw ? json{{"type", "row_wise"}} : json{{"type", "column_wise"}, {"ranks", {0, 1}}};
  for (size_t i = 0; i < ranks.size(); ++i) {
    const std::string n = "t" + std::to_string(i + 1);
    j["tables"].push_back({{"name", n}, {"num_embeddings", 100}, {"embedding_dim", 4}, {"feature_names", {"f" + std::to_string(i + 1)}}});
    j["sharding"]["tables"][n] = {{"type", "table_wise"}, {"ranks", {ranks[i]}}};
  }
  return parse_workload(j, "change_back");
}

/// t3 split (`type` over every rank / in blocks on ranks 0 and 1) in parity_spec on `world`
/// ranks, every other table on rank 0, f3 looking up 1 id a bag on average (about 1 of the 8.5
/// ids of a sample: cooled), the change back allowed; a rebalance every 2 steps over 6 steps.
WorkloadSpec back_live(ShardingType type, int world, OptimizerType opt) {
  WorkloadSpec s = parity_spec(ShardingType::table_wise, world, Pooling::sum, opt);
  for (const auto& t : s.tables) s.sharding.per_table[t.name] = {ShardingType::table_wise, {0}, -1};
  s.sharding.per_table["t3"] = {type, type == ShardingType::column_wise ? std::vector<int>{0, 1} : std::vector<int>{}, -1};
  for (auto& f : s.features)
    if (f.name == "f3") f.pooling_factor = {false, 1, 2};
  s.steps = 6;
  s.rebalance.trigger = RebalanceTrigger::every;
  s.rebalance.every = 2;
  s.rebalance.row_wise_hot_tables = type == ShardingType::row_wise;
  s.rebalance.column_wise_hot_tables = type == ShardingType::column_wise;
  return s;
}

using BackParam = std::tuple<ShardingType, int, OptimizerType>;
class LiveChangeBack : public ::testing::TestWithParam<BackParam> {};

}  // namespace

// t0 row_wise, 10 ids a shard (40 x 4 ranks = 160 <= all 250: cooled); t1..t3 (60 ids each, not
// hot either) on ranks 1..3: loads {10, 70, 70, 70}. Without t0 {0, 60, 60, 60}: t0 goes whole to
// rank 0, {40, 60, 60, 60} (max 60 <= 70); t1..t3 stay. The 750 rows of ranks 1..3 move, 64
// bytes each.
TEST(ChangeBack, ACooledRowWiseTableJoinsOnTheLeastLoadedRank) {
  const WorkloadSpec s = back_spec("row_wise", {1, 2, 3});
  const ShardingPlan cur = plan_sharding(s);
  ASSERT_EQ(cur.tables[0].type, ShardingType::row_wise);
  const rebalance::Proposal p = rebalance::propose(s, cur, {{{10, 10, 10, 10}, {60}, {60}, {60}}}, 0);
  ASSERT_TRUE(p.worth_it());
  EXPECT_TRUE(p.moves.empty());
  ASSERT_EQ(p.changes.size(), 1u);
  const auto& c = p.changes[0];
  EXPECT_EQ(c.table, 0);
  EXPECT_EQ(c.from, -1);
  EXPECT_EQ(c.to, 0);
  EXPECT_EQ(c.from_type, ShardingType::row_wise);
  EXPECT_EQ(c.to_type, ShardingType::table_wise);
  EXPECT_EQ(c.ids, 40);
  EXPECT_EQ(c.bytes, 750 * 64);
  EXPECT_EQ(p.bytes_moved, 48000);
  EXPECT_EQ(p.load_after, (std::vector<int64_t>{40, 60, 60, 60}));
  EXPECT_EQ(p.plan.tables[0].type, ShardingType::table_wise);
  ASSERT_EQ(p.plan.tables[0].shards.size(), 1u);
  EXPECT_EQ(p.plan.tables[0].shards[0].rank, 0);
  EXPECT_EQ(p.plan.tables[0].shards[0].num_rows, 1000);
  EXPECT_EQ(p.plan.tables[0].shards[0].num_cols, 16);
}

// Still hot (400 of 550 ids, above the mean 137.5): it stays row_wise; loads {100, 150, 150, 150}
// and no move of t1..t3 (50 each) lowers the maximum.
TEST(ChangeBack, AHotTableStaysSplit) {
  const WorkloadSpec s = back_spec("row_wise", {1, 2, 3});
  const rebalance::Proposal p = rebalance::propose(s, plan_sharding(s), {{{100, 100, 100, 100}, {50}, {50}, {50}}}, 0);
  EXPECT_TRUE(p.changes.empty());
  EXPECT_FALSE(p.worth_it());
}

// Cooled (40 of 240) but every rank already carries 50 besides it: whole on any rank it would make
// 90 > the maximum 60, so it stays split.
TEST(ChangeBack, NotWhenItRaisesTheMaximum) {
  const WorkloadSpec s = back_spec("row_wise", {1, 2, 3, 0});
  const rebalance::Proposal p = rebalance::propose(s, plan_sharding(s), {{{10, 10, 10, 10}, {50}, {50}, {50}, {50}}}, 0);
  EXPECT_TRUE(p.changes.empty());
  EXPECT_FALSE(p.worth_it());
}

// t0 column_wise in blocks of 8 on ranks 0 and 1 (20 ids' worth each), t1 (300 ids, 4 columns:
// no split) on rank 2: loads {20, 20, 300, 0}. t0 joins on rank 0: {40, 0, 300, 0}, the same
// maximum and imbalance - worth it, as a change back. Rank 1's block moves: 1000 rows x 8
// columns x 4 bytes.
TEST(ChangeBack, AColumnWiseTableJoinsAtAnEqualImbalance) {
  const WorkloadSpec s = back_spec("column_wise", {2, 3});
  const ShardingPlan cur = plan_sharding(s);
  ASSERT_EQ(cur.tables[0].type, ShardingType::column_wise);
  ASSERT_EQ(cur.tables[0].shards.size(), 2u);
  const rebalance::Proposal p = rebalance::propose(s, cur, {{{20, 20}, {300}, {0}}}, 0);
  ASSERT_EQ(p.changes.size(), 1u);
  EXPECT_EQ(p.changes[0].to, 0);
  EXPECT_EQ(p.changes[0].from_type, ShardingType::column_wise);
  EXPECT_EQ(p.changes[0].bytes, 1000 * 8 * 4);
  EXPECT_EQ(p.load_after, (std::vector<int64_t>{40, 0, 300, 0}));
  EXPECT_DOUBLE_EQ(p.imbalance_after, p.imbalance_before);
  EXPECT_TRUE(p.worth_it());
}

TEST_P(LiveChangeBack, TablesAndLossesEqualTheReference) {
  const auto [type, world, opt] = GetParam();
  const WorkloadSpec s = back_live(type, world, opt);
  const RunResult run = check_parity(s);
  ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
  ASSERT_EQ(run.plan.tables[3].type, type);
  ASSERT_GE(run.rebalances.size(), 1u);
  std::vector<const embedscope::sessions::PlanChangeRecord*> t3;
  for (const auto& c : run.plan_changes)
    if (c.table_name == "t3" && c.from_type != c.to_type) t3.push_back(&c);
  ASSERT_EQ(t3.size(), 1u);  // one row: the table whole on its new rank
  const auto& c = *t3[0];
  EXPECT_EQ(c.step, 2);
  EXPECT_EQ(c.from_type, to_string(type));
  EXPECT_EQ(c.to_type, "table_wise");
  EXPECT_EQ(c.from_rank, -1);
  EXPECT_EQ(c.to_rank, 1);  // rank 0 keeps t0..t2; the others are empty without t3
  EXPECT_EQ(c.row_offset, 0);
  EXPECT_EQ(c.num_rows, 50);
  EXPECT_EQ(c.col_offset, 0);
  EXPECT_EQ(c.num_cols, 16);
  EXPECT_EQ(c.bytes, rebalance::change_bytes(s, run.plan.tables[3], 1));
  EXPECT_EQ(run.final_plan.tables[3].type, ShardingType::table_wise);
}

INSTANTIATE_TEST_SUITE_P(
    Types, LiveChangeBack,
    ::testing::Values(BackParam{ShardingType::row_wise, 2, OptimizerType::sgd},
                      BackParam{ShardingType::row_wise, 3, OptimizerType::rowwise_adagrad},
                      BackParam{ShardingType::row_wise, 4, OptimizerType::rowwise_adagrad},
                      BackParam{ShardingType::column_wise, 2, OptimizerType::sgd},
                      BackParam{ShardingType::column_wise, 2, OptimizerType::rowwise_adagrad},
                      BackParam{ShardingType::column_wise, 3, OptimizerType::rowwise_adagrad},
                      BackParam{ShardingType::column_wise, 4, OptimizerType::adam}),
    [](const ::testing::TestParamInfo<BackParam>& p) {
      return fmt::format("{}_w{}_{}", to_string(std::get<0>(p.param)), std::get<1>(p.param), to_string(std::get<2>(p.param)));
    });

// `stats` prints a change back as one line: "t3: row_wise -> table_wise on rank 1 (...)".
TEST(LiveChangeBackSession, StatsPrintsTheChangeBack) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("embedscope_change_back_{}", ::getpid());
  fs::create_directories(dir);
  const std::string path = (dir / "run.db").string();
  const WorkloadSpec s = back_live(ShardingType::row_wise, 2, OptimizerType::rowwise_adagrad);
  TrainerOptions opt;
  opt.session_path = path;
  const RunResult run = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
  // rank 0's 25 rows of t3 go to rank 1: 25 x (16 + 1) x 4 bytes
  const auto st = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + path, dir);
  ASSERT_EQ(st.code, 0) << st.err;
  const std::string want =
      fmt::format("t3: row_wise -> table_wise on rank 1 ({})", embedscope::sessions::format_bytes(25 * 17 * 4));
  EXPECT_NE(st.out.find(want), std::string::npos) << st.out;
  fs::remove_all(dir);
}
