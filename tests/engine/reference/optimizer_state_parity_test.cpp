// Parity of reduced-precision optimizer state (TableSpec::optimizer_state_type fp16 / bf16)
// under every sharding type, for the optimizers that keep state (rowwise_adagrad, adam): the
// sharded forward outputs, the tables after three steps, the dense parameters and the loss equal
// the unsharded reference (reference.h), which rounds each state value in double after the step
// that updated it. Tolerance: parity_check.h's, plus storage_slack's state term (one stored unit
// of the state either way, 2^-11 fp16, 2^-8 bf16, twice).
//
// So that the check can fail for a kernel that ignored optimizer_state_type, every case also
// asserts that the run is much closer (L1 over all tables) to the rounded reference than to the
// reference with fp32 state, and that the run allocated 2 bytes a state value.

#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/reference/reference.h"
#include "engine/parity_check.h"

using namespace embedscope::engine;
using namespace embedscope::engine::parity;

namespace {

double l1(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double s = 0;
  for (size_t t = 0; t < a.size(); ++t)
    for (size_t i = 0; i < a[t].size(); ++i) s += std::abs(static_cast<double>(a[t][i]) - b[t][i]);
  return s;
}

using OptimizerStateParam = std::tuple<OptimizerStateType, ShardingType, OptimizerType>;

class OptimizerStateParity : public ::testing::TestWithParam<OptimizerStateParam> {};

TEST_P(OptimizerStateParity, ForwardAndTablesAfterThreeSteps) {
  const auto [st, type, opt] = GetParam();
  WorkloadSpec s = parity_spec(type, type == ShardingType::table_row_wise ? 4 : 3, Pooling::sum, opt);
  for (auto& t : s.tables) t.optimizer_state_type = st;
  const RunResult run = check_parity(s);
  ASSERT_EQ(run.ended, RunEnd::complete);

  // the rounding of the state is visible: the fp32-state reference is farther from the rounded
  // one than the run is, by a wide margin
  WorkloadSpec fp32 = s;
  for (auto& t : fp32.tables) t.optimizer_state_type = OptimizerStateType::fp32;
  const ReferenceResult a = run_reference(s, s.steps, &run.plan), b = run_reference(fp32, s.steps, &run.plan);
  const double rounding = l1(a.tables, b.tables), off = l1(run.tables, a.tables);
  EXPECT_GT(rounding, 0.0);
  EXPECT_LT(off, 0.1 * rounding) << "run vs rounded reference " << off << ", rounded vs fp32-state reference "
                                 << rounding;

  // the state bytes: 2 a value, on every shard (t3: 50 rows x 16 columns)
  ASSERT_EQ(run.table_storage.size(), s.tables.size());
  const auto& t3 = run.table_storage[3];
  EXPECT_EQ(t3.optimizer_state_type, st);
  int64_t want = 0;
  for (const Shard& sh : run.plan.tables[3].shards) want += optimizer_state_bytes(opt, sh.num_rows, sh.num_cols, st);
  EXPECT_EQ(t3.total_optimizer_state_bytes(), want);
  if (type != ShardingType::column_wise && type != ShardingType::data_parallel) {
    EXPECT_EQ(want, opt == OptimizerType::adam ? 2 * 50 * 16 * 2 : 50 * 2);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, OptimizerStateParity,
    ::testing::Combine(::testing::Values(OptimizerStateType::fp16, OptimizerStateType::bf16),
                       ::testing::Values(ShardingType::data_parallel, ShardingType::table_wise, ShardingType::row_wise,
                                         ShardingType::column_wise, ShardingType::table_row_wise),
                       ::testing::Values(OptimizerType::rowwise_adagrad, OptimizerType::adam)),
    [](const ::testing::TestParamInfo<OptimizerStateParam>& p) {
      return fmt::format("{}_{}_{}", enum_name(std::get<0>(p.param)), to_string(std::get<1>(p.param)),
                         to_string(std::get<2>(p.param)));
    });

// With reduced-precision rows as well (the state rounded, then the row): int8 and bf16 tables
// with fp16 / bf16 state on the mixed plan of every sharding type.
TEST(OptimizerStateParity, WithReducedPrecisionRowsOnTheMixedPlan) {
  WorkloadSpec s = mixed_spec(OptimizerType::adam);
  s.tables[0].data_type = TableDataType::int8;
  s.tables[0].optimizer_state_type = OptimizerStateType::fp16;
  s.tables[3].data_type = TableDataType::bf16;
  s.tables[3].optimizer_state_type = OptimizerStateType::bf16;
  const RunResult run = check_parity(s);
  ASSERT_EQ(run.table_storage.size(), 4u);
  EXPECT_EQ(run.table_storage[1].optimizer_state_type, OptimizerStateType::fp32);
  // t1 (1 row x 4, data_parallel on 4 ranks, fp32 state): adam's 2 x 4 floats on every rank
  EXPECT_EQ(run.table_storage[1].optimizer_state_bytes, (std::vector<int64_t>{32, 32, 32, 32}));
  EXPECT_EQ(run.table_storage[3].total_optimizer_state_bytes(), 2 * 50 * 16 * 2);
}

}  // namespace

namespace {

// Mean loss of steps [from, from + n).
double mean_loss(const RunResult& r, size_t from, size_t n) {
  double s = 0;
  for (size_t i = from; i < from + n; ++i) s += r.loss[i];
  return s / static_cast<double>(n);
}

}  // namespace

// Training still learns with the state in fp16 / bf16: 40 steps of rowwise_adagrad and adam on 2
// ranks (the parity workload, 64 samples a rank): the mean loss of the last 5 steps is below
// that of the first 5, as with fp32 state, and within 0.02 of fp32 state's.
TEST(OptimizerStateTraining, LossStillFalls) {
  for (OptimizerType opt : {OptimizerType::rowwise_adagrad, OptimizerType::adam})
    for (OptimizerStateType st : {OptimizerStateType::fp32, OptimizerStateType::fp16, OptimizerStateType::bf16}) {
      WorkloadSpec s = parity_spec(ShardingType::row_wise, 2, Pooling::sum, opt);
      s.batch_size = 64;
      s.steps = 40;
      for (auto& t : s.tables) t.optimizer_state_type = st;
      TrainerOptions o;
      o.trace = false;
      const RunResult r = run_training(s, plan_sharding(s), o);
      ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
      ASSERT_EQ(r.loss.size(), 40u);
      const std::string what = fmt::format("{} state {}", to_string(opt), enum_name(st));
      EXPECT_LT(mean_loss(r, 35, 5), mean_loss(r, 0, 5)) << what;
      WorkloadSpec f32 = s;
      for (auto& t : f32.tables) t.optimizer_state_type = OptimizerStateType::fp32;
      const RunResult base = run_training(f32, plan_sharding(f32), o);
      EXPECT_NEAR(mean_loss(r, 35, 5), mean_loss(base, 35, 5), 0.02) << what;
    }
}
