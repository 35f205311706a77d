// A user ran one configuration twice on a shared machine (mean step 21.93 vs 28.68 ms) and
// `compare` said "they differ" for A vs A: it treated the steps as independent samples and one
// run per configuration as the whole noise. The verdict now tests the means with batch-means
// standard errors (noise.h batch_means, Flegal & Jones 2010) and, where the compared sessions
// repeat a configuration, holds the other pairs against the repeats' spread. Hand-made sessions.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/analysis/analysis.h"  // analyze
#include "embedscope/sessions/analysis/noise.h"
#include "embedscope/sessions/analysis/stats.h"  // summarize
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
namespace ss = embedscope::sessions;

fs::path ana61_scratch() {
  static const fs::path dir = embedscope::test_support::fresh_scratch("es_ana61_" + std::to_string(getpid()));
  return dir;
}
embedscope::test_support::CliResult ana61_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, ana61_scratch());
}

// A one-rank cpu session of workload `workload_json` and plan `plan_json` whose steps take
// `step_us` microseconds each, in that order.
std::string ana61_session(const std::string& name, const std::string& workload_json, const std::string& plan_json,
                          const std::vector<int64_t>& step_us) {
  const fs::path path = ana61_scratch() / name;
  fs::remove(path);
  ss::SessionWriter w(path.string());
  w.set_metadata(ss::meta::kWorldSize, "1");
  w.set_metadata(ss::meta::kBackend, "cpu");
  w.set_metadata(ss::meta::kWorkloadName, "hand");
  w.set_metadata(ss::meta::kWorkloadJson, workload_json);
  w.set_metadata(ss::meta::kShardingPlanJson, plan_json);
  w.set_metadata("samples_per_step", "8");
  w.add_lane({0, 0, "compute", "thread"});
  int64_t t = 0;
  for (size_t s = 0; s < step_us.size(); ++s) {
    w.add_step({static_cast<int64_t>(s), 0, t, t + step_us[s] * 1000, 0.5, 0, 0});
    t += step_us[s] * 1000;
  }
  w.close("complete");
  return path.string();
}

// 16 steady steps around `mean_us`: mean_us - 10, mean_us + 10 alternately (sd 10.33 us)
std::vector<int64_t> ana61_steady(int64_t mean_us) {
  std::vector<int64_t> v;
  for (int i = 0; i < 16; ++i) v.push_back(mean_us + (i % 2 ? 10 : -10));
  return v;
}

const char* kWorkload = R"({"name": "hand", "batch_size": 8, "steps": 16, "optimizer": {"type": "adam"}})";
const char* kOtherOptimizer = R"({"name": "hand", "batch_size": 8, "steps": 16, "optimizer": {"type": "sgd"}})";
const char* kThirdOptimizer = R"({"name": "hand", "batch_size": 8, "steps": 16, "optimizer": {"type": "adagrad"}})";
const char* kPlan = R"({"tables": [{"name": "t0", "sharding_type": "table_wise", "ranks": [0]}]})";
}  // namespace

