// `export --format csv` writes the per-rank waits for peers that `stats` prints under the
// collectives (peer_waits.csv), the same numbers as `stats --json`'s peer_waits. The tester's
// straggler trace (tests/data/traces/straggler): one all-reduce in 2 profiler steps, rank 0 waits
// 150 us for rank 1 (by hand in ana60_stragglers_test.cpp).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "import_test_support.h"
#include "support/cli_run.h"

namespace {
namespace ss = embedscope::sessions;
namespace fs = std::filesystem;
using nlohmann::json;

embedscope::test_support::CliResult ana61_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, ss::testing::import_scratch());
}

std::vector<std::string> ana61_lines(const fs::path& p) {
  std::ifstream f(p);
  std::vector<std::string> out;
  for (std::string line; std::getline(f, line);) out.push_back(line);
  return out;
}
}  // namespace

TEST(Ana61PeerWaitsCsv, ExportHasTheWaitsStatsPrints) {
  const std::string db = ss::testing::scratch_db("ana61_strag.db");
  std::remove(db.c_str());
  auto r = ana61_cli("import " + ss::testing::trace_fixture("straggler") + " -o " + db);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  r = ana61_cli("stats --json " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const json w = json::parse(r.out).at("peer_waits");
  const fs::path dir = ss::testing::import_scratch() / "ana61_strag_csv";
  fs::remove_all(dir);
  r = ana61_cli("export " + db + " --format csv -o " + dir.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto lines = ana61_lines(dir / "peer_waits.csv");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "rank,counted_steps,collectives,last_arrivals,waited_ns,caused_wait_ns,straggler");
  // by hand: 2 steps; rank 0 waited 150 us, rank 1 last to arrive and the straggler
  EXPECT_EQ(lines[1], "0,2,1,0,150000,0,0");
  EXPECT_EQ(lines[2], "1,2,1,1,0,150000,1");
  // and the same as stats --json, row by row
  ASSERT_EQ(w.at("ranks").size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const json& k = w.at("ranks")[i];
    std::ostringstream row;
    row << k.at("rank").get<int>() << ",2," << k.at("collectives").get<int64_t>() << ","
        << k.at("last_arrivals").get<int64_t>() << "," << k.at("waited_ns").get<int64_t>() << ","
        << k.at("caused_wait_ns").get<int64_t>() << "," << (w.at("straggler").at("rank") == k.at("rank") ? 1 : 0);
    EXPECT_EQ(lines[i + 1], row.str()) << i;
  }
  // a session whose collectives ran on one rank (nothing to wait for): the header alone
  const std::string one = ss::testing::scratch_db("ana61_one_rank.db");
  std::remove(one.c_str());
  r = ana61_cli("run --preset tiny --steps 2 --devices 1 -o " + one);
  ASSERT_EQ(r.code, 0) << r.err;
  const fs::path dir1 = ss::testing::import_scratch() / "ana61_one_rank_csv";
  fs::remove_all(dir1);
  ASSERT_EQ(ana61_cli("export " + one + " --format csv -o " + dir1.string()).code, 0);
  EXPECT_EQ(ana61_lines(dir1 / "peer_waits.csv"),
            (std::vector<std::string>{"rank,counted_steps,collectives,last_arrivals,waited_ns,caused_wait_ns,straggler"}));
}
