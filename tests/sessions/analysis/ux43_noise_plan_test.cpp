// tester42 F13, F5, F8: what moved between two plans (per table), the held-out AUC's standard
// error (Hanley & McNeil 1982) and the step time's noise, hand-computed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/analysis/noise.h"
#include "embedscope/sessions/analysis/plan_diff.h"
#include "embedscope/sessions/analysis/rebalance_effect.h"
#include "embedscope/sessions/model/held_out_key.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace ss = embedscope::sessions;

namespace {
std::string ux43_scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("es_ux43_" + std::to_string(getpid()) + "_" + name + ".db")).string();
}
std::string ux43_session(const std::string& name, const std::string& workload, const std::string& plan,
                         const std::string& held_out = "") {
  const std::string path = ux43_scratch(name);
  std::filesystem::remove(path);
  ss::SessionWriter w(path);
  w.set_metadata(ss::meta::kWorkloadName, "hot_table_straggler");
  w.set_metadata(ss::meta::kWorkloadJson, workload);
  w.set_metadata(ss::meta::kShardingPlanJson, plan);
  w.set_metadata(ss::meta::kSteps, "10");
  if (!held_out.empty()) w.set_metadata(ss::meta::kHeldOutJson, held_out);
  w.close("complete");
  return path;
}
std::string tw(const std::string& name, int rank) {
  return R"({"name":")" + name + R"(","sharding_type":"table_wise","shards":[{"rank":)" + std::to_string(rank) +
         R"(,"row_offset":0,"num_rows":100,"col_offset":0,"num_cols":8}]})";
}
std::string rw(const std::string& name, int split) {  // rows [0, split) on rank 0, [split, 100) on rank 1
  return R"({"name":")" + name + R"(","sharding_type":"row_wise","shards":[{"rank":0,"row_offset":0,"num_rows":)" +
         std::to_string(split) + R"(,"col_offset":0,"num_cols":8},{"rank":1,"row_offset":)" + std::to_string(split) +
         R"(,"num_rows":)" + std::to_string(100 - split) + R"(,"col_offset":0,"num_cols":8}]})";
}
}  // namespace

TEST(Ux43PlanChanges, SaysPerTableWhatMoved) {
  const std::string base = R"({"tables":[)" + tw("cold_0", 0) + "," + tw("hot_1", 3) + "," + tw("t_cat_2", 2) + "," +
                           rw("r", 50) + "," + tw("gone", 1) + "]}";
  const std::string other = R"({"tables":[)" + tw("cold_0", 0) + "," + tw("hot_1", 0) + "," + rw("t_cat_2", 50) + "," +
                            rw("r", 30) + "," + tw("new_t", 2) + "]}";
  EXPECT_EQ(ss::plan_changes(base, other),
            (std::vector<std::string>{"hot_1: rank 3 -> rank 0 (table_wise)",
                                      "t_cat_2: table_wise on rank 2 -> row_wise on ranks 0, 1",
                                      "r: shards split differently (row_wise on ranks 0, 1)",
                                      "new_t: not in the baseline's plan", "gone: only in the baseline's plan"}));
  EXPECT_TRUE(ss::plan_changes(base, base).empty());
  EXPECT_TRUE(ss::plan_changes("not json", "{}").empty());
  EXPECT_EQ(ss::ranks_text({3}), "rank 3");
  EXPECT_EQ(ss::ranks_text({3, 1, 0, 2}), "ranks 0-3");
  EXPECT_EQ(ss::ranks_text({6, 0, 2, 5, 2}), "ranks 0, 2, 5, 6");
  EXPECT_EQ(ss::ranks_text({0, 1, 2, 5}), "ranks 0-2, 5");
  EXPECT_EQ(ss::ranks_text({}), "no rank");
}

