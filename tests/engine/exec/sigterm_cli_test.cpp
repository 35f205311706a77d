// SIGTERM (what Slurm, Kubernetes and CI time limits send) stops `embedscope scenario` and
// `embedscope scaling` as Ctrl-C does (crit42, tester42 F22: exit 143 and a half-written session):
// the run in progress is cancelled after its current step, the runs after it are listed as not
// run, the exit status is 0 and the sessions written can be read. No timing: the signal is sent
// once the child has printed a progress line, and the runs are far too long to end by themselves.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
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

// Runs the CLI with `args`; its stream `piped_fd` (1 or 2) is read through a pipe (`piped`), the
// other goes to `other_file` (`other`). Once what it printed holds `wait_for`, the child gets
// SIGTERM (`sent` 1); its output is read to the end and it is waited for. A child that ends before
// printing `wait_for` is waited for too (the test then fails on what it printed).
embedscope::test_support::SignalledRun terminate_after(const std::vector<std::string>& args, int piped_fd,
                                                       const std::string& wait_for, const fs::path& other_file) {
  return embedscope::test_support::run_signalled(EMBEDSCOPE_CLI, args, SIGTERM, {{wait_for}}, {piped_fd, other_file.string()});
}
}  // namespace

TEST(SigtermCli, ScenarioCancelsTheRunningRunAndListsTheRestAsNotRun) {
  const fs::path dir = sigterm_scratch("scenario");
  // the first measured step's progress line ("  step 1/100000000 ...") on stderr
  const auto s = terminate_after({"scenario", "row_wise_vs_table_wise", "--steps", "100000000", "-o", dir.string()}, 2,
                                    "  step 1/", dir / "out.txt");
  ASSERT_EQ(s.sent, 1) << s.piped << s.other;
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
  // point 1 (1 GPU) does not fit mlperf_dlrm_dcnv2's 97 GiB of tables and prints its row at once;
  // point 2 (8 GPUs) then runs its 100,000,000 steps until the signal; point 3 never starts
  const auto s = terminate_after({"scaling", "--preset", "mlperf_dlrm_dcnv2", "--simulate", "h100_sxm", "--gpus", "1,8,16",
                                     "--shardings", "table_wise", "--steps", "100000000", "-o", dir.string()},
                                    1, "no plan fits the devices", dir / "err.txt");
  ASSERT_EQ(s.sent, 1) << s.piped << s.other;
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
