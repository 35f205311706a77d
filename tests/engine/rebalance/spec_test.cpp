// The workload's "rebalance" policy (issue 17): its JSON forms, every out-of-range value refused
// naming its JSON pointer, the round trip through to_json, and the CLI's exit 2.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/spec.h"
#include "support/cli_run.h"

using namespace embedscope::engine;
using nlohmann::json;

namespace {

json base(int devices = 4) {
  return {{"name", "w"},
          {"batch_size", 8},
          {"steps", 4},
          {"devices", {{"count", devices}}},
          {"tables", {{{"name", "t0"}, {"num_embeddings", 100}, {"embedding_dim", 4}, {"feature_names", {"f0"}}}}}};
}

std::string error_of(const json& rebalance, int devices = 4) {
  json j = base(devices);
  j["rebalance"] = rebalance;
  try {
    parse_workload(j, "w");
  } catch (const SpecError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST(RebalanceSpec, OffByDefaultAndAsTheStringOff) {
  EXPECT_EQ(parse_workload(base(), "w").rebalance.trigger, RebalanceTrigger::off);
  json j = base();
  j["rebalance"] = "off";
  const WorkloadSpec s = parse_workload(j, "w");
  EXPECT_FALSE(s.rebalance.enabled());
  EXPECT_FALSE(to_json(s).contains("rebalance"));  // absent = off
}

TEST(RebalanceSpec, EveryAndWhenFormsRoundTrip) {
  json j = base();
  j["rebalance"] = {{"every", 10}, {"max_bytes_per_move", 1 << 20}, {"cooldown_steps", 3}};
  WorkloadSpec s = parse_workload(j, "w");
  EXPECT_EQ(s.rebalance.trigger, RebalanceTrigger::every);
  EXPECT_EQ(s.rebalance.every, 10);
  EXPECT_EQ(s.rebalance.max_bytes_per_move, 1 << 20);
  EXPECT_EQ(s.rebalance.cooldown_steps, 3);
  EXPECT_EQ(to_json(s)["rebalance"], json({{"every", 10}, {"max_bytes_per_move", 1 << 20}, {"cooldown_steps", 3}}));
  EXPECT_EQ(parse_workload(to_json(s), "again").rebalance.every, 10);
  EXPECT_FALSE(s.rebalance.row_wise_hot_tables);  // default: only whole tables move
  j["rebalance"]["row_wise_hot_tables"] = true;
  s = parse_workload(j, "w");
  EXPECT_TRUE(s.rebalance.row_wise_hot_tables);
  EXPECT_EQ(to_json(s)["rebalance"]["row_wise_hot_tables"], json(true));
  EXPECT_TRUE(parse_workload(to_json(s), "again").rebalance.row_wise_hot_tables);

  j["rebalance"] = {{"when", {{"imbalance_above", 1.5}, {"window", 4}}}};
  s = parse_workload(j, "w");
  EXPECT_EQ(s.rebalance.trigger, RebalanceTrigger::when);
  EXPECT_DOUBLE_EQ(s.rebalance.imbalance_above, 1.5);
  EXPECT_EQ(s.rebalance.window, 4);
  EXPECT_EQ(s.rebalance.max_bytes_per_move, 0);  // unlimited
  EXPECT_EQ(s.rebalance.cooldown_steps, 0);
  const WorkloadSpec back = parse_workload(to_json(s), "again");
  EXPECT_EQ(back.rebalance.trigger, RebalanceTrigger::when);
  EXPECT_DOUBLE_EQ(back.rebalance.imbalance_above, 1.5);
  EXPECT_EQ(back.rebalance.window, 4);
}

TEST(RebalanceSpec, ShapeErrorsNameThePointer) {
  EXPECT_EQ(error_of("on"), "w: /rebalance: must be \"off\" or an object with \"every\" or \"when\", got \"on\"");
  EXPECT_EQ(error_of(3), "w: /rebalance: must be \"off\" or an object with \"every\" or \"when\", got number");
  EXPECT_EQ(error_of(json::object()), "w: /rebalance: needs \"every\" (steps) or \"when\" ({\"imbalance_above\", \"window\"})");
  EXPECT_EQ(error_of({{"every", 2}, {"when", {{"imbalance_above", 1.5}, {"window", 2}}}}),
            "w: /rebalance: give one of \"every\" and \"when\", not both");
  EXPECT_EQ(error_of({{"every", 2}, {"often", true}}), "w: /rebalance/often: unknown key");
  EXPECT_EQ(error_of({{"when", {{"imbalance_above", 1.5}, {"window", 2}, {"metric", "ids"}}}}),
            "w: /rebalance/when/metric: unknown key");
  EXPECT_EQ(error_of({{"when", 2}}), "w: /rebalance/when: must be an object, got number");
  EXPECT_EQ(error_of({{"when", {{"window", 2}}}}), "w: /rebalance/when/imbalance_above: required");
  EXPECT_EQ(error_of({{"when", {{"imbalance_above", 1.5}}}}), "w: /rebalance/when/window: required");
  EXPECT_EQ(error_of({{"every", 1.5}}), "w: /rebalance/every: must be an integer, got 1.5");
  EXPECT_EQ(error_of({{"every", "often"}}), "w: /rebalance/every: must be an integer, got string");
  EXPECT_EQ(error_of({{"when", {{"imbalance_above", "high"}, {"window", 2}}}}),
            "w: /rebalance/when/imbalance_above: must be a number, got string");
}

TEST(RebalanceSpec, EveryOutOfRangeValueNamesItsPointer) {
  EXPECT_EQ(error_of({{"every", 0}}), "w: /rebalance/every: must be > 0, got 0");
  EXPECT_EQ(error_of({{"every", 2000000000}}), "w: /rebalance/every: must be <= 1000000000, got 2000000000");
  EXPECT_EQ(error_of({{"when", {{"imbalance_above", 1.0}, {"window", 2}}}}),
            "w: /rebalance/when/imbalance_above: must be in (1, devices.count = 4) (max/mean over 4 ranks is in "
            "[1, 4]), got 1");
  EXPECT_EQ(error_of({{"when", {{"imbalance_above", 4}, {"window", 2}}}}),
            "w: /rebalance/when/imbalance_above: must be in (1, devices.count = 4) (max/mean over 4 ranks is in "
            "[1, 4]), got 4");
  EXPECT_EQ(error_of({{"when", {{"imbalance_above", 3.99}, {"window", 2}}}}), "(accepted)");
  EXPECT_EQ(error_of({{"when", {{"imbalance_above", 1.5}, {"window", 0}}}}), "w: /rebalance/when/window: must be > 0, got 0");
  EXPECT_EQ(error_of({{"when", {{"imbalance_above", 1.5}, {"window", 1000000001}}}}),
            "w: /rebalance/when/window: must be <= 1000000000, got 1000000001");
  // 0 = unlimited, as `rebalance --max-bytes-per-move 0` (tester42 F7)
  EXPECT_EQ(error_of({{"every", 2}, {"max_bytes_per_move", 0}}), "(accepted)");
  EXPECT_EQ(error_of({{"every", 2}, {"max_bytes_per_move", -1}}), "w: /rebalance/max_bytes_per_move: must be >= 0, got -1");
  EXPECT_EQ(error_of({{"every", 2}, {"max_bytes_per_move", int64_t{1} << 51}}),
            "w: /rebalance/max_bytes_per_move: must be <= 1125899906842624, got 2251799813685248");
  EXPECT_EQ(error_of({{"every", 2}, {"cooldown_steps", -1}}), "w: /rebalance/cooldown_steps: must be >= 0, got -1");
  EXPECT_EQ(error_of({{"every", 2}, {"cooldown_steps", 1000000001}}),
            "w: /rebalance/cooldown_steps: must be <= 1000000000, got 1000000001");
  EXPECT_EQ(error_of({{"every", 2}, {"row_wise_hot_tables", 1}}),
            "w: /rebalance/row_wise_hot_tables: must be true or false, got number");
  EXPECT_EQ(error_of({{"every", 2}}, 1), "w: /rebalance: needs devices.count >= 2 (nothing to balance), got 1");
  EXPECT_EQ(error_of("off", 1), "(accepted)");
}

TEST(RebalanceSpec, ValidateSeesACommandLineDeviceCount) {
  json j = base(4);
  j["rebalance"] = {{"when", {{"imbalance_above", 2.5}, {"window", 2}}}};
  WorkloadSpec s = parse_workload(j, "w");
  s.devices.count = 2;  // as run --devices 2 sets it
  try {
    validate(s, "w");
    FAIL() << "accepted";
  } catch (const SpecError& e) {
    EXPECT_STREQ(e.what(), "w: /rebalance/when/imbalance_above: must be in (1, devices.count = 2) (max/mean over 2 "
                           "ranks is in [1, 2]), got 2.5");
  }
}

TEST(RebalanceSpec, CliRefusesAnOutOfRangeValueWithExit2NamingThePointer) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_rebalance_spec_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  json j = base();
  j["rebalance"] = {{"when", {{"imbalance_above", 1.5}, {"window", -3}}}};
  const auto path = dir / "bad_rebalance.json";
  std::ofstream(path) << j.dump(2);
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "plan " + path.string(), dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad_rebalance.json: /rebalance/when/window: must be > 0, got -3"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

TEST(RebalanceSpec, BalanceIsIdsByDefaultOrLookupTimeAndBadValuesNameThePointer) {
  json j = base();
  j["rebalance"] = {{"every", 2}};
  EXPECT_EQ(parse_workload(j, "w").rebalance.balance, RebalanceBalance::ids);
  EXPECT_FALSE(to_json(parse_workload(j, "w"))["rebalance"].contains("balance"));  // the default stays implicit
  j["rebalance"]["balance"] = "ids";
  EXPECT_EQ(parse_workload(j, "w").rebalance.balance, RebalanceBalance::ids);
  j["rebalance"]["balance"] = "lookup_time";
  const WorkloadSpec s = parse_workload(j, "w");
  EXPECT_EQ(s.rebalance.balance, RebalanceBalance::lookup_time);
  EXPECT_EQ(to_json(s)["rebalance"]["balance"], "lookup_time");
  EXPECT_EQ(parse_workload(to_json(s), "again").rebalance.balance, RebalanceBalance::lookup_time);
  EXPECT_EQ(error_of({{"every", 2}, {"balance", "time"}}),
            "w: /rebalance/balance: must be \"ids\" or \"lookup_time\", got \"time\"");
  EXPECT_EQ(error_of({{"every", 2}, {"balance", 1}}), "w: /rebalance/balance: must be \"ids\" or \"lookup_time\", got number");
}
