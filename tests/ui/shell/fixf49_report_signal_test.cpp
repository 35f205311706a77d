// tester49 F13: SIGTERM / Ctrl-C during `embedscope-ui --report` killed it silently (rc 143) and
// left summary.png, timeline.png, ... without index.html, which made the identical rerun refuse
// the folder. F4: a page that could not be written said "libpng error: Write Error" and
// "DIR/timeline.png: cannot write" without the reason, and left a 0-byte PNG. The pages are now
// staged under DIR/.embedscope-report-PID and put in place at the end; a signal removes them and
// exits 130 with a line, a write error gives its reason and leaves no file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <system_error>

#include "support/cli_run.h"

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

// Starts `embedscope-ui --report SESSION -o OUT` (offscreen; its stderr read through a pipe), sends
// `sig` once its staging folder holds a page (cli_run.h's run_signalled, asked every 10 ms) and
// returns how it ended: `sent` 0 when it ended before a page was staged.
embedscope::test_support::SignalledRun fixf49_report_signalled(const std::string& session, const fs::path& out, int sig) {
  const embedscope::test_support::SignalWhen staged(
      [&out](int pid) {
        const fs::path staging = out / (".embedscope-report-" + std::to_string(pid));
        std::error_code ec;
        return fs::is_directory(staging, ec) && !fs::is_empty(staging, ec);
      },
      10);
  embedscope::test_support::ChildIo io;
  io.env = {"QT_QPA_PLATFORM=offscreen"};
  return embedscope::test_support::run_signalled(EMBEDSCOPE_UI, {"--report", session, "-o", out.string()}, sig, {staged},
                                                 io);
}
}  // namespace

TEST(Fixf49ReportSignal, SigtermLeavesNothingAndTheRerunWorks) {
  Fixf49Dir t("sigterm");
  const std::string s = t.session();
  const fs::path out = t.dir / "rep";
  const auto run = fixf49_report_signalled(s, out, SIGTERM);
  ASSERT_EQ(run.sent, 1) << run.piped;  // it did not end before a page was staged
  const int st = run.status;
  ASSERT_TRUE(WIFEXITED(st)) << "killed by signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  EXPECT_EQ(WEXITSTATUS(st), 130);
  EXPECT_NE(run.piped.find("report cancelled; nothing was written (no " + out.string() + " written)"), std::string::npos)
      << run.piped;
  EXPECT_FALSE(fs::exists(out));  // the folder it created goes too
  // the identical command again: a whole report
  const auto r = run_merged(fixf49_ui("--report '" + s + "' -o '" + out.string() + "'"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(fixf49_files(out), kFixf49Report);

  // Ctrl-C over that report: it stays as it was, page for page (its pages go only at the commit)
  const std::string index = fixf49_slurp(out / "index.html"), summary = fixf49_slurp(out / "summary.png");
  const auto run2 = fixf49_report_signalled(s, out, SIGINT);
  ASSERT_EQ(run2.sent, 1) << run2.piped;
  const int st2 = run2.status;
  ASSERT_TRUE(WIFEXITED(st2));
  EXPECT_EQ(WEXITSTATUS(st2), 130);
  EXPECT_NE(run2.piped.find("report cancelled; nothing was written (" + out.string() + " is as it was)"), std::string::npos)
      << run2.piped;
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
