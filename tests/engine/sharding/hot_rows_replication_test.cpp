// Hot-row replication (issue 17, sharding/hot_rows.cpp; TableSharding::hot_rows): the spec's
// checks (exact messages), the step program's figures (hand-computed), and parity with the
// unsharded reference (engine/reference, double; the tolerances of parity_check.h) for row_wise
// tables with hot rows, under sum and mean pooling, every optimizer, and the base, sparse_dist and
// semi_sync pipelines. The reference knows nothing of hot rows: replicating them must not change
// a single value beyond rounding.

#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/input/input.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/rebalance/hot_rows.h"
#include "embedscope/engine/reference/reference.h"
#include "engine/parity_check.h"
#include "program/program_sink.h"

using namespace embedscope::engine;
using namespace embedscope::engine::parity;

namespace {

// parity_spec's four tables, all of `type` (row_wise by default), with hot rows: t0 (10 rows,
// uniform ids) rows 1, 4 and 9; t1 (1 row) its only row, so its shards receive no id at all; t2
// (3 rows, two features) row 0; t3 (50 rows, Zipf ids) four rows. t0 and t2 stay partly
// model-parallel.
WorkloadSpec hotrep_spec(int world, Pooling pooling, OptimizerType opt, ShardingType type = ShardingType::row_wise) {
  WorkloadSpec s = parity_spec(type, world, pooling, opt);
  auto hot = [type](std::vector<int64_t> rows) {
    TableSharding t;
    t.type = type;
    t.hot_rows = std::move(rows);
    return t;
  };
  s.sharding.per_table["t0"] = hot({1, 4, 9});
  s.sharding.per_table["t1"] = hot({0});
  s.sharding.per_table["t2"] = hot({0});
  s.sharding.per_table["t3"] = hot({0, 7, 13, 49});
  return s;
}

std::string hotrep_error(const nlohmann::json& j) {
  try {
    parse_workload(j, "test.json");
  } catch (const SpecError& e) {
    return e.what();
  }
  return "(no error)";
}

// ---- the spec ------------------------------------------------------------------------------

TEST(HotRowsSpec, RoundTripsSortedThroughJson) {
  nlohmann::json j = to_json(hotrep_spec(4, Pooling::sum, OptimizerType::sgd));
  j["sharding"]["tables"]["t0"]["hot_rows"] = {9, 1, 4};
  const WorkloadSpec s = parse_workload(j, "test.json");
  EXPECT_EQ(s.sharding.per_table.at("t0").hot_rows, (std::vector<int64_t>{1, 4, 9}));
  EXPECT_EQ(to_json(s)["sharding"]["tables"]["t0"]["hot_rows"], nlohmann::json({1, 4, 9}));
}

TEST(HotRowsSpec, BadRowsAndTypesAreRefusedNamingThePointer) {
  const nlohmann::json base = to_json(hotrep_spec(4, Pooling::sum, OptimizerType::sgd));
  auto with = [&](const char* table, nlohmann::json entry) {
    nlohmann::json j = base;
    j["sharding"]["tables"][table] = std::move(entry);
    return hotrep_error(j);
  };
  EXPECT_EQ(with("t0", {{"type", "row_wise"}, {"hot_rows", {3, 10}}}),
            "test.json: /sharding/tables/t0/hot_rows/1: must be in [0, 10), got 10 (the rows of table \"t0\")");
  EXPECT_EQ(with("t0", {{"type", "row_wise"}, {"hot_rows", {3, 5, 3}}}),
            "test.json: /sharding/tables/t0/hot_rows/2: row 3 is listed twice (also at /sharding/tables/t0/hot_rows/0)");
  EXPECT_EQ(with("t0", {{"type", "row_wise"}, {"hot_rows", {-1}}}),
            "test.json: /sharding/tables/t0/hot_rows/0: must be >= 0, got -1");
  for (const char* type : {"table_wise", "column_wise", "table_column_wise", "data_parallel"})
    EXPECT_EQ(with("t0", {{"type", type}, {"hot_rows", {3}}}),
              fmt::format("test.json: /sharding/tables/t0/hot_rows: only allowed with /sharding/tables/t0/type "
                          "row_wise, table_row_wise or grid_shard, not {} (hot-row replication of tables not split by "
                          "rows is not implemented)",
                          type));
  for (const char* type : {"row_wise", "table_row_wise", "grid_shard"})
    EXPECT_EQ(with("t0", {{"type", type}, {"hot_rows", {3}}}), "(no error)") << type;
  nlohmann::json fp16 = base;
  fp16["tables"][0]["data_type"] = "fp16";
  EXPECT_EQ(hotrep_error(fp16), "test.json: /sharding/tables/t0/hot_rows: needs data_type fp32 (table \"t0\" has fp16 "
                                "at /tables/0/data_type)");
  nlohmann::json low_rank = base;
  low_rank["tables"][0]["low_rank_dim"] = 2;
  EXPECT_EQ(hotrep_error(low_rank), "test.json: /sharding/tables/t0/hot_rows: not allowed with low_rank_dim (table \"t0\" "
                                    "has 2 at /tables/0/low_rank_dim): the replicas hold full rows");
  nlohmann::json host = base;
  host["tables"][0]["placement"] = "host";
  EXPECT_EQ(hotrep_error(host), "test.json: /sharding/tables/t0/hot_rows: needs placement device (table \"t0\" has host "
                                "at /tables/0/placement): the replicas live in device memory");
}

TEST(HotRowsSpec, ProgrammaticSpecsMustBeSortedAndUnique) {
  WorkloadSpec s = hotrep_spec(4, Pooling::sum, OptimizerType::sgd);
  s.sharding.per_table["t3"].hot_rows = {7, 7};
  try {
    validate(s, "spec");
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_STREQ(e.what(), "spec: /sharding/tables/t3/hot_rows/1: must be unique and in increasing order, got 7 after 7");
  }
}

// ---- the step program ----------------------------------------------------------------------

// One table of 10 rows x 6, uniform ids, 3 ids a bag, B = 5, row_wise over 4 ranks (TorchRec's
// rows 3, 3, 3, 1), hot rows {1, 4, 9}. Rank 0 sends each rank the expected ids of its row range
// less the hot ones: 15 x (3 - 1) / 10 = 3, 15 x (3 - 1) / 10 = 3, 15 x 3 / 10 = 4.5 -> 5,
// 15 x (1 - 1) / 10 = 0 (without hot rows: 4.5 -> 5, 5, 5, 1.5 -> 2); the all-reduce carries
// 3 x (6 + 1) = 21 fp32 values; the hot lookup reads 15 x 3 / 10 = 4.5 ids.
TEST(HotRowsProgram, FewerIdsInTheInputDistAndOneAllReduce) {
  WorkloadSpec s;
  s.name = "hot";
  s.tables = {{"t0", 10, 6, Pooling::sum, {"f0"}}};
  FeatureSpec f;
  f.name = "f0";
  f.pooling_factor = {true, 3, 3};
  s.features = {f};
  s.batch_size = 5;
  s.devices.count = 4;
  s.devices.memory_bytes = 64 << 20;
  s.dense.reset();
  s.sharding.default_type = ShardingType::row_wise;
  auto ids_sent = [](const StepProgram& p) {
    for (const auto& op : p.ops)
      for (const auto& c : op.collectives)
        if (c.name == "input_dist/ids") return c.send_elements;
    return std::vector<int64_t>{};
  };
  const StepProgram before = build_step_program(s, plan_sharding(s), 0, 0);
  EXPECT_EQ(ids_sent(before), (std::vector<int64_t>{5, 5, 5, 2}));
  s.sharding.per_table["t0"] = {ShardingType::row_wise, {}, -1, {1, 4, 9}};
  const StepProgram after = build_step_program(s, plan_sharding(s), 0, 0);
  EXPECT_EQ(ids_sent(after), (std::vector<int64_t>{3, 3, 5, 0}));
  int all_reduces = 0;
  for (const auto& op : after.ops)
    for (const auto& c : op.collectives)
      if (c.name == "grad_dist/hot_rows_all_reduce") {
        ++all_reduces;
        EXPECT_EQ(c.kind, CollectiveKind::all_reduce);
        EXPECT_EQ(c.count, 21);
        EXPECT_EQ(c.elem_bytes, 4);
        EXPECT_EQ(op.lane, embedscope::sessions::Lane::comm);
      }
  EXPECT_EQ(all_reduces, 1);
  const auto lookup = std::find_if(after.ops.begin(), after.ops.end(), [](const auto& op) { return op.name == "lookup"; });
  const auto lookup0 = std::find_if(before.ops.begin(), before.ops.end(), [](const auto& op) { return op.name == "lookup"; });
  ASSERT_NE(lookup, after.ops.end());
  ASSERT_NE(lookup0, before.ops.end());
  // rank 0's shard: 4 ranks x 15 ids x 2 / 10 = 12 cold ids, plus its own 4.5 hot ids -> 16.5 -> 17 (before: 18)
  EXPECT_EQ(lookup0->rows, 18);
  EXPECT_EQ(lookup->rows, 17);
}

// Permuted Zipf ids: the hot rows' expected share is the Zipf mass of their ranks, found by
// inverting the feature's row permutation: rows perm(0) and perm(1) of 10 at alpha 1 hold
// (1 + 1/2) / (1 + 1/2 + ... + 1/10) = 1.5 / 2.9289683 = 0.5121258; uniform ids 2 / 10.
TEST(HotRowsProgram, ExpectedShareOfPermutedZipfHotRows) {
  WorkloadSpec s;
  s.tables = {{"t0", 10, 6, Pooling::sum, {"f0", "f1"}}};
  FeatureSpec z, u;
  z.name = "f0";
  z.ids.kind = IdDistributionKind::zipf;
  z.ids.alpha = 1.0;
  u.name = "f1";
  s.features = {z, u};
  s.seed = 11;
  const RowPermutation perm = feature_row_permutation(s, 0, 10);
  ASSERT_NE(perm(0), perm(1));
  std::vector<int64_t> hot = {perm(0), perm(1)};
  std::sort(hot.begin(), hot.end());
  s.sharding.per_table["t0"] = {ShardingType::row_wise, {}, -1, hot};
  EXPECT_NEAR(program::hot_id_share(s, 0, 0, 0, 10), 0.5121258, 1e-6);
  EXPECT_NEAR(program::hot_id_share(s, 0, 0, perm(0), perm(0) + 1), 0.3414172, 1e-6);  // 1 / 2.9289683
  EXPECT_NEAR(program::hot_id_share(s, 0, 1, 0, 10), 0.2, 1e-12);
}

// The planner's memory estimate counts every rank's replicas (rank_setup.cpp's order: rows, then adam's
// two state buffers, each rounded to the allocator's 512 bytes): hotrep_spec's four replicas (3 x 6,
// 1 x 4, 1 x 5, 4 x 16 floats, all under 512 bytes) add 4 x 512 bytes of weights and 8 x 512 of
// optimizer state on every rank, and the estimate stays at or above the measured peak.
TEST(HotRowsMemory, EstimateCountsTheReplicasAndCoversThePeak) {
  const WorkloadSpec hot = hotrep_spec(4, Pooling::sum, OptimizerType::adam);
  const WorkloadSpec cold = parity_spec(ShardingType::row_wise, 4, Pooling::sum, OptimizerType::adam);
  const auto with = estimate_memory(hot, plan_sharding(hot));
  const auto without = estimate_memory(cold, plan_sharding(cold));
  ASSERT_EQ(with.size(), 4u);
  ASSERT_EQ(without.size(), 4u);
  TrainerOptions opt;
  opt.trace = false;
  const RunResult run = run_training(hot, plan_sharding(hot), opt);
  ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
  for (size_t r = 0; r < 4; ++r) {
    EXPECT_EQ(with[r].weights - without[r].weights, 4 * 512) << r;
    EXPECT_EQ(with[r].optimizer_state - without[r].optimizer_state, 8 * 512) << r;
    EXPECT_GE(with[r].total(), run.ranks[r].memory_bytes) << r;
  }
}

// ---- parity with the reference -------------------------------------------------------------

// world 2: one node of 2 ranks (row_wise) or 2 nodes of 1 (table_row_wise, grid_shard); world 4:
// 2 nodes of 2 (parity_spec)
using HotrepParam = std::tuple<ShardingType, PipelineKind, Pooling, int>;
class HotRowsEqualReference : public ::testing::TestWithParam<HotrepParam> {};

TEST_P(HotRowsEqualReference, ForwardAndTablesAfterThreeSteps) {
  const auto [type, pipeline, pooling, world] = GetParam();
  WorkloadSpec s = hotrep_spec(world, pooling, OptimizerType::adam, type);
  s.pipeline = pipeline;
  check_parity(s);
}

INSTANTIATE_TEST_SUITE_P(
    Pipelines, HotRowsEqualReference,
    ::testing::Combine(::testing::Values(ShardingType::row_wise, ShardingType::table_row_wise, ShardingType::grid_shard),
                       ::testing::Values(PipelineKind::base, PipelineKind::sparse_dist, PipelineKind::semi_sync),
                       ::testing::Values(Pooling::sum, Pooling::mean), ::testing::Values(2, 4)),
    [](const auto& p) {
      return fmt::format("{}_{}_{}_w{}", to_string(std::get<0>(p.param)), to_string(std::get<1>(p.param)),
                         to_string(std::get<2>(p.param)), std::get<3>(p.param));
    });

TEST(HotRowsParity, EveryOptimizer) {
  for (ShardingType type : {ShardingType::row_wise, ShardingType::table_row_wise, ShardingType::grid_shard})
    for (OptimizerType opt : {OptimizerType::sgd, OptimizerType::rowwise_adagrad, OptimizerType::adam}) {
      SCOPED_TRACE(fmt::format("{} {}", to_string(type), to_string(opt)));
      check_parity(hotrep_spec(type == ShardingType::row_wise ? 3 : 4, Pooling::mean, opt, type));
    }
}

// The hot rows beside every other sharding type, and the device path (emulate_device).
TEST(HotRowsParity, AmongOtherTypesAndOnTheDevicePath) {
  WorkloadSpec s = mixed_spec(OptimizerType::rowwise_adagrad);  // t0 row_wise, t2 table_row_wise
  s.sharding.per_table["t0"].hot_rows = {0, 5, 6};
  s.sharding.per_table["t2"].hot_rows = {2};
  check_parity(s);
  check_parity(hotrep_spec(4, Pooling::sum, OptimizerType::adam), {}, true);
}

// The replicas really are trained, and identically on every rank: the hot rows of the run's
// tables (taken from rank 0's replica) moved from their initial values as the reference's did.
TEST(HotRowsParity, HotRowsMoveAsTheReferences) {
  const WorkloadSpec s = hotrep_spec(4, Pooling::sum, OptimizerType::sgd);
  const RunResult run = check_parity(s);
  ASSERT_EQ(run.tables.size(), 4u);
  double moved = 0;
  for (int64_t r : {1, 4, 9})
    for (int64_t c = 0; c < 6; ++c)
      moved += std::abs(run.tables[0][static_cast<size_t>(r * 6 + c)] - initial_weight(s.seed, 0, r, c, 10));
  EXPECT_GT(moved, 1e-3);
}

// ---- rows chosen from the observed ids, and the run's figures ------------------------------

// Feature f0 (table t0: 10 rows x 6, row_wise over W = 2) gets the same 5 bags of 4 ids on every
// rank and iteration: row 3 eight times, row 5 seven times, rows 1, 2, 4, 6, 7 once. Per step
// over both ranks: row 3 16 ids > W x (dim + 1) = 14 (hot), row 5 14 (not: the threshold is
// strict), the others 2.
std::optional<Batch> hotrep_source(BatchGenerator& gen, int64_t it, int rank) {
  Batch b = gen.make(it, rank);
  const int64_t B = b.kjt.batch_size;
  int64_t f0_ids = 0;
  for (int64_t s = 0; s < B; ++s) f0_ids += b.kjt.lengths[static_cast<size_t>(s)];
  std::vector<int64_t> values = {3, 3, 3, 3, 3, 3, 3, 3, 5, 5, 5, 5, 5, 5, 5, 1, 2, 4, 6, 7};
  values.insert(values.end(), b.kjt.values.begin() + f0_ids, b.kjt.values.end());
  b.kjt.values = std::move(values);
  for (int64_t s = 0; s < B; ++s) b.kjt.lengths[static_cast<size_t>(s)] = 4;
  return b;
}

TEST(HotRowsAuto, ChosenFromTheFirstStepsIdsWithTheByteCostThreshold) {
  WorkloadSpec s = parity_spec(ShardingType::row_wise, 2, Pooling::mean, OptimizerType::rowwise_adagrad);
  ASSERT_EQ(s.batch_size, 5);
  s.sharding.per_table["t0"] = {ShardingType::row_wise, {}, -1, {}, 1};
  BatchGenerator gen(s);
  auto source = [&](int64_t it, int rank) { return hotrep_source(gen, it, rank); };
  const WorkloadSpec resolved = rebalance::resolve_hot_rows(s, plan_sharding(s), source);
  EXPECT_EQ(resolved.sharding.per_table.at("t0").hot_rows, (std::vector<int64_t>{3}));
  EXPECT_EQ(resolved.sharding.per_table.at("t0").hot_rows_sample_steps, 0);
  // the run resolves them itself and trains as the reference; its figures: 8 ids x 2 ranks x 3
  // measured steps kept off the input dist, 1 x (6 + 1) x 4 = 28 bytes of all-reduce a step
  const RunResult run = check_parity(s, source);
  ASSERT_EQ(run.table_storage.size(), 4u);
  EXPECT_EQ(run.table_storage[0].hot_rows, 1);
  EXPECT_EQ(run.table_storage[0].hot_ids, 48);
  EXPECT_EQ(run.table_storage[0].hot_all_reduce_bytes, 28);
  EXPECT_EQ(run.table_storage[1].hot_rows, 0);
}

// No row over the threshold (every row of t0 twice a rank: 4 ids a step over both ranks, not
// more than W x (dim + 1) = 14): none chosen, and the resolved spec (the session's workload)
// keeps the request rather than dropping the key.
TEST(HotRowsAuto, NoneChosenKeepsTheRequest) {
  WorkloadSpec s = parity_spec(ShardingType::row_wise, 2, Pooling::mean, OptimizerType::rowwise_adagrad);
  s.sharding.per_table["t0"] = {ShardingType::row_wise, {}, -1, {}, 1};
  BatchGenerator gen(s);
  auto source = [&](int64_t it, int rank) -> std::optional<Batch> {
    Batch b = gen.make(it, rank);
    const int64_t B = b.kjt.batch_size;
    int64_t f0_ids = 0;
    for (int64_t k = 0; k < B; ++k) f0_ids += b.kjt.lengths[static_cast<size_t>(k)];
    std::vector<int64_t> values = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    values.insert(values.end(), b.kjt.values.begin() + f0_ids, b.kjt.values.end());
    b.kjt.values = std::move(values);
    for (int64_t k = 0; k < B; ++k) b.kjt.lengths[static_cast<size_t>(k)] = 4;
    return b;
  };
  const WorkloadSpec resolved = rebalance::resolve_hot_rows(s, plan_sharding(s), source);
  EXPECT_TRUE(resolved.sharding.per_table.at("t0").hot_rows.empty());
  EXPECT_EQ(resolved.sharding.per_table.at("t0").hot_rows_sample_steps, 1);
  EXPECT_EQ(to_json(resolved)["sharding"]["tables"]["t0"]["hot_rows"],
            (nlohmann::json{{"auto", true}, {"sample_steps", 1}}));
  const RunResult run = check_parity(s, source);
  EXPECT_EQ(run.table_storage[0].hot_rows, 0);
}

TEST(HotRowsAuto, JsonFormAndItsErrors) {
  const nlohmann::json base = to_json(parity_spec(ShardingType::row_wise, 2, Pooling::sum, OptimizerType::sgd));
  nlohmann::json j = base;
  j["sharding"]["tables"]["t0"] = {{"type", "row_wise"}, {"hot_rows", {{"auto", true}, {"sample_steps", 2}}}};
  const WorkloadSpec s = parse_workload(j, "test.json");
  EXPECT_EQ(s.sharding.per_table.at("t0").hot_rows_sample_steps, 2);
  EXPECT_EQ(to_json(s)["sharding"]["tables"]["t0"]["hot_rows"], j["sharding"]["tables"]["t0"]["hot_rows"]);
  j["sharding"]["tables"]["t0"]["hot_rows"]["sample_steps"] = 4;
  EXPECT_EQ(hotrep_error(j), "test.json: /sharding/tables/t0/hot_rows/sample_steps: must be in [1, 3] (warmup_steps + "
                             "steps: the run's iterations), got 4");
  j["sharding"]["tables"]["t0"]["hot_rows"]["sample_steps"] = 0;
  EXPECT_EQ(hotrep_error(j), "test.json: /sharding/tables/t0/hot_rows/sample_steps: must be > 0, got 0");
  j["sharding"]["tables"]["t0"]["hot_rows"] = {{"auto", false}, {"sample_steps", 1}};
  EXPECT_EQ(hotrep_error(j), "test.json: /sharding/tables/t0/hot_rows/auto: must be true (list the rows in an array "
                             "instead, or leave hot_rows out)");
  j["sharding"]["tables"]["t0"]["hot_rows"] = {{"auto", true}};
  EXPECT_EQ(hotrep_error(j), "test.json: /sharding/tables/t0/hot_rows/sample_steps: required");
}

}  // namespace
