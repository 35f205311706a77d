// Live rebalancing that moves nothing (issue 17, from a new user's try): a firing that moved
// nothing has no steps to amortise; after a refusal the policy does not propose again (nor record
// the same refusal) while the load stays where it was; the refusals read one per move; and
// `embedscope run` / `stats` say what each rebalance did, as text and as JSON.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "embedscope/engine/rebalance/reshard.h"
#include "embedscope/sessions/analysis/rebalance_effect.h"
#include "engine/rebalance/live_fixtures.h"
#include "engine/rebalance/straggler_workload.h"
#include "support/cli_run.h"

using nlohmann::json;

namespace {

std::filesystem::path repeat_scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("es_repeat_refusal_" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

embedscope::test_support::CliResult repeat_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, repeat_scratch());
}

// The straggler (straggler_workload.h: per step ranks 0..2 look up 32 ids, rank 3 768; h0..h3
// are 500 x 8 fp32, 16000 B, sgd) over 6 steps with `policy` as its rebalance.
std::string straggler_with(const json& policy, const std::string& name) {
  json w = embedscope::test_support::straggler_workload(name);
  w["steps"] = 6;
  w["rebalance"] = policy;
  const auto path = repeat_scratch() / (name + ".json");
  std::ofstream(path) << w.dump(2);
  return path.string();
}

}  // namespace

// Steps 0..3 take 10, 10, 4, 6 ns; a firing after step 1 over 2 steps took 12 ns. Moving
// something, the median step fell 10 -> 4: 12 / 6 = 2 steps to pay for itself. Moving nothing
// (or a move that failed), the same medians are noise of one plan: no figure.
TEST(RebalanceNothingMoved, HasNoAmortisedFigure) {
  using namespace embedscope::sessions;
  std::vector<StepMetric> steps;
  const int64_t ns[4] = {10, 10, 4, 6};
  for (int64_t s = 0; s < 4; ++s) steps.push_back({s, 0, 100 * s, 100 * s + ns[s], 0, 0, 0});
  RebalanceRecord r;
  r.step = 1;
  r.window_steps = 2;
  r.after_steps = 2;
  r.duration_ns = 12;
  r.moves = 1;
  EXPECT_DOUBLE_EQ(rebalance_effects({r}, steps)[0].amortised_after_steps, 2.0);
  r.moves = 0;
  const auto e = rebalance_effects({r}, steps)[0];
  EXPECT_EQ(e.step_p50_before_ns, 10);  // the step times are still given
  EXPECT_EQ(e.step_p50_after_ns, 4);
  EXPECT_DOUBLE_EQ(e.amortised_after_steps, -1.0);
  r.moves = 1;
  r.outcome = "failed: the run ended during the move (rank 0: in the reshard all-to-all); no shard of it is kept";
  EXPECT_DOUBLE_EQ(rebalance_effects({r}, steps)[0].amortised_after_steps, -1.0);
}

// The stored refusals ("; "-joined since schema 6) cut one per move, each with its table.
TEST(RebalanceRefusedText, CutsOnePerMoveWithItsTable) {
  using embedscope::sessions::refused_moves;
  const std::string a = "table \"h1\" (2.5 MiB) from rank 3 to rank 0: exceeds max_bytes_per_move: 0 B already moved + "
                        "2.5 MiB > 97.7 KiB";
  const std::string b = "table \"t;2\" (1.0 KiB) from rank 1 to row_wise over 4 ranks: rank 2 would need 9.1 MiB of "
                        "8.0 MiB (weights 1 B, optimizer state 0 B, dense 0 B, buffers 0 B)";
  const auto m = refused_moves(a + "; " + b);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].table, "h1");
  EXPECT_EQ(m[0].reason, a);
  EXPECT_EQ(m[1].table, "t;2");
  EXPECT_EQ(m[1].reason, b);
  EXPECT_TRUE(refused_moves("").empty());
  // a text in another form: one refusal, whole, naming no table
  const auto other = refused_moves("no room; none at all");
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0].table, "");
  EXPECT_EQ(other[0].reason, "no room; none at all");
}

// load_shift by hand: {30, 10} vs {25, 15} moves an eighth of the load.
TEST(RebalanceLoadShift, IsTheShareOfTheLoadThatWentElsewhere) {
  using embedscope::engine::rebalance::load_shift;
  EXPECT_DOUBLE_EQ(load_shift({{30, 10}}, {{25, 15}}), 0.125);
  EXPECT_DOUBLE_EQ(load_shift({{30}, {10}}, {{60}, {20}}), 0.0);  // twice the load, the same shares
  EXPECT_DOUBLE_EQ(load_shift({{1, 0}}, {{0, 1}}), 1.0);
  EXPECT_DOUBLE_EQ(load_shift({{1, 0}}, {{1}, {0}}), 1.0);  // another plan's shape
  EXPECT_DOUBLE_EQ(load_shift({{0, 0}}, {{0, 0}}), 0.0);
  EXPECT_DOUBLE_EQ(load_shift({{0, 0}}, {{0, 3}}), 1.0);
}

