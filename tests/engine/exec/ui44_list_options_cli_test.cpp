// tester44 F13: the comma-separated list options (`plan --sharding-types`, `--allow-storage`,
// `scaling --shardings`, `--gpus`, `run --allow-storage`) take one value a use, so a workload file
// given after them is the positional workload, not one of their values (it was: "--sharding-types:
// must be one of ..., got \"w.json\""). A use may repeat the option.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/cli_run.h"

namespace {

embedscope::test_support::CliResult ui44_cli(const std::string& args) {
  static const auto dir = [] {
    const auto d = std::filesystem::temp_directory_path() / "embedscope_ui44_list_options";
    std::filesystem::create_directories(d);
    std::filesystem::copy_file(std::string(EMBEDSCOPE_SOURCE_DIR) + "/resources/workloads/tiny.json", d / "w.json",
                               std::filesystem::copy_options::overwrite_existing);
    return d;
  }();
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, dir);
}

TEST(Ui44ListOptionsCli, AWorkloadFileAfterAListOptionIsTheWorkload) {
  const std::string w = (std::filesystem::temp_directory_path() / "embedscope_ui44_list_options" / "w.json").string();
  for (const std::string& args :
       {"plan --auto --sharding-types table_wise,row_wise " + w, "plan --auto --allow-storage fp16 " + w,
        "plan --auto --sharding-types table_wise --sharding-types row_wise " + w,
        "scaling --simulate h100_sxm --shardings table_wise " + w + " --gpus 8 --steps 1",
        "scaling --simulate h100_sxm --gpus 8 " + w + " --steps 1"}) {
    SCOPED_TRACE(args);
    const auto r = ui44_cli(args);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err.find("must be one of"), std::string::npos) << r.err;
    // tiny's plan, or its study
    EXPECT_TRUE(r.out.find("t_small") != std::string::npos || r.out.find("scaling study: tiny on") != std::string::npos)
        << r.out;
  }
  // a second value after a space is a second positional, refused as such (exit 2)
  const auto r = ui44_cli("plan --auto --sharding-types table_wise row_wise " + w);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("The following argument was not expected: " + w), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hint: --sharding-types takes its values comma-separated in one argument (--sharding-types "
                       "table_wise,row_wise)"),
            std::string::npos)
      << r.err;
}

}  // namespace
