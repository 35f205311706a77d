// Parity (ctest label `parity`): every sharding type, world sizes 1-4, sum and mean pooling,
// every optimizer. The sharded forward output of every rank and step must equal the
// unsharded single-rank reference, and the tables re-assembled after 3 training steps must
// equal the reference's.
//
// Tolerance: |sharded - reference| <= 2e-5 + 1e-4 |reference|. The reference accumulates in
// double, the kernels in fp32 and in another order (per shard, then reduce-scatter), so the
// values differ by rounding only; a wrong row, shard boundary or scale is off by >= 1e-2.
//
// Pipelines: sparse_dist trains exactly as base (checked bit for bit); semi_sync is checked
// against the reference with the same one-step staleness. Quantized comms (qcomms fp16 / bf16):
// the reference rounds the pooled outputs and gradients where the collectives do, but row-wise
// and table-row-wise sums round each rank's partial sum rather than the total, and the reference
// accumulates in double before rounding, so a value may land one unit in the last place of the
// precision apart: those runs add 2 W u max|reference| (u = 2^-8 for bf16, 2^-11 for fp16, W
// ranks; max over the compared vector) to the tolerance, and 1e-3 to the loss tolerance.

#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include <fmt/format.h>

#include "embedscope/engine/reference/reference.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/sharding/plan_json.h"
#include "parity_check.h"

using namespace embedscope::engine;

using namespace embedscope::engine::parity;

