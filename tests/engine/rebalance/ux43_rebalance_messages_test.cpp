// tester42 F7 and F8: `embedscope rebalance` says when --window was cut to the session, how to get
// the plan it recommends (--plan-out), and holds a gain within the step time's run-to-run noise;
// a workload's max_bytes_per_move 0 is unlimited as the flag's is; a policy that cannot fire
// within the run is warned about. Step times and lookup ns are set by hand (SQL), so every figure
// is hand-computed.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/rebalance/policy_reach.h"
#include "embedscope/engine/workload/spec.h"
#include "engine/rebalance/straggler_workload.h"
#include "support/cli_run.h"

using nlohmann::json;

namespace {
std::filesystem::path ux43_rb_scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("es_ux43_rb_" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}
embedscope::test_support::CliResult ux43_rb_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, ux43_rb_scratch());
}
void ux43_sql(const std::filesystem::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(h);
  sqlite3_close(h);
}
/// The straggler (3 steps; ranks 0..2 32 ids a step, rank 3 768) with every step's window set to
/// `ms[step]` ms on every rank and 10 lookup ns per id; its backward_fused_optimizer ops removed,
/// so the gain is the lookups' alone (measured update times would make it vary from run to run).
std::filesystem::path ux43_straggler(const std::string& name, const std::array<int, 3>& ms) {
  const auto wl = ux43_rb_scratch() / (name + ".json");
  std::ofstream(wl) << embedscope::test_support::straggler_workload(name).dump(2);
  const auto db = ux43_rb_scratch() / (name + ".db");
  const auto r = ux43_rb_cli("run " + wl.string() + " -o " + db.string() + " --force-overwrite");
  EXPECT_EQ(r.code, 0) << r.err;
  ux43_sql(db, "DELETE FROM op_blocks; DELETE FROM ops WHERE name_id = (SELECT id FROM strings WHERE value = "
               "'backward_fused_optimizer'); UPDATE load_counters SET lookup_ns = ids * 10; UPDATE steps SET end_ns = start_ns + 1000000 * CASE step "
               "WHEN 0 THEN " + std::to_string(ms[0]) + " WHEN 1 THEN " + std::to_string(ms[1]) + " ELSE " +
               std::to_string(ms[2]) + " END WHERE step >= 0");
  return db;
}
}  // namespace

