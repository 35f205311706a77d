// tester45 F12.5 (still open in tester46): `embedscope-ui --report s.db -o DIR` replaced the files
// of an existing DIR (there a copy of a database named summary.png) without a flag, where the CLI
// replaces its outputs only with --force-overwrite. A new, empty or earlier-report folder takes the
// report; a folder holding anything else is refused before any work unless --force-overwrite.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using embedscope::test_support::run_merged;

std::string fix47_slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
}  // namespace

TEST(ReportDirF125, AFolderOfOtherFilesIsRefusedUnlessForceOverwrite) {
  const fs::path dir = fs::temp_directory_path() / ("es_fix47_rep_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "rep");
  const fs::path study = dir / "study.json";  // a one-page report: quick
  std::string make = "'";
  make += EMBEDSCOPE_CLI;
  make += "' scaling --preset tiny --simulate h100_sxm --gpus 8 --steps 1 --json > '" + study.string() + "'";
  ASSERT_EQ(run_merged(make).code, 0);
  std::ofstream(dir / "rep" / "scaling.png") << "precious, not a picture";
  std::string ui = "QT_QPA_PLATFORM=offscreen '";
  ui += EMBEDSCOPE_UI;
  ui += "' --report '" + study.string() + "' -o '" + (dir / "rep").string() + "'";
  auto r = run_merged(ui);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("error: " + (dir / "rep").string() + ": the report would replace scaling.png there, and the "
                       "folder holds no Embedscope report (no index.html of one): choose another folder (-o), or allow "
                       "replacing it (--force-overwrite)"),  // fixb48 (retest47 R8): names the file it would replace
            std::string::npos)
      << r.out;
  EXPECT_EQ(fix47_slurp(dir / "rep" / "scaling.png"), "precious, not a picture");
  EXPECT_FALSE(fs::exists(dir / "rep" / "index.html"));
  r = run_merged(ui + " --force-overwrite");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(fix47_slurp(dir / "rep" / "scaling.png"), "precious, not a picture");
  EXPECT_TRUE(fs::exists(dir / "rep" / "index.html"));
  r = run_merged(ui);  // an earlier report: replaced without the flag
  EXPECT_EQ(r.code, 0) << r.out;
  fs::remove_all(dir);
}