// {10, 12, 11, 20, 22, 21, 30, 32, 31}, a drift: b floor(sqrt(9)) = 3, a 3, batch means 11, 21,
// 31, their mean 21: sigma^2_BM = 3 / (3 - 1) x (100 + 0 + 100) = 300, se sqrt(300 / 9) = 5.7735;
// as independent values (deviations -11, -9, -10, -1, 1, 0, 9, 11, 10: squares 606 / 8 = 75.75)
// sd / 3 = 2.9011: the batches see the drift the independent-samples SE misses.
TEST(Ana61BatchMeans, AnAutocorrelatedSeriesHasTheLargerBatchMeansError) {
  const auto m = ss::batch_means({10, 12, 11, 20, 22, 21, 30, 32, 31});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->n, 9);
  EXPECT_EQ(m->batch_size, 3);
  EXPECT_EQ(m->batches, 3);
  EXPECT_DOUBLE_EQ(m->mean, 21.0);
  EXPECT_NEAR(m->bm_se, std::sqrt(300.0 / 9.0), 1e-12);
  EXPECT_NEAR(m->iid_se, std::sqrt(75.75) / 3.0, 1e-12);
  EXPECT_NEAR(m->se, 5.773502692, 1e-9);
  EXPECT_DOUBLE_EQ(m->df, 2.0);
  // 10 values: b 3, a 3, the last value left out of the batches but in the mean
  const auto ten = ss::batch_means({10, 12, 11, 20, 22, 21, 30, 32, 31, 41});
  EXPECT_EQ(ten->batches, 3);
  EXPECT_DOUBLE_EQ(ten->mean, 23.0);
  EXPECT_NEAR(ten->bm_se, std::sqrt(300.0 / 9.0), 1e-12);
  EXPECT_FALSE(ss::batch_means({5}).has_value());
  // the test of two such means: A against A + 30 (se 5.7735 each): t 30 / 8.165 = 3.674, df
  // (2 x 33.33)^2 / (2 x 33.33^2 / 2) = 4 (t 2.776): a difference; as independent values Welch's
  // t would be 30 / 4.1028 = 7.31
  const ss::WelchTest w = ss::two_means_test(21, 300.0 / 9.0, 2, 51, 300.0 / 9.0, 2);
  EXPECT_NEAR(w.t, 30.0 / std::sqrt(600.0 / 9.0), 1e-12);
  EXPECT_NEAR(w.df, 4.0, 1e-12);
  EXPECT_DOUBLE_EQ(w.critical, 2.776);
  EXPECT_TRUE(w.differs);
}

