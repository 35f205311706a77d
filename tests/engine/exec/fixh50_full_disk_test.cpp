// retest49 R3, R7, R8: a full disk, simulated by a small tmpfs mounted in a private mount
// namespace (root, or an unprivileged user namespace; skipped where neither is allowed) or by a
// file size limit (RLIMIT_FSIZE, always).
// R3: a session whose writes fail when the disk is full, even when another process took the last
// byte, still ends write_failed (not "running" / crashed) and keeps its steps. R7: a session that
// cannot be created on a full disk: `run` exits 1 with "no session was written", `launch` names
// the ranks that could not write their session instead of "a rank refused its input". R8:
// `embedscope-ui --screenshot` onto a full disk says the OS reason, not "Unknown error".
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/end_mark.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"
#include "support/full_disk.h"

namespace {
namespace fs = std::filesystem;
using embedscope::test_support::fill_disk;
using embedscope::test_support::in_tmpfs;
using embedscope::test_support::kNoTmpfs;
using embedscope::test_support::session_on_full_disk;

fs::path fixh50_scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("es_fixh50_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d / "full");
  return d;
}

std::string fixh50_read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

// R3: 10 steps committed, then another process takes every byte left; the next commit fails with
// nothing of it written, and the end mark still goes in: the session reads write_failed with
// its 10 steps (before the fix it kept ended = "running": "crashed" to every reader).
TEST(Fixh50FullDisk, EndMarkFitsWhenAnotherProcessFilledTheDisk) {
  const fs::path dir = fixh50_scratch("end");
  const fs::path full = dir / "full";
  const int rc = in_tmpfs(full, "4m", [&] { return session_on_full_disk(dir, full, 0, 10, false); });
  if (rc == kNoTmpfs) GTEST_SKIP() << "no tmpfs can be mounted here (not root, no user namespaces)";
  ASSERT_EQ(rc, 0);
  const embedscope::sessions::SessionReader s((dir / "s.db").string());
  EXPECT_EQ(s.meta(embedscope::sessions::meta::kEnded), "write_failed");
  EXPECT_EQ(s.status(), "write_failed");
  EXPECT_EQ(s.steps().size(), 10u);
  const std::string msg = s.meta(embedscope::sessions::meta::kEndMessage);
  EXPECT_NE(msg.find("the session keeps 10 steps (through step 9)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("database or disk is full"), std::string::npos) << msg;
}

// After a failed write the -wal holds no bytes after its last commit: the rolled-back commit's
// frames (160 KiB of room left, a commit of 5000 steps needing more) are cut away at close, so no
// reader calls the session's -wal damaged; the end mark and the 10 steps are there.
TEST(Fixh50FullDisk, NoUnreadableFramesLeftAfterTheEndMark) {
  const fs::path dir = fixh50_scratch("tail");
  const fs::path full = dir / "full";
  const int rc = in_tmpfs(full, "4m", [&] { return session_on_full_disk(dir, full, 160 * 1024, 5000, true); });
  if (rc == kNoTmpfs) GTEST_SKIP() << "no tmpfs can be mounted here (not root, no user namespaces)";
  ASSERT_EQ(rc, 0);
  const std::string db = (dir / "s.db").string();
  const embedscope::sessions::WalScan wal = embedscope::sessions::scan_wal(db);
  EXPECT_TRUE(wal.present);
  EXPECT_EQ(wal.unread_bytes, 0) << embedscope::sessions::describe_unread_wal(db, wal);
  EXPECT_EQ(wal.readable_bytes, wal.file_bytes);
  const embedscope::sessions::SessionReader s(db);
  EXPECT_EQ(s.meta(embedscope::sessions::meta::kEnded), "write_failed");
  EXPECT_EQ(s.steps().size(), 10u);
}

// R7: a disk too full for the session's room (200 KiB) or for its schema (400 KiB): `run` exits 1,
// says the reason and "no session was written", leaves no file; `launch` names the ranks that
// could not write their session (exit 1), not "a rank refused its input" (exit 2, bad input).
TEST(Fixh50FullDisk, NoRoomAtCreationIsAWriteFailureNotBadInput) {
  const fs::path dir = fixh50_scratch("create");
  const fs::path full = dir / "full";
  namespace ts = embedscope::test_support;
  for (const char* size : {"200k", "400k"}) {
    SCOPED_TRACE(size);
    const int rc = in_tmpfs(full, size, [&] {
      return ts::run_cli(EMBEDSCOPE_CLI, "run --preset tiny --steps 5 --json -o " + (full / "x.db").string(), dir).code;
    });
    if (rc == kNoTmpfs) GTEST_SKIP() << "no tmpfs can be mounted here (not root, no user namespaces)";
    const std::string err = fixh50_read(dir / "err.txt"), out = fixh50_read(dir / "out.txt");
    EXPECT_EQ(rc, 1) << err;
    EXPECT_NE(err.find("error: run ended write_failed: " + (full / "x.db").string() + ": "), std::string::npos) << err;
    EXPECT_NE(err.find(std::string(size) == "200k" ? "cannot be written: No space left on device"
                                                   : "database or disk is full"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("\nno session was written\n"), std::string::npos) << err;
    EXPECT_NE(out.find(R"("ended":"write_failed")"), std::string::npos) << out;
    EXPECT_NE(out.find(R"("session":null)"), std::string::npos) << out;
  }
  const int rc = in_tmpfs(full, "400k", [&] {
    const int code =
        ts::run_cli(EMBEDSCOPE_CLI, "launch -n 2 run --preset tiny --steps 5 -o " + (full / "q.db").string(), dir).code;
    return fs::exists(full / "q.rank0.db") || fs::exists(full / "q.rank1.db") ? 20 : code;
  });
  const std::string err = fixh50_read(dir / "err.txt");
  EXPECT_EQ(rc, 1) << err;
  EXPECT_EQ(err.find("refused its input"), std::string::npos) << err;
  EXPECT_NE(err.find("error: launch: ranks 0, 1 could not write their session (above); nothing to merge"), std::string::npos)
      << err;
}

// R8: the screenshot's write fails (a 20 KiB tmpfs; a 1 KiB file size limit): the reason is the
// OS's, no file is left, the exit status is 2.
TEST(Fixh50FullDisk, ScreenshotSaysWhyItCannotBeWritten) {
  if (std::string(EMBEDSCOPE_UI).empty()) GTEST_SKIP() << "no embedscope-ui in this build (EMBEDSCOPE_BUILD_UI=OFF)";
  const fs::path dir = fixh50_scratch("shot");
  const fs::path full = dir / "full";
  const std::string db = (dir / "run.db").string();
  {
    embedscope::sessions::SessionWriter w(db);
    w.set_metadata(embedscope::sessions::meta::kWorkloadName, "shot");
    w.add_lane({0, 0, "compute", "thread"});
    w.add_step({0, 0, 0, 1'000'000, 0.0, 0, 0});
    w.close("complete");
  }
  const std::string ui = "env -u DISPLAY -u WAYLAND_DISPLAY QT_QPA_PLATFORM=offscreen '" + std::string(EMBEDSCOPE_UI) + "' " + db;
  namespace ts = embedscope::test_support;
  // a file size limit (1 KiB; SIGXFSZ ignored, so the write fails with EFBIG)
  auto r = ts::run_merged("trap '' XFSZ; ulimit -f 1; " + ui + " --screenshot " + (dir / "s.png").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find((dir / "s.png").string() + ": cannot write the screenshot: File too large"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("Unknown error"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "s.png"));
  // the file system full
  const int rc = in_tmpfs(full, "20k", [&] {
    fill_disk(full);
    const auto m = ts::run_merged(ui + " --screenshot " + (full / "d.png").string());
    std::ofstream(dir / "shot.txt") << m.out;
    return fs::exists(full / "d.png") ? 20 : m.code;
  });
  if (rc == kNoTmpfs) GTEST_SKIP() << "no tmpfs can be mounted here (not root, no user namespaces)";
  const std::string said = fixh50_read(dir / "shot.txt");
  EXPECT_EQ(rc, 2) << said;
  EXPECT_NE(said.find((full / "d.png").string() + ": cannot write the screenshot: No space left on device"),
            std::string::npos)
      << said;
  // a folder that cannot be made (a missing one is made, as `run -o` does): a file stands where it
  // would go, and the reason is the file system's
  std::ofstream(dir / "a-file") << "x";
  r = ts::run_merged(ui + " --screenshot " + (dir / "a-file" / "s.png").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("cannot make the folder " + (dir / "a-file").string() + ": Not a directory"), std::string::npos)
      << r.out;
}
