// Parity of reduced-precision tables (TableSpec::data_type fp16 / bf16 / int8) under every
// sharding type and optimizer: the sharded forward outputs, the tables after three training
// steps, the dense parameters and the loss equal the unsharded reference (reference.h), which
// rounds the stored rows in double from the layouts' definitions. Tolerance: parity_check.h's,
// plus storage_slack (one stored unit either way, see there).
//
// So that the check can fail for a kernel that ignored data_type, every case also asserts that
// the reference's reduced-precision tables are farther from the fp32 reference's than that
// tolerance allows (the rounding is visible), and the run reports the bytes of the stored rows.

#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/quant/row_codec.h"
#include "embedscope/engine/reference/reference.h"
#include "engine/parity_check.h"

using namespace embedscope::engine;
using namespace embedscope::engine::parity;

namespace {

// The fraction of the values of all tables that differ by more than the fp32 tolerance
// (parity_check.h: kAbs + kRel |want|, no storage slack).
double tight_mismatch_fraction(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want) {
  size_t n = 0, off = 0;
  for (size_t t = 0; t < want.size(); ++t)
    for (size_t i = 0; i < want[t].size(); ++i, ++n)
      if (std::abs(got[t][i] - want[t][i]) > kAbs + kRel * std::abs(want[t][i])) ++off;
  return n ? static_cast<double>(off) / static_cast<double>(n) : 0.0;
}

using DataTypeParam = std::tuple<TableDataType, ShardingType, OptimizerType>;

class DataTypeParity : public ::testing::TestWithParam<DataTypeParam> {};

TEST_P(DataTypeParity, ForwardAndTablesAfterThreeSteps) {
  const auto [dt, type, opt] = GetParam();
  WorkloadSpec s = parity_spec(type, type == ShardingType::table_row_wise ? 4 : 3, Pooling::mean, opt);
  for (auto& t : s.tables) t.data_type = dt;
  const RunResult run = check_parity(s);
  ASSERT_EQ(run.ended, RunEnd::complete);

  // The storage slack alone would let an fp32 run pass (its rows are within one stored unit of
  // the rounded ones), so: the run matches the rounded reference to the fp32 tolerance in almost
  // every value (a value near a rounding boundary may land one unit apart); the rounding changed
  // most values of the fp32 reference; fp16 / bf16 values are representable in the precision,
  // and int8 ones are farther than the fp32 tolerance from the fp32 reference in most places.
  WorkloadSpec fp32 = s;
  for (auto& t : fp32.tables) t.data_type = TableDataType::fp32;
  const ReferenceResult a = run_reference(s, s.steps, &run.plan), b = run_reference(fp32, s.steps, &run.plan);
  EXPECT_LE(tight_mismatch_fraction(run.tables, a.tables), 0.02);
  size_t changed = 0, n = 0, off_grid = 0;
  for (size_t t = 0; t < a.tables.size(); ++t)
    for (size_t i = 0; i < a.tables[t].size(); ++i, ++n) {
      changed += a.tables[t][i] != b.tables[t][i];
      if (dt != TableDataType::int8) {
        const float v = run.tables[t][i];
        off_grid += round_to_precision(v, dt == TableDataType::fp16 ? CommPrecision::fp16 : CommPrecision::bf16) != v;
      }
    }
  EXPECT_GE(static_cast<double>(changed), 0.5 * static_cast<double>(n)) << "the rounding changed few values";
  EXPECT_EQ(off_grid, 0u) << "values of the run are not " << to_string(dt) << " values";
  if (dt == TableDataType::int8) {
    EXPECT_GE(tight_mismatch_fraction(b.tables, a.tables), 0.5);
  }

  // the stored bytes: every row of every shard in its precision (t3: 50 rows x 16 columns)
  ASSERT_EQ(run.table_storage.size(), s.tables.size());
  const auto& t3 = run.table_storage[3];
  EXPECT_EQ(t3.name, "t3");
  EXPECT_EQ(t3.data_type, dt);
  int64_t want = 0;
  for (const Shard& sh : run.plan.tables[3].shards) want += sh.num_rows * row_bytes(dt, sh.num_cols);
  EXPECT_EQ(t3.total_weight_bytes(), want);
  if (type != ShardingType::column_wise && type != ShardingType::data_parallel) {
    EXPECT_EQ(want, 50 * (dt == TableDataType::int8 ? 16 + 8 : 2 * 16));
  }
  EXPECT_EQ(t3.master_copy_bytes, 0);
  // the measured rows' error against their fp32 values: non-zero, and at most one stored unit
  EXPECT_GT(t3.max_abs_error, 0.0);
  EXPECT_GT(t3.relative_error, 0.0);
  EXPECT_LE(t3.relative_error, dt == TableDataType::int8 ? 1.0 / 255 : row_unit_roundoff(dt) * 1.01);
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, DataTypeParity,
    ::testing::Combine(::testing::Values(TableDataType::fp16, TableDataType::bf16, TableDataType::int8),
                       ::testing::Values(ShardingType::data_parallel, ShardingType::table_wise, ShardingType::row_wise,
                                         ShardingType::column_wise, ShardingType::table_row_wise),
                       ::testing::Values(OptimizerType::sgd, OptimizerType::rowwise_adagrad, OptimizerType::adam)),
    [](const ::testing::TestParamInfo<DataTypeParam>& p) {
      return fmt::format("{}_{}_{}", to_string(std::get<0>(p.param)), to_string(std::get<1>(p.param)),
                         to_string(std::get<2>(p.param)));
    });

// Every type at once (tables of different data types), on the mixed plan of every sharding type.
TEST(DataTypeParity, MixedTypesOnTheMixedPlan) {
  WorkloadSpec s = mixed_spec(OptimizerType::rowwise_adagrad);
  s.tables[0].data_type = TableDataType::int8;
  s.tables[1].data_type = TableDataType::fp16;
  s.tables[2].data_type = TableDataType::bf16;
  s.tables[3].data_type = TableDataType::int8;  // column_wise: a scale and bias per column shard
  const RunResult run = check_parity(s);
  ASSERT_EQ(run.table_storage.size(), 4u);
  // t1 (1 row x 4, data_parallel on 4 ranks): 8 bytes on every rank
  EXPECT_EQ(run.table_storage[1].weight_bytes, (std::vector<int64_t>{8, 8, 8, 8}));
}

// The hashing trick (TableSpec::hash_size): t0's 10 ids on 4 rows and t3's 50 (Zipf) ids on 7,
// under every sharding type; the tables have hash_size rows, and the collisions are counted.
class HashSizeParity : public ::testing::TestWithParam<ShardingType> {};

TEST_P(HashSizeParity, ForwardAndTablesAfterThreeSteps) {
  WorkloadSpec s = parity_spec(GetParam(), GetParam() == ShardingType::table_row_wise ? 4 : 3, Pooling::sum,
                               OptimizerType::rowwise_adagrad);
  s.tables[0].hash_size = 4;
  s.tables[3].hash_size = 7;
  const RunResult run = check_parity(s);
  ASSERT_EQ(run.ended, RunEnd::complete);
  ASSERT_EQ(run.tables.size(), 4u);
  EXPECT_EQ(run.tables[0].size(), 4u * 6);
  EXPECT_EQ(run.tables[3].size(), 7u * 16);
  ASSERT_EQ(run.table_storage.size(), 4u);
  // 5 bags a rank of ~3 ids over 10 ids on 4 rows: some ids share a row in every batch
  EXPECT_GT(run.table_storage[0].hash_collisions, 0);
  EXPECT_GT(run.table_storage[3].hash_collisions, 0);
  EXPECT_EQ(run.table_storage[1].hash_collisions, 0);
  EXPECT_EQ(run.table_storage[3].hash_size, 7);
  int64_t per_rank = 0;
  for (const auto& rk : run.ranks) per_rank += rk.hash_collisions;
  int64_t per_table = 0;
  for (const auto& ts : run.table_storage) per_table += ts.hash_collisions;
  EXPECT_EQ(per_rank, per_table);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, HashSizeParity,
                         ::testing::Values(ShardingType::data_parallel, ShardingType::table_wise, ShardingType::row_wise,
                                           ShardingType::column_wise, ShardingType::table_row_wise),
                         [](const auto& p) { return std::string(to_string(p.param)); });

// Both at once: a hashed int8 table and a hashed bf16 table on the mixed plan.
TEST(HashSizeParity, WithReducedPrecisionOnTheMixedPlan) {
  WorkloadSpec s = mixed_spec(OptimizerType::adam);
  s.tables[0].hash_size = 5;
  s.tables[0].data_type = TableDataType::int8;
  s.tables[3].hash_size = 20;
  s.tables[3].data_type = TableDataType::bf16;
  const RunResult run = check_parity(s);
  ASSERT_EQ(run.table_storage.size(), 4u);
  EXPECT_EQ(run.table_storage[3].total_weight_bytes(), 20 * 2 * 16);  // column-wise: every row once
}

}  // namespace
