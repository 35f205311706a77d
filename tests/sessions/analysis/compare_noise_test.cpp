// ux42 (tester41 #4, #5): a comparison shows each session's spread of measured step times (min,
// max), marks a step-time difference Welch's t-test cannot tell from the steps' noise "within
// noise", and warns where the sessions are the same file, or another workload or world size.
// Hand-made RunStats and sessions.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace ss = embedscope::sessions;
using ss::CompareFigure;

// `n` measured steps with mean `mean` ms, sample standard deviation `sd` ms, min `lo` ms and max `hi` ms
ss::ComparedSession ux42_steps(double mean, double sd, int64_t lo, int64_t hi, int64_t n = 5) {
  ss::ComparedSession s;
  s.stats.steps = n;
  s.stats.step_time_ns.count = n;
  s.stats.step_time_ns.mean = mean * 1e6;
  s.stats.step_time_ns.stddev = sd * 1e6;
  s.stats.step_time_ns.min = lo * 1'000'000;
  s.stats.step_time_ns.p50 = static_cast<int64_t>(mean) * 1'000'000;
  s.stats.step_time_ns.p99 = hi * 1'000'000;
  s.stats.step_time_ns.max = hi * 1'000'000;
  s.rate = {1000.0 / mean * 100, "samples"};  // 100 samples a step
  return s;
}

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

// "within noise" is Welch's t-test of the mean step times (noise.h welch_t_test), not the min -
// max spread. A {100, 120, 80, 110, 90} ms (sd sqrt(1000 / 4) = 15.811) against B, the same
// shifted by 10 ms: se sqrt(2 x 15.811^2 / 5) = 10, t 1.0, df 8 (t 2.306): within noise.
TEST(Ux42Compare, AStepTimeDifferenceWithinTheWelchTestIsWithinNoise) {
  const auto a = ux42_steps(100, std::sqrt(250.0), 80, 120), b = ux42_steps(110, std::sqrt(250.0), 90, 130);
  // the spread rows: each session's fastest and slowest measured step
  EXPECT_DOUBLE_EQ(*ss::compare_value(a, CompareFigure::StepMin), 80e6);
  EXPECT_DOUBLE_EQ(*ss::compare_value(b, CompareFigure::StepMax), 130e6);
  EXPECT_STREQ(ss::compare_figure_name(CompareFigure::StepMin), "step time min (measured steps)");
  EXPECT_STREQ(ss::compare_figure_key(CompareFigure::StepMax), "step_time_max_ns");
  const auto w = ss::step_time_test(a, b);
  ASSERT_TRUE(w.has_value());
  EXPECT_NEAR(w->t, 1.0, 1e-9);
  EXPECT_NEAR(w->df, 8.0, 1e-9);
  EXPECT_DOUBLE_EQ(w->critical, 2.306);
  EXPECT_TRUE(ss::within_noise(a, b));
  const ss::CompareDelta d = ss::compare_delta(a, b, CompareFigure::StepMean);
  EXPECT_DOUBLE_EQ(*d.diff, 10e6);
  EXPECT_TRUE(d.within_noise);
  EXPECT_EQ(d.text.substr(d.text.size() - 23), "(+10.0 %), within noise") << d.text;
  EXPECT_TRUE(ss::compare_delta(a, b, CompareFigure::Throughput).within_noise);
  EXPECT_FALSE(ss::compare_delta(a, b, CompareFigure::StepP99).within_noise);  // a tail, not the centre
  EXPECT_EQ(ss::step_time_test_text(a, b, "A", "B"),
            "step times B vs A (Welch's t-test, 95 %): t 1.00, df 8.0, critical 2.306: within noise");
  // twice the steps' spread and mean, 200 ms (sd 31.623): t 6.325, df 5.88 (t 2.571): a difference
  const auto c = ux42_steps(200, std::sqrt(1000.0), 160, 240);
  EXPECT_FALSE(ss::within_noise(a, c));
  const ss::CompareDelta far = ss::compare_delta(a, c, CompareFigure::StepMean);
  EXPECT_FALSE(far.within_noise);
  EXPECT_EQ(far.text.find("within noise"), std::string::npos) << far.text;
  // a 2x change whose noisy steps put each mean inside the other's [min, max] (550 in [100, 600],
  // 260 in [200, 900]) is still a difference: 20 steps each, sd 113.55 and 86.75 ms, t -9.08
  const auto slow = ux42_steps(550, 113.555, 200, 900, 20), fast = ux42_steps(260, 86.754, 100, 600, 20);
  EXPECT_FALSE(ss::within_noise(slow, fast));
  EXPECT_NEAR(ss::step_time_test(slow, fast)->t, -9.0756, 1e-3);
  // no difference: nothing to call noise; no measured step, or fewer than 5: no verdict
  EXPECT_FALSE(ss::compare_delta(a, a, CompareFigure::StepMean).within_noise);
  EXPECT_FALSE(ss::within_noise(a, ss::ComparedSession{}));
  const auto four = ux42_steps(110, std::sqrt(250.0), 90, 130, 4);
  EXPECT_FALSE(ss::step_time_test(a, four).has_value());
  EXPECT_FALSE(ss::within_noise(a, four));
  EXPECT_EQ(ss::step_time_test_text(a, four, "A", "B"), "step times B vs A: no noise test (B has 4 counted steps; it needs 5 in each)");
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
