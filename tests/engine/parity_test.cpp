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

#include "embedscope/engine/reference.h"
#include "embedscope/engine/trainer.h"

using namespace embedscope::engine;

namespace {

constexpr double kAbs = 2e-5, kRel = 1e-4;

// Uneven rows and dims: 10 rows x 6 (row-wise over 4: 3,3,2,2), 1 row, 3 rows (one row-wise
// rank is empty at world 4) shared by two features, 50 rows x 16 with Zipf ids; bag lengths
// vary (Poisson mean 3, max 6), so empty bags happen.
WorkloadSpec parity_spec(ShardingType type, int world, Pooling pooling, OptimizerType opt) {
  WorkloadSpec s;
  s.name = "parity";
  s.tables = {
      {"t0", 10, 6, pooling, {"f0"}},
      {"t1", 1, 4, pooling, {"f1"}},
      {"t2", 3, 5, pooling, {"f2a", "f2b"}},
      {"t3", 50, 16, pooling, {"f3"}},
  };
  auto feature = [](std::string n, bool fixed, double mean, int64_t max, bool zipf) {
    FeatureSpec f;
    f.name = std::move(n);
    f.pooling_factor = {fixed, mean, max};
    if (zipf) f.ids.kind = IdDistributionKind::zipf;
    return f;
  };
  s.features = {feature("f0", false, 3, 6, false), feature("f1", true, 2, 2, false),
                feature("f2a", false, 1.5, 4, false), feature("f2b", true, 1, 1, false),
                feature("f3", false, 4, 8, true)};
  s.batch_size = 5;
  s.steps = 3;
  s.seed = 7;
  s.devices.count = world;
  s.devices.memory_bytes = 64 << 20;
  s.optimizer.type = opt;
  s.optimizer.learning_rate = opt == OptimizerType::sgd ? 0.5 : 0.05;
  s.optimizer.dense_learning_rate = s.optimizer.learning_rate;
  s.sharding.default_type = type;
  s.sharding.local_world_size = type == ShardingType::table_row_wise && world == 4 ? 2 : (type == ShardingType::table_row_wise ? 1 : 0);
  s.collective_timeout_ms = 20000;
  return s;
}

// Every sharding type at once on 4 ranks in 2 nodes, explicit ranks, mean pooling.
WorkloadSpec mixed_spec(OptimizerType opt) {
  WorkloadSpec s = parity_spec(ShardingType::table_wise, 4, Pooling::mean, opt);
  s.sharding.local_world_size = 2;
  s.sharding.per_table["t0"] = {ShardingType::row_wise, {}, -1};
  s.sharding.per_table["t1"] = {ShardingType::data_parallel, {}, -1};
  s.sharding.per_table["t2"] = {ShardingType::table_row_wise, {}, 1};
  s.sharding.per_table["t3"] = {ShardingType::column_wise, {2, 0, 2}, -1};
  return s;
}

// qcomms tolerance term per unit of max|reference| (see the header).
double quantized_slack(const WorkloadSpec& spec) {
  auto u = [](CommPrecision p) { return p == CommPrecision::bf16 ? 1.0 / 256 : p == CommPrecision::fp16 ? 1.0 / 2048 : 0.0; };
  return 2.0 * spec.devices.count * std::max(u(spec.qcomms.forward_precision), u(spec.qcomms.backward_precision));
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what,
                  double slack = 0) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double max_ref = 0;
  for (float v : want) max_ref = std::max(max_ref, static_cast<double>(std::abs(v)));
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = kAbs + kRel * std::abs(want[i]) + slack * max_ref;
    if (std::abs(got[i] - want[i]) > tol && reported++ < 5)
      ADD_FAILURE() << what << " [" << i << "]: sharded " << got[i] << " vs reference " << want[i];
  }
}

struct Captured {
  std::mutex mu;
  // [iteration][rank][feature]
  std::map<std::tuple<int64_t, int, int>, std::vector<float>> pooled;
};

RunResult check_parity(const WorkloadSpec& spec, const std::function<std::optional<Batch>(int64_t, int)>& source = {}) {
  Captured cap;
  TrainerOptions opt;
  opt.keep_tables = true;
  opt.trace = false;
  opt.batch_source = source;
  opt.on_pooled = [&](int rank, int64_t it, int f, const float* p, int64_t B, int64_t dim) {
    std::lock_guard<std::mutex> lock(cap.mu);
    cap.pooled[{it, rank, f}] = std::vector<float>(p, p + B * dim);
  };
  RunResult run = run_training(spec, opt);
  EXPECT_EQ(run.ended, RunEnd::complete) << run.error;
  if (run.ended != RunEnd::complete) return run;
  ReferenceResult ref = run_reference(spec, spec.steps, &run.plan, source);
  const int F = static_cast<int>(spec.features.size());
  const double slack = quantized_slack(spec);
  EXPECT_EQ(cap.pooled.size(), static_cast<size_t>(spec.steps * spec.devices.count * F));
  if (cap.pooled.size() != static_cast<size_t>(spec.steps * spec.devices.count * F)) return run;
  for (int64_t it = 0; it < spec.steps; ++it)
    for (int r = 0; r < spec.devices.count; ++r)
      for (int f = 0; f < F; ++f)
        expect_close(cap.pooled[{it, r, f}], ref.pooled[static_cast<size_t>(it)][static_cast<size_t>(r)][static_cast<size_t>(f)],
                     fmt::format("forward step {} rank {} feature {}", it, r, spec.features[static_cast<size_t>(f)].name),
                     slack);
  EXPECT_EQ(run.tables.size(), ref.tables.size());
  if (run.tables.size() != ref.tables.size()) return run;
  double moved = 0;  // training really changed the tables: equality is not the initial weights
  for (size_t t = 0; t < ref.tables.size(); ++t) {
    expect_close(run.tables[t], ref.tables[t], "table " + spec.tables[t].name + " after training", slack);
    const int64_t D = spec.tables[t].embedding_dim;
    for (int64_t r = 0; r < spec.tables[t].num_embeddings; ++r)
      for (int64_t c = 0; c < D; ++c)
        moved += std::abs(ref.tables[t][static_cast<size_t>(r * D + c)] -
                          initial_weight(spec.seed, static_cast<int>(t), r, c, spec.tables[t].num_embeddings));
  }
  EXPECT_GT(moved, 1e-2);
  expect_close(run.dense_params, ref.dense_params, "dense parameters after training", slack);
  EXPECT_EQ(run.loss.size(), ref.loss.size());
  if (run.loss.size() != ref.loss.size()) return run;
  for (size_t i = 0; i < ref.loss.size(); ++i)
    EXPECT_NEAR(run.loss[i], ref.loss[i], slack > 0 ? 1e-3 : 1e-5) << "loss step " << i;
  return run;
}

using Param = std::tuple<ShardingType, int, Pooling, OptimizerType>;

class ShardedEqualsReference : public ::testing::TestWithParam<Param> {};

TEST_P(ShardedEqualsReference, ForwardAndTablesAfterThreeSteps) {
  const auto [type, world, pooling, opt] = GetParam();
  check_parity(parity_spec(type, world, pooling, opt));
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, ShardedEqualsReference,
    ::testing::Combine(::testing::Values(ShardingType::data_parallel, ShardingType::table_wise, ShardingType::row_wise,
                                         ShardingType::column_wise, ShardingType::table_row_wise),
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
                                         ShardingType::column_wise, ShardingType::table_row_wise)),
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
  const RunResult base = run_training(s, opt);
  s.pipeline = PipelineKind::sparse_dist;
  const RunResult sparse = run_training(s, opt);
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

}  // namespace
