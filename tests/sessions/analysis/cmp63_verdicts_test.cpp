// Compare's step-time verdicts that a user can trust: a test with the power 10-step runs have
// (tester63a F2: 272 -> 607 ms a step called "within noise" by batch means with df 2.4), "too few
// steps to tell" where the test has none, simulated sessions' differences as the model's, exact,
// and without a noise verdict against a measurement (tester63a F9, tester63d F4), and a machine
// that differed between two runs, seen in the dense part no sharding changes (tester63a F6).
// Hand-made RunStats and sessions; every figure below is worked out by hand in its comment.
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

// step times in units of 0.01 ms (21210 = 212.10 ms), in step order
ss::ComparedSession cmp63_series(const std::vector<int64_t>& hundredths_ms, bool simulated = false) {
  std::vector<int64_t> ns;
  for (const int64_t v : hundredths_ms) ns.push_back(v * 10'000);
  ss::ComparedSession s;
  s.stats.steps = static_cast<int64_t>(ns.size());
  s.stats.step_series_ns = ns;
  s.stats.step_time_ns = ss::summarize(ns);
  s.stats.simulated = simulated;
  s.rate = {1e9 / s.stats.step_time_ns.mean * 2048, "samples", 2048};
  return s;
}

std::string cmp63_file(const std::string& name, const std::string& workload_json, bool simulated,
                         const std::string& other_runnable = "") {
  const auto dir = std::filesystem::temp_directory_path() / ("es_cmp63_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::filesystem::remove(path);
  ss::SessionWriter w(path);
  w.set_metadata(ss::meta::kWorkloadName, "criteo_kaggle");
  w.set_metadata(ss::meta::kWorkloadJson, workload_json);
  w.set_metadata(ss::meta::kWorldSize, "2");
  w.set_metadata(ss::meta::kBackend, simulated ? "simulated" : "cpu");
  w.set_metadata(ss::meta::kSimulated, simulated ? "1" : "0");
  if (!other_runnable.empty()) w.set_metadata(ss::meta::kCpuOtherRunnable, other_runnable);
  w.close("complete");
  return path;
}

// tester63a F2's steps (the slowest rank's window per step, ms, from `export --format csv`)
const std::vector<int64_t> kCmp63TableWise = {21210, 22050, 22560, 24210, 31010, 21930, 23780, 24270, 36490, 44590};
const std::vector<int64_t> kCmp63RowWise = {51680, 61550, 56250, 57940, 64920, 27970, 78460, 72560, 76800, 58940};
}  // namespace

TEST(Cmp63Verdicts, LagOneAutocorrelationAndItsWhiteNoiseBound) {
  // 100..109: deviations -4.5..4.5, sum of squares 82.5, sum of neighbours' products 57.75
  std::vector<int64_t> climb;
  for (int i = 0; i < 10; ++i) climb.push_back(100 + i);
  EXPECT_NEAR(ss::lag1_autocorrelation(climb), 0.7, 1e-12);
  // {100, 120, 80, 110, 90}: deviations 0, 20, -20, 10, -10: (0 - 400 - 200 - 100) / 1000
  EXPECT_NEAR(ss::lag1_autocorrelation({100, 120, 80, 110, 90}), -0.7, 1e-12);
  EXPECT_DOUBLE_EQ(ss::lag1_autocorrelation({5, 5, 5}), 0.0);  // no spread
  EXPECT_DOUBLE_EQ(ss::lag1_autocorrelation({5}), 0.0);
  EXPECT_NEAR(ss::white_noise_lag1_bound(10), 1.96 / std::sqrt(10.0), 1e-12);  // 0.6198
  EXPECT_TRUE(std::isinf(ss::white_noise_lag1_bound(0)));
}

// tester63a F2: A (table_wise) mean 272.10 ms, sd 77.757; B (row_wise) 607.07 ms, sd 145.943; lag-1
// autocorrelations 0.3669 and -0.1863, both within 1.96 / sqrt(10) = 0.6198: Welch's t on the steps,
// t = 334.97 / sqrt(77.757^2 / 10 + 145.943^2 / 10) = 6.4056, df (va + vb)^2 / (va^2 / 9 + vb^2 / 9)
// = 13.729 (df 13's 2.160): they differ. The batch-means test said t 4.13, df 2.4: within noise.
TEST(Cmp63Verdicts, TenStepRunsThatDifferTwofoldAreTestedWithWelchOnTheSteps) {
  const auto a = cmp63_series(kCmp63TableWise), b = cmp63_series(kCmp63RowWise);
  const auto t = ss::step_time_test(a, b);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->method, ss::StepTestMethod::WelchSteps);
  EXPECT_STREQ(ss::step_test_method_key(t->method), "welch_steps");
  EXPECT_NEAR(t->base_lag1, 0.36687, 1e-5);
  EXPECT_NEAR(t->other_lag1, -0.18626, 1e-5);
  EXPECT_NEAR(t->base_bound, 0.61981, 1e-5);
  EXPECT_NEAR(t->diff_ns, 334.97e6, 1.0);
  EXPECT_NEAR(t->test.t, 6.40563, 1e-4);
  EXPECT_NEAR(t->test.df, 13.7286, 1e-3);
  EXPECT_DOUBLE_EQ(t->test.critical, 2.160);
  EXPECT_TRUE(t->test.differs);
  EXPECT_FALSE(t->powerless);
  EXPECT_EQ(ss::step_verdict(a, b), ss::StepVerdict::Differ);
  EXPECT_FALSE(ss::within_noise(a, b));
  const ss::CompareDelta d = ss::compare_delta(a, b, CompareFigure::StepMean);
  EXPECT_FALSE(d.within_noise);
  EXPECT_EQ(d.text, "+334.97 ms (+123.1 %)");
  EXPECT_EQ(ss::compare_delta(a, b, CompareFigure::Throughput).text.find("noise"), std::string::npos);
  EXPECT_EQ(ss::step_time_test_text(a, b, "A", "B"),
            "step times B vs A (Welch's t on the steps, 95 %; lag-1 autocorrelation 0.37 and -0.19, within +-0.62): "
            "+334.97 ms (+123.1 %), t 6.41, df 13.7, critical 2.160: they differ within this pair of runs; run-to-run "
            "noise not measured (run the baseline twice to measure it)");
}

