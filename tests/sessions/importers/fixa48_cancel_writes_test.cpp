// fixa48: Ctrl-C / SIGTERM cancel `merge` and `export` as they cancel `import` (they had no
// handler: a SIGTERM killed a merge half-way), and cancel an import in its writing phase too
// (retest47 R7: announced, then ignored: exit 0, the session written). Each: exit 130, the line
// "<command> cancelled; nothing was ...", nothing under the output name (or the file already
// there unchanged) and no staged ".<name>.<merging|exporting|importing>-PID" left.
//
// No timing: the command's stderr is a pipe filled to the brim before it starts, so its first
// line (printed once its handler is in place) blocks in write(2); the test waits until
// /proc/PID/syscall shows that write and signals it then (that line itself may never come out:
// the cancel can end the process before the interrupted write resumes). The import's writing phase: the test
// holds a read transaction on the staged session, so the import's final WAL checkpoint waits
// (SQLite's busy handler sleeps) inside SessionWriter::close, and the test signals it there.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "import_test_support.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using embedscope::sessions::testing::import_scratch;
using embedscope::sessions::testing::trace_fixture;

// The syscall process `pid`'s main thread is blocked in and its first argument ("1", "0x2": a
// write to fd 2 on x86-64); {"", ""} while it runs or once it is gone.
std::pair<std::string, std::string> fixa48_syscall(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/syscall");
  std::string nr, arg;
  f >> nr >> arg;
  return {nr, arg};
}

std::string fixa48_slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Every entry of `dir` whose name holds `part`.
std::vector<std::string> fixa48_entries_with(const fs::path& dir, const std::string& part) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(part) != std::string::npos) found.push_back(e.path().filename().string());
  return found;
}

// A CLI process whose stderr is a full pipe: its first stderr line blocks in write(2).
struct Fixa48Child {
  pid_t pid = -1;
  int err = -1;  // the read end of its stderr
};

Fixa48Child fixa48_start(const std::vector<std::string>& args, const std::string& stdout_file) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const std::string filler = std::string(4095, 'x') + "\n";  // PIPE_BUF: written whole or not at all
  fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK);
  while (write(fds[1], filler.data(), filler.size()) == static_cast<ssize_t>(filler.size())) {
  }
  fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) & ~O_NONBLOCK);
  const pid_t child = fork();
  if (child == 0) {
    dup2(fds[1], 2);
    dup2(open(stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 1);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv{const_cast<char*>(EMBEDSCOPE_CLI)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(EMBEDSCOPE_CLI, argv.data());
    _exit(127);
  }
  close(fds[1]);
  return {child, fds[0]};
}

// Waits until the child blocks in its first stderr write (true), or ends (false; reaped into `status`).
bool fixa48_wait_blocked(pid_t pid, int& status) {
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (fixa48_syscall(pid) == std::pair<std::string, std::string>{"1", "0x2"}) return true;
    usleep(1000);
  }
  return false;
}

// Reads the child's stderr to its end (the filler lines dropped); sends SIGTERM again once a line
// holds `again` (when not empty).
std::string fixa48_drain(const Fixa48Child& c, const std::string& again = "") {
  std::string err;
  FILE* in = fdopen(c.err, "r");
  char* line = nullptr;
  size_t cap = 0;
  bool sent = false;
  while (getline(&line, &cap, in) > 0) {
    if (line[0] == 'x') continue;
    err += line;
    if (!again.empty() && !sent && std::string(line).find(again) != std::string::npos) {
      kill(c.pid, SIGTERM);
      sent = true;
    }
  }
  free(line);
  fclose(in);
  return err;
}

struct Fixa48Ended {
  int status = 0;
  bool signalled = false;
  std::string err, out;
};

