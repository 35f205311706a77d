// `embedscope rebalance SESSION --balance lookup_time` applies the live policy's noise rule
// (engine/rebalance/noise.h): the load is each shard's median step over the window, and a move
// whose predicted gain is within the window's noise is held and printed as a refusal with its
// numbers. The session's lookup ns are set by hand (SQL) so that every figure is hand-computed.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/rebalance/straggler_workload.h"
#include "support/cli_run.h"

using nlohmann::json;

namespace {
std::filesystem::path cli_noise_scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("es_cli_noise_" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}
embedscope::test_support::CliResult cli_noise_run(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, cli_noise_scratch());
}

/// A run of the straggler (c0..c2 on ranks 0..2, h0..h3 on rank 3; 3 steps) whose lookup ns are
/// then set: c0 `c0_ns[step]`, c1 and c2 1000 a step; each hot table `hot_ns[step]`.
std::filesystem::path cli_noise_session(const std::string& name, const std::array<int, 3>& c0_ns,
                                        const std::array<int, 3>& hot_ns) {
  const auto wl = cli_noise_scratch() / (name + ".json");
  std::ofstream(wl) << embedscope::test_support::straggler_workload(name).dump(2);
  const auto db = cli_noise_scratch() / (name + ".db");
  const auto r = cli_noise_run("run " + wl.string() + " -o " + db.string() + " --force-overwrite");
  EXPECT_EQ(r.code, 0) << r.err;
  sqlite3* h = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  auto by_step = [](const std::array<int, 3>& v) {
    return "CASE step WHEN 0 THEN " + std::to_string(v[0]) + " WHEN 1 THEN " + std::to_string(v[1]) + " ELSE " +
           std::to_string(v[2]) + " END";
  };
  const std::string sql = "UPDATE load_counters SET lookup_ns = CASE WHEN table_index = 0 THEN " + by_step(c0_ns) +
                          " WHEN table_index < 3 THEN 1000 ELSE " + by_step(hot_ns) + " END";
  EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(h);
  return db;
}
}  // namespace

// Hand-computed (noise.h's formulas), steps 0..2, ranks' lookup ns a step:
//   cold ranks 0-2: 1000 each step; rank 3 (4 hot tables): 4 x {400, 250, 600} = {1600, 1000, 2400}.
// Median load: hot 3 x 400 = 1200 each, rank 3 4800; cold 3000: {3000, 3000, 3000, 4800}, max/mean
// 4800 x 4 / 13800 = 1.3913 (the window's sum would give 5000: 1.4286). The proposal moves h3 to
// rank 0: {4200, 3000, 3000, 3600}, 1.2174; gain 0.1739 (12.5%). Noise: shares 4 x / T per step,
// rank 3 {1.3913, 1.0, 1.7778}: median 1.3913, deviations {0, 0.3913, 0.3865}, MAD 0.3865,
// sigma 1.4826 x 0.3865 / sqrt(3) = 0.3308 (ranks 0-2: 0.1103). 0.1739 < 2 x 0.3308: held.
TEST(RebalanceCliNoise, AGainWithinTheNoiseIsHeldAndPrintedWithItsNumbers) {
  const auto db = cli_noise_session("cli_noisy", {1000, 1000, 1000}, {400, 250, 600});
  auto r = cli_noise_run("rebalance " + db.string() + " --balance lookup_time --window 3 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json p = json::parse(r.out);
  EXPECT_EQ(p["load_before"], json({3000, 3000, 3000, 4800}));
  EXPECT_NEAR(p["imbalance_before"].get<double>(), 4800.0 * 4 / 13800, 1e-9);
  EXPECT_TRUE(p["moves"].empty()) << r.out;
  EXPECT_FALSE(p["worth_it"].get<bool>());
  EXPECT_EQ(p["load_after"], p["load_before"]);
  ASSERT_TRUE(p["noise"].is_object()) << r.out;
  EXPECT_NEAR(p["noise"]["sigma"].get<double>(), 0.3308133, 1e-6);
  EXPECT_NEAR(p["noise"]["gain"].get<double>(), 4800.0 * 4 / 13800 - 4200.0 * 4 / 13800, 1e-9);
  EXPECT_NEAR(p["noise"]["relative_gain"].get<double>(), 0.125, 1e-9);
  EXPECT_EQ(p["noise"]["steps"], 3);
  EXPECT_FALSE(p["noise"]["enough"].get<bool>());
  ASSERT_EQ(p["refused"].size(), 1u) << r.out;
  EXPECT_EQ(p["refused"][0]["table"], "h3");
  EXPECT_EQ(p["refused"][0]["from"], 3);
  EXPECT_EQ(p["refused"][0]["to"], 0);
  const std::string why =
      "from rank 3 to rank 0: the predicted gain, lookup ns max/mean 1.39 -> 1.22 (12.5%), is within the noise of the "
      "measured lookup ns: it needs > 2 x 0.331 (1.4826 MAD / sqrt(3) of the ranks' shares over 3 steps) and >= 5% of 1.39";
  EXPECT_NE(p["refused"][0]["reason"].get<std::string>().find(why), std::string::npos) << r.out;
  // the text output prints the refusal and the rule's numbers
  r = cli_noise_run("rebalance " + db.string() + " --balance lookup_time --window 3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("  refused: table \"h3\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(why), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("noise        gain 0.174 (12.5% of 1.39) against 2 x 0.331 (1.4826 MAD / sqrt(3) of the ranks' "
                       "shares over 3 steps) and 5%: held: within the noise"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("verdict      not worth it"), std::string::npos) << r.out;
  // the ids measure is a count: no noise rule
  r = cli_noise_run("rebalance " + db.string() + " --balance ids --window 3 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(json::parse(r.out)["noise"].is_null()) << r.out;
}

// The same medians in a quiet window: rank 3 {1600, 1600, 1600}, c0 {1000, 1010, 990} (median
// 1000). Shares of rank 0 {0.8696, 0.8764, 0.8627}: MAD 0.0068, sigma 0.0058 (the largest rank's);
// 0.1739 > 2 x 0.0058 and 12.5% >= 5%: h3 moves to rank 0, as the live policy would move it.
TEST(RebalanceCliNoise, AClearGainInAQuietWindowMoves) {
  const auto db = cli_noise_session("cli_quiet", {1000, 1010, 990}, {400, 400, 400});
  const auto r = cli_noise_run("rebalance " + db.string() + " --balance lookup_time --window 3 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json p = json::parse(r.out);
  EXPECT_EQ(p["load_before"], json({3000, 3000, 3000, 4800}));
  EXPECT_NEAR(p["noise"]["sigma"].get<double>(), 0.0058126, 1e-6);
  EXPECT_TRUE(p["noise"]["enough"].get<bool>());
  EXPECT_TRUE(p["worth_it"].get<bool>());
  ASSERT_EQ(p["moves"].size(), 1u) << r.out;
  EXPECT_EQ(p["moves"][0]["table"], "h3");
  EXPECT_EQ(p["moves"][0]["from"], 3);
  EXPECT_EQ(p["moves"][0]["to"], 0);
  EXPECT_EQ(p["load_after"], json({4200, 3000, 3000, 3600}));
  EXPECT_NEAR(p["imbalance_after_predicted"].get<double>(), 4200.0 * 4 / 13800, 1e-9);
  EXPECT_TRUE(p["refused"].empty()) << r.out;
}