// A steady climb 100..109 ms against 105..114 ms: lag-1 0.7 > 0.6198 in both, so batch means: b 3,
// a 3, batch means 101, 104, 107: sigma^2 3 / 2 x 18 = 27, se sqrt(27 / 9) = 1.7321 ms (above
// sd / sqrt(10) = 0.9574); t 5 / sqrt(2 x 3) = 2.0412, df 36 / (9 / 2 + 9 / 2) = 4 (2.776): no
// difference found, but 3 batches cannot find one: too few steps to tell, not within noise.
TEST(Cmp63Verdicts, ABatchMeansTestWithoutPowerSaysTooFewStepsToTell) {
  std::vector<int64_t> lo, hi;
  for (int i = 0; i < 10; ++i) lo.push_back(10000 + 100 * i), hi.push_back(10500 + 100 * i);
  const auto a = cmp63_series(lo), b = cmp63_series(hi);
  const auto t = ss::step_time_test(a, b);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->method, ss::StepTestMethod::BatchMeans);
  EXPECT_NEAR(t->base.se, 1.7320508e6, 1.0);
  EXPECT_EQ(t->base.batches, 3);
  EXPECT_NEAR(t->test.t, 5.0 / std::sqrt(6.0), 1e-9);
  EXPECT_NEAR(t->test.df, 4.0, 1e-9);
  EXPECT_DOUBLE_EQ(t->test.critical, 2.776);
  EXPECT_FALSE(t->test.differs);
  EXPECT_TRUE(t->powerless);
  EXPECT_EQ(ss::step_verdict(a, b), ss::StepVerdict::TooFewSteps);
  EXPECT_STREQ(ss::step_verdict_key(ss::StepVerdict::TooFewSteps), "too_few_steps");
  EXPECT_FALSE(ss::within_noise(a, b));
  const ss::CompareDelta d = ss::compare_delta(a, b, CompareFigure::StepMean);
  EXPECT_FALSE(d.within_noise);
  EXPECT_EQ(d.text, "+5.00 ms (+4.8 %), too few steps to tell");  // 5 / 104.5
  EXPECT_EQ(ss::step_time_test_text(a, b, "A", "B"),
            "step times B vs A (batch means, 95 %; lag-1 autocorrelation 0.70 and 0.70, above +-0.62): +5.00 ms "
            "(+4.8 %), t 2.04, df 4.0, critical 2.776: too few steps to tell (the steps drift, so only batch means "
            "test them, and 3 batches a run leave df 4.0); run >= 20 steps");
  // 20 steps of the same climbs: b 4, a 5 (df 4 each): a powered test; batch means 101.5, 105.5,
  // ..., 117.5 (sd 6.3246): sigma^2 4 x 40 = 160, se sqrt(160 / 20) = 2.8284; t 5 / 4 = 1.25, df 8
  // (2.306): within the steps' noise
  std::vector<int64_t> lo20, hi20;
  for (int i = 0; i < 20; ++i) lo20.push_back(10000 + 100 * i), hi20.push_back(10500 + 100 * i);
  const auto t20 = ss::step_time_test(cmp63_series(lo20), cmp63_series(hi20));
  ASSERT_TRUE(t20.has_value());
  EXPECT_EQ(t20->base.batches, 5);
  EXPECT_NEAR(t20->base.se, std::sqrt(8.0) * 1e6, 1.0);
  EXPECT_NEAR(t20->test.t, 1.25, 1e-9);
  EXPECT_FALSE(t20->powerless);
  EXPECT_EQ(ss::step_verdict(cmp63_series(lo20), cmp63_series(hi20)), ss::StepVerdict::WithinStepNoise);
}

