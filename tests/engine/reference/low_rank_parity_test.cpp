// Parity of low-rank tables (TableSpec::low_rank_dim, model/low_rank.h) under the sharding types
// that allow them (table_wise, data_parallel, row_wise: A's rows split, B copied to every rank
// and its gradient all-reduced) on 1 to 4 ranks and every optimizer: the forward
// outputs, the tables E = A B after three steps, the dense parameters and the loss equal the
// unsharded reference, which keeps A and B in double and updates them from its own formulas
// (reference/low_rank_reference.h). Tolerance: parity_check.h's (2e-5 absolute + 1e-4 relative),
// the fp32 tolerance: both factors are fp32, nothing is rounded.
//
// So that the check can fail, each case also asserts that the low-rank reference's tables are
// far from the full-rank reference's (the factorization is visible), that training moved them,
// and that the run allocated A and B (4 (rows r + r dim) bytes a replica), not rows x dim.

#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/reference/reference.h"
#include "engine/parity_check.h"

using namespace embedscope::engine;
using namespace embedscope::engine::parity;

namespace {

// Fraction of the values that differ by more than the fp32 tolerance.
double mismatch_fraction(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want) {
  size_t n = 0, off = 0;
  for (size_t t = 0; t < want.size(); ++t)
    for (size_t i = 0; i < want[t].size(); ++i, ++n)
      if (std::abs(got[t][i] - want[t][i]) > kAbs + kRel * std::abs(want[t][i])) ++off;
  return n ? static_cast<double>(off) / static_cast<double>(n) : 0.0;
}

// parity_spec with every table factorized: t0 10 x 6 r 2, t1 1 x 4 r 1, t2 3 x 5 r 3, t3 50 x 16 r 4.
WorkloadSpec low_rank_spec(ShardingType type, int world, OptimizerType opt) {
  WorkloadSpec s = parity_spec(type, world, Pooling::mean, opt);
  const int64_t r[] = {2, 1, 3, 4};
  for (size_t t = 0; t < s.tables.size(); ++t) s.tables[t].low_rank_dim = r[t];
  return s;
}

using LowRankParam = std::tuple<ShardingType, int, OptimizerType>;
class LowRankParity : public ::testing::TestWithParam<LowRankParam> {};

TEST_P(LowRankParity, ForwardAndTablesAfterThreeSteps) {
  const auto [type, world, opt] = GetParam();
  const WorkloadSpec s = low_rank_spec(type, world, opt);
  const RunResult run = check_parity(s);
  ASSERT_EQ(run.ended, RunEnd::complete);

  WorkloadSpec full = s, untrained = s;
  for (auto& t : full.tables) t.low_rank_dim = 0;
  const ReferenceResult lr = run_reference(s, s.steps), fr = run_reference(full, s.steps), r0 = run_reference(untrained, 0);
  EXPECT_GE(mismatch_fraction(lr.tables, fr.tables), 0.9) << "the factorized tables equal the full ones";
  EXPECT_GE(mismatch_fraction(run.tables, r0.tables), 0.5) << "training moved few values of A B";

  // t3: 50 x 16, r 4: A 50 x 4 and B 4 x 16 fp32 on each replica; row_wise: A's 50 rows split
  // over the ranks, a copy of B (and of its state) with each
  ASSERT_EQ(run.table_storage.size(), s.tables.size());
  const auto& t3 = run.table_storage[3];
  EXPECT_EQ(t3.low_rank_dim, 4);
  const int64_t replicas = type == ShardingType::data_parallel ? world : 1;
  const int64_t b_copies = type == ShardingType::row_wise ? world : replicas;
  EXPECT_EQ(t3.total_weight_bytes(), 4 * (replicas * 50 * 4 + b_copies * 4 * 16));
  // state: rowwise_adagrad one value a row of A and of B; adam two of each value
  const int64_t a_state = opt == OptimizerType::sgd ? 0 : opt == OptimizerType::rowwise_adagrad ? 4 * 50 : 2 * 4 * 50 * 4;
  const int64_t b_state = opt == OptimizerType::sgd ? 0 : opt == OptimizerType::rowwise_adagrad ? 4 * 4 : 2 * 4 * 4 * 16;
  EXPECT_EQ(t3.total_optimizer_state_bytes(), replicas * a_state + b_copies * b_state);
}

INSTANTIATE_TEST_SUITE_P(
    LowRank, LowRankParity,
    ::testing::Combine(::testing::Values(ShardingType::table_wise, ShardingType::data_parallel, ShardingType::row_wise),
                       ::testing::Values(1, 2, 3, 4),
                       ::testing::Values(OptimizerType::sgd, OptimizerType::rowwise_adagrad, OptimizerType::adam)),
    [](const auto& p) {  // not `info`: the macro's own parameter has that name (-Wshadow)
      return fmt::format("{}_w{}_{}", to_string(std::get<0>(p.param)), std::get<1>(p.param),
                         to_string(std::get<2>(p.param)));
    });

// Tables in both placements at once on 3 ranks, sum pooling, a hashed factorized table and
// fp16 optimizer state (rounded in the reference as in the kernels: storage_slack).
TEST(LowRankParity, MixedPlacementsHashingAndHalfState) {
  WorkloadSpec s = low_rank_spec(ShardingType::table_wise, 3, OptimizerType::rowwise_adagrad);
  for (auto& t : s.tables) t.pooling = Pooling::sum;
  s.tables[3].hash_size = 20;
  s.tables[0].optimizer_state_type = OptimizerStateType::fp16;
  s.sharding.per_table["t0"] = {ShardingType::data_parallel, {}, -1};
  s.sharding.per_table["t3"] = {ShardingType::table_wise, {2}, -1};
  const RunResult run = check_parity(s);
  ASSERT_EQ(run.ended, RunEnd::complete);
  ASSERT_EQ(run.tables[3].size(), 20u * 16u);  // E of the 20 hashed rows
  EXPECT_EQ(run.table_storage[3].total_weight_bytes(), 4 * (20 * 4 + 4 * 16));
  EXPECT_EQ(run.table_storage[0].total_optimizer_state_bytes(), 3 * 2 * (10 + 2));  // fp16, 3 replicas
}

}  // namespace