// Runs `args`, sends SIGTERM when its first stderr line blocks (again once a line holds `again`).
Fixa48Ended fixa48_term(const std::vector<std::string>& args, const fs::path& dir, const std::string& again = "",
                        const std::string& staged_part = "", std::vector<std::string>* staged_seen = nullptr) {
  Fixa48Ended e;
  const std::string out_file = (dir.parent_path() / (dir.filename().string() + ".stdout")).string();
  const Fixa48Child c = fixa48_start(args, out_file);
  if (c.pid < 0) return e;
  bool ended = !fixa48_wait_blocked(c.pid, e.status);
  if (!ended) {
    if (staged_seen) *staged_seen = fixa48_entries_with(dir, staged_part);  // while it is blocked
    kill(c.pid, SIGTERM);
    e.signalled = true;
  }
  e.err = fixa48_drain(c, again);
  if (!ended) waitpid(c.pid, &e.status, 0);
  e.out = fixa48_slurp(out_file);
  return e;
}

fs::path fixa48_dir(const std::string& name) {
  const fs::path dir = import_scratch() / ("fixa48_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// rank 0 and rank 1 of hta_small, imported each as one session, in `dir`.
std::pair<std::string, std::string> fixa48_rank_sessions(const fs::path& dir) {
  const std::string a = (dir / "r0.db").string(), b = (dir / "r1.db").string();
  for (const auto& [trace, db] : {std::pair{trace_fixture("hta_small/rank0.json"), a}, {trace_fixture("hta_small/rank1.json"), b}}) {
    const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "import " + trace + " -o " + db, dir.parent_path());
    EXPECT_EQ(r.code, 0) << r.err;
  }
  return {a, b};
}

}  // namespace

TEST(CancelWritesFixa48, SigtermCancelsAMergeAndKeepsTheSessionItWasToReplace) {
  const fs::path dir = fixa48_dir("merge");
  const auto [a, b] = fixa48_rank_sessions(dir);
  const std::string out = (dir / "all.db").string();
  fs::copy_file(a, out);  // an earlier session under the output name: --force-overwrite would replace it
  const std::string before = fixa48_slurp(out);
  const Fixa48Ended e = fixa48_term({"merge", a, b, "-o", out, "--force-overwrite", "--json"}, dir);
  ASSERT_TRUE(e.signalled) << e.err;
  ASSERT_TRUE(WIFEXITED(e.status)) << "ended by signal " << (WIFSIGNALED(e.status) ? WTERMSIG(e.status) : 0) << "\n" << e.err;
  EXPECT_EQ(WEXITSTATUS(e.status), 130) << e.err;
  EXPECT_NE(e.err.find("cancelling the merge"), std::string::npos) << e.err;
  EXPECT_NE(e.err.find("merge cancelled; nothing was written (" + out + " is as it was)"), std::string::npos) << e.err;
  EXPECT_EQ(e.out, "{\"ended\":\"cancelled\",\"session\":null}\n");
  EXPECT_EQ(fixa48_slurp(out), before);  // byte for byte
  EXPECT_EQ(fixa48_entries_with(dir, ".merging-"), std::vector<std::string>{});
  EXPECT_EQ(fixa48_entries_with(dir, "all.db"), std::vector<std::string>{"all.db"});  // no -wal / -shm beside it
}

TEST(CancelWritesFixa48, ASecondSigtermStillLeavesNoMergedSessionNorStagedFile) {
  const fs::path dir = fixa48_dir("merge2");
  const auto [a, b] = fixa48_rank_sessions(dir);
  const std::string out = (dir / "all.db").string();
  const Fixa48Ended e = fixa48_term({"merge", a, b, "-o", out}, dir, "cancelling the merge");
  ASSERT_TRUE(e.signalled) << e.err;
  ASSERT_TRUE(WIFEXITED(e.status)) << "ended by signal " << (WIFSIGNALED(e.status) ? WTERMSIG(e.status) : 0) << "\n" << e.err;
  EXPECT_EQ(WEXITSTATUS(e.status), 130) << e.err;
  EXPECT_NE(e.err.find("merge cancelled; nothing was written (no " + out + " written)"), std::string::npos) << e.err;
  EXPECT_EQ(e.out, "");  // no --json: nothing on stdout
  std::vector<std::string> left;
  for (const auto& x : fs::directory_iterator(dir)) left.push_back(x.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"r0.db", "r1.db"}));
}