// tester63a F9: two simulated sessions (every step 199.90 us vs 210.00 us): no t (it was -inf), no
// "run the baseline twice": the difference is the cost model's, +10.1 us (+5.1 %), exact.
TEST(Cmp63Verdicts, SimulatedSessionsDifferByTheModelExactlyWithoutANoiseTest) {
  const std::string wa = R"({"batch_size":512,"sharding":{"default":"table_wise"}})";
  const std::string wb = R"({"batch_size":512,"sharding":{"default":"row_wise"}})";
  const std::string fa = cmp63_file("sim_tw.db", wa, true), fb = cmp63_file("sim_rw.db", wb, true);
  const ss::SessionReader ra(fa), rb(fb);
  std::vector<ss::ComparedSession> cs = {cmp63_series(std::vector<int64_t>(10, 20)), cmp63_series(std::vector<int64_t>(10, 21))};
  // 199.90 us and 210.00 us in 0.01 ms units are not whole: set the series in ns directly
  for (auto [i, ns] : {std::pair<size_t, int64_t>{0, 199'900}, std::pair<size_t, int64_t>{1, 210'000}}) {
    cs[i].stats.step_series_ns.assign(10, ns);
    cs[i].stats.step_time_ns = ss::summarize(cs[i].stats.step_series_ns);
    cs[i].stats.simulated = true;
  }
  const ss::RunToRunNoise noise = ss::apply_run_to_run_noise(cs, {&ra, &rb});
  EXPECT_FALSE(noise.measured());
  EXPECT_EQ(noise.simulated_sessions, 2);
  EXPECT_EQ(ss::run_to_run_text(noise, {"A", "B"}),
            "run-to-run noise: none (every session is simulated: the cost model gives the same step times every run; "
            "the differences are the model's, exact)");
  EXPECT_FALSE(ss::step_time_test(cs[0], cs[1]).has_value());
  EXPECT_EQ(ss::step_verdict(cs[0], cs[1]), ss::StepVerdict::Simulated);
  EXPECT_EQ(ss::compare_delta(cs[0], cs[1], CompareFigure::StepMean).text, "+10.1 us (+5.1 %), exact (simulated)");
  const std::string line = ss::step_time_test_text(cs[0], cs[1], "A", "B");
  EXPECT_EQ(line, "step times B vs A: both simulated: +10.1 us (+5.1 %) is the cost model's difference, exact (a "
                  "simulation's steps do not vary from run to run: no noise test)");
  EXPECT_EQ(line.find("inf"), std::string::npos);
  EXPECT_EQ(line.find("twice"), std::string::npos);
}

