// The storage trade-offs of a scenario's runs (core/tradeoff_figures.h), without Qt: figures of
// sessions written with known bytes, losses, step times and peaks (support/tradeoff_sessions.h).
#include <gtest/gtest.h>

#include "core/tradeoff_figures.h"
#include "embedscope/engine/workload/scenario.h"
#include "ui/support/tradeoff_sessions.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
TradeoffComparison tradeoff_figures_study() {
  const std::vector<std::string> paths = tradeoff_fixtures::tradeoff_study();
  const std::vector<std::string> labels = {"fp16 rows", "FP32", "hash", "shared"};
  std::vector<TradeoffRun> runs;
  for (size_t i = 0; i < paths.size(); ++i) runs.push_back(tradeoff_run(labels[i], sessions::SessionReader(paths[i])));
  return compare_tradeoffs(std::move(runs));
}
}  // namespace

TEST(TradeoffFigures, EachRunsBytesLossTimeAndErrorAgainstTheFp32Run) {
  const TradeoffComparison c = tradeoff_figures_study();
  ASSERT_EQ(c.runs.size(), 4u);
  EXPECT_EQ(c.reference, 1u);  // labelled fp32 (any case), though not first
  EXPECT_EQ(c.loss_steps, 2);  // hash measured 2 steps; shared none (not counted)

  const TradeoffRun& fp16 = c.runs[0];
  EXPECT_EQ(fp16.technique, "fp16 rows");
  EXPECT_EQ(fp16.tables, 2);
  EXPECT_EQ(fp16.weight_bytes, 8'000'000);
  EXPECT_EQ(fp16.optimizer_state_bytes, 32'000'000);
  EXPECT_EQ(fp16.table_bytes(), 40'000'000);
  EXPECT_EQ(fp16.peak_allocated_bytes, 44'000'000);
  EXPECT_EQ(fp16.peak_rank, 0);
  EXPECT_EQ(fp16.steps, 3);
  EXPECT_DOUBLE_EQ(fp16.step_mean_ns, 10e6);  // the slowest rank's window, warm-up (100 ms) ignored
  EXPECT_TRUE(fp16.has_loss);
  EXPECT_DOUBLE_EQ(fp16.loss, 0.61);          // after 2 steps, not the last (0.51)
  EXPECT_NEAR(fp16.loss_delta, 0.01, 1e-12);
  EXPECT_NEAR(fp16.loss_relative, 0.01 / 0.60, 1e-12);
  EXPECT_DOUBLE_EQ(fp16.max_abs_error, 0.002);  // the worst table
  EXPECT_DOUBLE_EQ(fp16.relative_error, 0.03);
  EXPECT_DOUBLE_EQ(c.table_bytes_ratio(0), 40.0 / 48.0);
  EXPECT_DOUBLE_EQ(c.peak_ratio(0), 44.0 / 50.0);
  EXPECT_DOUBLE_EQ(c.step_time_ratio(0), 10.0 / 14.0);
  EXPECT_TRUE(fp16.has_held_out);  // held_out_json
  EXPECT_DOUBLE_EQ(fp16.held_out_auc, 0.72);
  EXPECT_DOUBLE_EQ(fp16.held_out_loss, 0.52);
  EXPECT_EQ(fp16.held_out_samples, 64);
  EXPECT_NEAR(fp16.held_out_auc_delta, 0.72 - 0.725, 1e-12);
  EXPECT_NEAR(fp16.held_out_auc_se, 0.0792991993, 1e-9);  // Hanley-McNeil, 16 positives, 48 negatives (tester42 F5)
  EXPECT_NEAR(fp16.held_out_auc_delta_se, 0.1118747275, 1e-9);
  EXPECT_TRUE(fp16.held_out_auc_delta_within_noise);

  const TradeoffRun& fp32 = c.runs[1];
  EXPECT_EQ(fp32.technique, "fp32");
  EXPECT_EQ(fp32.table_bytes(), 48'000'000);
  EXPECT_EQ(fp32.peak_allocated_bytes, 50'000'000);
  EXPECT_EQ(fp32.peak_rank, 1);
  EXPECT_DOUBLE_EQ(fp32.step_mean_ns, 14e6);  // (12 + 14 + 16) / 3 ms
  EXPECT_DOUBLE_EQ(fp32.loss, 0.60);
  EXPECT_EQ(fp32.loss_delta, 0);
  EXPECT_EQ(fp32.max_abs_error, 0);
  EXPECT_DOUBLE_EQ(c.table_bytes_ratio(1), 1.0);
  EXPECT_DOUBLE_EQ(fp32.held_out_auc, 0.725);
  EXPECT_EQ(fp32.held_out_auc_delta, 0);

  const TradeoffRun& hash = c.runs[2];
  EXPECT_EQ(hash.technique, "hash 1,000 rows (1 of 2 tables)");
  EXPECT_EQ(hash.table_bytes(), 41'000'000);
  EXPECT_EQ(hash.hash_collisions, 30);
  EXPECT_DOUBLE_EQ(hash.collisions_per_step(), 15.0);
  EXPECT_DOUBLE_EQ(hash.step_mean_ns, 12e6);
  EXPECT_DOUBLE_EQ(hash.loss, 0.58);
  EXPECT_NEAR(hash.loss_delta, -0.02, 1e-12);
  EXPECT_NEAR(hash.loss_relative, -0.02 / 0.60, 1e-12);
  EXPECT_FALSE(hash.has_held_out);  // "auc": null (one class): no AUC to compare
  EXPECT_EQ(hash.held_out_auc_delta, 0);

  const TradeoffRun& shared = c.runs[3];
  EXPECT_EQ(shared.technique, "1 table shared");
  EXPECT_EQ(shared.ended, "crashed");
  EXPECT_EQ(shared.tables, 1);
  EXPECT_EQ(shared.table_bytes(), 24'000'000);  // stored once
  EXPECT_EQ(shared.steps, 0);
  EXPECT_FALSE(shared.has_loss);
  EXPECT_EQ(shared.loss_delta, 0);
  EXPECT_EQ(shared.step_mean_ns, 0);
  EXPECT_EQ(shared.peak_allocated_bytes, 5'000'000);  // its memory counters still count
  EXPECT_FALSE(shared.has_held_out);  // no held_out_json
}

