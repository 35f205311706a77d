// tester46 F5: `launch` killed with SIGKILL (the OOM killer, a batch system's hard kill) left its
// ranks writing into pipes nobody read: each ended "crashed: cannot write to file: Broken pipe",
// nothing saying the launcher went away. Now each rank notices its pipe lost its reader, cancels
// after the current step (the ranks' cancel vote agrees on it) and ends its session "cancelled"
// naming the launcher and the merge command.
//
// No timing: the launcher is killed once a rank printed a measured step of a run far too long to
// end by itself; this test is the ranks' subreaper, so it waits for them when they are orphaned.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "embedscope/sessions/store/session.h"

namespace {
namespace fs = std::filesystem;

std::string fix47_meta(const fs::path& db, const std::string& key) {
  const embedscope::sessions::SessionReader r(db.string());
  const auto m = r.metadata();
  const auto it = m.find(key);
  return it == m.end() ? std::string("(missing)") : it->second;
}
}  // namespace

TEST(LauncherGoneF5, RanksOfAKilledLauncherEndCancelledNamingItAndTheMerge) {
  const fs::path dir = fs::temp_directory_path() / ("es_fix47_launch_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);  // the ranks are re-parented to this process
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const std::string out = (dir / "L.db").string();
  const pid_t launcher = fork();
  if (launcher == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    execl(EMBEDSCOPE_CLI, EMBEDSCOPE_CLI, "launch", "-n", "2", "run", "--preset", "tiny", "--steps", "100000000",
          "--warmup-steps", "0", "-o", out.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string err;
  FILE* in = fdopen(fds[0], "r");
  char* line = nullptr;
  size_t cap = 0;
  bool killed = false;
  while (getline(&line, &cap, in) > 0) {
    err += line;
    if (!killed && std::string(line).find("[rank 0] step ") != std::string::npos) {
      kill(launcher, SIGKILL);
      killed = true;
    }
  }
  free(line);
  fclose(in);
  int status = 0;
  waitpid(launcher, &status, 0);
  // the two ranks, orphaned: each must end by itself, exit 0
  std::vector<int> rank_status;
  for (int st = 0; waitpid(-1, &st, 0) > 0;) rank_status.push_back(st);
  prctl(PR_SET_CHILD_SUBREAPER, 0);
  ASSERT_TRUE(killed) << err;
  ASSERT_EQ(rank_status.size(), 2u) << err;
  for (int st : rank_status) {
    ASSERT_TRUE(WIFEXITED(st)) << "a rank ended by signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    EXPECT_EQ(WEXITSTATUS(st), 0);
  }
  for (int r = 0; r < 2; ++r) {
    const fs::path db = dir / ("L.rank" + std::to_string(r) + ".db");
    EXPECT_EQ(fix47_meta(db, "ended"), "cancelled") << fix47_meta(db, "end_message");
    EXPECT_EQ(fix47_meta(db, "end_message"),
              "launcher (pid " + std::to_string(launcher) + ") went away: output pipe closed; rank " + std::to_string(r) +
                  " cancelled after the current step. Merge the rank sessions: embedscope merge " +
                  (dir / "L.rank*.db").string() + " -o " + out);
  }
  EXPECT_FALSE(fs::exists(out));  // nobody merged: the message says how
}
