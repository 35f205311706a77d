// Live resharding of a hot table from table_wise to column_wise (issue 17,
// RebalanceSpec::column_wise_hot_tables) against the unsharded reference (reference.h): each new
// column shard gets its block of every row with its optimizer state - adam's moments cut like
// the weights; rowwise_adagrad's one accumulator a row copied into every block, after which each
// block keeps its own (FBGEMM keeps the state per column shard, and the reference, told of the
// change by run_reference's column_groups, splits its accumulator the same way from that step
// on; a run that dropped or shared the accumulators would train the hot rows differently). The
// run ends with the forward outputs of every step, the tables, the dense parameters and the
// losses of the reference (parity_check.h: 2e-5 absolute + 1e-4 relative, losses 1e-5), on 2,
// 3 and 4 ranks, sgd, rowwise_adagrad and adam, on the base pipeline and under sparse_dist and
// semi_sync. The session's plan_changes rows carry each block's columns (schema 9; version 8
// files read as whole-width shards) and `stats` prints them.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "embedscope/engine/rebalance/type_change.h"
#include "embedscope/sessions/model/units.h"
#include "embedscope/sessions/store/session.h"
#include "engine/parity_check.h"
#include "support/cli_run.h"

using namespace embedscope::engine;
using namespace embedscope::engine::parity;

namespace {

/// parity_spec on `world` ranks with every table on rank 0 and f3 (table t3, 50 rows x 16, Zipf
/// ids) looking up 20 ids a bag on average (up to 30): t3 alone exceeds the mean rank load. A
/// rebalance every 2 steps that may change hot tables to column_wise, 6 steps.
WorkloadSpec cw_hot_t3(PipelineKind pipeline, int world, OptimizerType opt) {
  WorkloadSpec s = parity_spec(ShardingType::table_wise, world, Pooling::sum, opt);
  for (const auto& t : s.tables) s.sharding.per_table[t.name] = {ShardingType::table_wise, {0}, -1};
  for (auto& f : s.features)
    if (f.name == "f3") f.pooling_factor = {false, 20, 30};
  s.pipeline = pipeline;
  s.steps = 6;
  s.rebalance.trigger = RebalanceTrigger::every;
  s.rebalance.every = 2;
  s.rebalance.column_wise_hot_tables = true;
  if (opt == OptimizerType::adam) s.optimizer.learning_rate = s.optimizer.dense_learning_rate = 0.01;
  return s;
}

using CwParam = std::tuple<PipelineKind, int, OptimizerType>;
class LiveColumnWiseParity : public ::testing::TestWithParam<CwParam> {};

}  // namespace