// Two sessions of the same configuration, steady steps of 20 ms and 26 ms (+30 %): the
// independent-samples Welch test said they differ (t = 6 ms / sqrt(2 x 10.33^2 / 16) us, about
// 1643); they are one configuration, so their 6 ms (30 %) is the run-to-run noise. C (another
// optimizer) at 24 ms: +20 % of the faster (20 ms) is within that noise; D (a third optimizer) at
// 40 ms: +100 %, beyond it: they differ.
TEST(Ana61CompareRepeats, TwoRunsOfOneConfigurationAreItsRunToRunNoise) {
  const std::string a = ana61_session("a.db", kWorkload, kPlan, ana61_steady(20000));
  const std::string b = ana61_session("b.db", kWorkload, kPlan, ana61_steady(26000));
  const std::string c = ana61_session("c.db", kOtherOptimizer, kPlan, ana61_steady(24000));
  const std::string d = ana61_session("d.db", kThirdOptimizer, kPlan, ana61_steady(40000));
  {
    const ss::SessionReader ra(a), rb(b), rc(c);
    EXPECT_TRUE(ss::same_configuration(ra, rb));
    EXPECT_FALSE(ss::same_configuration(ra, rc));  // another optimizer
    // what the old test said: the steps as independent samples, sd 10.33 us, 16 each
    const double sd = std::sqrt(16 * 100.0 / 15) * 1000;
    const auto old = ss::welch_t_test(20e6, sd, 16, 26e6, sd, 16);
    ASSERT_TRUE(old.has_value());
    EXPECT_TRUE(old->differs);
  }
  auto r = ana61_cli("compare " + a + " " + b + " " + c + " " + d);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("run-to-run noise: two runs of the same configuration (A, B) differ by 6.00 ms (30.0 %): "
                       "differences below that are noise on this machine\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("step times B vs A: the same configuration; +6.00 ms (+30.0 %) is run-to-run noise\n"),
            std::string::npos)
      << r.out;
  // C: steps of 24 +- 0.01 ms against 20, alternating (lag-1 autocorrelation -1500 / 1600 =
  // -0.9375, within 1.96 / 4 = 0.49): Welch's t on the steps (se sd / 4 = 2.58 us each) finds a
  // difference, the run-to-run noise (30 % of 20 ms = 6 ms) does not
  EXPECT_NE(r.out.find("step times C vs A (Welch's t on the steps, 95 %; lag-1 autocorrelation -0.94 and -0.94, within "
                       "+-0.49): +4.00 ms (+20.0 %), t 1095.45, df 30.0, critical 2.042: "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("the steps differ, but by less than the run-to-run noise (30.0 %, 6.00 ms of the faster mean "
                       "here): noise on this machine\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("step times D vs A (Welch's t on the steps, 95 %; lag-1 autocorrelation -0.94 and -0.94, within "
                       "+-0.49): +20.00 ms (+100.0 %), t "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("they differ, beyond the run-to-run noise (30.0 %, 6.00 ms of the faster mean here)\n"),
            std::string::npos)
      << r.out;
  r = ana61_cli("compare --json " + a + " " + b + " " + c + " " + d);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& noise = j.at("run_to_run_noise");
  EXPECT_TRUE(noise.at("measured").get<bool>());
  EXPECT_NEAR(noise.at("spread_ns").get<double>(), 6e6, 1e-3);
  EXPECT_NEAR(noise.at("spread_pct").get<double>(), 30.0, 1e-9);
  ASSERT_EQ(noise.at("groups").size(), 1u);
  EXPECT_EQ(noise.at("groups")[0].at("sessions"), (std::vector<std::string>{"A", "B"}));
  const auto& diffs = j.at("differences");
  EXPECT_EQ(diffs[0].at("step_time_verdict"), "same_configuration");
  EXPECT_TRUE(diffs[0].at("same_configuration").get<bool>());
  EXPECT_TRUE(diffs[0].at("figures").at("step_time_mean_ns").at("within_noise").get<bool>());
  EXPECT_TRUE(diffs[0].at("step_time_test").at("differs").get<bool>());  // the within-run test alone would say so
  EXPECT_EQ(diffs[1].at("step_time_verdict"), "within_run_to_run_noise");
  EXPECT_EQ(diffs[1].at("verdict_scope"), "run_to_run");
  EXPECT_EQ(diffs[2].at("step_time_verdict"), "differ");
  EXPECT_FALSE(diffs[2].at("figures").at("step_time_mean_ns").at("within_noise").get<bool>());
  // without the repeat: within-run only, and said so
  r = ana61_cli("compare " + a + " " + d);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("run-to-run noise: not measured (no two sessions ran the same configuration): the verdicts "
                       "below are within-run only; run the baseline twice to measure it\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("they differ within this pair of runs; run-to-run noise not measured (run the baseline twice to "
                       "measure it)\n"),
            std::string::npos)
      << r.out;
}

// The library's grouping, by hand: means 20, 26, 30 ms, A and B one configuration.
TEST(Ana61CompareRepeats, GroupsRepeatsAndMarksTheirCells) {
  const std::string a = ana61_session("ga.db", kWorkload, kPlan, ana61_steady(20000));
  const std::string b = ana61_session("gb.db", kWorkload, kPlan, ana61_steady(26000));
  const std::string c = ana61_session("gc.db", kOtherOptimizer, kPlan, ana61_steady(30000));
  const ss::SessionReader ra(a), rb(b), rc(c);
  std::vector<ss::ComparedSession> cs(3);
  for (size_t i = 0; i < 3; ++i) cs[i].stats = ss::analyze(i == 0 ? ra : i == 1 ? rb : rc);
  const ss::RunToRunNoise n = ss::apply_run_to_run_noise(cs, {&ra, &rb, &rc});
  ASSERT_EQ(n.groups.size(), 1u);
  EXPECT_EQ(n.groups[0].sessions, (std::vector<size_t>{0, 1}));
  EXPECT_NEAR(n.groups[0].spread_ns, 6e6, 1e-3);
  EXPECT_NEAR(n.spread_pct, 30.0, 1e-9);
  EXPECT_EQ(cs[0].configuration, 0);
  EXPECT_EQ(cs[1].configuration, 0);
  EXPECT_EQ(cs[2].configuration, 2);
  EXPECT_EQ(ss::step_verdict(cs[0], cs[1]), ss::StepVerdict::SameConfiguration);
  EXPECT_EQ(ss::step_verdict(cs[0], cs[2]), ss::StepVerdict::Differ);  // +50 % > 30 %
  const ss::CompareDelta d = ss::compare_delta(cs[0], cs[1], ss::CompareFigure::StepMean);
  EXPECT_TRUE(d.within_noise);
  EXPECT_NE(d.text.find(", within noise"), std::string::npos) << d.text;
  // a longer run of the same configuration is still a repeat ("steps" aside)
  const std::string longer =
      ana61_session("glong.db", R"({"name": "hand", "batch_size": 8, "steps": 40, "optimizer": {"type": "adam"}})", kPlan,
                    ana61_steady(20000));
  const ss::SessionReader rl(longer);
  EXPECT_TRUE(ss::same_configuration(ra, rl));
}
