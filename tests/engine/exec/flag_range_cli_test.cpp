// Integer flags with a lower bound say the bound and the value (crit42, tester42 F6): `rebalance
// --window 0` said "Value 0 not in range 0.000000 to " and DBL_MAX's 309 digits, and the same
// for a word. The checks run before the session is read, so no session is needed.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/cli_run.h"

namespace {
embedscope::test_support::CliResult f6_cli(const std::string& args) {
  static const auto dir = [] {
    const auto d = std::filesystem::temp_directory_path() / "embedscope_flag_range";
    std::filesystem::create_directories(d);
    return d;
  }();
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, dir);
}
}  // namespace

TEST(FlagRangeCli, LowerBoundsAreSaidWithTheValue) {
  struct Case {
    std::string args, said;
  };
  for (const Case& c : {Case{"rebalance none.db --window 0", "--window: must be >= 1, got 0"},
                        Case{"rebalance none.db --window abc", "--window: must be an integer >= 1, got 'abc'"},
                        Case{"rebalance none.db --max-bytes-per-move -5", "--max-bytes-per-move: must be >= 0, got -5"},
                        Case{"run --held-out-batches -1", "--held-out-batches: must be >= 0, got -1"},
                        Case{"run --held-out-batches abc", "--held-out-batches: must be an integer >= 0, got 'abc'"}}) {
    SCOPED_TRACE(c.args);
    const auto r = f6_cli(c.args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(c.said), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("0.000000"), std::string::npos) << r.err;
    EXPECT_LT(r.err.size(), 400u) << r.err;
  }
}