// The three runs of hot_table_straggler as their sessions record them: greedy, rebalanced (the
// per-table overrides of `rebalance --plan-out`), live (a "when" policy; the greedy plan at start).
TEST(Ux43DifferingSettings, HotTableStragglerReadsAsMovesNotPointers) {
  const std::string greedy_plan = R"({"tables":[)" + tw("cold_0", 0) + "," + tw("hot_0", 3) + "," + tw("hot_1", 3) + "]}";
  const std::string moved_plan = R"({"tables":[)" + tw("cold_0", 0) + "," + tw("hot_0", 3) + "," + tw("hot_1", 0) + "]}";
  const std::string w_greedy = R"({"steps":10,"sharding":{"default":"table_wise","tables":{}},"rebalance":"off"})";
  const std::string w_moved =
      R"({"steps":10,"sharding":{"default":"table_wise","tables":{"cold_0":{"type":"table_wise","ranks":[0]},)"
      R"("hot_0":{"type":"table_wise","ranks":[3]},"hot_1":{"type":"table_wise","ranks":[0]}}},"rebalance":"off"})";
  const std::string w_live = R"({"steps":10,"sharding":{"default":"table_wise","tables":{}},)"
                             R"("rebalance":{"when":{"imbalance_above":1.5,"window":3},"cooldown_steps":100}})";
  const std::string a = ux43_session("greedy", w_greedy, greedy_plan), b = ux43_session("moved", w_moved, moved_plan),
                    c = ux43_session("live", w_live, greedy_plan);
  {
    const ss::SessionReader ra(a), rb(b), rc(c);
    EXPECT_EQ(ss::differing_settings({&ra, &rb, &rc}),
              (std::vector<std::string>{
                  "rebalance off, plan 3 table_wise",
                  "rebalance off, plan vs the baseline: hot_1: rank 3 -> rank 0 (table_wise)",
                  "plan as the baseline's, rebalance/cooldown_steps 100, rebalance/when/imbalance_above 1.5, "
                  "rebalance/when/window 3"}));
    // the per-table overrides are not listed: the plan says where the tables went
    EXPECT_EQ(ss::differing_settings({&ra, &rb}),
              (std::vector<std::string>{"plan 3 table_wise", "plan vs the baseline: hot_1: rank 3 -> rank 0 (table_wise)"}));
    // --verbose: the raw pointers, "(none)" where absent, numbered placements
    const auto raw = ss::differing_settings({&ra, &rb}, 6, true);
    EXPECT_NE(raw[1].find("sharding/tables/hot_1/ranks/0 0"), std::string::npos) << raw[1];
    EXPECT_NE(raw[0].find("sharding/tables/hot_1/ranks/0 (none)"), std::string::npos) << raw[0];
    EXPECT_NE(raw[1].find("plan 3 table_wise, placement 2"), std::string::npos) << raw[1];
  }
  const std::string d = ux43_session("nokey", R"({"steps":10,"sharding":{"default":"table_wise","tables":{}}})", greedy_plan);
  {
    const ss::SessionReader rc(c), rd(d);  // a setting one session lacks altogether reads "not set", once
    EXPECT_EQ(ss::differing_settings({&rd, &rc}),
              (std::vector<std::string>{"rebalance not set",
                                        "rebalance/cooldown_steps 100, rebalance/when/imbalance_above 1.5, rebalance/when/window 3"}));
  }
  for (const auto& p : {a, b, c, d}) std::filesystem::remove(p);
}

// Hanley & McNeil 1982, equation (2), by hand: A 0.75, 10 positives, 20 negatives:
// Q1 = 0.75 / 1.25 = 0.6, Q2 = 2 x 0.5625 / 1.75 = 0.642857; SE^2 = (0.1875 + 9 x 0.0375 +
// 19 x 0.080357) / 200 = 2.0517857 / 200 = 0.0102589, SE 0.1012864.
TEST(Ux43AucStandardError, HanleyMcNeilByHand) {
  ASSERT_TRUE(ss::auc_standard_error(0.75, 10, 20).has_value());
  EXPECT_NEAR(*ss::auc_standard_error(0.75, 10, 20), std::sqrt(2.0517857142857 / 200), 1e-12);
  EXPECT_NEAR(*ss::auc_standard_error(0.75, 10, 20), 0.1012863691, 1e-9);
  // A 0.5, one of each: Q1 = Q2 = 1/3, SE^2 = 0.25: SE 0.5
  EXPECT_DOUBLE_EQ(*ss::auc_standard_error(0.5, 1, 1), 0.5);
  EXPECT_FALSE(ss::auc_standard_error(0.75, 0, 20).has_value());
  EXPECT_FALSE(ss::auc_standard_error(std::nan(""), 10, 20).has_value());
  // from a session: samples 30 of which 10 positive
  const std::string s = ux43_session("auc", "{}", "{}", R"({"batches":1,"samples":30,"positives":10,"loss":0.5,"auc":0.75})");
  const std::string none = ux43_session("auc_null", "{}", "{}", R"({"samples":30,"positives":0,"auc":null})");
  EXPECT_NEAR(*ss::held_out_auc_se(ss::SessionReader(s)), 0.1012863691, 1e-9);
  EXPECT_FALSE(ss::held_out_auc_se(ss::SessionReader(none)).has_value());
  std::filesystem::remove(s);
  std::filesystem::remove(none);
}

