// Parity (ctest label `parity`): every sharding type, world sizes 1-4, sum and mean pooling,
// every optimizer. The sharded forward output of every rank and step must equal the
// unsharded single-rank reference, and the tables re-assembled after 3 training steps must
// equal the reference's.
//
// Tolerance: |sharded - reference| <= 2e-5 + 1e-4 |reference|. The reference accumulates in
// double, the kernels in fp32 and in another order (per shard, then reduce-scatter), so the
// values differ by rounding only; a wrong row, shard boundary or scale is off by >= 1e-2.

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

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = kAbs + kRel * std::abs(want[i]);
    if (std::abs(got[i] - want[i]) > tol && reported++ < 5)
      ADD_FAILURE() << what << " [" << i << "]: sharded " << got[i] << " vs reference " << want[i];
  }
}

struct Captured {
  std::mutex mu;
  // [iteration][rank][feature]
  std::map<std::tuple<int64_t, int, int>, std::vector<float>> pooled;
};

void check_parity(const WorkloadSpec& spec, const std::function<std::optional<Batch>(int64_t, int)>& source = {}) {
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
  ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
  ReferenceResult ref = run_reference(spec, spec.steps, &run.plan, source);
  const int F = static_cast<int>(spec.features.size());
  ASSERT_EQ(cap.pooled.size(), static_cast<size_t>(spec.steps * spec.devices.count * F));
  for (int64_t it = 0; it < spec.steps; ++it)
    for (int r = 0; r < spec.devices.count; ++r)
      for (int f = 0; f < F; ++f)
        expect_close(cap.pooled[{it, r, f}], ref.pooled[static_cast<size_t>(it)][static_cast<size_t>(r)][static_cast<size_t>(f)],
                     fmt::format("forward step {} rank {} feature {}", it, r, spec.features[static_cast<size_t>(f)].name));
  ASSERT_EQ(run.tables.size(), ref.tables.size());
  double moved = 0;  // training really changed the tables: equality is not the initial weights
  for (size_t t = 0; t < ref.tables.size(); ++t) {
    expect_close(run.tables[t], ref.tables[t], "table " + spec.tables[t].name + " after training");
    const int64_t D = spec.tables[t].embedding_dim;
    for (int64_t r = 0; r < spec.tables[t].num_embeddings; ++r)
      for (int64_t c = 0; c < D; ++c)
        moved += std::abs(ref.tables[t][static_cast<size_t>(r * D + c)] -
                          initial_weight(spec.seed, static_cast<int>(t), r, c, spec.tables[t].num_embeddings));
  }
  EXPECT_GT(moved, 1e-2);
  expect_close(run.dense_params, ref.dense_params, "dense parameters after training");
  ASSERT_EQ(run.loss.size(), ref.loss.size());
  for (size_t i = 0; i < ref.loss.size(); ++i) EXPECT_NEAR(run.loss[i], ref.loss[i], 1e-5) << "loss step " << i;
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

}  // namespace
