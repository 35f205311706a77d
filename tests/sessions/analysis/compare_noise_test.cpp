// ux42 (tester41 #4, #5): a comparison shows each session's spread of measured step times (min,
// max), marks a step-time difference Welch's t-test cannot tell from the steps' noise "within
// noise", and warns where the sessions are the same file, or another workload or world size.
// Hand-made RunStats and sessions.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/analysis/stats.h"  // summarize
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace ss = embedscope::sessions;
using ss::CompareFigure;

std::string ux42_session(const std::string& name, const std::string& workload, int world) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_ux42_cmp_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::filesystem::remove(path);
  ss::SessionWriter w(path);
  w.set_metadata(ss::meta::kWorkloadName, workload);
  w.set_metadata(ss::meta::kWorldSize, std::to_string(world));
  w.close("complete");
  return path;
}
}  // namespace

// the steps' times in step order (ms), as analyze records them: the series and its summary
static ss::ComparedSession ux42_series(const std::vector<int64_t>& ms) {
  std::vector<int64_t> ns;
  for (const int64_t v : ms) ns.push_back(v * 1'000'000);
  ss::ComparedSession s;
  s.stats.steps = static_cast<int64_t>(ns.size());
  s.stats.step_series_ns = ns;
  s.stats.step_time_ns = ss::summarize(ns);
  s.rate = {1e9 / s.stats.step_time_ns.mean * 100, "samples"};  // 100 samples a step
  return s;
}

// "within noise" is a test of the mean step times, not the min - max spread. A {100, 120, 80,
// 110, 90} ms: lag-1 autocorrelation -0.7, within 1.96 / sqrt(5) = 0.877 (no drift), so Welch's
// t on the steps: sd 15.811, se 7.0711 ms; B, A shifted by 10 ms, the same: t 10 / sqrt(2 x 50)
// = 1.0, df 100^2 / (2 x 50^2 / 4) = 8 (2.306): within the steps' noise. (Its batch means, kept
// beside: b 2, a 2, batch means 110 and 95: sigma^2 2 x 112.5 = 225, se sqrt(225 / 4) = 7.5 ms.)
TEST(Ux42Compare, AStepTimeDifferenceWithinTheBatchMeansTestIsWithinNoise) {
  const auto a = ux42_series({100, 120, 80, 110, 90}), b = ux42_series({110, 130, 90, 120, 100});
  // the spread rows: each session's fastest and slowest measured step
  EXPECT_DOUBLE_EQ(*ss::compare_value(a, CompareFigure::StepMin), 80e6);
  EXPECT_DOUBLE_EQ(*ss::compare_value(b, CompareFigure::StepMax), 130e6);
  EXPECT_STREQ(ss::compare_figure_name(CompareFigure::StepMin), "step time min (measured steps)");
  EXPECT_STREQ(ss::compare_figure_key(CompareFigure::StepMax), "step_time_max_ns");
  const auto w = ss::step_time_test(a, b);
  ASSERT_TRUE(w.has_value());
  EXPECT_NEAR(w->base.se, 7.5e6, 1e-3);
  EXPECT_EQ(w->base.batch_size, 2);
  EXPECT_EQ(w->base.batches, 2);
  EXPECT_EQ(w->method, ss::StepTestMethod::WelchSteps);
  EXPECT_NEAR(w->base_lag1, -0.7, 1e-12);
  EXPECT_NEAR(w->test.t, 1.0, 1e-9);
  EXPECT_NEAR(w->test.df, 8.0, 1e-9);
  EXPECT_DOUBLE_EQ(w->test.critical, 2.306);
  EXPECT_TRUE(ss::within_noise(a, b));
  EXPECT_EQ(ss::step_verdict(a, b), ss::StepVerdict::WithinStepNoise);
  const ss::CompareDelta d = ss::compare_delta(a, b, CompareFigure::StepMean);
  EXPECT_DOUBLE_EQ(*d.diff, 10e6);
  EXPECT_TRUE(d.within_noise);
  EXPECT_EQ(d.text.substr(d.text.size() - 23), "(+10.0 %), within noise") << d.text;
  EXPECT_TRUE(ss::compare_delta(a, b, CompareFigure::Throughput).within_noise);
  EXPECT_FALSE(ss::compare_delta(a, b, CompareFigure::StepP99).within_noise);  // a tail, not the centre
  EXPECT_EQ(ss::step_time_test_text(a, b, "A", "B"),
            "step times B vs A (Welch's t on the steps, 95 %; lag-1 autocorrelation -0.70 and -0.70, within +-0.88): "
            "+10.00 ms (+10.0 %), t 1.00, df 8.0, critical 2.306: within the steps' noise");
  // 16 steady steps of 100 +- 1 ms against the same at 200: batches of 4, a difference
  std::vector<int64_t> steady, twice;
  for (int i = 0; i < 16; ++i) steady.push_back(100 + i % 2), twice.push_back(200 + i % 2);
  const auto c = ux42_series(steady), e = ux42_series(twice);
  EXPECT_FALSE(ss::within_noise(c, e));
  EXPECT_EQ(ss::step_verdict(c, e), ss::StepVerdict::Differ);
  const ss::CompareDelta far = ss::compare_delta(c, e, CompareFigure::StepMean);
  EXPECT_FALSE(far.within_noise);
  EXPECT_EQ(far.text.find("within noise"), std::string::npos) << far.text;
  // no difference: nothing to call noise; no measured step, or fewer than 5: no verdict
  EXPECT_FALSE(ss::compare_delta(a, a, CompareFigure::StepMean).within_noise);
  EXPECT_FALSE(ss::within_noise(a, ss::ComparedSession{}));
  const auto four = ux42_series({110, 130, 90, 120});
  EXPECT_FALSE(ss::step_time_test(a, four).has_value());
  EXPECT_FALSE(ss::within_noise(a, four));
  EXPECT_EQ(ss::step_verdict(a, four), ss::StepVerdict::NotTested);
  EXPECT_EQ(ss::step_time_test_text(a, four, "A", "B"),
            "step times B vs A: no within-run test (B has 4 counted steps; it needs 5 in each)");
}

