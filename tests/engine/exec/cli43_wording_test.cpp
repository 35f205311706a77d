// cli43 (tester42 F15): the CLI's words where they named the wrong thing - scenario's overwrite
// refusal named `embedscope run --force-overwrite`; a workload file given to `scenario` read
// "/batch_size: unknown key"; calibrate -o replaced an existing profile silently; scaling's
// footnote said "1 = perfect" beside a column of percentages. Each failed before its fix.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;

fs::path cli43_wording_scratch() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_cli43_wording_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}
embedscope::test_support::CliResult cli43_wording_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, cli43_wording_scratch());
}
std::string cli43_wording_slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
}  // namespace

TEST(Cli43Wording, ScenarioOverwriteRefusalNamesScenario) {
  const fs::path dir = cli43_wording_scratch() / "sc";
  fs::create_directories(dir);
  std::ofstream(dir / "compression-3.db") << "x";  // any run's file stops the scenario before its first run
  const auto r = cli43_wording_cli("scenario compression -o " + dir.string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.err, "error: " + (dir / "compression-3.db").string() +
                       ": already exists; choose another directory (-o) or allow overwriting the scenario's sessions "
                       "(embedscope scenario compression -o " + dir.string() + " --force-overwrite)\n");
  EXPECT_EQ(cli43_wording_slurp(dir / "compression-3.db"), "x");
}

TEST(Cli43Wording, AWorkloadGivenToScenarioIsSaidToBeOne) {
  const std::string tiny = std::string(EMBEDSCOPE_TEST_DATA) + "/../../resources/workloads/tiny.json";
  auto r = cli43_wording_cli("scenario " + tiny);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.err, "error: " + tiny + ": /: a workload file, not a scenario (no \"runs\"): run it with `embedscope run " +
                       tiny + "`; a scenario has \"id\", \"title\", \"explanation\" and \"runs\" (two or more workloads "
                              "to compare)\n");
  // an lm_embedding workload too; a scenario missing its runs is still told it misses them
  const fs::path lm = cli43_wording_scratch() / "lm.json";
  std::ofstream(lm) << R"({"model": "lm_embedding", "vocab_size": 64, "hidden_size": 8})";
  r = cli43_wording_cli("scenario " + lm.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(lm.string() + ": /: a workload file, not a scenario"), std::string::npos) << r.err;
  const fs::path bare = cli43_wording_scratch() / "bare.json";
  std::ofstream(bare) << R"({"id": "x", "title": "t", "explanation": "e"})";
  r = cli43_wording_cli("scenario " + bare.string());
  EXPECT_EQ(r.err, "error: " + bare.string() + ": /: missing \"runs\"\n");
}

TEST(Cli43Wording, CalibrateRefusesToOverwriteAProfile) {
  const fs::path dir = cli43_wording_scratch() / "calib";
  fs::create_directories(dir);
  const auto run = cli43_wording_cli("run --preset tiny --steps 2 -o " + (dir / "s.db").string());
  ASSERT_EQ(run.code, 0) << run.err;
  std::ofstream(dir / "prof.json") << "{\"name\": \"mine\"}\n";
  auto r = cli43_wording_cli("calibrate " + (dir / "s.db").string() + " -o " + (dir / "prof.json").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: -o " + (dir / "prof.json").string() +
                       ": already exists; choose another name or allow overwriting it (embedscope calibrate ... -o " +
                       (dir / "prof.json").string() + " --force-overwrite)\n");
  EXPECT_EQ(cli43_wording_slurp(dir / "prof.json"), "{\"name\": \"mine\"}\n");
  // --force-overwrite passes the refusal. What the fit then makes of tiny's 2 steps depends on
  // their measured times: either a profile replaces the file, or the fit itself refuses
  // ("calibrate: ..."; tiny's collectives may give it no bandwidth) - never the overwrite check.
  r = cli43_wording_cli("calibrate " + (dir / "s.db").string() + " -o " + (dir / "prof.json").string() +
                        " --force-overwrite");
  EXPECT_EQ(r.err.find("already exists"), std::string::npos) << r.err;
  if (r.code == 0)
    EXPECT_NE(cli43_wording_slurp(dir / "prof.json").find("\"gpu\""), std::string::npos) << r.err;
  else
    EXPECT_NE(r.err.find("calibrate: "), std::string::npos) << r.err;
}

TEST(Cli43Wording, ScalingFootnoteSaysPercent) {
  const auto r = cli43_wording_cli("scaling --preset tiny --simulate h100_sxm --gpus 8 --steps 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("   100.0% "), std::string::npos) << r.out;  // the column
  // one baseline for every type (misc55, tester55 F3), in percent
  EXPECT_NE(r.out.find("scaling: samples/s per GPU over the baseline, the best at the smallest size any type ran: "
                       "table_wise at 8 GPUs, "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("100% = the baseline's rate); "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("1 = perfect"), std::string::npos) << r.out;
}