TEST(TradeoffFigures, WithoutAnFp32LabelTheFirstRunIsTheReference) {
  const std::vector<std::string> paths = tradeoff_fixtures::tradeoff_study();
  std::vector<TradeoffRun> runs = {tradeoff_run("hash", sessions::SessionReader(paths[2])),
                                   tradeoff_run("fp16", sessions::SessionReader(paths[0]))};
  const TradeoffComparison c = compare_tradeoffs(std::move(runs));
  EXPECT_EQ(c.reference, 0u);
  EXPECT_EQ(c.loss_steps, 2);
  EXPECT_NEAR(c.runs[1].loss_delta, 0.61 - 0.58, 1e-12);
  EXPECT_DOUBLE_EQ(c.table_bytes_ratio(1), 40.0 / 41.0);
}

TEST(TradeoffFigures, ASessionWithoutTableStorageSaysSo) {
  const auto path = tradeoff_fixtures::tradeoff_session("nostorage", "not json", "", {{5'000'000, 6'000'000, 0.4}},
                                                        {1000, 2000}, "complete");
  const TradeoffRun r = tradeoff_run("old", sessions::SessionReader(path));
  EXPECT_FALSE(r.has_storage);
  EXPECT_EQ(r.technique, "no table storage recorded");
  EXPECT_EQ(r.table_bytes(), 0);
  EXPECT_DOUBLE_EQ(r.step_mean_ns, 6e6);
  EXPECT_EQ(r.peak_rank, 1);
  const TradeoffComparison c = compare_tradeoffs({});
  EXPECT_TRUE(c.runs.empty());
  EXPECT_EQ(c.loss_steps, 0);
}

TEST(TradeoffFigures, OnlyScenariosWhoseRunsStoreTablesDifferentlyQualify) {
  int seen = 0;
  for (const engine::Scenario& sc : engine::builtin_scenarios()) {
    if (sc.id == "compression") {
      EXPECT_TRUE(runs_differ_in_table_storage(sc));
      ++seen;
    }
    if (sc.id == "communication_storm") {  // same tables, different networks
      EXPECT_FALSE(runs_differ_in_table_storage(sc));
      engine::Scenario changed = sc;
      changed.runs[1].spec.tables[0].data_type = engine::TableDataType::int8;
      EXPECT_TRUE(runs_differ_in_table_storage(changed));
      changed = sc;
      changed.runs[1].spec.tables[0].hash_size = 10;
      EXPECT_TRUE(runs_differ_in_table_storage(changed));
      changed.runs.resize(1);  // one run compares with nothing
      EXPECT_FALSE(runs_differ_in_table_storage(changed));
      ++seen;
    }
  }
  EXPECT_EQ(seen, 2);
}

// Stochastic rounding (TableSpec::stochastic_rounding, issue 16) is part of how a run stores its
// tables: named in the technique, and a difference that qualifies a scenario.
TEST(TradeoffFigures, StochasticRoundingIsPartOfTheTechnique) {
  const std::string storage =
      R"([{"table": "t0", "data_type": "int4", "stochastic_rounding": true, "optimizer_state_type": "fp32",
           "weight_bytes": [1200, 0], "optimizer_state_bytes": [0, 0], "master_copy_bytes": 0, "max_abs_error": 0.01,
           "relative_error": 0.1, "hash_size": 0, "low_rank_dim": 0, "hash_collisions": 0},
          {"table": "t1", "data_type": "fp32", "stochastic_rounding": false, "optimizer_state_type": "fp32",
           "weight_bytes": [0, 1200], "optimizer_state_bytes": [0, 0], "master_copy_bytes": 0, "max_abs_error": 0.02,
           "relative_error": 0.05, "hash_size": 0, "low_rank_dim": 0, "hash_collisions": 0}])";
  const std::string path = tradeoff_fixtures::tradeoff_session("int4_sr", storage, "", {{10'000'000, 10'000'000, 0.7}},
                                                               {3000, 3000}, "complete");
  const TradeoffRun r = tradeoff_run("int4", sessions::SessionReader(path));
  EXPECT_EQ(r.technique, "int4 rows, stochastic rounding (1 of 2 tables)");
  EXPECT_EQ(r.weight_bytes, 2400);
  EXPECT_DOUBLE_EQ(r.relative_error, 0.1);
  std::filesystem::remove(path);
  for (const engine::Scenario& sc : engine::builtin_scenarios()) {
    if (sc.id != "communication_storm") continue;
    engine::Scenario changed = sc;
    for (auto& run : changed.runs)
      for (auto& t : run.spec.tables) t.data_type = engine::TableDataType::fp16;
    EXPECT_FALSE(runs_differ_in_table_storage(changed));
    changed.runs[1].spec.tables[0].stochastic_rounding = true;  // fp16 rows rounded stochastically
    EXPECT_TRUE(runs_differ_in_table_storage(changed));
  }
}
