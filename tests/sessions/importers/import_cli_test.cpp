// `embedscope import` end to end: what it prints, exit codes, and refusing to overwrite.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "import_test_support.h"
#include "support/cli_run.h"

using namespace embedscope::sessions::testing;

namespace {
using Result = embedscope::test_support::CliResult;
Result cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, import_scratch());
}
}  // namespace

TEST(ImportCli, DirectoryOfRanksPrintsRanksEventsAndHtaFigures) {
  const std::string db = scratch_db("cli_small.db");
  std::remove(db.c_str());
  Result r = cli("import " + trace_fixture("hta_small") + " -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("ranks        0, 1 (2 ranks)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kernels 8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("37.50%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no comm"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("import: reading"), std::string::npos) << r.err;  // progress on stderr
  // An existing output is refused (exit 2) unless --force-overwrite.
  r = cli("import " + trace_fixture("hta_small") + " -o " + db);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--force-overwrite"), std::string::npos) << r.err;
  r = cli("import " + trace_fixture("hta_small") + " -o " + db + " --force-overwrite --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ranks"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(j["events"]["collectives"], 2);
  EXPECT_EQ(j["gpu_kernels"]["ranks"][0]["overlap_pct"], 37.5);
  EXPECT_TRUE(j["gpu_kernels"]["ranks"][1]["overlap_pct"].is_null());  // no communication, not NaN
  EXPECT_EQ(j["gpu_kernels"]["ranks"][0]["idle_ns"], 30000);
  // stats shows the figures beside the thread-level ones, with the import problems.
  r = cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("IMPORTED from kineto_json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("thread level"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Holistic Trace Analysis"), std::string::npos) << r.out;
  r = cli("stats " + db + " --json --keep-last-step");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["gpu_kernels"]["ranks"][0]["idle_ns"], 80000);
}

TEST(ImportCli, UnknownFormatsAndMissingFilesAreBadInput) {
  Result r = cli("import " + std::string(EMBEDSCOPE_TEST_DATA) + "/sessions/v1.db -o " + scratch_db("x.db"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("an SQLite database"), std::string::npos) << r.err;
  r = cli("import /nonexistent/trace.json -o " + scratch_db("y.db"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no such file or directory"), std::string::npos) << r.err;
}