TEST(CancelWritesFixa48, SigtermCancelsAChromeExportAndKeepsTheFileThere) {
  const fs::path dir = fixa48_dir("export");
  const auto [a, b] = fixa48_rank_sessions(dir);
  const std::string out = (dir / "trace.json").string();
  std::ofstream(out) << "an earlier export\n";
  std::vector<std::string> staged_while_blocked;
  const Fixa48Ended e = fixa48_term({"export", a, "--format", "chrome", "-o", out, "--force-overwrite"}, dir, "",
                                    ".exporting-", &staged_while_blocked);
  ASSERT_TRUE(e.signalled) << e.err;
  // the export had begun: its staged file existed when the signal came
  EXPECT_EQ(staged_while_blocked.size(), 1u) << e.err;
  ASSERT_TRUE(WIFEXITED(e.status)) << "ended by signal " << (WIFSIGNALED(e.status) ? WTERMSIG(e.status) : 0) << "\n" << e.err;
  EXPECT_EQ(WEXITSTATUS(e.status), 130) << e.err;
  EXPECT_NE(e.err.find("cancelling the export"), std::string::npos) << e.err;
  EXPECT_NE(e.err.find("export cancelled; nothing was written (" + out + " is as it was)"), std::string::npos) << e.err;
  EXPECT_EQ(fixa48_slurp(out), "an earlier export\n");
  EXPECT_EQ(fixa48_entries_with(dir, ".exporting-"), std::vector<std::string>{});
}

TEST(CancelWritesFixa48, SigtermCancelsACsvExportAndLeavesNoFolder) {
  const fs::path dir = fixa48_dir("export_csv");
  const auto [a, b] = fixa48_rank_sessions(dir);
  const std::string out = (dir / "csv").string();
  std::vector<std::string> staged_while_blocked;
  const Fixa48Ended e =
      fixa48_term({"export", a, "--format", "csv", "-o", out}, dir, "", ".exporting-", &staged_while_blocked);
  ASSERT_TRUE(e.signalled) << e.err;
  EXPECT_EQ(staged_while_blocked.size(), 1u) << e.err;
  ASSERT_TRUE(WIFEXITED(e.status)) << "ended by signal " << (WIFSIGNALED(e.status) ? WTERMSIG(e.status) : 0) << "\n" << e.err;
  EXPECT_EQ(WEXITSTATUS(e.status), 130) << e.err;
  EXPECT_NE(e.err.find("export cancelled; nothing was written (no " + out + " written)"), std::string::npos) << e.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(fixa48_entries_with(dir, ".exporting-"), std::vector<std::string>{});
}

// retest47 R7: a signal while the import writes its session (here: inside SessionWriter::close,
// whose final checkpoint waits for this test's read transaction) was announced and then ignored.
TEST(CancelWritesFixa48, SigtermWhileTheImportClosesItsSessionCancelsIt) {
  const fs::path dir = fixa48_dir("import");
  const std::string out = (dir / "t.db").string();
  const std::string stdout_file = (import_scratch() / "fixa48_import.stdout").string();
  const Fixa48Child c = fixa48_start({"import", trace_fixture("hta_small/rank0.json"), "-o", out, "--json"}, stdout_file);
  ASSERT_GT(c.pid, 0);
  int status = 0;
  ASSERT_TRUE(fixa48_wait_blocked(c.pid, status));  // at "import: reading ...": the staged session exists
  const std::string staged = (dir / (".t.db.importing-" + std::to_string(c.pid))).string();
  ASSERT_TRUE(fs::exists(staged));
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(staged.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "BEGIN; SELECT count(*) FROM sqlite_master;", nullptr, nullptr, nullptr), SQLITE_OK);
  std::string err;
  std::thread drain([&] { err = fixa48_drain(c); });  // the import goes on
  bool ended = false, signalled = false;
  while (!(ended = waitpid(c.pid, &status, WNOHANG) == c.pid)) {
    // the main thread sleeps only in SQLite's busy handler: the checkpoint of close() waiting for us
    if (const std::string nr = fixa48_syscall(c.pid).first; nr == "35" || nr == "230") {
      kill(c.pid, SIGTERM);
      signalled = true;
      break;
    }
    usleep(1000);
  }
  drain.join();
  if (!ended) waitpid(c.pid, &status, 0);
  sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close(db);

  ASSERT_TRUE(signalled) << err;
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << "\n" << err;
  EXPECT_EQ(WEXITSTATUS(status), 130) << err;
  EXPECT_NE(err.find("import: writing 1 rank(s)"), std::string::npos) << err;
  EXPECT_NE(err.find("cancelling the import"), std::string::npos) << err;
  EXPECT_NE(err.find("import cancelled; nothing was kept (no " + out + " written)"), std::string::npos) << err;
  EXPECT_EQ(fixa48_slurp(stdout_file), "{\"ended\":\"cancelled\",\"session\":null}\n");
  for (const auto& e : fs::directory_iterator(dir)) ADD_FAILURE() << "left behind: " << e.path();
}

