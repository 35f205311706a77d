// launch's refusals before any process starts and its second Ctrl-C with a stopped rank: a world
// size the workload refuses and a run's --devices other than -n are refused once, naming
// `launch -n` (every rank used to print the refusal, blaming the --world-size launch adds); a
// rank stopped with SIGSTOP is killed at the second Ctrl-C instead of being waited for through
// the collective timeout and --kill-after. Every test runs the real CLI in real processes.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/cli_run.h"
#include "support/launch_children.h"

namespace {
namespace fs = std::filesystem;
namespace ts = embedscope::test_support;
using nlohmann::json;

// 2 cpu ranks, 2 tables of 1,000 x 8, batch 8: `steps` steps.
fs::path write_small(const fs::path& dir, int steps) {
  json w{{"name", "small"},
         {"batch_size", 8},
         {"steps", steps},
         {"devices", {{"count", 2}}},
         {"tables", {{{"name", "t0"}, {"num_embeddings", 1000}, {"embedding_dim", 8}, {"feature_names", {"f0"}}},
                     {{"name", "t1"}, {"num_embeddings", 1000}, {"embedding_dim", 8}, {"feature_names", {"f1"}}}}},
         {"features", {{{"name", "f0"}, {"pooling_factor", 1}}, {{"name", "f1"}, {"pooling_factor", 1}}}}};
  const fs::path p = dir / "small.json";
  std::ofstream(p) << w.dump(1);
  return p;
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}


}  // namespace

TEST(Launch62, WorldSizeTheWorkloadRefusesIsRefusedOnceBeforeAnyRank) {
  const fs::path dir = ts::fresh_scratch("es_launch62_n65_" + std::to_string(getpid()));
  const fs::path w = write_small(dir, 2);
  const auto r = ts::run_cli(EMBEDSCOPE_CLI, "launch -n 65 run " + w.string() + " -o " + (dir / "e.db").string(), dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(count_of(r.err, "launch -n 65: the run's world size (/devices/count of " + w.string() +
                                ") must be in [1, 64], got 65"), 1) << r.err;
  EXPECT_EQ(count_of(r.err, "[rank "), 0) << r.err;  // no process started
  EXPECT_EQ(count_of(r.err, "processes, rendezvous"), 0) << r.err;
}

TEST(Launch62, DevicesOtherThanNIsBlamedOnTheFlagsGiven) {
  const fs::path dir = ts::fresh_scratch("es_launch62_dev_" + std::to_string(getpid()));
  const fs::path w = write_small(dir, 2);
  const auto r =
      ts::run_cli(EMBEDSCOPE_CLI, "launch -n 2 run " + w.string() + " --devices 4 -o " + (dir / "e.db").string(), dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(count_of(r.err, "launch -n 2: the run's --devices 4 disagrees"), 1) << r.err;
  EXPECT_EQ(count_of(r.err, "--world-size"), 0) << r.err;
  EXPECT_EQ(count_of(r.err, "[rank "), 0) << r.err;
}

// Rank 1 stopped (SIGSTOP), then two Ctrl-Cs 1 s apart: launch ends within seconds (before: the
// 30 s collective timeout and the 120 s --kill-after), naming the stopped rank. The first Ctrl-C
// now continues the stopped rank (launch_stops.h) and every rank cancels after its step: launch
// has often merged and exited 0 before the second comes; one that comes in time stops it at once,
// exit 130 (a rank still stopped then, in a debugger's stop, is killed).
TEST(Launch62, SecondCtrlCKillsAStoppedRankAtOnce) {
  const fs::path dir = ts::fresh_scratch("es_launch62_stop_" + std::to_string(getpid()));
  const fs::path w = write_small(dir, 1000000);
  const fs::path out = dir / "out.txt", err = dir / "err.txt";
  const pid_t launch = fork();
  if (launch == 0) {
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1), dup2(e, 2);
    const std::string ws = w.string(), db = (dir / "s.db").string();
    execl(EMBEDSCOPE_CLI, EMBEDSCOPE_CLI, "launch", "-n", "2", "run", ws.c_str(), "-o", db.c_str(), nullptr);
    _exit(127);
  }
  // both ranks stepping: their sessions exist and rank 0 printed a step
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<pid_t> kids;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
    kids = ts::child_pids(launch);
    if (kids.size() == 2 && fs::exists(dir / "s.rank1.db") && fs::exists(dir / "s.rank0.db")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(kids.size(), 2u) << ts::file_text(err);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  kill(kids[1], SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  kill(launch, SIGINT);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  kill(launch, SIGINT);
  const auto stopped = std::chrono::steady_clock::now();
  int st = 0;
  pid_t got = 0;
  while ((got = waitpid(launch, &st, WNOHANG)) == 0 && std::chrono::steady_clock::now() - stopped < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (got == 0) {
    kill(launch, SIGKILL);
    for (pid_t k : kids) kill(k, SIGKILL);
    waitpid(launch, &st, 0);
    FAIL() << "launch still ran 60 s after the second Ctrl-C:\n" << ts::file_text(err);
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
  EXPECT_LT(took, 20.0) << ts::file_text(err);
  const std::string e = ts::file_text(err);
  EXPECT_NE(e.find("(pid " + std::to_string(kids[1]) + ") is stopped: continued (SIGCONT) so that it takes the Ctrl-C"),
            std::string::npos) << e;
  ASSERT_TRUE(WIFEXITED(st)) << e;
  EXPECT_TRUE(WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 130) << WEXITSTATUS(st) << "\n" << e;
  EXPECT_EQ(e.find("ended hang"), std::string::npos) << e;
}
