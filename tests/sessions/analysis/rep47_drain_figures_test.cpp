// tester46 F21 (rest): a pipelined run's drain steps were left out of the step times but not of
// the overlap, the exposed communication, the ranks' compute / comm and the critical path; they
// are now left out of every time figure (kept in per_step and critical_paths, marked drain).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace rep47ss = embedscope::sessions;

// One rank, semi_sync (its last 2 steps drain), 6 measured steps. Steps 0-3: window [100s,
// 100s + 100), compute [100s, 100s + 100), comm [100s + 50, 100s + 100) (hidden: 50 ns overlap).
// Drain steps 4-5: window [100s, 100s + 40), comm alone [100s, 100s + 40) (exposed).
std::string rep47_drain_session(const std::string& pipeline) {
  const auto p = std::filesystem::temp_directory_path() / ("es_rep47_drain_" + pipeline + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(p);
  rep47ss::SessionWriter w(p.string());
  w.set_metadata(rep47ss::meta::kPipeline, pipeline);
  w.set_metadata(rep47ss::meta::kWorldSize, "1");
  w.set_metadata(rep47ss::meta::kSamplesPerStep, "100");
  using rep47ss::Lane;
  using rep47ss::OpCategory;
  for (int64_t s = 0; s < 6; ++s) {
    const int64_t t = 100 * s;
    if (s < 4) {
      w.add_ops({{0, Lane::compute, OpCategory::dense, "dense", s, t, t + 100},
                 {0, Lane::comm, OpCategory::comm, "all_to_all", s, t + 50, t + 100}});
      w.add_step({s, 0, t, t + 100, 0.5, 0, 0});
    } else {
      w.add_ops({{0, Lane::comm, OpCategory::comm, "all_to_all", s, t, t + 40}});
      w.add_step({s, 0, t, t + 40, 0.5, 0, 0});
    }
  }
  w.close("complete");
  return p.string();
}
}  // namespace

TEST(Rep47DrainFigures, DrainStepsAreInNoTimeFigure) {
  const std::string path = rep47_drain_session("semi_sync");
  const rep47ss::RunStats st = rep47ss::analyze(rep47ss::SessionReader(path));
  EXPECT_EQ(st.drain_steps, 2);
  EXPECT_EQ(st.step_time_ns.count, 4);
  EXPECT_DOUBLE_EQ(st.overlap_pct, 100.0);  // with the drain: 200 / 280 = 71.4 %
  EXPECT_EQ(st.exposed_comm_ns, 0);         // with the drain: 80
  ASSERT_EQ(st.ranks.size(), 1u);
  EXPECT_EQ(st.ranks[0].comm_ns, 200);      // 4 x 50 (with the drain 280)
  EXPECT_EQ(st.ranks[0].compute_ns, 400);
  EXPECT_EQ(st.ranks[0].window_ns, 400);    // with the drain 480
  EXPECT_EQ(st.critical_path_ns, 400);      // steps 0-3's paths, 100 each (with the drain 480)
  EXPECT_EQ(st.critical_paths.size(), 6u);  // every step's path is kept
  ASSERT_EQ(st.per_step.size(), 6u);        // and its row, marked
  EXPECT_TRUE(st.per_step[4].drain);
  EXPECT_EQ(st.per_step[4].exposed_comm_ns, 40);
  std::filesystem::remove(path);
}

TEST(Rep47DrainFigures, ABaseRunCountsEveryStep) {
  const std::string path = rep47_drain_session("base");
  const rep47ss::RunStats st = rep47ss::analyze(rep47ss::SessionReader(path));
  EXPECT_EQ(st.drain_steps, 0);
  EXPECT_NEAR(st.overlap_pct, 100.0 * 200 / 280, 1e-9);
  EXPECT_EQ(st.exposed_comm_ns, 80);
  EXPECT_EQ(st.critical_path_ns, 480);
  std::filesystem::remove(path);
}

// retest47 R5: the per-step figures are divided by the steps they cover (4 counted), not by the 6
// measured: the collectives' rows hold steps 0-3 only (one all_to_all of 50 ns each), and compare's
// exposed communication per step is the total over the counted steps.
TEST(Rep47DrainFigures, PerStepFiguresDivideByTheCountedSteps) {
  const std::string path = rep47_drain_session("semi_sync");
  const rep47ss::RunStats st = rep47ss::analyze(rep47ss::SessionReader(path));
  EXPECT_EQ(st.counted_steps(), 4);
  ASSERT_EQ(st.collectives.size(), 1u);
  EXPECT_EQ(st.collectives[0].count, 4);      // 1.0 a counted step (was shown as 4 / 6 = 0.7)
  EXPECT_EQ(st.collectives[0].time_ns, 200);  // 50 ns a counted step
  rep47ss::ComparedSession c{st, {}, false};
  c.stats.exposed_comm_ns = 400;  // by hand: 100 ns a counted step (400 / 6 = 66.7 with the drain steps)
  EXPECT_DOUBLE_EQ(*rep47ss::compare_value(c, rep47ss::CompareFigure::ExposedComm), 100.0);
  std::filesystem::remove(path);
}