namespace {

using Param = std::tuple<ShardingType, int, Pooling, OptimizerType>;

class ShardedEqualsReference : public ::testing::TestWithParam<Param> {};

TEST_P(ShardedEqualsReference, ForwardAndTablesAfterThreeSteps) {
  const auto [type, world, pooling, opt] = GetParam();
  check_parity(parity_spec(type, world, pooling, opt));
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, ShardedEqualsReference,
    ::testing::Combine(::testing::Values(ShardingType::data_parallel, ShardingType::table_wise, ShardingType::row_wise,
                                         ShardingType::column_wise, ShardingType::table_row_wise,
                                         ShardingType::table_column_wise, ShardingType::grid_shard),
                       ::testing::Values(1, 2, 3, 4), ::testing::Values(Pooling::sum, Pooling::mean),
                       ::testing::Values(OptimizerType::sgd, OptimizerType::rowwise_adagrad, OptimizerType::adam)),
    [](const ::testing::TestParamInfo<Param>& p) {
      return fmt::format("{}_w{}_{}_{}", to_string(std::get<0>(p.param)), std::get<1>(p.param),
                         to_string(std::get<2>(p.param)), to_string(std::get<3>(p.param)));
    });

// Mixed plan: every type at once, explicit ranks, column shards on chosen ranks.
TEST(Parity, MixedShardingWithExplicitRanks) {
  for (OptimizerType opt : {OptimizerType::sgd, OptimizerType::rowwise_adagrad, OptimizerType::adam}) {
    WorkloadSpec s = parity_spec(ShardingType::table_wise, 4, Pooling::mean, opt);
    s.sharding.local_world_size = 2;
    s.sharding.per_table["t0"] = {ShardingType::row_wise, {}, -1};
    s.sharding.per_table["t1"] = {ShardingType::data_parallel, {}, -1};
    s.sharding.per_table["t2"] = {ShardingType::table_wise, {3}, -1};
    s.sharding.per_table["t3"] = {ShardingType::column_wise, {2, 0, 2}, -1};
    check_parity(s);
    s.sharding.per_table["t3"] = {ShardingType::table_row_wise, {}, 1};
    check_parity(s);
  }
}

// The two node-bound types among the others on 4 ranks in 2 nodes: table_column_wise on a given
// node, grid_shard's column blocks on both nodes, int8 rows (each column block encodes its own
// scale and bias), every optimizer (rowwise_adagrad keeps one state per row per column block).
TEST(Parity, TableColumnWiseAndGridShardAmongTheOthers) {
  for (OptimizerType opt : {OptimizerType::sgd, OptimizerType::rowwise_adagrad, OptimizerType::adam}) {
    WorkloadSpec s = parity_spec(ShardingType::table_wise, 4, Pooling::mean, opt);
    s.sharding.local_world_size = 2;
    s.sharding.per_table["t0"] = {ShardingType::grid_shard, {}, -1};
    s.sharding.per_table["t1"] = {ShardingType::row_wise, {}, -1};
    s.sharding.per_table["t2"] = {ShardingType::table_row_wise, {}, 0};
    s.sharding.per_table["t3"] = {ShardingType::table_column_wise, {}, 1};
    const RunResult r = check_parity(s);
    ASSERT_EQ(r.plan.tables[3].shards.size(), 2u);  // 16 columns over the 2 ranks of node 1
    EXPECT_EQ(r.plan.tables[3].shards[0].rank / 2, 1);
    EXPECT_EQ(r.plan.tables[3].shards[1].rank / 2, 1);
    s.sharding.per_table["t3"] = {ShardingType::grid_shard, {}, -1};
    s.tables[3].data_type = TableDataType::int8;
    const RunResult g = check_parity(s);
    ASSERT_EQ(g.plan.tables[3].shards.size(), 4u);  // 2 column blocks x 2 row shards
  }
}

// A hand-made grid plan whose two column blocks share one node (the planner never makes it,
// a plan file may): every rank of node 0 holds rows of both blocks of t3; t0's single block is
// on node 1.
TEST(Parity, GridShardWithTwoBlocksOnOneNode) {
  for (OptimizerType opt : {OptimizerType::sgd, OptimizerType::rowwise_adagrad}) {
    WorkloadSpec s = parity_spec(ShardingType::table_wise, 4, Pooling::sum, opt);
    s.sharding.local_world_size = 2;
    ShardingPlan plan = plan_sharding(s);
    plan.tables[3].type = ShardingType::grid_shard;
    plan.tables[3].shards = {{0, 0, 25, 0, 8}, {1, 25, 25, 0, 8}, {1, 0, 30, 8, 8}, {0, 30, 20, 8, 8}};
    plan.tables[0].type = ShardingType::grid_shard;
    plan.tables[0].shards = {{2, 0, 5, 0, 6}, {3, 5, 5, 0, 6}};
    validate_plan(s, plan, "hand plan");
    check_parity(s, {}, false, &plan);
  }
}

// Periodic compaction moves every live buffer between steps; training is unchanged.
TEST(Parity, CompactionEveryStepKeepsResults) {
  for (ShardingType type : {ShardingType::data_parallel, ShardingType::table_wise, ShardingType::row_wise,
                            ShardingType::column_wise}) {
    WorkloadSpec s = parity_spec(type, 3, Pooling::mean, OptimizerType::adam);
    s.memory.compaction = 1;
    check_parity(s);
  }
  // with the buffers a pipeline carries from one step into the next
  for (PipelineKind p : {PipelineKind::sparse_dist, PipelineKind::semi_sync}) {
    WorkloadSpec s = mixed_spec(OptimizerType::adam);
    s.memory.compaction = 1;
    s.pipeline = p;
    check_parity(s);
  }
}

// A rank whose whole batch is empty (every bag of every feature has no ids) at one step.
TEST(Parity, RankWithEmptyBatch) {
  for (ShardingType type : {ShardingType::data_parallel, ShardingType::table_wise, ShardingType::row_wise,
                            ShardingType::column_wise, ShardingType::table_row_wise}) {
    WorkloadSpec s = parity_spec(type, 3, Pooling::mean, OptimizerType::rowwise_adagrad);
    BatchGenerator gen(s);
    auto source = [&](int64_t it, int rank) -> std::optional<Batch> {
      Batch b = gen.make(it, rank);
      if (rank == 1 && it == 1) {
        std::fill(b.kjt.lengths.begin(), b.kjt.lengths.end(), 0);
        b.kjt.values.clear();
      }
      return b;
    };
    check_parity(s, source);
  }
}

// The full model: a DLRM dense part (MLPs and interaction), trained end to end.
TEST(Parity, WithDenseMlp) {
  for (ShardingType type : {ShardingType::table_wise, ShardingType::row_wise, ShardingType::column_wise}) {
    WorkloadSpec s = parity_spec(type, 2, Pooling::sum, OptimizerType::adam);
    s.dense = DenseSpec{3, {8, 4}, Interaction::cat, 2, 3, {6, 1}};
    check_parity(s);
    s.dense->interaction = Interaction::dcn;
    check_parity(s);
    // dot interaction: every embedding_dim equals the bottom MLP's output
    s.dense->interaction = Interaction::dot;
    for (auto& t : s.tables) t.embedding_dim = 4;
    check_parity(s);
  }
}

// ---- pipelines and quantized comms ----------------------------------------------------------


class PipelineParity : public ::testing::TestWithParam<std::tuple<PipelineKind, ShardingType>> {};

TEST_P(PipelineParity, ForwardAndTablesAfterThreeSteps) {
  const auto [pipeline, type] = GetParam();
  WorkloadSpec s = parity_spec(type, 3, Pooling::mean, OptimizerType::adam);
  s.pipeline = pipeline;
  check_parity(s);
}

INSTANTIATE_TEST_SUITE_P(
    SparseDistAndSemiSync, PipelineParity,
    ::testing::Combine(::testing::Values(PipelineKind::sparse_dist, PipelineKind::semi_sync),
                       ::testing::Values(ShardingType::data_parallel, ShardingType::table_wise, ShardingType::row_wise,
                                         ShardingType::column_wise, ShardingType::table_row_wise,
                                         ShardingType::table_column_wise, ShardingType::grid_shard)),
    [](const auto& p) {
      return fmt::format("{}_{}", to_string(std::get<0>(p.param)), to_string(std::get<1>(p.param)));
    });

// Every pipeline with every comm precision, on a plan with every sharding type at once, the
// dense MLP, warmup steps and two nodes.
class PipelinePrecisionParity : public ::testing::TestWithParam<std::tuple<PipelineKind, CommPrecision>> {};

TEST_P(PipelinePrecisionParity, MixedPlanWithDenseMlp) {
  const auto [pipeline, precision] = GetParam();
  WorkloadSpec s = mixed_spec(OptimizerType::rowwise_adagrad);
  for (auto& t : s.tables) t.embedding_dim = 4;
  s.dense = DenseSpec{3, {8, 4}, Interaction::dot, 2, 3, {6, 1}};
  s.dense->bucket_cap_bytes = 64;  // DDP buckets: every tensor of more than 16 values its own bucket
  s.pipeline = pipeline;
  s.qcomms = {precision, precision};
  s.warmup_steps = 1;  // the reference trains warmup + measured steps; the run reports measured ones
  s.steps = 2;
  WorkloadSpec ref_spec = s;  // the same 3 batches, all compared
  ref_spec.warmup_steps = 0;
  ref_spec.steps = 3;
  const RunResult run = check_parity(ref_spec);
  if (precision == CommPrecision::fp32) {
    EXPECT_EQ(run.qcomms_error.forward_max_abs, 0.0);
    EXPECT_EQ(run.qcomms_error.backward_max_abs, 0.0);
  } else {
    // rounding to nearest: relative error at most the unit roundoff 2^-8 (bf16: 8 significant
    // bits) / 2^-11 (fp16: 11)
    const double u = precision == CommPrecision::bf16 ? 1.0 / 256 : 1.0 / 2048;
    EXPECT_GT(run.qcomms_error.forward_relative, 0.0);
    EXPECT_LE(run.qcomms_error.forward_relative, u);
    EXPECT_GT(run.qcomms_error.backward_relative, 0.0);
    EXPECT_LE(run.qcomms_error.backward_relative, u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, PipelinePrecisionParity,
    ::testing::Combine(::testing::Values(PipelineKind::base, PipelineKind::sparse_dist, PipelineKind::semi_sync),
                       ::testing::Values(CommPrecision::fp32, CommPrecision::fp16, CommPrecision::bf16)),
    [](const auto& p) {
      return fmt::format("{}_{}", to_string(std::get<0>(p.param)), to_string(std::get<1>(p.param)));
    });

// sparse_dist only moves the input dist earlier: bit-identical to base. semi_sync's staleness
// really changes the forward outputs from step 1 on (so its parity test can fail).
TEST(Parity, SparseDistIsBitIdenticalToBaseAndSemiSyncIsStale) {
  WorkloadSpec s = mixed_spec(OptimizerType::adam);
  TrainerOptions opt;
  opt.keep_tables = true;
  opt.trace = false;
  const RunResult base = run_training(s, plan_sharding(s), opt);
  s.pipeline = PipelineKind::sparse_dist;
  const RunResult sparse = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(base.ended, RunEnd::complete) << base.error;
  ASSERT_EQ(sparse.ended, RunEnd::complete) << sparse.error;
  EXPECT_EQ(sparse.tables, base.tables);
  EXPECT_EQ(sparse.dense_params, base.dense_params);
  EXPECT_EQ(sparse.loss, base.loss);
  const ReferenceResult ref_base = run_reference(s, 3, &base.plan);
  s.pipeline = PipelineKind::semi_sync;
  const ReferenceResult ref_semi = run_reference(s, 3, &base.plan);
  EXPECT_EQ(ref_semi.pooled[0], ref_base.pooled[0]);  // batch 0: the initial tables either way
  EXPECT_NE(ref_semi.pooled[1], ref_base.pooled[1]);  // batch 1: before batch 0's update
  EXPECT_NE(ref_semi.tables, ref_base.tables);
}

// The cuda executor's device path (shard weights and optimizer state, lookup, row optimizer
// and MLP layers behind the copies to and from a device), with host memory standing in for the
// GPU (TrainerOptions::emulate_device): every sharding type, optimizer and pooling.
using DeviceParam = std::tuple<ShardingType, OptimizerType>;
class DevicePathEqualsReference : public ::testing::TestWithParam<DeviceParam> {};

TEST_P(DevicePathEqualsReference, ForwardAndTablesAfterThreeSteps) {
  const auto [type, opt] = GetParam();
  for (Pooling pooling : {Pooling::sum, Pooling::mean}) check_parity(parity_spec(type, 2, pooling, opt), {}, true);
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, DevicePathEqualsReference,
    ::testing::Combine(::testing::Values(ShardingType::data_parallel, ShardingType::table_wise, ShardingType::row_wise,
                                         ShardingType::column_wise, ShardingType::table_row_wise),
                       ::testing::Values(OptimizerType::sgd, OptimizerType::rowwise_adagrad, OptimizerType::adam)),
    [](const ::testing::TestParamInfo<DeviceParam>& p) {
      return fmt::format("{}_{}", to_string(std::get<0>(p.param)), to_string(std::get<1>(p.param)));
    });

TEST(DevicePath, MixedPlanOnFourRanks) { check_parity(mixed_spec(OptimizerType::adam), {}, true); }

// Several ranks on one device (issue 14): the device path with 4 ranks on 1 emulated device
// (TrainerOptions::emulated_devices), every group on the intra-device communicator
// (comm/local/): every sharding type, optimizer and pooling against the reference.
class FourRanksOnOneDeviceEqualReference : public ::testing::TestWithParam<DeviceParam> {};

TEST_P(FourRanksOnOneDeviceEqualReference, ForwardAndTablesAfterThreeSteps) {
  const auto [type, opt] = GetParam();
  for (Pooling pooling : {Pooling::sum, Pooling::mean}) check_parity(parity_spec(type, 4, pooling, opt), {}, true, nullptr, 1);
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, FourRanksOnOneDeviceEqualReference,
    ::testing::Combine(::testing::Values(ShardingType::data_parallel, ShardingType::table_wise, ShardingType::row_wise,
                                         ShardingType::column_wise, ShardingType::table_row_wise),
                       ::testing::Values(OptimizerType::sgd, OptimizerType::rowwise_adagrad, OptimizerType::adam)),
    [](const ::testing::TestParamInfo<DeviceParam>& p) {
      return fmt::format("{}_{}", to_string(std::get<0>(p.param)), to_string(std::get<1>(p.param)));
    });

TEST(DevicePath, MixedPlanWithFourRanksOnOneDevice) { check_parity(mixed_spec(OptimizerType::adam), {}, true, nullptr, 1); }

// 4 ranks on 2 emulated devices (ranks 0-1 on device 0, 2-3 on device 1): the node groups of
// the mixed plan's table_row_wise table (nodes of 2) are each on one device (intra-device
// communicator), the world group spans both with 2 ranks on each (the hierarchical communicator,
// comm/hier/), the cross groups have one rank on each device (Gloo).
TEST(DevicePath, MixedPlanWithTwoRanksOnEachOfTwoDevices) {
  check_parity(mixed_spec(OptimizerType::rowwise_adagrad), {}, true, nullptr, 2);
}


// ---- pipelines on the device path (issue 14: sparse_dist and semi_sync on the cuda backend) ----
// The cuda executor's device path (host memory standing in for the GPU) with a pipeline: the
// next batch's input dist (and, semi_sync, its lookup) while the dense part of this one runs, so
// two batches' device buffers are in flight at once and the comm worker uses the rank's device
// (the intra-device communicator's staging on its comm stream) while the rank thread runs the
// lookups and the dense part. Every sharding type against the reference (semi_sync with its
// one-step staleness), on 3 ranks each on a device of its own (Gloo between them) and on 4 ranks
// sharing one device (every group on the intra-device communicator: the one-GPU desktop).
using DevicePipelineParam = std::tuple<PipelineKind, ShardingType, int>;
class DevicePipelineEqualsReference : public ::testing::TestWithParam<DevicePipelineParam> {};

TEST_P(DevicePipelineEqualsReference, ForwardAndTablesAfterThreeSteps) {
  const auto [pipeline, type, devices] = GetParam();
  WorkloadSpec s = parity_spec(type, devices == 1 ? 4 : 3, Pooling::mean, OptimizerType::adam);
  s.pipeline = pipeline;
  check_parity(s, {}, true, nullptr, devices);
}

INSTANTIATE_TEST_SUITE_P(
    SparseDistAndSemiSync, DevicePipelineEqualsReference,
    ::testing::Combine(::testing::Values(PipelineKind::sparse_dist, PipelineKind::semi_sync),
                       ::testing::Values(ShardingType::data_parallel, ShardingType::table_wise, ShardingType::row_wise,
                                         ShardingType::column_wise, ShardingType::table_row_wise,
                                         ShardingType::table_column_wise, ShardingType::grid_shard),
                       ::testing::Values(0, 1)),
    [](const ::testing::TestParamInfo<DevicePipelineParam>& p) {
      return fmt::format("{}_{}_{}", to_string(std::get<0>(p.param)), to_string(std::get<1>(p.param)),
                         std::get<2>(p.param) == 1 ? "w4_one_device" : "w3_device_each");
    });

// A pipeline on the device path with every sharding type at once (mixed_spec). First the whole
// model: the DLRM dense part on the device (MLPs, dot interaction, loss, SGD), DDP buckets on the
// comm worker next to the batch ahead's input dist, 4 steps, 4 ranks on one device.
class DevicePipelineMixedPlan : public ::testing::TestWithParam<PipelineKind> {};

TEST_P(DevicePipelineMixedPlan, WithDenseMlpFourRanksOnOneDevice) {
  WorkloadSpec s = mixed_spec(OptimizerType::rowwise_adagrad);
  for (auto& t : s.tables) t.embedding_dim = 4;
  s.dense = DenseSpec{3, {8, 4}, Interaction::dot, 2, 3, {6, 1}};
  s.dense->bucket_cap_bytes = 64;
  s.pipeline = GetParam();
  s.steps = 4;
  check_parity(s, {}, true, nullptr, 1);
}

// A pipeline with the ranks on 2 emulated devices of 2 (the one-GPU-per-pair desktop): the mixed
// plan's world group on the hierarchical communicator (intra-device parts, Gloo between the
// devices' leaders), its node groups each on one device, while the batch ahead's collectives
// share the comm worker with this batch's.
TEST_P(DevicePipelineMixedPlan, TwoRanksOnEachOfTwoDevices) {
  WorkloadSpec s = mixed_spec(OptimizerType::rowwise_adagrad);
  s.pipeline = GetParam();
  check_parity(s, {}, true, nullptr, 2);
}

INSTANTIATE_TEST_SUITE_P(SparseDistAndSemiSync, DevicePipelineMixedPlan,
                         ::testing::Values(PipelineKind::sparse_dist, PipelineKind::semi_sync),
                         [](const auto& p) { return std::string(to_string(p.param)); });

}  // namespace
