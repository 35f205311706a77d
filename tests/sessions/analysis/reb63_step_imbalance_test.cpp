// The per-step ids imbalance (RunStats::lookups_max_over_mean_per_step) beside the whole run's
// totals' figure: a run whose heaviest rank changes from one step to the next (a live rebalance
// moved the hot table) reads balanced in its totals while every step had a straggler.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::sessions;
namespace fs = std::filesystem;

namespace {
fs::path reb63_scratch() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_reb63_imb_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// 4 ranks, 3 measured steps (and a warm-up step whose load is not counted): ids per rank
// step 0 [1024, 512, 512, 512], step 1 [512, 1024, 512, 512], step 2 [512, 512, 512, 1024].
std::string write_session(const std::string& name) {
  const std::string path = (reb63_scratch() / name).string();
  SessionWriter w(path);
  w.set_metadata("world_size", "4");
  w.set_metadata("samples_per_step", "256");
  const int64_t ids[3][4] = {{1024, 512, 512, 512}, {512, 1024, 512, 512}, {512, 512, 512, 1024}};
  for (int r = 0; r < 4; ++r) {
    w.add_lane({r, 0, "compute", "thread"});
    w.add_rank({r, "h", "cpu (thread)", 1 << 20});
    w.add_step({-1, r, 0, 500, 0.9, 0, 0});
    w.add_load({-1, r, 0, 0, 9999, 1, 1, 1, 1});
    for (int s = 0; s < 3; ++s) {
      w.add_step({s, r, 1000 * (s + 1), 1000 * (s + 1) + 900, 0.7, 0, 0});
      w.add_ops({OpEvent{r, Lane::compute, OpCategory::lookup, "lookup", s, 1000 * (s + 1), 1000 * (s + 1) + 100, 0, 0}});
      w.add_load({s, r, 0, 0, ids[s][r], 1, 0, 0, 100});
    }
  }
  w.close("complete");
  return path;
}
}  // namespace

// By hand: every step's max/mean is 1024 / 640 = 1.60; the totals [2048, 2048, 1536, 2048] give
// 2048 / 1920 = 1.07 - balanced-looking, where every step waited on a rank 1.6x the mean.
TEST(Reb63StepImbalance, PerStepFigureBesideTheTotals) {
  const SessionReader r(write_session("steps.db"));
  const RunStats st = analyze(r);
  ASSERT_TRUE(st.has_load);
  EXPECT_DOUBLE_EQ(st.lookups_max_over_mean, 2048.0 / 1920.0);
  EXPECT_DOUBLE_EQ(st.lookups_max_over_mean_per_step, 1.6);
  // compare: the per-step row, then the totals' row, each named
  EXPECT_STREQ(compare_figure_key(CompareFigure::LookupImbalancePerStep), "lookups_max_over_mean_per_step");
  EXPECT_STREQ(compare_figure_name(CompareFigure::LookupImbalance), "imbalance: ids looked up (max/mean of the run's totals)");
  EXPECT_STREQ(compare_figure_name(CompareFigure::LookupImbalancePerStep),
               "imbalance: ids looked up (max/mean a step, mean over steps)");
}