// tester42's compression study: low rank r8 0.7517 against fp32 0.6903 is beyond the noise;
// shared pairs 0.6914 is within it. SEs 0.0046, 0.0048: the difference's sqrt(0.0046^2 +
// 0.0048^2) = 0.0066483, 2 SE = 0.0132966.
TEST(Ux43AucStandardError, DifferencesWithinTwoStandardErrorsAreNoise) {
  const auto far = ss::auc_difference(0.7517, 0.0046, 0.6903, 0.0048);
  EXPECT_NEAR(far.diff, 0.0614, 1e-12);
  EXPECT_NEAR(far.se, 0.0066483081, 1e-9);
  EXPECT_FALSE(far.within_noise);
  EXPECT_EQ(ss::auc_difference_text(far), "+0.0614 (> 2 SE = 0.0133)");
  const auto near = ss::auc_difference(0.6914, 0.0046, 0.6903, 0.0048);
  EXPECT_TRUE(near.within_noise);
  EXPECT_EQ(ss::auc_difference_text(near), "+0.0011 (within noise: 2 SE = 0.0133)");
  EXPECT_EQ(ss::auc_difference_cell(far), "+0.0614");
  EXPECT_EQ(ss::auc_difference_cell(near), "+0.0011 noise");
  EXPECT_EQ(ss::auc_difference_cell(ss::auc_difference(0.69029, 0.0086, 0.6903, 0.0086)), "0 noise");  // -0.00001
  // exactly at 2 SE (binary-exact: SEs 3/32 and 1/8 make 5/32, 2 SE = 0.3125): within, inclusive
  EXPECT_DOUBLE_EQ(ss::auc_difference(0.8125, 0.09375, 0.5, 0.125).se, 0.15625);
  EXPECT_TRUE(ss::auc_difference(0.8125, 0.09375, 0.5, 0.125).within_noise);
  EXPECT_FALSE(ss::auc_difference(0.8125 + 1e-9, 0.09375, 0.5, 0.125).within_noise);
}

// {100, 104, 98, 110, 101} in step order: median 101; batch means (noise.h batch_means) b 2, a 2:
// 102 and 104, mean 103, sigma^2 2 / 1 x (1 + 1) = 4, bm_se sqrt(4 / 4) = 1, floored at the
// independent-samples se sqrt(21.8 / 5) = 2.0881 (deviations from 102.6: -2.6, 1.4, -4.6, 7.4,
// -1.6, squares 87.2 / 4 = 21.8); the difference SE of two such means sqrt(2) x 2.0881 = 2.9530,
// and a gain within 2 x that (5.906) is within the noise.
TEST(Ux43StepNoise, BatchMeansOfTheStepTimesAndTheGainAgainstIt) {
  const ss::StepNoise n = ss::step_time_noise({100, 104, 98, 110, 101});
  EXPECT_EQ(n.steps, 5);
  EXPECT_EQ(n.median_ns, 101);
  EXPECT_NEAR(n.mean_se_ns, std::sqrt(21.8 / 5), 1e-12);
  EXPECT_EQ(n.batch_size, 2);
  EXPECT_NEAR(n.mean_diff_se_ns, std::sqrt(2 * 21.8 / 5), 1e-12);
  EXPECT_TRUE(ss::gain_within_step_noise(5.5, n));   // 5.5 <= 5.906
  EXPECT_FALSE(ss::gain_within_step_noise(6.0, n));  // 6 > 5.906
  const auto bm = ss::batch_means({100, 104, 98, 110, 101});
  ASSERT_TRUE(bm.has_value());
  EXPECT_DOUBLE_EQ(bm->bm_se, 1.0);
  EXPECT_DOUBLE_EQ(bm->df, 1.0);
  const ss::StepNoise two = ss::step_time_noise({100, 300});
  EXPECT_FALSE(two.known());
  EXPECT_FALSE(ss::gain_within_step_noise(1.0, two));  // nothing to hold the gain against
}

TEST(Ux43RebalanceSlowdown, SaysTheStepGotSlowerInsteadOfADash) {
  ss::RebalanceEffect e;
  e.rebalance.moves = 3;
  e.rebalance.outcome = "complete";
  e.step_p50_before_ns = 156'810'000;
  e.step_p50_after_ns = 221'620'000;
  EXPECT_EQ(ss::rebalance_slowdown_text(e), "the measured step got slower after the rebalance (156.81 ms -> 221.62 ms)");
  e.step_p50_after_ns = 150'000'000;  // faster: amortised says it
  EXPECT_EQ(ss::rebalance_slowdown_text(e), "");
  e.step_p50_after_ns = 221'620'000;
  e.rebalance.moves = 0;  // nothing moved: the same plan ran before and after
  EXPECT_EQ(ss::rebalance_slowdown_text(e), "");
}
