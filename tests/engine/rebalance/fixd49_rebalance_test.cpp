// tester49 F12: `rebalance --balance lookup_time` printed "observed" lookup ns that were each
// shard's median step x the window's steps, and a max/mean (2.06) that was not stats' (2.04) for
// the same session. Now both figures, labelled: "measured" = the window's counters summed, whose
// max/mean is stats' lookup time max/mean; "median x N" = the load the moves balance.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/rebalance/straggler_workload.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path d49rb_scratch() {
  static const fs::path dir = embedscope::test_support::fresh_scratch("es_fixd49_rb_" + std::to_string(::getpid()));
  return dir;
}

embedscope::test_support::CliResult d49rb_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, d49rb_scratch());
}

void d49rb_sql(const fs::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  sqlite3_close(h);
}
}  // namespace

// The straggler (straggler_workload.h: per step rank 3 looks up 768 ids, ranks 0..2 32 each; one
// table a rank 0..2, 3 steps) with lookup_ns set to 40 ns an id, and rank 0's step 0 slowed by
// 100,000 ns (one slow step):
//   measured (sums over steps 0..2): 3 x 1280 + 100000 = 103840, 3840, 3840, 3 x 30720 = 92160;
//     max/mean = 103840 / (203680 / 4) = 2.0393 -> "2.04", stats' lookup time max/mean
//   median x 3 (the load the moves balance): 3840, 3840, 3840, 92160 -> 92160 / 25920 = 3.56
TEST(Fixd49Rebalance, LookupTimeShowsTheMeasuredSumsStatsUsesBesideTheMedianLoad) {
  const fs::path wl = d49rb_scratch() / "straggler.json";
  std::ofstream(wl) << embedscope::test_support::straggler_workload("straggler_d49").dump(2);
  const fs::path db = d49rb_scratch() / "straggler.db";
  auto r = d49rb_cli("run " + wl.string() + " -o " + db.string() + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  d49rb_sql(db, "UPDATE load_counters SET lookup_ns = 40 * ids + CASE WHEN step = 0 AND rank = 0 THEN 100000 ELSE 0 END");
  r = d49rb_cli("rebalance " + db.string() + " --json --balance lookup_time");
  ASSERT_EQ(r.code, 0) << r.err;
  const json p = json::parse(r.out);
  EXPECT_EQ(p["load_basis"], "median_step_x_steps");
  EXPECT_EQ(p["load_measured"], json({103840, 3840, 3840, 92160}));
  EXPECT_NEAR(p["imbalance_measured"].get<double>(), 103840.0 * 4 / 203680.0, 1e-12);
  EXPECT_EQ(p["load_before"], json({3840, 3840, 3840, 92160}));
  EXPECT_NEAR(p["imbalance_before"].get<double>(), 92160.0 * 4 / 103680.0, 1e-12);
  // stats says the measured figure
  auto s = d49rb_cli("stats --json " + db.string());
  ASSERT_EQ(s.code, 0) << s.err;
  const json st = json::parse(s.out);
  EXPECT_NEAR(st["imbalance"]["lookup_time_max_over_mean"].get<double>(), p["imbalance_measured"].get<double>(), 1e-12)
      << s.out;
  // the text labels both
  r = d49rb_cli("rebalance " + db.string() + " --balance lookup_time");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("rank        measured    median x 3 before     median x 3 after\n"
                       "0             103840                 3840"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("imbalance    lookup ns max/mean 2.04 measured (stats' lookup time max/mean, over steps 0..2); "
                       "median x 3 3.56 before, "),
            std::string::npos)
      << r.out;
  s = d49rb_cli("stats " + db.string());
  EXPECT_NE(s.out.find("lookup time max/mean 2.04"), std::string::npos) << s.out;
  // ids mode is unchanged: its load is the window's sums already
  r = d49rb_cli("rebalance " + db.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json q = json::parse(r.out);
  EXPECT_EQ(q["load_basis"], "sum");
  EXPECT_FALSE(q.contains("load_measured"));
  EXPECT_EQ(q["ids_before"], json({96, 96, 96, 2304}));
}