// tester63d F4: measured cw4 630.20 ms a step (620.20..640.20) against its simulation 417.65 ms:
// -212.55 ms, -33.73 % - a model-vs-measurement comparison, no "within noise".
TEST(Cmp63Verdicts, ASimulatedSessionAgainstAMeasuredOneIsTheModelsErrorWithoutAVerdict) {
  const std::string w = R"({"batch_size":512})";
  const std::string fm = cmp63_file("c_cw4.db", w, false), fs = cmp63_file("s_cw4.db", w, true);
  const ss::SessionReader rm(fm), rs(fs);
  std::vector<ss::ComparedSession> cs = {cmp63_series({62020, 64020, 62520, 63520, 63020}),
                                         cmp63_series(std::vector<int64_t>(5, 41765), true)};
  const ss::RunToRunNoise noise = ss::apply_run_to_run_noise(cs, {&rm, &rs});
  EXPECT_EQ(ss::run_to_run_text(noise, {"A", "B"}),
            "run-to-run noise: not measured (no two measured sessions ran the same configuration): the verdicts below "
            "are within-run only; run the baseline twice to measure it");
  EXPECT_EQ(ss::step_verdict(cs[0], cs[1]), ss::StepVerdict::ModelVsMeasured);
  EXPECT_FALSE(ss::within_noise(cs[0], cs[1]));
  const ss::CompareDelta d = ss::compare_delta(cs[0], cs[1], CompareFigure::StepP50);
  EXPECT_FALSE(d.within_noise);
  EXPECT_EQ(d.text, "-212.55 ms (-33.7 %), model vs measured");
  EXPECT_EQ(ss::step_time_test_text(cs[0], cs[1], "A", "B"),
            "step times B vs A: a model-vs-measurement comparison (B simulated, A measured): the simulated mean step "
            "is 33.7 % below the measured one (-212.55 ms); no significance verdict (the simulation has no noise, and "
            "the measurement's noise is not the model's error)");
  // the simulation as the baseline: still the model's error relative to the measurement
  EXPECT_NE(ss::step_time_test_text(cs[1], cs[0], "S", "M").find("(S simulated, M measured): the simulated mean step is "
                                                                  "33.7 % below the measured one (-212.55 ms)"),
            std::string::npos);
}

namespace {
// a cpu run of 2 ranks and 10 steps whose dense part takes base_ms + 1 on even steps, base_ms - 1
// on odd ones on both ranks
ss::ComparedSession cmp63_dense_run(int64_t base_ms) {
  std::vector<int64_t> steps(10, 300);
  ss::ComparedSession s = cmp63_series(std::vector<int64_t>(steps.begin(), steps.end()));
  for (int64_t step = 0; step < 10; ++step)
    for (int32_t rank = 0; rank < 2; ++rank) {
      ss::RankStepTimes t;
      t.step = step;
      t.rank = rank;
      t.by_category_ns[static_cast<size_t>(embedscope::sessions::OpCategory::dense)] =
          (base_ms + (step % 2 == 0 ? 1 : -1)) * 1'000'000;
      s.stats.per_step.push_back(t);
    }
  return s;
}
}  // namespace