TEST(Ux42Compare, WarnsOfTheSameFileTwiceAndOfAnotherWorkloadOrWorldSize) {
  const std::string a = ux42_session("a.db", "criteo_kaggle", 4);
  const std::string d = ux42_session("d.db", "criteo_kaggle", 4);
  const std::string t = ux42_session("t.db", "tiny", 2);
  const std::string w = ux42_session("w.db", "criteo_kaggle", 8);
  const std::string again = (std::filesystem::path(a).parent_path() / "." / "a.db").string();
  const ss::SessionReader ra(a), rd(d), rt(t), rw(w), ragain(again);
  const auto warnings = ss::comparison_warnings({&ra, &ragain, &rd, &rt, &rw}, {"A", "B", "C", "D", "E"});
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_EQ(warnings[0], "B is the same file as A (" + again + "): every difference is 0 by construction");
  EXPECT_EQ(warnings[1], "D is not like-for-like with A: another workload (tiny vs criteo_kaggle), another world size "
                         "(2 vs 4 ranks); its differences mix those changes");
  EXPECT_EQ(warnings[2], "E is not like-for-like with A: another world size (8 vs 4 ranks); its differences mix that "
                         "change with any other");
  EXPECT_TRUE(ss::comparison_warnings({&ra, &rd}, {"A", "B"}).empty());  // like for like: nothing to say
}

// tester42 F17: a simulated session beside a measured one is not like for like either
TEST(Ux42Compare, WarnsOfASimulatedSessionBesideAMeasuredOne) {
  const std::string a = ux42_session("m.db", "criteo_kaggle", 4);
  const auto dir = std::filesystem::path(a).parent_path();
  const std::string sim = (dir / "s.db").string();
  std::filesystem::remove(sim);
  {
    ss::SessionWriter w(sim);
    w.set_metadata(ss::meta::kWorkloadName, "criteo_kaggle");
    w.set_metadata(ss::meta::kWorldSize, "4");
    w.set_metadata(ss::meta::kSimulated, "1");
    w.close("complete");
  }
  const ss::SessionReader ra(a), rs(sim);
  const auto warnings = ss::comparison_warnings({&ra, &rs}, {"A", "B"});
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "B is not like-for-like with A: SIMULATED vs measured (the cost model's times against a "
                         "run's); its differences mix that change with any other");
  const auto back = ss::comparison_warnings({&rs, &ra}, {"A", "B"});
  ASSERT_EQ(back.size(), 1u);
  EXPECT_NE(back[0].find("measured vs SIMULATED"), std::string::npos) << back[0];
}
