// One run of a teaching scenario headless and its figures (exec/scenario_run.h), an lm_embedding
// run's per-step progress (LmRunOptions::on_step), and the loader's find_scenario / with_steps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/exec/scenario_run.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/engine/workload/scenario.h"
#include "embedscope/engine/workload/spec_error.h"
#include "embedscope/sessions/store/session.h"

namespace {

namespace es = embedscope::engine;

std::filesystem::path scenario_run_scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("es_scenario_run_" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

std::string scenario_run_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const es::SpecError& e) {
    return e.what();
  }
  return "no error";
}

TEST(LmRunProgress, OnStepHearsEveryStepOfRankZeroInOrder) {
  es::LmWorkloadSpec spec = es::load_lm_preset("llama3_8b_embedding_scaled");
  spec.vocab_size = 64;
  spec.hidden_size = 8;
  spec.sequence_length = 8;
  spec.micro_batch_size = 2;
  spec.world_size = 2;
  spec.steps = 3;
  std::vector<es::StepProgress> seen;
  es::LmRunOptions opt;
  opt.on_step = [&](const es::StepProgress& p) { seen.push_back(p); };
  opt.session_path = (scenario_run_scratch() / "progress.db").string();
  opt.overwrite = true;
  const es::LmRunResult r = es::run_lm(spec, opt);
  ASSERT_EQ(seen.size(), 3u);
  ASSERT_EQ(r.step_ns.size(), 3u);
  // the progress is rank 0's, live (the summary's step_ns is the slowest rank's, known only at
  // the end): rank 0's steps rows
  std::vector<int64_t> rank0_ns;
  for (const auto& st : embedscope::sessions::SessionReader(opt.session_path).steps())
    if (st.rank == 0) rank0_ns.push_back(st.end_ns - st.start_ns);
  ASSERT_EQ(rank0_ns.size(), 3u);
  int64_t elapsed = 0;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(seen[i].step, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(seen[i].total_steps, 3);
    EXPECT_EQ(seen[i].warmup_done, 0);
    EXPECT_EQ(seen[i].loss, r.losses[i]);
    // vocab_parallel: the group's B = 2 sequences a step, over rank 0's steps so far
    EXPECT_GE(r.step_ns[i], rank0_ns[i]);
    elapsed += rank0_ns[i];
    const double seconds = static_cast<double>(elapsed) * 1e-9;
    EXPECT_DOUBLE_EQ(seen[i].samples_per_s, 2.0 * static_cast<double>(i + 1) / seconds);
    EXPECT_DOUBLE_EQ(seen[i].eta_s, seconds / static_cast<double>(i + 1) * static_cast<double>(2 - i));
  }
}

TEST(ScenarioLoader, WithStepsSetsEveryRunsStepsAndNamesABadValue) {
  const es::Scenario lm = es::with_steps(es::find_scenario("vocab_parallel_vs_sequence_parallel"), 3);
  ASSERT_EQ(lm.runs.size(), 4u);
  for (const auto& run : lm.runs) {
    ASSERT_TRUE(run.lm.has_value()) << run.label;
    EXPECT_EQ(run.lm->steps, 3);
    EXPECT_EQ(run.steps(), 3);
    EXPECT_EQ(run.workload.at("steps"), 3);
  }
  EXPECT_EQ(lm.runs[1].lm->sequence_parallel, true);  // the rest of each run is kept
  const es::Scenario dlrm = es::with_steps(es::find_scenario("row_wise_vs_table_wise"), 2);
  for (const auto& run : dlrm.runs) {
    EXPECT_FALSE(run.lm.has_value());
    EXPECT_EQ(run.spec.steps, 2);
  }
  EXPECT_EQ(scenario_run_error([&] { es::with_steps(lm, 0); }), "--steps: must be at least 1, got 0");
}

