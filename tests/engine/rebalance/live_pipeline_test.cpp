// Live resharding under the pipelines (issue 17): with sparse_dist the batch after the move had
// its input dist under the old plan; with semi_sync the batch after it was already looked up and
// its output dist started, and the one after that input-dist'ed. At the move they finish what
// they began (settle_inflight), then go to the new shards again (replan_inflight: the
// `reshard_input_dist/*` collectives). Against the unsharded reference (reference.h, which knows
// semi_sync's one-step staleness and no plan): the forward outputs of every step, the tables, the
// dense parameters and the losses (parity_check.h: 2e-5 absolute + 1e-4 relative, losses 1e-5),
// on 2, 3 and 4 ranks, sgd and rowwise_adagrad, for whole table moves and for a hot table
// changed to row_wise (mean pooling there: the per-bag scales of the batch already looked up are
// rebuilt for the new shards).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "embedscope/engine/rebalance/policy.h"
#include "embedscope/sessions/store/session.h"
#include "engine/parity_check.h"
#include "engine/rebalance/live_fixtures.h"

using namespace embedscope::engine;
using namespace embedscope::engine::parity;
using embedscope::test_support::crowded_live_spec;
using embedscope::test_support::rebalance_moves;

namespace {

/// The sharding plan a run ended with differs from the one it started with in some table.
int pipe_tables_changed(const RunResult& run) {
  int n = 0;
  for (size_t t = 0; t < run.plan.tables.size(); ++t) {
    const TablePlan &a = run.plan.tables[t], &b = run.final_plan.tables[t];
    n += a.type != b.type || a.shards.size() != b.shards.size() || a.shards[0].rank != b.shards[0].rank;
  }
  return n;
}

using PipeParam = std::tuple<PipelineKind, int, OptimizerType>;
std::string pipe_param_name(const ::testing::TestParamInfo<PipeParam>& p) {
  return fmt::format("{}_w{}_{}", to_string(std::get<0>(p.param)), std::get<1>(p.param), to_string(std::get<2>(p.param)));
}
auto pipe_params() {
  return ::testing::Combine(::testing::Values(PipelineKind::sparse_dist, PipelineKind::semi_sync), ::testing::Values(2, 3, 4),
                            ::testing::Values(OptimizerType::sgd, OptimizerType::rowwise_adagrad));
}

class LivePipelineMoves : public ::testing::TestWithParam<PipeParam> {};
class LivePipelineRowWise : public ::testing::TestWithParam<PipeParam> {};

}  // namespace

TEST_P(LivePipelineMoves, TablesAndLossesEqualTheReference) {
  const auto [pipeline, world, opt] = GetParam();
  const WorkloadSpec s = crowded_live_spec(world, opt, pipeline);
  const RunResult run = check_parity(s);
  ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
  ASSERT_EQ(run.rebalances.size(), 2u);
  EXPECT_EQ(run.rebalances[0].step, 1);
  EXPECT_EQ(run.rebalances[1].step, 3);
  // under semi_sync step 0 also looked up batch 1: still every id on rank 0
  EXPECT_DOUBLE_EQ(run.rebalances[0].imbalance_before, static_cast<double>(world));
  EXPECT_GE(run.rebalances[0].moves, 1);
  EXPECT_LT(run.rebalances[0].imbalance_after, static_cast<double>(world));
  EXPECT_EQ(static_cast<int>(run.plan_changes.size()), rebalance_moves(run));
  EXPECT_GE(pipe_tables_changed(run), 1);
}

INSTANTIATE_TEST_SUITE_P(Pipelines, LivePipelineMoves, pipe_params(), pipe_param_name);

// t3 (50 rows, 20 ids a bag) alone exceeds the mean rank load: it changes to row_wise at the
// first rebalance. Mean pooling: the table_wise slots scale their bags at the lookup, the
// row_wise one after the reduce-scatter, so the batch looked up before the move (semi_sync)
// needs the new slots' scales for its backward.
TEST_P(LivePipelineRowWise, TablesAndLossesEqualTheReference) {
  const auto [pipeline, world, opt] = GetParam();
  WorkloadSpec s = crowded_live_spec(world, opt, pipeline, Pooling::mean);
  for (auto& f : s.features)
    if (f.name == "f3") f.pooling_factor = {false, 20, 30};
  s.rebalance.row_wise_hot_tables = true;
  const RunResult run = check_parity(s);
  ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
  ASSERT_EQ(run.rebalances.size(), 2u);
  int t3 = 0;
  for (const auto& c : run.plan_changes)
    if (c.table_name == "t3") {
      ++t3;
      EXPECT_EQ(c.step, 2);
      EXPECT_EQ(c.from_type + " -> " + c.to_type, "table_wise -> row_wise");
    }
  EXPECT_EQ(t3, world);
  EXPECT_EQ(run.final_plan.tables[3].type, ShardingType::row_wise);
}

INSTANTIATE_TEST_SUITE_P(Pipelines, LivePipelineRowWise, pipe_params(), pipe_param_name);

// The session of a semi_sync run on 2 ranks: each rebalance sends the two batches ahead again
// (batch s + 1 looked up, batch s + 2 input-dist'ed), 3 collectives each, named
// reshard_input_dist/*, at the rebalance's step; sparse_dist sends one batch again.
TEST(LivePipeline, BatchesAheadAreSentAgainAtTheMove) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("embedscope_live_pipeline_{}", ::getpid());
  fs::create_directories(dir);
  for (auto [pipeline, ahead] : {std::pair{PipelineKind::semi_sync, 2}, {PipelineKind::sparse_dist, 1}}) {
    const std::string path = (dir / fmt::format("{}.db", to_string(pipeline))).string();
    const WorkloadSpec s = crowded_live_spec(2, OptimizerType::rowwise_adagrad, pipeline);
    TrainerOptions opt;
    opt.session_path = path;
    const RunResult run = run_training(s, plan_sharding(s), opt);
    ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
    embedscope::sessions::SessionReader r(path);
    const auto rb = r.rebalances();
    ASSERT_EQ(rb.size(), 2u);
    std::map<std::pair<int64_t, std::string>, int> again;  // (step, name) -> records (one per rank)
    for (const auto& c : r.collectives())
      if (c.name.rfind("reshard_input_dist/", 0) == 0 && c.name.find("/split_check") == std::string::npos)
        ++again[{c.step, c.name}];  // (each all-to-all-v's split check is a record of its own)
    std::map<std::pair<int64_t, std::string>, int> want;
    for (const auto& e : rb)
      if (e.moves > 0)
        for (const char* n : {"reshard_input_dist/splits", "reshard_input_dist/lengths", "reshard_input_dist/ids"})
          want[{e.step, n}] = 2 * ahead;
    ASSERT_FALSE(want.empty());
    EXPECT_EQ(again, want) << to_string(pipeline);
  }
  fs::remove_all(dir);
}