TEST_P(LiveColumnWiseParity, TablesAndLossesEqualTheReference) {
  const auto [pipeline, world, opt] = GetParam();
  const WorkloadSpec s = cw_hot_t3(pipeline, world, opt);
  const RunResult run = check_parity(s);
  ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
  ASSERT_EQ(run.rebalances.size(), 2u);  // after steps 1 and 3
  EXPECT_DOUBLE_EQ(run.rebalances[0].imbalance_before, static_cast<double>(world));  // all ids on rank 0
  EXPECT_LT(run.rebalances[0].imbalance_after, static_cast<double>(world));
  // t3 became column_wise at the first rebalance: min(world, 16 / 4) blocks, block 0 on rank 0
  std::vector<const embedscope::sessions::PlanChangeRecord*> t3;
  for (const auto& c : run.plan_changes)
    if (c.table_name == "t3") t3.push_back(&c);
  const std::vector<int64_t> cols = column_split(16, world);
  ASSERT_EQ(t3.size(), cols.size());
  int64_t off = 0;
  std::vector<int> ranks;
  for (size_t i = 0; i < t3.size(); ++i) {
    const auto& c = *t3[i];
    EXPECT_EQ(c.step, 2);
    EXPECT_EQ(c.shard_index, static_cast<int>(i));
    EXPECT_EQ(c.from_type + " -> " + c.to_type, "table_wise -> column_wise");
    EXPECT_EQ(c.from_rank, 0);
    EXPECT_EQ(c.row_offset, 0);
    EXPECT_EQ(c.num_rows, 50);
    EXPECT_EQ(c.col_offset, off);
    EXPECT_EQ(c.num_cols, cols[i]);
    EXPECT_EQ(c.bytes, i == 0 ? 0 : rebalance::block_move_bytes(s, 3, 50, cols[i]));
    off += cols[i];
    ranks.push_back(c.to_rank);
  }
  EXPECT_EQ(ranks[0], 0);
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(std::unique(ranks.begin(), ranks.end()), ranks.end());  // one block a rank
  const TablePlan& fin = run.final_plan.tables[3];
  EXPECT_EQ(fin.type, ShardingType::column_wise);
  ASSERT_EQ(fin.shards.size(), cols.size());
  for (size_t i = 0; i < cols.size(); ++i) EXPECT_EQ(fin.shards[i].rank, t3[i]->to_rank);
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, LiveColumnWiseParity,
    ::testing::Values(CwParam{PipelineKind::base, 2, OptimizerType::sgd},
                      CwParam{PipelineKind::base, 2, OptimizerType::rowwise_adagrad},
                      CwParam{PipelineKind::base, 3, OptimizerType::sgd},
                      CwParam{PipelineKind::base, 3, OptimizerType::rowwise_adagrad},
                      CwParam{PipelineKind::base, 3, OptimizerType::adam},
                      CwParam{PipelineKind::base, 4, OptimizerType::sgd},
                      CwParam{PipelineKind::base, 4, OptimizerType::rowwise_adagrad},
                      CwParam{PipelineKind::sparse_dist, 4, OptimizerType::rowwise_adagrad},
                      CwParam{PipelineKind::semi_sync, 3, OptimizerType::rowwise_adagrad}),
    [](const ::testing::TestParamInfo<CwParam>& p) {
      return fmt::format("{}_w{}_{}", to_string(std::get<0>(p.param)), std::get<1>(p.param), to_string(std::get<2>(p.param)));
    });

// The session: plan_changes rows with each block's columns, `stats` prints the change with its
// ranks and columns, and the file as version 8 wrote it (no columns) reads as whole-width shards.
TEST(LiveColumnWise, SessionRowsAndStatsSayColumnWise) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("embedscope_live_column_wise_{}", ::getpid());
  fs::create_directories(dir);
  const std::string path = (dir / "run.db").string();
  const WorkloadSpec s = cw_hot_t3(PipelineKind::base, 2, OptimizerType::rowwise_adagrad);
  TrainerOptions opt;
  opt.session_path = path;
  const RunResult run = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
  {
    embedscope::sessions::SessionReader r(path);
    const auto pc = r.plan_changes();
    ASSERT_EQ(pc.size(), run.plan_changes.size());
    std::vector<std::pair<int64_t, int64_t>> cols;
    for (const auto& c : pc)
      if (c.table_name == "t3") cols.emplace_back(c.col_offset, c.num_cols);
    EXPECT_EQ(cols, (std::vector<std::pair<int64_t, int64_t>>{{0, 8}, {8, 8}}));
  }
  // 50 rows x (8 columns + 1 accumulator) x 4 bytes go to rank 1
  const auto st = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + path, dir);
  ASSERT_EQ(st.code, 0) << st.err;
  const std::string want = fmt::format("t3: table_wise -> column_wise, rank 0 -> shards on ranks 0,1 (columns 0-7, 8-15) ({})",
                                       embedscope::sessions::format_bytes(50 * 9 * 4));
  EXPECT_NE(st.out.find(want), std::string::npos) << st.out;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    for (const char* col : {"col_offset", "num_cols"})
      ASSERT_EQ(sqlite3_exec(db, (std::string("ALTER TABLE plan_changes DROP COLUMN ") + col).c_str(), nullptr, nullptr, nullptr),
                SQLITE_OK)
          << sqlite3_errmsg(db);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 8", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  embedscope::sessions::SessionReader v8(path);
  const auto old = v8.plan_changes();
  ASSERT_EQ(old.size(), run.plan_changes.size());
  for (const auto& c : old) {
    EXPECT_EQ(c.col_offset, 0);
    EXPECT_EQ(c.num_cols, -1);
  }
  fs::remove_all(dir);
}
