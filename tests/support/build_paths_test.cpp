// build_paths.cpp's environment overrides (the packed device checks run test executables away
// from their build tree, tests/gpu/run_device_checks.sh --prebuilt): each EMBEDSCOPE_* variable
// replaces its build path from the executable's start, before namespace-scope initialisers of
// the tests read it; an empty variable keeps the build's path; a value too long stops the
// executable naming the variable. The overrides are checked in a child run of this executable
// (BuildPathsChild.*, which skips unless a BuildPaths test started it).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace {
// read by a namespace-scope initialiser, as test sources do (scaling_study_test.cpp's profile path)
const std::string kBuildPathsDataAtStart = EMBEDSCOPE_TEST_DATA;
const std::string kBuildPathsCliAtStart = EMBEDSCOPE_CLI;

struct BuildPathsChildRun {
  int exit_code = -1;  ///< the child's exit status; -1 when it did not exit normally
  std::string output;  ///< stdout and stderr together
};

/// Runs this executable again with `env` (shell assignments) in front, only the tests of `filter`.
BuildPathsChildRun build_paths_run_child(const std::string& env, const std::string& filter) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();  // not the shell's
  const std::string cmd = env + " '" + self + "' --gtest_filter='" + filter + "' 2>&1";
  BuildPathsChildRun r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) r.output.append(buf, n);
  const int status = pclose(pipe);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

/// The variable's value, "" when unset.
std::string build_paths_env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}
}  // namespace

TEST(BuildPaths, DefaultsPointIntoTheSourceAndBuildTree) {
  if (!build_paths_env("EMBEDSCOPE_TEST_DATA").empty() || !build_paths_env("ES_BUILD_PATHS_CHILD").empty())
    GTEST_SKIP() << "EMBEDSCOPE_TEST_DATA is set: the defaults are overridden";
  EXPECT_TRUE(std::filesystem::is_regular_file(std::string(EMBEDSCOPE_SOURCE_DIR) + "/tests/support/build_paths.cpp"));
  EXPECT_EQ(std::string(EMBEDSCOPE_TEST_DATA), std::string(EMBEDSCOPE_SOURCE_DIR) + "/tests/data");
  EXPECT_TRUE(std::filesystem::is_directory(EMBEDSCOPE_TEST_DATA));
  EXPECT_EQ(std::filesystem::path(EMBEDSCOPE_CLI).filename(), "embedscope");
  EXPECT_EQ(kBuildPathsDataAtStart, EMBEDSCOPE_TEST_DATA);
}

TEST(BuildPaths, EnvironmentOverridesEveryPathFromTheStart) {
  const auto r = build_paths_run_child(
      "ES_BUILD_PATHS_CHILD=1 EMBEDSCOPE_TEST_DATA=/pack/data EMBEDSCOPE_CLI=/pack/bin/embedscope "
      "EMBEDSCOPE_UI=/pack/bin/embedscope-ui EMBEDSCOPE_SOURCE_DIR=/pack EMBEDSCOPE_SHARED_DATA=/pack/shared "
      "ES_EXPECT_TEST_DATA=/pack/data ES_EXPECT_CLI=/pack/bin/embedscope ES_EXPECT_UI=/pack/bin/embedscope-ui "
      "ES_EXPECT_SOURCE_DIR=/pack ES_EXPECT_SHARED_DATA=/pack/shared",
      "BuildPathsChild.*");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[  PASSED  ] 1 test."), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("SKIPPED"), std::string::npos) << r.output;
}

TEST(BuildPaths, AnEmptyVariableKeepsTheBuildPath) {
  const std::string cli = EMBEDSCOPE_CLI, data = EMBEDSCOPE_TEST_DATA, ui = EMBEDSCOPE_UI,
                    src = EMBEDSCOPE_SOURCE_DIR, shared = EMBEDSCOPE_SHARED_DATA;
  const auto r = build_paths_run_child("ES_BUILD_PATHS_CHILD=1 EMBEDSCOPE_CLI= EMBEDSCOPE_TEST_DATA='" + data +
                                           "' ES_EXPECT_CLI='" + cli + "' ES_EXPECT_TEST_DATA='" + data +
                                           "' ES_EXPECT_UI='" + ui + "' ES_EXPECT_SOURCE_DIR='" + src +
                                           "' ES_EXPECT_SHARED_DATA='" + shared + "'",
                                       "BuildPathsChild.*");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[  PASSED  ] 1 test."), std::string::npos) << r.output;
}

TEST(BuildPaths, AValueTooLongStopsNamingTheVariable) {
  const auto r = build_paths_run_child("EMBEDSCOPE_CLI=/" + std::string(4095, 'x'), "BuildPathsChild.*");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("build_paths: $EMBEDSCOPE_CLI is 4096 bytes long; at most 4095 fit"), std::string::npos)
      << r.output;
  // 4,095 bytes fit
  const std::string longest = "/" + std::string(4094, 'y');
  const auto ok = build_paths_run_child("ES_BUILD_PATHS_CHILD=1 EMBEDSCOPE_CLI=" + longest + " ES_EXPECT_CLI=" + longest,
                                        "BuildPathsChild.*");
  EXPECT_EQ(ok.exit_code, 0) << ok.output.substr(0, 2000);
}

TEST(BuildPathsChild, SeesTheExpectedPathsWhenStartedByBuildPaths) {
  if (build_paths_env("ES_BUILD_PATHS_CHILD").empty()) GTEST_SKIP() << "run by the BuildPaths tests in a child";
  // only the variables the parent names are compared
  auto check = [](const char* expect_var, const char* actual) {
    if (std::getenv(expect_var) != nullptr) {
      EXPECT_EQ(std::string(actual), build_paths_env(expect_var)) << expect_var;
    }
  };
  check("ES_EXPECT_TEST_DATA", EMBEDSCOPE_TEST_DATA);
  check("ES_EXPECT_CLI", EMBEDSCOPE_CLI);
  check("ES_EXPECT_UI", EMBEDSCOPE_UI);
  check("ES_EXPECT_SOURCE_DIR", EMBEDSCOPE_SOURCE_DIR);
  check("ES_EXPECT_SHARED_DATA", EMBEDSCOPE_SHARED_DATA);
  check("ES_EXPECT_TEST_DATA", kBuildPathsDataAtStart.c_str());  // the override came before the initialisers
  check("ES_EXPECT_CLI", kBuildPathsCliAtStart.c_str());
}
