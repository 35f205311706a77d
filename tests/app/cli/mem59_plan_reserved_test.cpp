// mem59 (tester59 F6): `plan` of a workload whose devices cannot hold it prints the reserved bytes
// that decide it in the text table, and its refusal on stdout in place of "this machine fits".
// tests/data/memory/plan_refused_53mb.json: t0 200000x64 and t1 100000x32 fp32, rowwise_adagrad,
// 2 ranks table-wise, devices of 53,000,000 B (50.5 MiB). Hand: rank 0 reserves a 50 MiB segment
// (51,200,000 B of weights rounded up to 2 MiB) + one 2 MiB small segment = 52.0 MiB; rank 1
// 14 MiB + 2 MiB = 16.0 MiB.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "support/cli_run.h"

TEST(Mem59PlanReserved, RefusedPlanShowsReservedAndNoFitsSentence) {
  const auto dir = embedscope::test_support::fresh_scratch("mem59_plan");
  const std::string w = std::string(EMBEDSCOPE_TEST_DATA) + "/memory/plan_refused_53mb.json";
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "plan " + w + " --backend cpu", dir);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find(fmt::format("{:>12} {:>12} {:>12}", "total", "reserved", "capacity")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(fmt::format("{:>12} {:>12}\n", "52.0 MiB", "50.5 MiB")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(fmt::format("{:>12} {:>12}\n", "16.0 MiB", "50.5 MiB")), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("this machine fits"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the devices DO NOT FIT this plan: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("52.0 MiB"), std::string::npos);
  // a plan that fits keeps the sentence
  std::string text;
  {
    std::ifstream in(w);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  const auto at = text.find("53000000");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 8, "54525952");  // exactly rank 0's reserved bytes
  const std::string fits = (dir / "fits.json").string();
  std::ofstream(fits) << text;
  const auto ok = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "plan " + fits + " --backend cpu", dir);
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("this machine fits"), std::string::npos) << ok.out;
  EXPECT_EQ(ok.out.find("DO NOT FIT this plan"), std::string::npos) << ok.out;
}
