// rebalance.balance "lookup_time" (issue 17): `embedscope rebalance --balance lookup_time`
// balances the shards' measured lookup ns (load_counters.lookup_ns), its per-rank loads recounted
// from the session with SQL; and a live run balancing lookup time records its rebalance.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <cmath>
#include <algorithm>

#include <nlohmann/json.hpp>

#include "engine/rebalance/straggler_workload.h"
#include "support/cli_run.h"

using nlohmann::json;

namespace {
std::filesystem::path balance_scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("es_balance_time_" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}
embedscope::test_support::CliResult balance_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, balance_scratch());
}

json balance_straggler() { return embedscope::test_support::straggler_workload("straggler_time"); }

/// The sum of load_counters.lookup_ns per rank (ranks 0..3), steps first..last.
std::vector<int64_t> lookup_ns_per_rank(const std::filesystem::path& db, int64_t first, int64_t last) {
  std::vector<int64_t> out(4, 0);
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) return {};
  sqlite3_stmt* st = nullptr;
  const std::string sql = "SELECT rank, SUM(lookup_ns) FROM load_counters WHERE step BETWEEN " + std::to_string(first) +
                          " AND " + std::to_string(last) + " GROUP BY rank";
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK)
    while (sqlite3_step(st) == SQLITE_ROW) out.at(static_cast<size_t>(sqlite3_column_int64(st, 0))) = sqlite3_column_int64(st, 1);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return out;
}
/// Sets every load counter's lookup_ns to 40 ns an id: the measured wall-clock ns of a run on a
/// loaded machine can make any rank the slowest, and the test is about what `rebalance` does
/// with the column, not about this machine's timing.
void set_lookup_ns_from_ids(const std::filesystem::path& db) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(h, "UPDATE load_counters SET lookup_ns = 40 * ids", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(h);
}
}  // namespace

TEST(RebalanceBalance, LookupTimeBalancesTheMeasuredLookupNs) {
  const auto wl = balance_scratch() / "straggler.json";
  std::ofstream(wl) << balance_straggler().dump(2);
  const auto db = balance_scratch() / "straggler.db";
  auto r = balance_cli("run " + wl.string() + " -o " + db.string() + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  set_lookup_ns_from_ids(db);
  r = balance_cli("rebalance " + db.string() + " --json --balance lookup_time");
  ASSERT_EQ(r.code, 0) << r.err;
  const json p = json::parse(r.out);
  EXPECT_EQ(p["balance"], "lookup_time");
  EXPECT_FALSE(p.contains("ids_before"));  // those name ids
  const std::vector<int64_t> ns = lookup_ns_per_rank(db, 0, 2);
  ASSERT_EQ(ns.size(), 4u);
  EXPECT_EQ(p["load_before"], json(ns));
  double sum = 0;
  int64_t mx = 0;
  for (int64_t v : ns) sum += static_cast<double>(v), mx = std::max(mx, v);
  EXPECT_NEAR(p["imbalance_before"].get<double>(), static_cast<double>(mx) * 4 / sum, 1e-9);
  // rank 3 does 768 of the 864 lookups a step: it is the slowest, and hot tables leave it
  EXPECT_EQ(std::max_element(ns.begin(), ns.end()) - ns.begin(), 3);
  ASSERT_FALSE(p["moves"].empty()) << r.out;
  int from_3 = 0;
  for (const auto& m : p["moves"]) from_3 += m["from"] == 3 ? 1 : 0;
  EXPECT_GE(from_3, 1) << r.out;
  // every move carries its table's ns: the total is conserved, and rank 3's share falls
  const auto after = p["load_after"].get<std::vector<int64_t>>();
  ASSERT_EQ(after.size(), 4u);
  EXPECT_EQ(after[0] + after[1] + after[2] + after[3], ns[0] + ns[1] + ns[2] + ns[3]);
  EXPECT_LT(after[3], ns[3]);
  EXPECT_LT(p["imbalance_after_predicted"].get<double>(), p["imbalance_before"].get<double>());
  // ids mode on the same session keeps the ids' names and numbers (rebalance_cli_test's)
  r = balance_cli("rebalance " + db.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json q = json::parse(r.out);
  EXPECT_EQ(q["balance"], "ids");
  EXPECT_EQ(q["ids_before"], json({96, 96, 96, 2304}));
  EXPECT_EQ(q["load_before"], q["ids_before"]);
  r = balance_cli("rebalance " + db.string() + " --balance time");
  EXPECT_EQ(r.code, 2) << r.out;
  r = balance_cli("rebalance " + db.string() + " --balance lookup_time");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("lookup ns max/mean"), std::string::npos) << r.out;
}

/// The load the live policy balances with lookup_time over steps first..last of a session
/// (rebalance/noise.h median_window_load): per (table, shard) steps x the median over the steps
/// of its lookup_ns, summed per rank of the counters' rows (a shard is on one rank).
std::vector<double> median_lookup_ns_per_rank(const std::filesystem::path& db, int64_t first, int64_t last) {
  std::map<std::pair<int, int>, std::pair<int, std::vector<double>>> per_shard;  // (table, shard) -> (rank, ns by step)
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) return {};
  sqlite3_stmt* st = nullptr;
  const std::string sql = "SELECT rank, table_index, shard, lookup_ns FROM load_counters WHERE step BETWEEN " +
                          std::to_string(first) + " AND " + std::to_string(last) + " ORDER BY step";
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK)
    while (sqlite3_step(st) == SQLITE_ROW) {
      auto& e = per_shard[{sqlite3_column_int(st, 1), sqlite3_column_int(st, 2)}];
      e.first = sqlite3_column_int(st, 0);
      e.second.push_back(static_cast<double>(sqlite3_column_int64(st, 3)));
    }
  sqlite3_finalize(st);
  sqlite3_close(h);
  std::vector<double> out(4, 0);
  for (auto& [key, e] : per_shard) {
    std::sort(e.second.begin(), e.second.end());
    const size_t n = e.second.size();
    const double med = n % 2 ? e.second[n / 2] : (e.second[n / 2 - 1] + e.second[n / 2]) / 2;
    out.at(static_cast<size_t>(e.first)) += std::round(static_cast<double>(last - first + 1) * med);
  }
  return out;
}

