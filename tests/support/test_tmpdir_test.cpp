// support/test_tmpdir.h: every test process runs in its own TMPDIR, removed when its tests pass
// and kept (path on stderr) when one fails. The end-to-end cases run this executable again as a
// child (TestTmpDirChild.*, which skips unless a TestTmpDir test started it).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/test_tmpdir.h"

namespace fs = std::filesystem;
using embedscope::test_support::TestTmpDir;

namespace {

std::string tmpdir_env_value() {
  const char* v = std::getenv("TMPDIR");
  return v == nullptr ? "" : v;
}

struct TmpDirChildRun {
  int exit_code = -1;
  std::string output;
};

// Runs this executable's TestTmpDirChild.Writes with TMPDIR=`tmp` and ES_TMPDIR_CHILD=`mode`.
TmpDirChildRun tmpdir_run_child(const fs::path& tmp, const std::string& mode) {
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const std::string cmd = "TMPDIR='" + tmp.string() + "' ES_TMPDIR_CHILD=" + mode + " '" + self +
                          "' --gtest_filter=TestTmpDirChild.Writes 2>&1";
  TmpDirChildRun r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) r.output.append(buf, n);
  const int status = pclose(pipe);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

std::vector<fs::path> tmpdir_entries(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
  return out;
}

}  // namespace

TEST(TestTmpDir, TheProcessRunsInItsOwnDirectory) {
  const fs::path tmp = fs::temp_directory_path();
  EXPECT_EQ(tmp.string(), tmpdir_env_value());
  EXPECT_EQ(tmp.filename().string().rfind("embedscope-test-" + std::to_string(::getpid()) + "-", 0), 0u) << tmp;
  EXPECT_TRUE(fs::is_directory(tmp));
}

TEST(TestTmpDir, FinishRemovesAfterAPassKeepsAfterAFailureAndRestoresTmpdir) {
  const std::string outer = tmpdir_env_value();
  fs::path passed_dir, failed_dir;
  {
    TestTmpDir a;
    passed_dir = a.path();
    EXPECT_EQ(tmpdir_env_value(), a.path().string());
    EXPECT_EQ(a.path().parent_path().string(), outer);  // nested in the process's own
    std::ofstream(a.path() / "session.db") << "x";
    fs::create_directories(a.path() / "report" / "lanes");
    EXPECT_TRUE(a.finish(true));
    EXPECT_FALSE(fs::exists(passed_dir));
    EXPECT_EQ(tmpdir_env_value(), outer);
    EXPECT_FALSE(a.finish(true));  // a second call does nothing
  }
  {
    TestTmpDir b;
    failed_dir = b.path();
    std::ofstream(b.path() / "trace.json") << "{}";
    EXPECT_FALSE(b.finish(false));
    EXPECT_TRUE(fs::is_regular_file(failed_dir / "trace.json"));
    EXPECT_EQ(tmpdir_env_value(), outer);
  }
  {
    TestTmpDir c;  // destroyed without finish: TMPDIR restored, nothing removed
    std::ofstream(c.path() / "f") << "y";
  }
  EXPECT_EQ(tmpdir_env_value(), outer);
  fs::remove_all(failed_dir);
}

TEST(TestTmpDir, AChildRunLeavesNothingWhenItPassesAndKeepsItsFilesWhenItFails) {
  const fs::path base = fs::temp_directory_path() / "children";
  fs::create_directories(base);

  const auto ok = tmpdir_run_child(base, "pass");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_TRUE(tmpdir_entries(base).empty()) << ok.output;

  const auto bad = tmpdir_run_child(base, "fail");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  const auto kept = tmpdir_entries(base);
  ASSERT_EQ(kept.size(), 1u) << bad.output;
  EXPECT_EQ(kept[0].filename().string().rfind("embedscope-test-", 0), 0u) << kept[0];
  EXPECT_TRUE(fs::is_regular_file(kept[0] / "scratch" / "written.db")) << bad.output;
  EXPECT_NE(bad.output.find("test files kept in " + kept[0].string()), std::string::npos) << bad.output;
}

// Started by the test above: writes a scratch file as the other tests do, and fails on request.
TEST(TestTmpDirChild, Writes) {
  const char* mode = std::getenv("ES_TMPDIR_CHILD");
  if (mode == nullptr) GTEST_SKIP() << "run by TestTmpDir.AChildRun...";
  const fs::path d = fs::temp_directory_path() / "scratch";
  fs::create_directories(d);
  std::ofstream(d / "written.db") << "session";
  if (std::string(mode) == "fail") ADD_FAILURE() << "failing on request (ES_TMPDIR_CHILD=fail)";
}