// A signal once the merged session is in place is too late to cancel it: said so, exit 0, the
// session kept. Deterministic: stdout is a full pipe, so the merge blocks in the write of its
// --json line, after the rename; the test signals it there and drains stdout only once the
// "too late" line is in stderr.
TEST(CancelWritesFixa48, ASignalAfterTheMergedSessionIsInPlaceSaysItIsTooLate) {
  const fs::path dir = fixa48_dir("merge_late");
  const auto [a, b] = fixa48_rank_sessions(dir);
  const std::string out = (dir / "all.db").string();
  const std::string err_file = (import_scratch() / "fixa48_merge_late.stderr").string();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const std::string filler = std::string(4095, 'x') + "\n";
  fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK);
  while (write(fds[1], filler.data(), filler.size()) == static_cast<ssize_t>(filler.size())) {
  }
  fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) & ~O_NONBLOCK);
  const pid_t child = fork();
  if (child == 0) {
    dup2(fds[1], 1);
    dup2(open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
    close(fds[0]);
    close(fds[1]);
    execl(EMBEDSCOPE_CLI, EMBEDSCOPE_CLI, "merge", a.c_str(), b.c_str(), "-o", out.c_str(), "--json",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  int status = 0;
  bool ended = false, signalled = false;
  while (!(ended = waitpid(child, &status, WNOHANG) == child)) {
    if (fixa48_syscall(child) == std::pair<std::string, std::string>{"1", "0x1"}) {
      kill(child, SIGTERM);
      signalled = true;
      break;
    }
    usleep(1000);
  }
  const std::string late = "merge: too late to cancel: " + out + " is already written";
  if (signalled)  // the line comes while the merge waits on us (unless it ended: a failure, said below)
    for (std::string e; (e = fixa48_slurp(err_file)).find(late) == std::string::npos &&
                        e.find("merge cancelled") == std::string::npos &&  // (then blocked on its --json line)
                        !(ended = waitpid(child, &status, WNOHANG) == child);)
      usleep(1000);
  std::string json_out;
  FILE* in = fdopen(fds[0], "r");
  char* line = nullptr;
  size_t cap = 0;
  while (getline(&line, &cap, in) > 0)
    if (line[0] != 'x') json_out += line;
  free(line);
  fclose(in);
  if (!ended) waitpid(child, &status, 0);
  const std::string err = fixa48_slurp(err_file);
  ASSERT_TRUE(signalled) << err;
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << "\n" << err;
  EXPECT_EQ(WEXITSTATUS(status), 0) << err;
  EXPECT_NE(err.find("cancelling the merge"), std::string::npos) << err;
  EXPECT_EQ(err.find("merge cancelled"), std::string::npos) << err;
  EXPECT_NE(json_out.find("\"session\":\"" + out + "\""), std::string::npos) << json_out;
  EXPECT_TRUE(fs::exists(out));
  EXPECT_EQ(fixa48_entries_with(dir, ".merging-"), std::vector<std::string>{});
}
