// tester46 F21: a pipelined run's last measured steps drain its pipeline (no next batch to start:
// sparse_dist its last 1, semi_sync its last 2) and are shorter than a steady step; they stay
// recorded but are left out of the step-time statistics and the throughput.
// tester46 F13: one median everywhere, the nearest-rank p50 (the lower middle of an even count).
// The step times are those of `run --preset criteo_kaggle --simulate h100_sxm --pipeline semi_sync
// --steps 6 --warmup-steps 1` (slowest rank per step, ns): steps 0-3 215,833, step 4 138,604,
// step 5 124,694; warm-up step -1 467,594.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/stats.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace ss = embedscope::sessions;

const std::vector<int64_t> kFixb46Steps{215'833, 215'833, 215'833, 215'833, 138'604, 124'694};

// A one-rank session of the steps above (warm-up step -1 first), pipeline `pipeline` recorded as
// the run records it (metadata `pipeline`) or only in workload_json (`in_meta` false).
std::string fixb46_session(const std::string& name, const std::string& pipeline, bool in_meta) {
  const auto p = std::filesystem::temp_directory_path() / ("es_fixb46_" + name + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(p);
  ss::SessionWriter w(p.string());
  w.set_metadata(ss::meta::kWorkloadName, "criteo_kaggle");
  w.set_metadata(ss::meta::kWorkloadJson, R"({"name":"criteo_kaggle","steps":6,"warmup_steps":1,"pipeline":")" + pipeline + "\"}");
  if (in_meta) w.set_metadata(ss::meta::kPipeline, pipeline);
  w.set_metadata(ss::meta::kWorldSize, "1");
  w.set_metadata(ss::meta::kSamplesPerStep, "2048");
  int64_t t = 0;
  w.add_step({-1, 0, t, t + 467'594, 0.5, 0, 0});
  t += 467'594;
  for (size_t s = 0; s < kFixb46Steps.size(); ++s) {
    w.add_step({static_cast<int64_t>(s), 0, t, t + kFixb46Steps[s], 0.5, 0, 0});
    t += kFixb46Steps[s];
  }
  w.close("complete");
  return p.string();
}
}  // namespace

TEST(Fixb46SteadySteps, DrainStepsPerPipeline) {
  EXPECT_EQ(ss::pipeline_drain_steps("base"), 0);
  EXPECT_EQ(ss::pipeline_drain_steps(""), 0);
  EXPECT_EQ(ss::pipeline_drain_steps("sparse_dist"), 1);
  EXPECT_EQ(ss::pipeline_drain_steps("semi_sync"), 2);
}

TEST(Fixb46SteadySteps, TheLastDrainStepsAreNotCounted) {
  const auto s = ss::steady_state_steps(kFixb46Steps, 2);
  EXPECT_EQ(s.counted, (std::vector<int64_t>{215'833, 215'833, 215'833, 215'833}));
  EXPECT_EQ(s.drain_left_out, 2);
  EXPECT_FALSE(s.all_drain);
  // every step drains: all counted, said
  const auto all = ss::steady_state_steps({138'604, 124'694}, 2);
  EXPECT_EQ(all.counted.size(), 2u);
  EXPECT_EQ(all.drain_left_out, 0);
  EXPECT_TRUE(all.all_drain);
  EXPECT_EQ(ss::steady_state_steps(kFixb46Steps, 0).counted, kFixb46Steps);
  // no measured step (a run cancelled in its warmup): nothing left out, no drain, no throw
  const auto none = ss::steady_state_steps({}, 2);
  EXPECT_TRUE(none.counted.empty());
  EXPECT_EQ(none.drain_left_out, 0);
  EXPECT_FALSE(none.all_drain);
  EXPECT_EQ(ss::drain_steps_text("semi_sync", 6, 2, false),
            "  (steps 4-5 drain the semi_sync pipeline: recorded, not in the step times, throughput, overlap, exposed "
            "communication, critical path or collective times; 4 of 6 measured steps counted)\n");
  EXPECT_EQ(ss::drain_steps_text("sparse_dist", 6, 1, false),
            "  (step 5 drains the sparse_dist pipeline: recorded, not in the step times, throughput, overlap, exposed "
            "communication, critical path or collective times; 5 of 6 measured steps counted)\n");
  EXPECT_EQ(ss::drain_steps_text("base", 6, 0, false), "");
}

TEST(Fixb46SteadySteps, StatsOfASemiSyncSessionCountItsSteadySteps) {
  const std::string path = fixb46_session("semi", "semi_sync", true);
  const ss::RunStats st = ss::analyze(ss::SessionReader(path));
  EXPECT_EQ(st.steps, 6);  // recorded
  EXPECT_EQ(st.pipeline, "semi_sync");
  EXPECT_EQ(st.drain_steps, 2);
  EXPECT_EQ(st.step_time_ns.count, 4);
  EXPECT_DOUBLE_EQ(st.step_time_ns.mean, 215'833.0);  // was (4 x 215,833 + 138,604 + 124,694) / 6 = 187,766.5
  EXPECT_EQ(st.step_time_ns.min, 215'833);
  EXPECT_DOUBLE_EQ(st.samples_per_s, 2048.0 / 215'833e-9);
  ASSERT_EQ(st.per_step.size(), 6u);
  for (size_t s = 0; s < 6; ++s) EXPECT_EQ(st.per_step[s].drain, s >= 4) << "step " << s;
  std::filesystem::remove(path);
}

TEST(Fixb46SteadySteps, SparseDistFromTheWorkloadJsonLeavesOutOneStep) {
  const std::string path = fixb46_session("sparse", "sparse_dist", false);  // an older session: no pipeline key
  const ss::RunStats st = ss::analyze(ss::SessionReader(path));
  EXPECT_EQ(st.drain_steps, 1);
  EXPECT_EQ(st.step_time_ns.count, 5);
  EXPECT_DOUBLE_EQ(st.step_time_ns.mean, (4 * 215'833.0 + 138'604.0) / 5);  // 200,387.2
  EXPECT_EQ(st.step_time_ns.p50, 215'833);   // 3rd of 5 sorted
  EXPECT_EQ(st.step_time_ns.min, 138'604);
  std::filesystem::remove(path);
}

TEST(Fixb46SteadySteps, ABaseSessionCountsEveryStep) {
  const std::string path = fixb46_session("base", "base", true);
  const ss::RunStats st = ss::analyze(ss::SessionReader(path));
  EXPECT_EQ(st.drain_steps, 0);
  EXPECT_EQ(st.step_time_ns.count, 6);
  EXPECT_EQ(st.step_time_ns.p50, 215'833);
  EXPECT_EQ(st.step_time_ns.min, 124'694);
  std::filesystem::remove(path);
}

TEST(Fixb46Median, TheLowerMiddleOfAnEvenCount) {
  // tester46 F13's session: the slowest rank per step, ms x 100; stats' p50 is the 3rd of 6
  EXPECT_EQ(ss::median_nearest_rank({33'811, 25'740, 35'057, 27'715, 34'999, 27'919}), 27'919);
  EXPECT_EQ(ss::median_nearest_rank({3, 1, 2}), 2);
  EXPECT_EQ(ss::median_nearest_rank({}), 0);
}
