// tester46 F24: SIGTERM (what a batch system's time limit sends) killed `embedscope import` (exit
// 143, the hidden ".OUT.importing-PID" files left) where Ctrl-C cancels cleanly (exit 130, nothing
// left). Now both cancel alike.
//
// No timing: the import's stderr is a pipe this test filled to the brim before the import started,
// so its first line ("import: reading FILE (1/1)", printed once its signal handler is in place)
// blocks in write(2) (that line itself may then be lost to the cancel's exit: see below). The test waits until /proc/PID/syscall shows that write, sends SIGTERM, and
// only then reads the pipe: the import cannot have read its trace before the signal.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "import_test_support.h"

namespace {
namespace fs = std::filesystem;

// Whether process `pid` is blocked in write(2) on its fd 2 (/proc/PID/syscall: "1 0x2 ..." on x86-64).
bool fix47_in_stderr_write(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/syscall");
  std::string nr, fd;
  f >> nr >> fd;
  return nr == "1" && fd == "0x2";
}
}  // namespace

TEST(ImportSigtermF24, SigtermCancelsTheImportAsCtrlCDoesAndLeavesNothing) {
  const fs::path dir = embedscope::sessions::testing::import_scratch() / "fix47_sigterm";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string trace = embedscope::sessions::testing::trace_fixture("epoch.json");
  const std::string out = (dir / "t.db").string();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  // fill the pipe: 4,096-byte lines (PIPE_BUF: each written whole or not at all)
  const std::string filler = std::string(4095, 'x') + "\n";
  fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK);
  while (write(fds[1], filler.data(), filler.size()) == static_cast<ssize_t>(filler.size())) {
  }
  fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) & ~O_NONBLOCK);  // the child's stderr blocks
  const pid_t child = fork();
  if (child == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    execl(EMBEDSCOPE_CLI, EMBEDSCOPE_CLI, "import", trace.c_str(), "-o", out.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  int status = 0;
  bool ended = false, signalled = false;
  while (!(ended = waitpid(child, &status, WNOHANG) == child)) {
    if (fix47_in_stderr_write(child)) {
      kill(child, SIGTERM);
      signalled = true;
      break;
    }
    usleep(1000);
  }
  std::string err;
  FILE* in = fdopen(fds[0], "r");
  char* line = nullptr;
  size_t cap = 0;
  while (getline(&line, &cap, in) > 0)
    if (line[0] != 'x') err += line;
  free(line);
  fclose(in);
  if (!ended) waitpid(child, &status, 0);

  ASSERT_TRUE(signalled) << err;
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << "\n" << err;
  EXPECT_EQ(WEXITSTATUS(status), 130) << err;
  // The blocked line ("import: reading FILE (1/1)") races the cancel thread's own lines once the
  // pipe drains: the thread may write first and exit (130) before it (ci53, 1 in a -j2 ctest), so
  // only the cancel's words are asserted.
  EXPECT_NE(err.find("cancelling the import"), std::string::npos) << err;
  EXPECT_NE(err.find("import cancelled; nothing was kept (no " + out + " written)"), std::string::npos) << err;
  // nothing left: no session, no hidden ".t.db.importing-PID" (nor its -wal / -shm)
  for (const auto& e : fs::directory_iterator(dir)) ADD_FAILURE() << "left behind: " << e.path();
}
