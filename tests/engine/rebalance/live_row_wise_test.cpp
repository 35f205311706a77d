// Live resharding of a hot table from table_wise to row_wise (issue 17,
// RebalanceSpec::row_wise_hot_tables) against the unsharded reference (reference.h): the rows of
// the hot table go with their optimizer state to every rank's row shard (one all-to-all, the old
// rank's own rows copied), the sharding modules are rebuilt with a row_wise table, and the run
// ends with the forward outputs of every step, the tables, the dense parameters and the losses of
// the reference (parity_check.h's tolerances: 2e-5 absolute + 1e-4 relative, losses 1e-5), on 2,
// 3 and 4 ranks, sgd and rowwise_adagrad (whose per-row accumulators travel with the rows).
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "embedscope/engine/rebalance/type_change.h"
#include "embedscope/sessions/store/session.h"
#include "engine/parity_check.h"

using namespace embedscope::engine;
using namespace embedscope::engine::parity;

namespace {

/// parity_spec with every table on rank 0 and f3 (table t3, 50 rows, Zipf ids) looking up 20 ids
/// a bag on average (up to 30) against about 7.5 for the other features together: t3 alone
/// exceeds the mean rank load on 2..4 ranks, so no whole move can balance it. A rebalance every
/// 2 steps that may change hot tables to row_wise, 6 steps.
WorkloadSpec hot_t3(int world, OptimizerType opt) {
  WorkloadSpec s = parity_spec(ShardingType::table_wise, world, Pooling::sum, opt);
  for (const auto& t : s.tables) s.sharding.per_table[t.name] = {ShardingType::table_wise, {0}, -1};
  for (auto& f : s.features)
    if (f.name == "f3") f.pooling_factor = {false, 20, 30};
  s.steps = 6;
  s.rebalance.trigger = RebalanceTrigger::every;
  s.rebalance.every = 2;
  s.rebalance.row_wise_hot_tables = true;
  return s;
}

using Param = std::tuple<int, OptimizerType>;
class LiveRowWiseParity : public ::testing::TestWithParam<Param> {};

}  // namespace

TEST_P(LiveRowWiseParity, TablesAndLossesEqualTheReference) {
  const auto [world, opt] = GetParam();
  const WorkloadSpec s = hot_t3(world, opt);
  const RunResult run = check_parity(s);
  ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
  ASSERT_EQ(run.rebalances.size(), 2u);  // after steps 1 and 3
  EXPECT_EQ(run.rebalances[0].step, 1);
  EXPECT_DOUBLE_EQ(run.rebalances[0].imbalance_before, static_cast<double>(world));  // all ids on rank 0
  EXPECT_GE(run.rebalances[0].moves, 1);
  EXPECT_LT(run.rebalances[0].imbalance_after, static_cast<double>(world));
  // t3 became row_wise at the first rebalance: one plan change per rank, each from rank 0
  std::vector<const embedscope::sessions::PlanChangeRecord*> t3;
  for (const auto& c : run.plan_changes)
    if (c.table_name == "t3") t3.push_back(&c);
  ASSERT_EQ(t3.size(), static_cast<size_t>(world));
  const TablePlan expect = rebalance::row_wise_table_plan(s, 3, world);
  int64_t bytes = 0;
  for (int r = 0; r < world; ++r) {
    const auto& c = *t3[static_cast<size_t>(r)];
    EXPECT_EQ(c.step, 2);
    EXPECT_EQ(c.shard_index, r);
    EXPECT_EQ(c.from_type, "table_wise");
    EXPECT_EQ(c.to_type, "row_wise");
    EXPECT_EQ(c.from_rank, 0);
    EXPECT_EQ(c.to_rank, r);
    EXPECT_EQ(c.row_offset, expect.shards[static_cast<size_t>(r)].row_offset);
    EXPECT_EQ(c.num_rows, expect.shards[static_cast<size_t>(r)].num_rows);
    EXPECT_EQ(c.bytes, r == 0 ? 0 : c.num_rows * rebalance::row_move_bytes(s, 3));
    bytes += c.bytes;
  }
  EXPECT_EQ(bytes, rebalance::row_wise_change_bytes(s, 3, 0, world));
  const TablePlan& fin = run.final_plan.tables[3];
  EXPECT_EQ(fin.type, ShardingType::row_wise);
  ASSERT_EQ(fin.shards.size(), static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) EXPECT_EQ(fin.shards[static_cast<size_t>(r)].rank, r);
  EXPECT_EQ(run.plan.tables[3].type, ShardingType::table_wise);  // the plan it started with
}

INSTANTIATE_TEST_SUITE_P(Ranks, LiveRowWiseParity,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Values(OptimizerType::sgd, OptimizerType::rowwise_adagrad)),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return fmt::format("w{}_{}", std::get<0>(p.param), to_string(std::get<1>(p.param)));
                         });

// The session file: the plan_changes rows say table_wise -> row_wise with their rows, and the
// reshard collective carries the bytes of the rows that left rank 0.
TEST(LiveRowWise, SessionRowsSayTableWiseToRowWise) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("embedscope_live_row_wise_{}", ::getpid());
  fs::create_directories(dir);
  const std::string path = (dir / "run.db").string();
  const WorkloadSpec s = hot_t3(2, OptimizerType::rowwise_adagrad);
  TrainerOptions opt;
  opt.session_path = path;
  const RunResult run = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
  embedscope::sessions::SessionReader r(path);
  const auto pc = r.plan_changes();
  ASSERT_EQ(pc.size(), run.plan_changes.size());
  int split = 0;
  for (const auto& c : pc) {
    if (c.table_name != "t3") continue;
    ++split;
    EXPECT_EQ(c.from_type + " -> " + c.to_type, "table_wise -> row_wise");
    EXPECT_EQ(c.num_rows, 25);  // 50 rows over 2 ranks
    EXPECT_EQ(c.row_offset, 25 * c.to_rank);
  }
  EXPECT_EQ(split, 2);
  // 25 rows x (16 + 1) floats from rank 0 to rank 1 (rowwise_adagrad), plus any whole moves
  int64_t reshard_bytes = 0;
  for (const auto& c : r.collectives())
    if (c.name == "reshard" && c.step == 1) reshard_bytes += c.bytes_sent;
  int64_t moved = 0;
  for (const auto& c : pc)
    if (c.step == 2 && c.from_rank != c.to_rank) moved += c.bytes;
  EXPECT_EQ(moved, r.rebalances()[0].bytes_moved);
  EXPECT_GE(reshard_bytes, 25 * 17 * 4);
  // the same file as version 6 wrote it (no types, no rows): it reads as whole table_wise moves
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    for (const char* col : {"from_type", "to_type", "row_offset", "num_rows"})
      ASSERT_EQ(sqlite3_exec(db, (std::string("ALTER TABLE plan_changes DROP COLUMN ") + col).c_str(), nullptr, nullptr, nullptr),
                SQLITE_OK)
          << sqlite3_errmsg(db);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 6", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  embedscope::sessions::SessionReader v6(path);
  const auto old = v6.plan_changes();
  ASSERT_EQ(old.size(), pc.size());
  for (const auto& c : old) {
    EXPECT_EQ(c.from_type, "table_wise");
    EXPECT_EQ(c.to_type, "table_wise");
    EXPECT_EQ(c.num_rows, -1);
  }
  fs::remove_all(dir);
}
