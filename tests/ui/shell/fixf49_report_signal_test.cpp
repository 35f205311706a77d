// tester49 F13: SIGTERM / Ctrl-C during `embedscope-ui --report` killed it silently (rc 143) and
// left summary.png, timeline.png, ... without index.html, which made the identical rerun refuse
// the folder. F4: a page that could not be written said "libpng error: Write Error" and
// "DIR/timeline.png: cannot write" without the reason, and left a 0-byte PNG. The pages are now
// staged under DIR/.embedscope-report-PID and put in place at the end; a signal removes them and
// exits 130 with a line, a write error gives its reason and leaves no file.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "support/cli_run.h"

extern char** environ;

namespace {
namespace fs = std::filesystem;
using embedscope::test_support::run_merged;

std::string fixf49_slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::set<std::string> fixf49_files(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

const std::set<std::string> kFixf49Report = {"index.html", "load.png",          "memory.png",
                                             "summary.png", "timeline-step.png", "timeline.png"};

struct Fixf49Dir {
  fs::path dir;
  explicit Fixf49Dir(const std::string& name)
      : dir(fs::temp_directory_path() / ("es_fixf49_" + name + "_" + std::to_string(getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Fixf49Dir() { fs::remove_all(dir); }
  std::string session() const {
    const fs::path p = dir / "s.db";
    const auto r = run_merged("'" + std::string(EMBEDSCOPE_CLI) + "' run --preset tiny --simulate h100_sxm --steps 2 -o '" +
                              p.string() + "'");
    EXPECT_EQ(r.code, 0) << r.out;
    return p.string();
  }
};

std::string fixf49_ui(const std::string& args) { return "QT_QPA_PLATFORM=offscreen '" + std::string(EMBEDSCOPE_UI) + "' " + args; }
// the same as the shell's last command, in its process (exec): the pid spawned is the UI's
std::string fixf49_exec_ui(const std::string& args) {
  return "export QT_QPA_PLATFORM=offscreen; exec '" + std::string(EMBEDSCOPE_UI) + "' " + args;
}

// Starts `embedscope-ui --report SESSION -o OUT` (stderr to ERR), waits until its staging folder
// holds a page, sends `sig`, and returns the wait status (or -1 when it ended first / never staged).
int fixf49_report_signalled(const std::string& session, const fs::path& out, const fs::path& err, int sig) {
  const std::string cmd = fixf49_exec_ui("--report '" + session + "' -o '" + out.string() + "' 2>'" + err.string() + "'");
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) return -1;
  const fs::path staging = out / (".embedscope-report-" + std::to_string(pid));
  bool staged = false;
  for (int i = 0; i < 12000 && !staged; ++i) {  // up to 120 s to render the first page
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid) return -1;  // ended before a page was staged
    std::error_code ec;
    staged = fs::is_directory(staging, ec) && !fs::is_empty(staging, ec);
    if (!staged) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (staged) kill(pid, sig);
  int st = 0;
  waitpid(pid, &st, 0);
  return staged ? st : -1;
}
}  // namespace

TEST(Fixf49ReportSignal, SigtermLeavesNothingAndTheRerunWorks) {
  Fixf49Dir t("sigterm");
  const std::string s = t.session();
  const fs::path out = t.dir / "rep", err = t.dir / "err.txt";
  const int st = fixf49_report_signalled(s, out, err, SIGTERM);
  ASSERT_NE(st, -1) << fixf49_slurp(err);
  ASSERT_TRUE(WIFEXITED(st)) << "killed by signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  EXPECT_EQ(WEXITSTATUS(st), 130);
  EXPECT_NE(fixf49_slurp(err).find("report cancelled; nothing was written (no " + out.string() + " written)"),
            std::string::npos)
      << fixf49_slurp(err);
  EXPECT_FALSE(fs::exists(out));  // the folder it created goes too
  // the identical command again: a whole report
  const auto r = run_merged(fixf49_ui("--report '" + s + "' -o '" + out.string() + "'"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(fixf49_files(out), kFixf49Report);

  // Ctrl-C over that report: it stays as it was, page for page (its pages go only at the commit)
  const std::string index = fixf49_slurp(out / "index.html"), summary = fixf49_slurp(out / "summary.png");
  const int st2 = fixf49_report_signalled(s, out, err, SIGINT);
  ASSERT_NE(st2, -1) << fixf49_slurp(err);
  ASSERT_TRUE(WIFEXITED(st2));
  EXPECT_EQ(WEXITSTATUS(st2), 130);
  EXPECT_NE(fixf49_slurp(err).find("report cancelled; nothing was written (" + out.string() + " is as it was)"),
            std::string::npos)
      << fixf49_slurp(err);
  EXPECT_EQ(fixf49_files(out), kFixf49Report);
  EXPECT_EQ(fixf49_slurp(out / "index.html"), index);
  EXPECT_EQ(fixf49_slurp(out / "summary.png"), summary);
}

// A page that cannot be written (here: larger than the process's file size limit, EFBIG, as a
// full disk's ENOSPC) says why, exits 2 and leaves no partial file and no folder it created.
TEST(Fixf49ReportSignal, AWriteErrorSaysWhyAndLeavesNoPartialFile) {
  Fixf49Dir t("efbig");
  const std::string s = t.session();
  const fs::path out = t.dir / "rep";
  // bash's ulimit -f counts KiB; SIGXFSZ ignored, so write(2) fails with EFBIG instead of a kill
  const auto r = run_merged("bash -c \"trap '' XFSZ; ulimit -f 40; " +
                            fixf49_exec_ui("--report '" + s + "' -o '" + out.string() + "'") + "\"");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("error: " + out.string() + "/timeline.png: cannot write: File too large\n"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("libpng"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out)) << (fs::exists(out) ? fixf49_files(out).size() : 0);
}
