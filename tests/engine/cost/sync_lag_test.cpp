// The scheduling lag at a collective (hardware_profile.h CpuContention::sync_lag_ns): the
// simulator delays each member's arrival by a seeded exponential draw, so a call waits for the
// expected maximum of its members' lags; the profile key parses; calibrate recovers the lag from
// sessions timed by a known profile (their mean member wait per call).
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/calibration.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec_error.h"
#include "engine/cost/cost_sessions.h"

namespace es = embedscope::engine;
namespace fs = std::filesystem;

namespace {

fs::path sync_lag_dir() { return embedscope::test_support::cost_scratch_dir("sync_lag"); }

// round_numbers with a cpu block of `cores`, `groups` other task groups, the sync lag `lag_ns` and
// the oversubscription penalty `penalty`.
nlohmann::json sync_lag_profile(int cores, double groups, double lag_ns, double penalty = 0) {
  std::ifstream f(std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json");
  nlohmann::json j = nlohmann::json::parse(f);
  j["name"] = "sync_lag_round_numbers";
  j["cluster"] = {{"gpus_per_node", 8}, {"max_nodes", 1}};
  j["cpu"] = {{"cores", cores}, {"threads_per_rank", 1.0}, {"background_threads", 0.0}, {"other_groups", groups},
              {"sync_lag_ns", lag_ns}, {"oversubscription_penalty", penalty}};
  return j;
}

// criteo_kaggle on `ranks` simulated with that profile for `steps` steps, relabelled measured
// (load recorded as self 1, other `groups`).
std::string sync_lag_session(const std::string& name, int ranks, es::ShardingType type, int cores, double groups,
                             double lag_ns, int steps, double penalty = 0) {
  const std::string profile = (sync_lag_dir() / (name + ".json")).string();
  std::ofstream(profile) << sync_lag_profile(cores, groups, lag_ns, penalty).dump();
  return embedscope::test_support::criteo_as_measured(
      profile, (sync_lag_dir() / (name + ".db")).string(), ranks, type, steps,
      "INSERT OR REPLACE INTO metadata (key, value) VALUES ('cpu_cores', '" + std::to_string(cores) +
          "'), ('cpu_self_cores', '1.000'), ('cpu_other_cores', '" + std::to_string(groups) + "');");
}

// The session's mean over collective calls of the members' mean wait for the last arrival, ns
// (what calibrate fits the lag to), and the calls' count; only calls whose name starts with
// `prefix` when it is not empty.
std::pair<double, int> sync_lag_mean_wait(const std::string& path, const std::string& prefix = "") {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT group_name, sequence, start_ns, name FROM collectives WHERE step >= 0", -1, &st,
                               nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  std::map<std::pair<std::string, int64_t>, std::vector<int64_t>> calls;
  while (sqlite3_step(st) == SQLITE_ROW)
    if (std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 3))).rfind(prefix, 0) == 0)
      calls[{reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), sqlite3_column_int64(st, 1)}].push_back(
        sqlite3_column_int64(st, 2));
  sqlite3_finalize(st);
  sqlite3_close(db);
  double sum = 0;
  for (const auto& [key, arrivals] : calls) {
    const int64_t last = *std::max_element(arrivals.begin(), arrivals.end());
    double w = 0;
    for (int64_t a : arrivals) w += static_cast<double>(last - a);
    sum += w / static_cast<double>(arrivals.size());
  }
  return {calls.empty() ? 0.0 : sum / static_cast<double>(calls.size()), static_cast<int>(calls.size())};
}

}  // namespace

TEST(SyncLag, SimulatedCallsWaitForTheMaximumOfTheMembersLags) {
  // 8 cores and no other load: contention 1, the lag's factor (k + 1) / 8 (sync_lag_factor) with
  // k the compute ops running on the node at the arrival (conc46; before, n / 8 for n ranks). The
  // input_dist calls follow one another on the comm lane with no compute op running (a lag of 400
  // ms, L = 50 ms, dwarfs round_numbers' ops: us): k = 0, and a call's members arrive their delays
  // apart: n draws (E - L)+ with E exponential of mean L; the members' mean wait for the last is
  // L (e^-2 + 2 e^-1 (1 - e^-1)) / 2 = 0.300 L at 2 ranks, 0.759 L at 4 (Monte Carlo, 4e5 calls).
  // (The output_dist, dense all-reduce and grad_dist calls are reached while ranks compute - all
  // ranks' lookups right after the input_dist, a DDP bucket inside its dense op - so k > 0 there.)
  // Sampled over 20 steps x the input_dist calls (the draws are a hash, fixed).
  const double lag = 4e8;
  const std::string r2 = sync_lag_session("w_rw2", 2, es::ShardingType::row_wise, 8, 0.0, lag, 20);
  const std::string r4 = sync_lag_session("w_rw4", 4, es::ShardingType::row_wise, 8, 0.0, lag, 20);
  const std::string none = sync_lag_session("w_rw4_0", 4, es::ShardingType::row_wise, 8, 0.0, 0.0, 20);
  const auto [w2, calls2] = sync_lag_mean_wait(r2, "input_dist/");
  const auto [w4, calls4] = sync_lag_mean_wait(r4, "input_dist/");
  EXPECT_GT(calls2, 100);
  EXPECT_GT(calls4, 100);
  EXPECT_NEAR(w2 / (lag / 8), 0.300, 0.04);
  EXPECT_NEAR(w4 / (lag / 8), 0.759, 0.06);
  EXPECT_LT(sync_lag_mean_wait(none).first, 0.001 * lag);  // without the lag the members arrive together
  // deterministic: the same session again has the same steps
  const std::string again = sync_lag_session("w_rw4_again", 4, es::ShardingType::row_wise, 8, 0.0, lag, 20);
  EXPECT_EQ(sync_lag_mean_wait(again, "input_dist/").first, w4);
}

