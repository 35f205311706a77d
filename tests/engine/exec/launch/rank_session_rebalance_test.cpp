// `embedscope rebalance` on one process's session of a multi-process run (crit42, tester42 F20:
// X.rank0.db of `launch -n 4` read as "rank ids before: 0 10240, 1 0, 2 0, 3 0", a false 4.00
// imbalance): refused with exit 2, naming the merged session X.db (or the merge to make it when
// it is gone); the merged session is rebalanced as before.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
}  // namespace

TEST(RankSessionRebalance, OneRanksSessionIsRefusedNamingTheMergedOne) {
  const fs::path dir = fs::temp_directory_path() / ("es_rank_rb_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto cli = [&](const std::string& a) { return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, a, dir); };
  const std::string x = (dir / "x").string();
  auto l = cli("launch -n 2 run --preset tiny --steps 2 -o " + x + ".db");
  ASSERT_EQ(l.code, 0) << l.err;
  ASSERT_TRUE(fs::exists(x + ".rank0.db") && fs::exists(x + ".rank1.db") && fs::exists(x + ".db")) << l.out << l.err;
  auto r = cli("rebalance " + x + ".rank1.db");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(x + ".rank1.db: the session of rank 1 alone of a 2-rank run (each process wrote its own): the "
                           "lookups of the other 1 rank are not in it"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("rebalance the merged session " + x + ".db"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("imbalance"), std::string::npos) << r.out;  // no figures
  // the merged session (which keeps process_rank 0, but holds both ranks) is rebalanced
  r = cli("rebalance " + x + ".db");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("imbalance"), std::string::npos) << r.out;
  // without the merged session: the merge to make it
  fs::remove(x + ".db");
  r = cli("rebalance " + x + ".rank0.db");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("merge the ranks' sessions (embedscope merge " + x + ".rank*.db -o " + x + ".db)"), std::string::npos)
      << r.err;
  fs::remove_all(dir);
}
