// The hot_table_straggler teaching scenario trains sensibly: its lesson is step time, but a class
// that reads the loss column must see a model that learns. Its greedy run (the workload of all
// three runs; only the placement differs), as `embedscope scenario` runs it, 6 of its 10 steps:
// every step's loss is finite and below 1 (binary cross-entropy of a coin is ln 2 = 0.693), and
// the last is below the first. With 32-id sum bags of its hot tables, the first rowwise_adagrad
// step moved every touched element by about the learning rate (0.05), so a hot bag's pooled
// vector reached a norm of ~9 and the dot interaction's logits exploded: losses 5.06, 36.16,
// 7.75, 5.12, 0.60, 0.57, held-out AUC 0.502.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/exec/scenario_run.h"
#include "embedscope/engine/workload/scenario.h"

namespace es = embedscope::engine;

TEST(StragglerScenarioTrains, GreedyRunLossStaysFiniteAndFalls) {
  es::Scenario s = es::find_scenario("hot_table_straggler");
  ASSERT_EQ(s.runs.size(), 3u);
  es::ScenarioRun run = s.runs[0];
  ASSERT_EQ(run.label, "greedy");
  run.spec.steps = 6;
  const auto dir = std::filesystem::temp_directory_path() / ("es_straggler_trains_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  es::ScenarioRunOptions opt;
  opt.session_path = (dir / "greedy.db").string();
  opt.overwrite = true;
  std::vector<double> loss;
  opt.on_step = [&](const es::StepProgress& p) {
    if (p.step > 0) loss.push_back(p.loss);
  };
  const es::ScenarioRunOutcome out = es::run_scenario_run(run, opt);
  ASSERT_EQ(out.ended, es::RunEnd::complete) << out.error;
  ASSERT_EQ(loss.size(), 6u);
  for (size_t i = 0; i < loss.size(); ++i) {
    EXPECT_TRUE(std::isfinite(loss[i])) << "step " << i;
    EXPECT_LT(loss[i], 1.0) << "step " << i;
  }
  EXPECT_LT(loss.back(), loss.front());
  std::filesystem::remove_all(dir);
}