TEST(ScenarioLoader, FindScenarioNamesAnUnknownNameAndABadFile) {
  EXPECT_EQ(es::find_scenario("row_wise_vs_table_wise").id, "row_wise_vs_table_wise");
  const std::string unknown = scenario_run_error([] { es::find_scenario("nope"); });
  EXPECT_EQ(unknown.rfind("scenario nope: not a built-in scenario (built in: caching_vs_expandable, ", 0), 0u) << unknown;
  EXPECT_NE(unknown.find("vocab_parallel_vs_sequence_parallel) and no such file"), std::string::npos) << unknown;
  const std::string missing = (scenario_run_scratch() / "missing.json").string();
  EXPECT_EQ(scenario_run_error([&] { es::find_scenario(missing); }),
            missing + ": cannot open the scenario file: No such file or directory");
}

// A DLRM run of the tiny preset (2 ranks, 8 samples each, table_wise) through run_scenario_run:
// its figures are the session's, counted here from the session's own rows.
TEST(ScenarioRun, DlrmRunsFiguresAreItsSessionsOwn) {
  const nlohmann::json j = {
      {"id", "tiny_pair"}, {"title", "t"}, {"explanation", "e"},
      {"runs", {{{"label", "tw"}, {"preset", "tiny"}, {"overrides", {{"steps", 3}, {"warmup_steps", 1}}}},
                {{"label", "rw"}, {"preset", "tiny"},
                 {"overrides", {{"steps", 3}, {"warmup_steps", 1}, {"sharding", {{"default", "row_wise"}}}}}}}}};
  const es::Scenario s = es::parse_scenario(j, "tiny_pair.json");
  const std::string path = (scenario_run_scratch() / es::session_file_name(s, 0)).string();
  std::vector<int64_t> steps;
  es::ScenarioRunOptions opt;
  opt.session_path = path;
  opt.on_step = [&](const es::StepProgress& p) { steps.push_back(p.step); };
  const es::ScenarioRunOutcome out = es::run_scenario_run(s.runs[0], opt);
  EXPECT_EQ(out.ended, es::RunEnd::complete) << out.error;
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 1, 2, 3}));  // the warmup step reports 0
  const embedscope::sessions::SessionReader session(path);
  const es::ScenarioFigures f = es::scenario_figures(s.runs[0], session);
  EXPECT_EQ(f.ended, "complete");
  EXPECT_EQ(f.steps, 3);
  EXPECT_EQ(f.samples_per_step, 16);
  EXPECT_EQ(f.tokens_per_sample, 0);
  int64_t sent = 0;
  for (const auto& c : session.collectives())
    if (c.step >= 0) sent += c.bytes_sent;
  EXPECT_GT(sent, 0);
  EXPECT_EQ(f.bytes_sent, sent);
  EXPECT_DOUBLE_EQ(f.bytes_per_sample, static_cast<double>(sent) / 48.0);
  EXPECT_EQ(f.bytes_per_token, 0.0);
  EXPECT_GT(f.comm_share, 0.0);
  EXPECT_LT(f.comm_share, 1.0);
  EXPECT_GT(f.embedding_comm_share, 0.0);  // the all-to-alls of table_wise
  EXPECT_LE(f.embedding_comm_share, f.comm_share);
  EXPECT_GT(f.peak_allocated_bytes, 0);
  EXPECT_GE(f.peak_reserved_bytes, f.peak_allocated_bytes);
  EXPECT_EQ(f.final_loss, session.steps().back().loss);
  // the held-out AUC the run recorded (a complete cpu run is evaluated by default)
  const nlohmann::json held = nlohmann::json::parse(session.meta("held_out_json"));
  ASSERT_TRUE(held.contains("auc") && held["auc"].is_number()) << held.dump();
  ASSERT_TRUE(f.held_out_auc.has_value());
  EXPECT_EQ(*f.held_out_auc, held["auc"].get<double>());
  // an existing session is refused before the run
  EXPECT_THROW(es::run_scenario_run(s.runs[0], opt), embedscope::sessions::SessionError);
}

}  // namespace