// Ids a window of 3 steps: {96, 96, 96, 2304} -> {672, 672, 672, 576}: the slowest rank looks up
// (2304 - 672) / 3 = 544 fewer ids a step, x 10 ns = 5440 ns = 0.0054 ms a step.
// Steps of 100, 200, 300 ms: median 200; batches of 1 (3 steps): se sd / sqrt(3) = 100 / sqrt(3) =
// 57.735 ms, the noise of the difference of two 3-step means sqrt(2) x 57.735 = 81.65 ms: the gain
// is within it.
TEST(Ux43RebalanceMessages, AGainWithinTheStepNoiseIsNotCalledWorthIt) {
  const auto db = ux43_straggler("ux43_noisy", {100, 200, 300});
  auto r = ux43_rb_cli("rebalance " + db.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json p = json::parse(r.out);
  EXPECT_TRUE(p["worth_it"].get<bool>());  // the load balances ...
  EXPECT_EQ(p["verdict"], "within_step_noise");  // ... but the step would not show it
  EXPECT_NEAR(p["lookup_ns_saved_per_step_predicted"].get<double>(), 5440.0, 1e-6);
  ASSERT_TRUE(p["step_noise"].is_object()) << r.out;
  EXPECT_EQ(p["step_noise"]["steps"], 3);
  EXPECT_EQ(p["step_noise"]["median_ns"], 200'000'000);
  EXPECT_NEAR(p["step_noise"]["mean_se_ns"].get<double>(), 100'000'000.0 / std::sqrt(3.0), 1e-3);
  EXPECT_EQ(p["step_noise"]["batch_size"], 1);
  EXPECT_NEAR(p["step_noise"]["mean_diff_se_ns"].get<double>(), 100'000'000.0 * std::sqrt(2.0 / 3.0), 1e-3);
  EXPECT_TRUE(p["step_noise"]["gain_within_noise"].get<bool>());
  r = ux43_rb_cli("rebalance " + db.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("verdict      within the step's noise: the load balances (ids max/mean 3.56 -> 1.04), but about "
                       "0.01 ms a step is within the noise of a 200.00 ms step; run the new plan and compare the two "
                       "sessions before adopting it (--plan-out FILE writes it)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("verdict      worth it"), std::string::npos) << r.out;
}

// The same load with steps of exactly 100 ms: no spread, the gain clears the noise; without
// --plan-out the verdict says how to get the plan (tester42 F7).
TEST(Ux43RebalanceMessages, AClearGainSaysHowToWriteThePlan) {
  const auto db = ux43_straggler("ux43_quiet", {100, 100, 100});
  auto r = ux43_rb_cli("rebalance " + db.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("verdict      worth it: run with the new plan (write it with --plan-out FILE, then run ... --plan "
                       "FILE)\n"),
            std::string::npos)
      << r.out;
  const auto plan = ux43_rb_scratch() / "ux43_quiet_plan.json";
  r = ux43_rb_cli("rebalance " + db.string() + " --plan-out " + plan.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("verdict      worth it: run with the new plan (written to " + plan.string() + ")\n"), std::string::npos)
      << r.out;
  EXPECT_TRUE(json::parse(ux43_rb_cli("rebalance " + db.string() + " --json").out)["verdict"] == "worth_it");
}

// --window 100 on a 3-step session counts steps 0..2 and says so (tester42 F7).
TEST(Ux43RebalanceMessages, AWindowLongerThanTheSessionIsSaidToBeCut) {
  const auto db = ux43_straggler("ux43_window", {100, 100, 100});
  auto r = ux43_rb_cli("rebalance " + db.string() + " --window 100");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("steps 0..2 (3 step(s))"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("window       --window 100 is longer than the session's 3 measured step(s): cut to steps 0..2\n"),
            std::string::npos)
      << r.out;
  r = ux43_rb_cli("rebalance " + db.string() + " --window 3");
  EXPECT_EQ(r.out.find("window       "), std::string::npos) << r.out;  // nothing cut
  EXPECT_EQ(json::parse(ux43_rb_cli("rebalance " + db.string() + " --window 100 --json").out)["window_cut_note"],
            "--window 100 is longer than the session's 3 measured step(s): cut to steps 0..2");
}

// "max_bytes_per_move": 0 in a workload is unlimited, as --max-bytes-per-move 0 is; a policy that
// cannot fire within the run's steps is run, with a warning.
TEST(Ux43RebalanceMessages, WorkloadByteBudgetZeroIsUnlimitedAndANeverFiringPolicyIsWarned) {
  json j = embedscope::test_support::straggler_workload("ux43_live");
  j["rebalance"] = {{"every", 2}, {"max_bytes_per_move", 0}};
  const auto wl = ux43_rb_scratch() / "ux43_live.json", db = ux43_rb_scratch() / "ux43_live.db";
  std::ofstream(wl) << j.dump(2);
  auto r = ux43_rb_cli("run " + wl.string() + " -o " + db.string() + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("warning: "), std::string::npos) << r.err;
  const json s = json::parse(ux43_rb_cli("stats " + db.string() + " --json").out);
  ASSERT_EQ(s["rebalances"].size(), 1u);
  EXPECT_EQ(s["rebalances"][0]["moves"], 3);  // every hot table but one, no budget
  j["rebalance"] = {{"every", 50}};
  std::ofstream(wl) << j.dump(2);
  r = ux43_rb_cli("run " + wl.string() + " -o " + db.string() + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: " + wl.string() + ": /rebalance/every: 50 with 3 measured steps: the policy first looks "
                       "after step 49 and never after the last one (step 2), so it never fires; give every <= 2, or more "
                       "steps\n"),
            std::string::npos)
      << r.err;
}

TEST(Ux43RebalanceMessages, NeverFiresByTheFirstStepAfterWhichThePolicyLooks) {
  namespace es = embedscope::engine;
  es::WorkloadSpec s;
  s.steps = 10;
  EXPECT_EQ(es::rebalance::rebalance_never_fires(s), "");  // off
  s.rebalance.trigger = es::RebalanceTrigger::every;
  s.rebalance.every = 9;  // looks after step 8, before the last (9)
  EXPECT_EQ(es::rebalance::rebalance_never_fires(s), "");
  s.rebalance.every = 10;  // after step 9, the last: never
  EXPECT_EQ(es::rebalance::rebalance_never_fires(s),
            "/rebalance/every: 10 with 10 measured steps: the policy first looks after step 9 and never after the last "
            "one (step 9), so it never fires; give every <= 9, or more steps");
  s.rebalance.trigger = es::RebalanceTrigger::when;
  s.rebalance.imbalance_above = 1.5;
  s.rebalance.window = 10;
  EXPECT_EQ(es::rebalance::rebalance_never_fires(s),
            "/rebalance/when/window: 10 with 10 measured steps: the policy first looks after step 9 and never after the "
            "last one (step 9), so it never fires; give window <= 9, or more steps");
  s.rebalance.window = 9;
  EXPECT_EQ(es::rebalance::rebalance_never_fires(s), "");
}

// tester47 F5: a window of 1 or 2 steps has no step noise to judge the gain against (3 steps
// needed); the verdict said "worth it" there, for a gain the 3-step window holds within the noise.
// Now: "gain not checked against noise", with the reason and how to get a judgement.
TEST(Fixd47RebalanceWindow, TooFewStepsForTheNoiseRuleIsNeverWorthIt) {
  const auto db = ux43_straggler("fixd47_window", {100, 100, 100});
  for (const char* w : {"1", "2"}) {
    SCOPED_TRACE(w);
    auto r = ux43_rb_cli("rebalance " + db.string() + " --window " + w + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const json p = json::parse(r.out);
    EXPECT_TRUE(p["worth_it"].get<bool>());  // the load balances ...
    EXPECT_EQ(p["verdict"], "gain_not_checked_against_noise");  // ... but nothing says the step would show it
    EXPECT_TRUE(p["step_noise"].is_null());
    EXPECT_EQ(p["step_noise_note"], std::string("unknown: ") + w + " step(s) in the window, 3 needed; give --window 3 or more");
    r = ux43_rb_cli("rebalance " + db.string() + " --window " + w);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find(std::string("step noise   unknown: ") + w +
                         " step(s) in the window, 3 needed to measure the step time's run-to-run noise (give --window 3 "
                         "or more)\n"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("verdict      gain not checked against noise: the load balances (ids max/mean 3.56 -> 1.04)"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("verdict      worth it"), std::string::npos) << r.out;
  }
  // the whole 3-step session judges it (steps of exactly 100 ms: the gain clears the noise)
  EXPECT_EQ(json::parse(ux43_rb_cli("rebalance " + db.string() + " --json").out)["verdict"], "worth_it");
}