// tester63a F6: the dense MLP took 2.3x as long in the row_wise run (other jobs' load). Dense per
// step 101/99 ms (A) and 231/229 ms (B): means 100 and 230 ms, sd sqrt(10 / 9) ms, lag-1 -0.9
// (Welch on the steps): se sqrt(2 x 10 / 90) = 0.4714 ms, t 130 / 0.4714 = 275.77, df 18.
TEST(Cmp63Verdicts, ADensePartSlowerBeyondNoiseSaysTheMachineDiffered) {
  const std::string tw = R"({"batch_size":512,"dense":{"bottom_mlp":[512,256]},"sharding":{"default":"table_wise"},"steps":10})";
  const std::string rw = R"({"batch_size":512,"dense":{"bottom_mlp":[512,256]},"sharding":{"default":"row_wise"},"steps":20})";
  const std::string b1024 = R"({"batch_size":1024,"dense":{"bottom_mlp":[512,256]},"sharding":{"default":"row_wise"}})";
  const std::string fa = cmp63_file("tw.db", tw, false, "5.049"), fb = cmp63_file("rw.db", rw, false, "13.033");
  const std::string fc = cmp63_file("rw_b1024.db", b1024, false), fs = cmp63_file("sim_rw.db", rw, true);
  const ss::SessionReader ra(fa), rb(fb), rc(fc), rs(fs);
  EXPECT_TRUE(ss::dense_work_alike(ra, rb));   // the sharding and the steps leave the dense part alone
  EXPECT_FALSE(ss::dense_work_alike(ra, rc));  // twice the batch: twice the dense work
  EXPECT_FALSE(ss::dense_work_alike(ra, rs));  // a simulation measures no machine
  const auto a = cmp63_dense_run(100), b = cmp63_dense_run(230);
  const auto dense = ss::dense_series_ns(b.stats);
  ASSERT_EQ(dense.size(), 10u);
  EXPECT_EQ(dense[0], 231'000'000);
  EXPECT_EQ(dense[1], 229'000'000);
  const auto m = ss::machine_difference(ra, a, rb, b);
  ASSERT_TRUE(m.has_value());
  EXPECT_DOUBLE_EQ(m->base_dense_ns, 100e6);
  EXPECT_DOUBLE_EQ(m->other_dense_ns, 230e6);
  EXPECT_DOUBLE_EQ(m->ratio, 2.3);
  EXPECT_EQ(m->test.method, ss::StepTestMethod::WelchSteps);
  EXPECT_NEAR(m->test.test.t, 130.0 / std::sqrt(20.0 / 90.0), 1e-6);
  EXPECT_NEAR(m->test.test.df, 18.0, 1e-9);
  EXPECT_EQ(ss::machine_difference_text(*m, ra, rb, "A", "B"),
            "the machine differed between the runs: the dense part (the same MLPs on the same batch, which no sharding "
            "changes) took 2.30x as long a step in B (B 230.00 ms, A 100.00 ms per rank and step, beyond the steps' "
            "noise: Welch's t 275.77, df 18.0); other processes' runnable threads 13.033 in B vs 5.049 in A; the step "
            "times carry that: rerun both on an equally loaded machine before blaming the difference on the settings");
  // B faster: named the other way round
  const auto back = ss::machine_difference(rb, b, ra, a);
  ASSERT_TRUE(back.has_value());
  EXPECT_NE(ss::machine_difference_text(*back, rb, ra, "A", "B").find("took 2.30x as long a step in A (B 100.00 ms, "
                                                                       "A 230.00 ms"),
            std::string::npos);
  // not flagged: other dense work, a shift under 10 % (105 vs 100 ms: t 15.9, differs), or a simulation
  EXPECT_FALSE(ss::machine_difference(ra, a, rc, b).has_value());
  EXPECT_FALSE(ss::machine_difference(ra, a, rb, cmp63_dense_run(105)).has_value());
  EXPECT_TRUE(ss::step_series_test(ss::dense_series_ns(a.stats), ss::dense_series_ns(cmp63_dense_run(105).stats))->test.differs);
  EXPECT_FALSE(ss::machine_difference(ra, a, rs, b).has_value());
  // 12 % slower: flagged
  EXPECT_TRUE(ss::machine_difference(ra, a, rb, cmp63_dense_run(112)).has_value());
}