TEST(RebalanceBalance, ALiveRunBalancingLookupTimeMovesTheHotTables) {
  json j = balance_straggler();
  // batch 512, not 8: at 8 samples a lookup call reads 8-192 ids, and the timer, the span and a
  // preempted thread (2 loaded cores) weighed as much as the ids - the measured imbalance came
  // out at 1.6 instead of the ids' 3.6, and no move paid (the policy's 2% rule). At 512 the ids
  // dominate the measured ns. A window of 3 steps (every 3) after a warm-up step: the policy
  // balances each shard's median step (rebalance/noise.h), so one step in which a cold table's
  // rank was preempted does not make that rank the slowest - with every 2 (the sum of 2 steps)
  // this test failed once under `ctest -j2` beside 3 builds (moves 0). A window of 5 (every 5):
  // with 3, CI's run of stop 39 and 1 of 40 runs here beside 3 busy loops measured shares that
  // varied so much between the 3 steps (noise 0.358, the gain of the best move 0.55 < 2 x noise)
  // that the noise rule refused every move; the median and MAD of 5 steps ride out 2 preempted ones.
  j["batch_size"] = 512;
  j["steps"] = 6;
  j["warmup_steps"] = 1;
  j["rebalance"] = {{"every", 5}, {"balance", "lookup_time"}};
  const auto wl = balance_scratch() / "live_time.json";
  std::ofstream(wl) << j.dump(2);
  const auto db = balance_scratch() / "live_time.db";
  auto r = balance_cli("run " + wl.string() + " -o " + db.string() + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  r = balance_cli("stats " + db.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json s = json::parse(r.out);
  ASSERT_EQ(s["rebalances"].size(), 1u);  // after step 4 of 6
  const json& e = s["rebalances"][0];
  EXPECT_EQ(e["step"], 4);
  // the imbalance recorded is of the median lookup ns over steps 0..4, recounted from the session
  const std::vector<double> ns = median_lookup_ns_per_rank(db, 0, 4);
  ASSERT_EQ(ns.size(), 4u);
  const double mx = *std::max_element(ns.begin(), ns.end());
  EXPECT_NEAR(e["imbalance_before"].get<double>(), mx * 4 / (ns[0] + ns[1] + ns[2] + ns[3]), 1e-9);
  EXPECT_GE(e["moves"].get<int>(), 1) << e.dump();
  EXPECT_LT(e["imbalance_predicted"].get<double>(), e["imbalance_before"].get<double>());
}

// `plan` refuses what `run` refuses before it starts (tester D8): a live rebalancing policy on
// the simulated backend is exit 2 from both, naming /devices/backend and the workload file.
TEST(RebalanceBalance, PlanRefusesAPolicyTheBackendCannotFollow) {
  json j = balance_straggler();
  j["rebalance"] = {{"every", 2}};
  j["devices"]["backend"] = "simulated";
  j["devices"]["hardware"] = "h100_sxm";
  const auto wl = balance_scratch() / "live_simulated.json";
  std::ofstream(wl) << j.dump(2);
  const auto plan = balance_cli("plan " + wl.string());
  EXPECT_EQ(plan.code, 2) << plan.out << plan.err;
  EXPECT_NE(plan.err.find("live_simulated.json: /devices/backend: live rebalancing"), std::string::npos) << plan.err;
  const auto run = balance_cli("run " + wl.string() + " -o " + (balance_scratch() / "live_simulated.db").string() +
                               " --force-overwrite");
  EXPECT_EQ(run.code, 2) << run.err;
  EXPECT_NE(run.err.find("/devices/backend: live rebalancing"), std::string::npos) << run.err;
  j["devices"]["backend"] = "cpu";  // the same policy on cpu ranks plans
  j["devices"].erase("hardware");
  std::ofstream(wl) << j.dump(2);
  EXPECT_EQ(balance_cli("plan " + wl.string()).code, 0);
}
