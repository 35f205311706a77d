// A refusal names the flags that set the field, each once and only those given (tester44 F8:
// "(set by --devices) (set by --nodes)" when --nodes was not given).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/cli_run.h"

namespace fs = std::filesystem;

TEST(SetByOnce, RefusalNamesOnlyTheFlagsGiven) {
  const fs::path dir = fs::temp_directory_path() / "embedscope_set_by_once";
  fs::create_directories(dir);
  namespace ts = embedscope::test_support;
  // 1,024 ranks in nodes of 4 are 256 nodes; h100_sxm describes at most 128
  auto r = ts::run_cli(EMBEDSCOPE_CLI, "run --preset tiny --simulate h100_sxm --devices 1024 --gpus-per-node 4", dir);
  EXPECT_EQ(r.code, 2);
  const std::string want = "/devices/count: 1024 ranks need 256 nodes of 4 GPUs, but hardware profile h100_sxm "
                           "describes clusters of at most 128 nodes (set by --devices)\n";
  EXPECT_TRUE(r.err.ends_with(want)) << r.err;
  EXPECT_EQ(r.err.find("--nodes"), std::string::npos) << r.err;
  r = ts::run_cli(EMBEDSCOPE_CLI, "run --preset tiny --simulate h100_sxm --devices 1024 --nodes 256 --gpus-per-node 4", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("at most 128 nodes (set by --devices and --nodes)\n"), std::string::npos) << r.err;
  fs::remove_all(dir);
}
