// The held-out evaluation (model/held_out.h): ROC AUC against hand-computed values (ties
// included) and against a pairwise count, the run's recorded figures against its own logits, a
// trained model against the untrained one, and the sharded run's evaluation against the same
// evaluation of the unsharded reference's tables (every sharding type, compressed tables).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/input/input.h"
#include "embedscope/engine/model/dense.h"
#include "embedscope/engine/model/held_out.h"
#include "embedscope/engine/reference/reference.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/sessions/model/held_out_key.h"
#include "embedscope/sessions/store/session.h"

namespace es = embedscope::engine;
using nlohmann::json;

namespace {

// The AUC by its definition: over every (positive, negative) pair, 1 when the positive scores
// higher, 1/2 on a tie, divided by the pairs. O(n^2): independent of roc_auc's ranks.
double held_out_pairwise_auc(const std::vector<double>& s, const std::vector<float>& y) {
  double wins = 0, pairs = 0;
  for (size_t i = 0; i < s.size(); ++i)
    for (size_t j = 0; j < s.size(); ++j) {
      if (y[i] != 1.0f || y[j] != 0.0f) continue;
      pairs += 1;
      wins += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
    }
  return wins / pairs;
}

TEST(RocAuc, HandComputed) {
  // sklearn's roc_auc_score example: pairs (0.35 > 0.1), (0.35 < 0.4), (0.8 > 0.1), (0.8 > 0.4): 3 / 4
  EXPECT_DOUBLE_EQ(*es::roc_auc(std::vector<double>{0.1, 0.4, 0.35, 0.8}, std::vector<float>{0, 0, 1, 1}), 0.75);
  // a tie between a positive and a negative counts 1/2: ranks 2.5 (tie), 2.5, 1, 4; R+ = 6.5,
  // (6.5 - 3) / 4 = 0.875
  EXPECT_DOUBLE_EQ(*es::roc_auc(std::vector<double>{0.5, 0.5, 0.2, 0.9}, std::vector<float>{1, 0, 0, 1}), 0.875);
  // three tied at 1 (ranks 1, 2, 3 -> 2 each) and two tied at 2 (4, 5 -> 4.5): R+ = 2 + 4.5 + 4.5
  // = 11, (11 - 6) / (3 x 2) = 5 / 6
  EXPECT_DOUBLE_EQ(*es::roc_auc(std::vector<double>{1, 1, 1, 2, 2}, std::vector<float>{0, 1, 0, 1, 1}), 5.0 / 6.0);
  // every score tied: 1/2; perfectly ordered: 1; reversed: 0
  EXPECT_DOUBLE_EQ(*es::roc_auc(std::vector<double>{3, 3, 3, 3}, std::vector<float>{1, 0, 1, 0}), 0.5);
  EXPECT_DOUBLE_EQ(*es::roc_auc(std::vector<double>{-1, 0, 5}, std::vector<float>{0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(*es::roc_auc(std::vector<double>{-1, 0, 5}, std::vector<float>{1, 1, 0}), 0.0);
  // one class only: undefined
  EXPECT_FALSE(es::roc_auc(std::vector<double>{1, 2}, std::vector<float>{1, 1}).has_value());
  EXPECT_FALSE(es::roc_auc(std::vector<double>{}, std::vector<float>{}).has_value());
}

TEST(RocAuc, EqualsThePairwiseCountWithManyTies) {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> level(0, 9);  // 10 score levels: ties everywhere
  std::bernoulli_distribution positive(0.3);
  std::vector<double> s(400);
  std::vector<float> y(400);
  for (size_t i = 0; i < s.size(); ++i) {
    y[i] = positive(rng) ? 1.0f : 0.0f;
    s[i] = 0.1 * level(rng) + 0.05 * y[i] * level(rng);  // positives a little higher
  }
  const auto auc = es::roc_auc(s, y);
  ASSERT_TRUE(auc.has_value());
  EXPECT_NEAR(*auc, held_out_pairwise_auc(s, y), 1e-12);
  EXPECT_GT(*auc, 0.5);
}

TEST(RocAuc, RefusesBadInput) {
  auto message = [](std::vector<double> s, std::vector<float> y) {
    try {
      es::roc_auc(s, y);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_EQ(message({1, 2}, {1}), "roc_auc: 2 scores but 1 labels");
  EXPECT_EQ(message({1, 2}, {1, 0.5f}), "roc_auc: label 1 is 0.5, not 0 or 1");
  EXPECT_EQ(message({std::nan(""), 2}, {1, 0}), "roc_auc: score 0 is NaN");
}

// A small DLRM with Criteo's 13 dense features (the teacher's linear part is learnable), two
// ranks, table_wise.
json held_out_spec() {
  return json::parse(R"({
    "name": "held_out",
    "tables": [
      {"name": "t0", "num_embeddings": 40, "embedding_dim": 4, "feature_names": ["f0"]},
      {"name": "t1", "num_embeddings": 200, "embedding_dim": 4, "feature_names": ["f1"]}
    ],
    "features": [{"name": "f0", "pooling_factor": 2}, {"name": "f1", "pooling_factor": 3}],
    "batch_size": 64, "steps": 30, "warmup_steps": 1, "seed": 5,
    "devices": {"count": 2, "memory_bytes": 67108864},
    "optimizer": {"type": "sgd", "learning_rate": 0.1},
    "dense": {"num_dense_features": 13, "bottom_mlp": [8], "interaction": "cat", "top_mlp": [8, 1]},
    "sharding": {"default": "table_wise"}
  })");
}

std::filesystem::path held_out_scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_held_out_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

// The run records loss and AUC of its own held-out logits; the trained model ranks the held-out
// samples better than the same model untrained.
TEST(HeldOut, RunRecordsTheFiguresOfItsLogits) {
  const es::WorkloadSpec spec = es::parse_workload(held_out_spec(), "held_out.json");
  es::TrainerOptions opt;
  opt.session_path = held_out_scratch("run.db").string();
  opt.session_overwrite = true;
  opt.held_out_batches = 3;
  const es::RunResult r = es::run_training(spec, es::plan_sharding(spec), opt);
  ASSERT_EQ(r.ended, es::RunEnd::complete) << r.error;
  ASSERT_TRUE(r.held_out.has_value()) << r.held_out_skipped;
  const es::HeldOutEval& e = *r.held_out;
  EXPECT_EQ(e.batches, 3);
  EXPECT_EQ(e.samples, 3 * 2 * 64);
  ASSERT_EQ(e.logits.size(), 384u);
  ASSERT_EQ(e.labels.size(), 384u);
  // the held-out labels are the generator's at iterations 2^40 + k, rank by rank
  const es::BatchGenerator gen(spec);
  EXPECT_EQ(std::vector<float>(e.labels.begin(), e.labels.begin() + 64), gen.make(int64_t{1} << 40, 0).labels);
  EXPECT_EQ(std::vector<float>(e.labels.begin() + 64, e.labels.begin() + 128), gen.make(int64_t{1} << 40, 1).labels);
  EXPECT_EQ(std::vector<float>(e.labels.end() - 64, e.labels.end()), gen.make((int64_t{1} << 40) + 2, 1).labels);
  int64_t positives = 0;
  double bce = 0;
  for (size_t i = 0; i < e.logits.size(); ++i) {
    const double z = e.logits[i], y = e.labels[i];
    positives += y == 1.0;
    bce += std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::abs(z)));  // BCE with logits, stable form
  }
  EXPECT_EQ(e.positives, positives);
  EXPECT_GT(positives, 0);
  EXPECT_NEAR(e.loss, bce / 384.0, 1e-6);
  ASSERT_TRUE(e.auc.has_value());
  EXPECT_NEAR(*e.auc, held_out_pairwise_auc(std::vector<double>(e.logits.begin(), e.logits.end()), e.labels), 1e-12);
  // the session says the same
  const embedscope::sessions::SessionReader reader(opt.session_path);
  const json h = json::parse(reader.meta(embedscope::sessions::meta::kHeldOutJson));
  EXPECT_EQ(h["samples"], 384);
  EXPECT_EQ(h["batches"], 3);
  EXPECT_EQ(h["positives"], positives);
  EXPECT_EQ(h["first_iteration"], int64_t{1} << 40);
  EXPECT_DOUBLE_EQ(h["auc"].get<double>(), *e.auc);
  EXPECT_DOUBLE_EQ(h["loss"].get<double>(), e.loss);
  // untrained: the initial rows and the initial dense parameters, on the same held-out batches
  std::vector<int64_t> dims{4, 4};
  const es::DenseModel initial(spec, dims);
  const es::HeldOutEval untrained = es::evaluate_held_out(
      spec, initial.params(),
      [&](int t, int64_t row, float* out) {
        es::init_shard(spec.seed, t, spec.tables[static_cast<size_t>(t)].num_embeddings, row, 1, 0, 4, out);
      },
      3);
  EXPECT_EQ(untrained.labels, e.labels);
  ASSERT_TRUE(untrained.auc.has_value());
  EXPECT_GT(*e.auc, *untrained.auc + 0.1) << "trained " << *e.auc << " vs untrained " << *untrained.auc;
  EXPECT_LT(e.loss, untrained.loss);
}

// Where the model cannot be evaluated the run says why (and the session), and 0 batches asks for none.
TEST(HeldOut, SkippedRunsSayWhy) {
  const es::WorkloadSpec spec = es::parse_workload(held_out_spec(), "held_out.json");
  es::TrainerOptions opt;
  opt.session_path = held_out_scratch("given.db").string();
  opt.session_overwrite = true;
  const es::BatchGenerator gen(spec);
  opt.batch_source = [&](int64_t it, int rank) -> std::optional<es::Batch> { return gen.make(it, rank); };
  const es::RunResult r = es::run_training(spec, es::plan_sharding(spec), opt);
  ASSERT_EQ(r.ended, es::RunEnd::complete) << r.error;
  EXPECT_FALSE(r.held_out.has_value());
  EXPECT_EQ(r.held_out_skipped, "the batches were given (a test's batch_source), not generated");
  EXPECT_EQ(embedscope::sessions::SessionReader(opt.session_path).meta(embedscope::sessions::meta::kHeldOutJson),
            R"({"skipped":"the batches were given (a test's batch_source), not generated"})");
  es::TrainerOptions none;
  none.session_path = held_out_scratch("none.db").string();
  none.session_overwrite = true;
  none.held_out_batches = 0;
  const es::RunResult n = es::run_training(spec, es::plan_sharding(spec), none);
  EXPECT_FALSE(n.held_out.has_value());
  EXPECT_EQ(n.held_out_skipped, "");
  EXPECT_EQ(embedscope::sessions::SessionReader(none.session_path).meta(embedscope::sessions::meta::kHeldOutJson, "absent"),
            "absent");
}

// The sharded run's evaluation reads every shard's rows where they are: the same logits as the
// evaluation of the unsharded reference's tables after the same steps, under every sharding
// type at once (row_wise with hot rows replicated, data_parallel, table_row_wise, column_wise), and with
// compressed tables (int8 rows row_wise, a hashed table column_wise, a low-rank data_parallel table
// with mean pooling).
TEST(HeldOutParity, ShardedRowsEqualTheReference) {
  for (int variant = 0; variant < 2; ++variant) {
    json j = held_out_spec();
    j["devices"]["count"] = 4;
    j["steps"] = 4;
    j["tables"].push_back({{"name", "t2"}, {"num_embeddings", 30}, {"embedding_dim", 4}, {"feature_names", {"f2"}}});
    j["tables"].push_back({{"name", "t3"}, {"num_embeddings", 50}, {"embedding_dim", 4}, {"feature_names", {"f3"}}});
    j["features"].push_back({{"name", "f2"}, {"pooling_factor", 2}});
    j["features"].push_back({{"name", "f3"}, {"pooling_factor", 1}});
    j["sharding"] = {{"local_world_size", 2},
                     {"tables",
                      {{"t0", variant == 0 ? json{{"type", "row_wise"}, {"hot_rows", {0, 1, 2, 7}}} : json{{"type", "row_wise"}}},
                       {"t1", {{"type", "column_wise"}, {"ranks", {2, 0}}}},
                       {"t2", {{"type", "data_parallel"}}},
                       {"t3", {{"type", "table_row_wise"}}}}}};
    if (variant == 1) {
      j["tables"][0]["data_type"] = "int8";
      j["tables"][1]["hash_size"] = 20;
      j["tables"][2]["low_rank_dim"] = 2;
      j["tables"][2]["pooling"] = "mean";
    }
    const es::WorkloadSpec spec = es::parse_workload(j, "held_out.json");
    const es::ShardingPlan plan = es::plan_sharding(spec);
    es::TrainerOptions opt;
    opt.held_out_batches = 2;
    const es::RunResult r = es::run_training(spec, plan, opt);
    ASSERT_EQ(r.ended, es::RunEnd::complete) << r.error;
    ASSERT_TRUE(r.held_out.has_value()) << r.held_out_skipped;
    const es::ReferenceResult ref = es::run_reference(spec, spec.warmup_steps + spec.steps, &plan);
    const es::HeldOutEval want = es::evaluate_held_out(
        spec, ref.dense_params,
        [&](int t, int64_t row, float* out) {
          const int64_t d = spec.tables[static_cast<size_t>(t)].embedding_dim;
          std::copy_n(ref.tables[static_cast<size_t>(t)].begin() + row * d, d, out);
        },
        2);
    ASSERT_EQ(r.held_out->logits.size(), want.logits.size());
    EXPECT_EQ(r.held_out->labels, want.labels);
    int reported = 0;
    for (size_t i = 0; i < want.logits.size(); ++i)
      if (std::abs(r.held_out->logits[i] - want.logits[i]) > 1e-3 + 1e-3 * std::abs(want.logits[i]) && reported++ < 5)
        ADD_FAILURE() << "variant " << variant << " logit " << i << ": sharded " << r.held_out->logits[i]
                      << " vs reference " << want.logits[i];
    EXPECT_NEAR(r.held_out->loss, want.loss, 1e-3) << "variant " << variant;
    EXPECT_NEAR(*r.held_out->auc, *want.auc, 0.01) << "variant " << variant;
  }
}

}  // namespace