// A byte budget below every table: the firing after step 1 refuses every move; the one after
// step 3 sees the same load on the same plan and is not proposed again - the run keeps one
// record of the refusal, with its reasons, and still trains to the reference.
TEST(RebalanceRepeatedRefusal, IsProposedAndRecordedOnce) {
  using namespace embedscope::engine;
  WorkloadSpec s = embedscope::test_support::crowded_live_spec(2, OptimizerType::sgd);
  s.rebalance.max_bytes_per_move = 8;  // t1 alone is 1 x 4 floats = 16 bytes
  const RunResult run = parity::check_parity(s);
  ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
  ASSERT_EQ(run.rebalances.size(), 1u);
  EXPECT_EQ(run.rebalances[0].step, 1);
  EXPECT_EQ(run.rebalances[0].moves, 0);
  EXPECT_NE(run.rebalances[0].refused.find("exceeds max_bytes_per_move"), std::string::npos) << run.rebalances[0].refused;
  EXPECT_TRUE(run.plan_changes.empty());
}

// `run` prints one line per rebalance and gives them in --json; `stats --json` gives the
// refusals as {table, reason} objects and no amortised figure for a firing that moved nothing.
TEST(RebalanceRunOutput, RefusedRebalanceIsPrintedOnceWithItsReasons) {
  const std::string wl = straggler_with({{"every", 2}, {"max_bytes_per_move", 1000}}, "refused");
  const auto db = (repeat_scratch() / "refused.db").string();
  auto r = repeat_cli("run " + wl + " -o " + db + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  // ids per step: ranks 0..2 32, rank 3 768: 768 x 4 / 864 = 3.56
  EXPECT_NE(r.out.find("rebalance after step 1: refused, nothing moved (ids max/mean 3.56; "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exceeds max_bytes_per_move: 0 B already moved + 15.6 KiB > 1000 B"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("rebalance after step 3"), std::string::npos) << r.out;  // the same load: not proposed again
  r = repeat_cli("stats " + db + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["rebalances"].size(), 1u);
  const json& rb = j["rebalances"][0];
  EXPECT_EQ(rb["moves"], 0);
  EXPECT_TRUE(rb["amortised_after_steps"].is_null());
  ASSERT_TRUE(rb["refused"].is_array());
  ASSERT_FALSE(rb["refused"].empty());
  for (const json& m : rb["refused"]) {
    const std::string table = m["table"].get<std::string>();
    EXPECT_EQ(table.size(), 2u) << table;  // c0..c2, h0..h3
    EXPECT_EQ(m["reason"].get<std::string>().rfind("table \"" + table + "\" (", 0), 0u) << m;
    EXPECT_NE(m["reason"].get<std::string>().find("exceeds max_bytes_per_move"), std::string::npos) << m;
  }
  r = repeat_cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("        refused: table \"h"), std::string::npos) << r.out;  // one line a move
}

TEST(RebalanceRunOutput, MovingRebalanceIsPrintedWithItsMovesAndInJson) {
  const std::string wl = straggler_with({{"every", 2}, {"cooldown_steps", 10}}, "moving");
  auto r = repeat_cli("run " + wl + " -o " + (repeat_scratch() / "moving.db").string() + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  // three hot tables to ranks 0..2: per step 32 + 192 = 224 on ranks 0..2, 192 on rank 3:
  // 224 x 4 / 864 = 1.04; 3 x 16000 B
  EXPECT_NE(r.out.find("rebalance after step 1: 3 table(s) moved, 46.9 KiB, ids max/mean 3.56 -> 1.04 predicted, 1.04 "
                       "observed; "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("sharding plan (as the run started; the live rebalances below changed it)"), std::string::npos);
  EXPECT_NE(r.out.find(": rank 3 -> rank 0 (15.6 KiB)"), std::string::npos) << r.out;
  r = repeat_cli("run " + wl + " -o " + (repeat_scratch() / "moving2.db").string() + " --force-overwrite --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["rebalances"].size(), 1u);
  EXPECT_EQ(j["rebalances"][0]["step"], 1);
  EXPECT_EQ(j["rebalances"][0]["moves"], 3);
  EXPECT_EQ(j["rebalances"][0]["bytes_moved"], 48000);
  EXPECT_NEAR(j["rebalances"][0]["imbalance_before"].get<double>(), 768.0 * 4 / 864, 1e-12);
  EXPECT_TRUE(j["rebalances"][0]["refused"].empty());
  EXPECT_EQ(j["plan_changes"].size(), 3u);
}
