// Training from Criteo files: criteo_kaggle's shape on 4 cpu ranks from a generated file
// against the unsharded reference fed by the test's own batches (criteo_support.h builds them
// from the generator's records, not through the reader); the malformed-line counters in the
// run and the session; out-of-range ids from a file through each invalid_ids policy.
#include <gtest/gtest.h>

#include <sqlite3.h>

#include "../parity_check.h"
#include "criteo_support.h"
#include "embedscope/engine/input/criteo.h"
#include "embedscope/sessions/model/metadata_keys.h"

using namespace embedscope::engine;
using namespace embedscope::engine::criteo_test;
namespace ts = embedscope::test_support;

namespace {
std::string metadata(const std::string& db, const char* key) {
  sqlite3* h = nullptr;
  sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(h, "SELECT value FROM metadata WHERE key = ?", -1, &st, nullptr);
  sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
  std::string v = "(absent)";
  if (sqlite3_step(st) == SQLITE_ROW) v = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}
}  // namespace

// criteo_kaggle (26 tables cut to 300 rows, its dense part and SGD) from a generated gzip file
// with empty fields, table_wise / row_wise / column_wise mixed, on 4 ranks: forward outputs,
// tables, dense parameters and losses equal the reference's on the same samples.
TEST(CriteoParity, CriteoKaggleFromAFileOnFourRanksMatchesTheReference) {
  Scratch dir("criteo_parity");
  ts::CriteoFixtureOptions o;
  o.lines = 3 * 4 * 8;  // 3 steps x 4 ranks x 8 samples
  o.empty_share = 0.15;
  o.alpha = 1.1;
  o.distinct = 400;
  o.gzip = true;
  const auto records = ts::write_criteo_fixture(dir / "train.tsv.gz", o);
  WorkloadSpec spec = criteo_spec({dir / "train.tsv.gz"}, 4, 8, 300);
  spec.optimizer.learning_rate = spec.optimizer.dense_learning_rate = 0.5;  // moves the tables visibly in 3 steps
  spec.sharding.per_table["t_cat_2"] = {ShardingType::row_wise, {}, -1};
  spec.sharding.per_table["t_cat_3"] = {ShardingType::column_wise, {1, 3}, -1};
  spec.sharding.per_table["t_cat_5"] = {ShardingType::data_parallel, {}, -1};
  validate(spec, "test");

  parity::Captured cap;
  TrainerOptions opt;
  opt.keep_tables = true;
  opt.trace = false;
  opt.on_pooled = [&](int rank, int64_t it, int f, const float* p, int64_t B, int64_t dim) {
    std::lock_guard<std::mutex> lock(cap.mu);
    cap.pooled[{it, rank, f}] = std::vector<float>(p, p + B * dim);
  };
  const RunResult run = run_training(spec, plan_sharding(spec), opt);  // reads the file
  ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
  const ReferenceResult ref = run_reference(spec, spec.steps, &run.plan, [&](int64_t it, int r) -> std::optional<Batch> {
    return expected_batch(spec, records, it, r);
  });
  ASSERT_EQ(cap.pooled.size(), static_cast<size_t>(3 * 4 * 26));
  for (int64_t it = 0; it < 3; ++it)
    for (int r = 0; r < 4; ++r)
      for (int f = 0; f < 26; ++f)
        parity::expect_close(cap.pooled[{it, r, f}], ref.pooled[static_cast<size_t>(it)][static_cast<size_t>(r)][static_cast<size_t>(f)],
                             fmt::format("forward step {} rank {} feature {}", it, r, f));
  ASSERT_EQ(run.tables.size(), ref.tables.size());
  double moved = 0;
  for (size_t t = 0; t < ref.tables.size(); ++t) {
    parity::expect_close(run.tables[t], ref.tables[t], "table " + spec.tables[t].name);
    for (size_t i = 0; i < ref.tables[t].size(); ++i) {
      const int64_t D = spec.tables[t].embedding_dim;
      moved += std::abs(ref.tables[t][i] - initial_weight(spec.seed, static_cast<int>(t), static_cast<int64_t>(i) / D,
                                                          static_cast<int64_t>(i) % D, spec.tables[t].num_embeddings));
    }
  }
  EXPECT_GT(moved, 1e-3);
  parity::expect_close(run.dense_params, ref.dense_params, "dense parameters");
  ASSERT_EQ(run.loss.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(run.loss[i], ref.loss[i], 1e-5) << "loss step " << i;
  // the loss is BCE on the file's labels: at the first step the model is near chance, so the
  // mean BCE lies near the entropy of the labels' share of positives, not at ln 2 exactly
  EXPECT_GT(run.loss[0], 0.3);
  EXPECT_LT(run.loss[0], 1.2);
}

TEST(CriteoRun, SkippedLinesAreCountedPerStepInTheRunAndTheSession) {
  Scratch dir("criteo_skip");
  ts::CriteoFixtureOptions o;
  o.lines = 2 * 2 * 4;
  o.malformed_at = {1, 12};  // before sample 1 (rank 0, step 0) and sample 11 (rank 0, step 1)
  ts::write_criteo_fixture(dir / "skip.tsv", o);
  WorkloadSpec spec = criteo_spec({dir / "skip.tsv"}, 2, 4, 100);
  spec.steps = 2;
  spec.input.malformed_lines = MalformedLinePolicy::skip;
  TrainerOptions opt;
  opt.trace = false;
  opt.session_path = dir / "skip.db";
  const RunResult run = run_training(spec, plan_sharding(spec), opt);
  ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
  EXPECT_EQ(run.skipped_lines_per_step, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(run.ranks[0].skipped_lines, 2);  // both bad lines come before samples of rank 0
  EXPECT_EQ(run.ranks[1].skipped_lines, 0);
  EXPECT_EQ(metadata(dir / "skip.db", embedscope::sessions::meta::kInputSkippedLines), "2");
  EXPECT_EQ(metadata(dir / "skip.db", embedscope::sessions::meta::kInputSkippedLinesPerStepJson), "[1,1]");
}

// tester49 F11: both are found before anything runs (the run reads its lines once up front).
TEST(CriteoRun, MalformedLineOrShortFileIsRefusedBeforeTheRun) {
  Scratch dir("criteo_badrun");
  ts::CriteoFixtureOptions o;
  o.lines = 10;
  o.malformed_at = {6};
  ts::write_criteo_fixture(dir / "bad.tsv", o);
  WorkloadSpec spec = criteo_spec({dir / "bad.tsv"}, 2, 2, 100);
  TrainerOptions opt;
  opt.trace = false;
  auto refusal = [&] {
    try {
      run_training(spec, plan_sharding(spec), opt);
    } catch (const InputFileError& e) {
      return std::string(e.what());
    }
    return std::string("(not refused)");
  };
  std::string error = refusal();
  EXPECT_NE(error.find((dir / "bad.tsv") + ": line 7: field 17 (C3)"), std::string::npos) << error;
  spec.input.malformed_lines = MalformedLinePolicy::skip;
  spec.steps = 4;  // needs 16 samples, the file holds 10
  error = refusal();
  EXPECT_NE(error.find("the run needs 16 samples"), std::string::npos) << error;
  EXPECT_NE(error.find("the files hold 10"), std::string::npos) << error;
  spec.steps = 2;  // 8 samples: the 10 valid lines are enough, the malformed one skipped
  EXPECT_EQ(run_training(spec, plan_sharding(spec), opt).ended, RunEnd::complete);
  // a missing file is refused before anything runs
  spec.input.paths = {dir / "missing.tsv"};
  EXPECT_THROW(run_training(spec, plan_sharding(spec), opt), InputFileError);
}

// categorical raw: the file's values are the ids, so ids outside a table reach invalid_ids.
TEST(CriteoRun, OutOfRangeIdsFromAFileGoThroughTheInvalidIdPolicy) {
  Scratch dir("criteo_raw");
  ts::CriteoFixtureOptions o;
  o.lines = 2 * 2 * 3;
  o.distinct = 40;  // values k * 2654435761 + 17: all but 17 (k = 0) are outside every table
  o.empty_share = 0.2;
  const auto records = ts::write_criteo_fixture(dir / "raw.tsv", o);
  WorkloadSpec spec = criteo_spec({dir / "raw.tsv"}, 2, 3, 100);
  spec.steps = 2;
  spec.input.categorical = CategoricalMapping::raw;
  int64_t outside = 0;  // counted from the generator's records
  auto bad = [&](const std::optional<uint64_t>& c, size_t f) {  // tables of 3 .. 100 rows
    return c && *c >= static_cast<uint64_t>(spec.tables[f].num_embeddings);
  };
  for (const auto& r : records)
    for (size_t f = 0; f < 26; ++f) outside += bad(r.cat[f], f);
  ASSERT_GT(outside, 0);
  // what the error of rank r's batch 0 (samples 3r..3r+2, lines 3r+1..3r+3) must say: its first
  // feature with an id outside the table and that feature's first such id
  auto expected_error = [&](int r) {
    for (size_t f = 0; f < 26; ++f)
      for (size_t i = static_cast<size_t>(3 * r); i < static_cast<size_t>(3 * r + 3); ++i)
        if (bad(records[i].cat[f], f))
          return fmt::format("{}: batch 0 (lines {}-{}), rank {}: feature '{}': ", dir / "raw.tsv", 3 * r + 1, 3 * r + 3, r,
                             spec.features[f].name) +
                 "|e.g. " + std::to_string(*records[i].cat[f]);
    return std::string("(no bad id)");
  };
  TrainerOptions opt;
  opt.trace = false;
  spec.invalid_ids = InvalidIdPolicy::error;
  RunResult run = run_training(spec, plan_sharding(spec), opt);
  EXPECT_EQ(run.ended, RunEnd::bad_input);
  EXPECT_TRUE(run.bad_input);
  bool matched = false;
  for (int r : {0, 1}) {
    const std::string e = expected_error(r);
    const std::string head = e.substr(0, e.find('|')), example = e.substr(e.find('|') + 1);
    matched = matched || (run.error.rfind(head, 0) == 0 && run.error.find(example) != std::string::npos);
  }
  EXPECT_TRUE(matched) << run.error << "\nexpected " << expected_error(0) << " or " << expected_error(1);
  for (InvalidIdPolicy p : {InvalidIdPolicy::clamp, InvalidIdPolicy::drop}) {
    spec.invalid_ids = p;
    run = run_training(spec, plan_sharding(spec), opt);
    ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
    EXPECT_EQ(run.ranks[0].invalid_ids + run.ranks[1].invalid_ids, outside) << to_string(p);
  }
}
