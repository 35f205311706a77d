// tester52 F2, end to end: `compare` of two tiny runs at batch 8 and 16 says that the second
// trains twice the samples a step, and never marks their throughputs' difference within noise.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;

fs::path cmp52_scratch() {
  static const fs::path dir = embedscope::test_support::fresh_scratch("es_cmp52_" + std::to_string(getpid()));
  return dir;
}
embedscope::test_support::CliResult cmp52_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, cmp52_scratch());
}
}  // namespace

TEST(Cmp52CompareCli, UnlikeWorkAStepIsSaidAndNotMarkedNoise) {
  const std::string a = (cmp52_scratch() / "b8.db").string(), b = (cmp52_scratch() / "b16.db").string();
  ASSERT_EQ(cmp52_cli("run --preset tiny --steps 3 --batch-size 8 --force-overwrite -o " + a).code, 0);
  ASSERT_EQ(cmp52_cli("run --preset tiny --steps 3 --batch-size 16 --force-overwrite -o " + b).code, 0);
  const auto sa = nlohmann::json::parse(cmp52_cli("stats --json " + a).out);
  const auto sb = nlohmann::json::parse(cmp52_cli("stats --json " + b).out);
  const int64_t per_a = sa.at("samples_per_step"), per_b = sb.at("samples_per_step");
  ASSERT_EQ(per_b, 2 * per_a);
  const auto text = cmp52_cli("compare " + a + " " + b);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("    trains " + std::to_string(per_b) + " samples a step, A " + std::to_string(per_a) + " (2.00x)"),
            std::string::npos)
      << text.out;
  for (const std::string& line : {std::string("throughput")}) {
    const auto at = text.out.find("\n" + line);
    ASSERT_NE(at, std::string::npos) << text.out;
    const std::string row = text.out.substr(at + 1, text.out.find('\n', at + 1) - at - 1);
    EXPECT_EQ(row.find("within noise"), std::string::npos) << row;
  }
  const auto j = nlohmann::json::parse(cmp52_cli("compare --json " + a + " " + b).out);
  EXPECT_EQ(j.at("sessions").at(0).at("units_per_step"), per_a);
  EXPECT_EQ(j.at("sessions").at(1).at("units_per_step"), per_b);
  EXPECT_EQ(j.at("differences").at(0).at("figures").at("throughput_per_s").at("within_noise"), false);
}
