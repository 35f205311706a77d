// SIGTERM (what Slurm, Kubernetes and CI time limits send) stops `embedscope scenario` and
// `embedscope scaling` as Ctrl-C does (crit42, tester42 F22: exit 143 and a half-written session):
// the run in progress is cancelled after its current step, the runs after it are listed as not
// run, the exit status is 0 and the sessions written can be read. No timing: the signal is sent
// once the child has printed a progress line, and the runs are far too long to end by themselves.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;

fs::path sigterm_scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("embedscope_sigterm_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

struct Stopped {
  int status = 0;
  std::string piped;  ///< everything the child wrote to the piped stream
  std::string other;  ///< everything it wrote to the other one
};

// Runs the CLI with `args`; its stream `piped_fd` (1 or 2) is read line by line, the other goes
// to `other_file`. Once a line contains `wait_for`, the child gets SIGTERM; its output is read
// to the end and it is waited for. A child that ends before printing `wait_for` is waited for
// too (the test then fails on what it printed).
Stopped terminate_after(const std::vector<std::string>& args, int piped_fd, const std::string& wait_for,
                        const fs::path& other_file, bool* signalled) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  if (child == 0) {
    dup2(fds[1], piped_fd);
    dup2(open(other_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), piped_fd == 1 ? 2 : 1);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv{const_cast<char*>(EMBEDSCOPE_CLI)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(EMBEDSCOPE_CLI, argv.data());
    _exit(127);
  }
  close(fds[1]);
  Stopped s;
  *signalled = false;
  FILE* in = fdopen(fds[0], "r");
  char* line = nullptr;
  size_t cap = 0;
  while (getline(&line, &cap, in) > 0) {
    s.piped += line;
    if (!*signalled && std::string(line).find(wait_for) != std::string::npos) {
      kill(child, SIGTERM);
      *signalled = true;
    }
  }
  free(line);
  fclose(in);
  waitpid(child, &s.status, 0);
  std::ifstream f(other_file);
  std::stringstream ss;
  ss << f.rdbuf();
  s.other = ss.str();
  return s;
}
}  // namespace

TEST(SigtermCli, ScenarioCancelsTheRunningRunAndListsTheRestAsNotRun) {
  const fs::path dir = sigterm_scratch("scenario");
  bool signalled = false;
  // the first measured step's progress line ("  step 1/100000000 ...") on stderr
  const Stopped s = terminate_after({"scenario", "row_wise_vs_table_wise", "--steps", "100000000", "-o", dir.string()}, 2,
                                    "  step 1/", dir / "out.txt", &signalled);
  ASSERT_TRUE(signalled) << s.piped << s.other;
  ASSERT_TRUE(WIFEXITED(s.status)) << "ended by signal " << (WIFSIGNALED(s.status) ? WTERMSIG(s.status) : 0) << "\n" << s.piped;
  EXPECT_EQ(WEXITSTATUS(s.status), 0) << s.piped;
  EXPECT_NE(s.piped.find("cancelling after the current step"), std::string::npos) << s.piped;
  EXPECT_NE(s.other.find("not run (cancelled)"), std::string::npos) << s.other;  // the second run
  EXPECT_FALSE(fs::exists(dir / "row_wise_vs_table_wise-1.db"));
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats --json " + (dir / "row_wise_vs_table_wise-0.db").string(),
                                                   dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ended"], "cancelled");
  EXPECT_GE(j["steps"].get<int>(), 1);
}

TEST(SigtermCli, ScalingCancelsTheRunningPointAndListsTheRestAsNotRun) {
  const fs::path dir = sigterm_scratch("scaling");
  bool signalled = false;
  // point 1 (1 GPU) does not fit mlperf_dlrm_dcnv2's 97 GiB of tables and prints its row at once;
  // point 2 (8 GPUs) then runs its 100,000,000 steps until the signal; point 3 never starts
  const Stopped s = terminate_after({"scaling", "--preset", "mlperf_dlrm_dcnv2", "--simulate", "h100_sxm", "--gpus", "1,8,16",
                                     "--shardings", "table_wise", "--steps", "100000000", "-o", dir.string()},
                                    1, "no plan fits the devices", dir / "err.txt", &signalled);
  ASSERT_TRUE(signalled) << s.piped << s.other;
  ASSERT_TRUE(WIFEXITED(s.status)) << "ended by signal " << (WIFSIGNALED(s.status) ? WTERMSIG(s.status) : 0) << "\n" << s.other;
  EXPECT_EQ(WEXITSTATUS(s.status), 0) << s.other;
  EXPECT_NE(s.other.find("cancelling after the current step"), std::string::npos) << s.other;
  // point 3 is not run; point 2 was cancelled in its run or before it started, by when the signal came
  EXPECT_NE(s.piped.find("table_wise           16     2  not run (cancelled)"), std::string::npos) << s.piped;
  EXPECT_FALSE(fs::exists(dir / "table_wise_16.db"));
  if (fs::exists(dir / "table_wise_8.db")) {  // cancelled in its run: a readable session that says so
    const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats --json " + (dir / "table_wise_8.db").string(), dir);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["ended"], "cancelled");
  }
}
