// tester47 F15: `launch` waited forever for a rank that was stopped (SIGSTOP: alive, never ending
// on its own) after the other rank had ended `hang`; --kill-after covered only a rank that died of
// a signal. Now the ranks still running --kill-after seconds after a rank ended unsuccessfully get
// SIGTERM, then SIGKILL, and launch merges and exits 1. The hang's own error no longer guesses
// that the silent peer "has exited or was killed".
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

#include "embedscope/sessions/store/session.h"

namespace {
namespace fs = std::filesystem;

fs::path fixc47_launch_scratch() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_fixc47_launch_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::string fixc47_slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The pid of launch's child running `--rank R` (-1 while there is none).
pid_t fixc47_rank_pid(pid_t launch, int rank) {
  const std::string children = fixc47_slurp("/proc/" + std::to_string(launch) + "/task/" + std::to_string(launch) + "/children");
  std::istringstream in(children);
  for (pid_t p; in >> p;) {
    std::string cmd = fixc47_slurp("/proc/" + std::to_string(p) + "/cmdline");
    for (char& c : cmd)
      if (c == '\0') c = ' ';
    if (cmd.find(" --rank " + std::to_string(rank) + " ") != std::string::npos) return p;
  }
  return -1;
}

}  // namespace

TEST(Fixc47LaunchStop, AStoppedRankIsKilledAfterItsPeersHangAndTheRunMerged) {
  const fs::path dir = fixc47_launch_scratch();
  std::ifstream in(std::string(EMBEDSCOPE_TEST_DATA) + "/../../resources/workloads/tiny.json");
  nlohmann::json wl = nlohmann::json::parse(in);
  wl["collective_timeout_ms"] = 1000;
  std::ofstream(dir / "t.json") << wl.dump();
  const fs::path out = dir / "launch.out", err = dir / "launch.err";
  pid_t launch = fork();
  if (launch == 0) {
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1), dup2(e, 2);
    const std::string w = (dir / "t.json").string(), o_db = (dir / "hs.db").string();
    std::vector<const char*> argv{EMBEDSCOPE_CLI, "launch", "-n", "2", "--kill-after", "1", "run", w.c_str(),
                                  "--steps", "1000000", "-o", o_db.c_str(), nullptr};
    execv(EMBEDSCOPE_CLI, const_cast<char* const*>(argv.data()));
    _exit(127);
  }
  pid_t stopped = -1;
  struct Cleanup {  // whatever happens below, no process outlives the test
    pid_t& launch;
    pid_t& stopped;
    ~Cleanup() {
      if (stopped > 0) kill(stopped, SIGKILL);
      if (launch > 0) kill(launch, SIGKILL), waitpid(launch, nullptr, 0);
    }
  } guard{launch, stopped};
  // until rank 1 has run steps (its first progress line through launch), a condition, bounded
  for (int i = 0; i < 3000 && fixc47_slurp(err).find("[rank 1]") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int i = 0; i < 3000 && fixc47_slurp(err).find("/1000000") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  stopped = fixc47_rank_pid(launch, 1);
  ASSERT_GT(stopped, 0) << fixc47_slurp(err);
  ASSERT_EQ(kill(stopped, SIGSTOP), 0);
  // rank 0 ends hang within its 1 s timeout plus the wait for failure reports; launch then gives
  // rank 1 1 s, SIGTERM (pending: it is stopped), 1 s, SIGKILL. Bounded by 60 s, not timed.
  int st = 0;
  bool ended = false;
  for (int i = 0; i < 3000 && !ended; ++i) {
    ended = waitpid(launch, &st, WNOHANG) == launch;
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string e = fixc47_slurp(err);
  ASSERT_TRUE(ended) << "launch did not end: " << e;
  launch = -1;
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 1) << e;
  EXPECT_NE(e.find("rank 1 (pid " + std::to_string(stopped) + ") did not end within 1 s after rank 0's hang: SIGTERM "
                   "(SIGKILL in 1 s)"),
            std::string::npos) << e;
  EXPECT_NE(e.find("rank 1 (pid " + std::to_string(stopped) + ") did not end within 2 s after rank 0's hang: killed"),
            std::string::npos) << e;
  // rank 0's error: its silent peer did not answer (no guess that it was killed)
  EXPECT_NE(e.find("reported no failure within"), std::string::npos) << e;
  EXPECT_NE(e.find("the process did not answer: it exited, was killed, or is stopped or stalled"), std::string::npos) << e;
  EXPECT_EQ(e.find("the process has exited or was killed"), std::string::npos) << e;
  stopped = -1;
  ASSERT_TRUE(fs::exists(dir / "hs.db")) << e;  // merged
  const embedscope::sessions::SessionReader m((dir / "hs.db").string());
  EXPECT_NE(m.status(), "complete");
}