TEST(SyncLag, ProfileKeyParsesRoundTripsAndIsRefusedNegative) {
  nlohmann::json j = sync_lag_profile(2, 0.5, 250000.5);
  const es::HardwareProfile p = es::parse_hardware_profile(j.dump(), "lag.json");
  EXPECT_DOUBLE_EQ(p.cpu.sync_lag_ns, 250000.5);
  EXPECT_DOUBLE_EQ(es::parse_hardware_profile(es::to_json(p).dump(), "again").cpu.sync_lag_ns, 250000.5);
  j["cpu"].erase("sync_lag_ns");  // optional
  EXPECT_DOUBLE_EQ(es::parse_hardware_profile(j.dump(), "lag.json").cpu.sync_lag_ns, 0.0);
  EXPECT_FALSE(es::to_json(es::parse_hardware_profile(j.dump(), "lag.json"))["cpu"].contains("sync_lag_ns"));
  j["cpu"]["sync_lag_ns"] = -1;
  try {
    es::parse_hardware_profile(j.dump(), "lag.json");
    FAIL() << "a negative sync_lag_ns was accepted";
  } catch (const es::SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("lag.json: /cpu/sync_lag_ns"), std::string::npos) << e.what();
  }
}

TEST(SyncLag, CalibrateRecoversTheLagFromTheMembersWaits) {
  // truth: round_numbers at 2 cores, 0.5 other groups (contention 1.5 at 2 ranks, 3 at 4), lag
  // 200 us. The fit simulates each session with the same draws, so the truth's lag gives its
  // waits exactly; every other coefficient as without a lag, step scale 1. Since conc46 the lag's
  // factor counts the compute ops running at each arrival, which moves with the lag itself (a
  // later arrival can fall after an op's end): the waits are a stepwise function of the lag and
  // the search lands within 6% (0.949) of it, the step scale within 1.5% (1.012); the held-out
  // run stays within 2%.
  const double lag = 200000;
  const std::vector<std::string> sessions = {
      sync_lag_session("c_tw2", 2, es::ShardingType::table_wise, 2, 0.5, lag, 3),
      sync_lag_session("c_rw2", 2, es::ShardingType::row_wise, 2, 0.5, lag, 3),
      sync_lag_session("c_tw4", 4, es::ShardingType::table_wise, 2, 0.5, lag, 3),
      sync_lag_session("c_rw4", 4, es::ShardingType::row_wise, 2, 0.5, lag, 3)};
  const es::Calibration cal = es::calibrate(sessions);
  EXPECT_NEAR(cal.sync_lag_ns / lag, 1.0, 0.06);
  EXPECT_DOUBLE_EQ(cal.profile.cpu.sync_lag_ns, cal.sync_lag_ns);
  EXPECT_NEAR(cal.step_scale, 1.0, 0.015);
  EXPECT_NEAR(cal.oversubscription_penalty, 0.0, 0.01);
  EXPECT_NEAR(static_cast<double>(cal.profile.intra_node.latency_ns), 1000.0, 20.0);  // round_numbers' link
  // a held-out 8-rank row_wise run of the same truth, checked with the fitted profile
  const std::string held = sync_lag_session("c_rw8", 8, es::ShardingType::row_wise, 2, 0.5, lag, 3);
  const std::string profile = (sync_lag_dir() / "fitted.json").string();
  std::ofstream(profile) << es::to_json(cal.profile).dump();
  EXPECT_NEAR(es::check_calibration(held, profile).error_at_run_load(), 0.0, 0.02);
}

TEST(SyncLag, PenaltyIsNotFittedWhenItWouldSlowEverySessionAlike) {
  // truth: penalty 0.4 at 2 cores and 1.5 other groups: x = 2.5 at 2 ranks, 5 at 4, so every
  // session's clamp(x - 1, 0, 1) is 1 and the penalty makes all of them 1.4 x slower: the rates
  // absorb it (they come out 1.4 x slower) and calibrate leaves it 0 (the sessions cannot tell it);
  // a held-out 8-rank run (x 10, clamp 1 too) is still predicted exactly
  const std::vector<std::string> sessions = {
      sync_lag_session("p_tw2", 2, es::ShardingType::table_wise, 2, 1.5, 0, 3, 0.4),
      sync_lag_session("p_rw2", 2, es::ShardingType::row_wise, 2, 1.5, 0, 3, 0.4),
      sync_lag_session("p_tw4", 4, es::ShardingType::table_wise, 2, 1.5, 0, 3, 0.4),
      sync_lag_session("p_rw4", 4, es::ShardingType::row_wise, 2, 1.5, 0, 3, 0.4)};
  const es::Calibration cal = es::calibrate(sessions);
  EXPECT_EQ(cal.oversubscription_penalty, 0.0);
  EXPECT_NE(cal.profile.sources.at("/cpu/oversubscription_penalty").find("not fitted"), std::string::npos);
  std::map<std::string, double> rate;
  for (const auto& f : cal.fits) rate[f.what] = f.rate;
  EXPECT_NEAR(rate["dense"] / (5e12 / 1.4), 1.0, 0.02);  // round_numbers' dense 1e13 x 0.5, 1.4 x slower
  EXPECT_NEAR(cal.step_scale, 1.0, 0.01);
  const std::string held = sync_lag_session("p_rw8", 8, es::ShardingType::row_wise, 2, 1.5, 0, 3, 0.4);
  const std::string profile = (sync_lag_dir() / "p_fitted.json").string();
  std::ofstream(profile) << es::to_json(cal.profile).dump();
  EXPECT_NEAR(es::check_calibration(held, profile).error_at_run_load(), 0.0, 0.02);
}
