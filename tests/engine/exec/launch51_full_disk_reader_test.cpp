// A session read while its disk is still full (launch51, a tester's leftover): a reader in WAL
// mode needs the -shm file beside the session, which SQLite makes (and fills page by page) where
// it is missing; on a full disk that failed ("disk I/O error"), and `launch`'s table called a
// rank session "unreadable" that was whole. The reader now opens such a file with a read-only
// wal-index (sessions/store/read_only_open.h): the steps still in the -wal (never checkpointed:
// the disk was full) are read.
//
// The session (support/full_disk.h, as fixh50's): 10 steps committed in a 4 MiB tmpfs, the disk
// then filled but for 160 KiB, 5000 more steps whose commit fails; the writer ends the session
// write_failed and leaves its -wal (the checkpoint cannot grow the file). Its -shm is then
// removed and the room it held taken again, so that no reader can make one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"
#include "support/full_disk.h"

namespace {
namespace fs = std::filesystem;
namespace ts = embedscope::test_support;

fs::path launch51fd_scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("es_launch51_fd_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d / "full");
  return d;
}

std::string launch51fd_read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes `text` to `p` (outside the full tmpfs): what the child saw, for the test's messages.
void launch51fd_say(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
}  // namespace

TEST(Launch51FullDiskReader, ASessionWithoutRoomForItsShmIsReadWithTheStepsInItsWal) {
  const fs::path dir = launch51fd_scratch("read");
  const fs::path full = dir / "full";
  const std::string db = (full / "s.db").string();
  const int rc = ts::in_tmpfs(full, "4m", [&] {
    if (const int code = ts::session_on_full_disk(dir, full, 160 * 1024, 5000, /*wal_required=*/true); code != 0)
      return code;
    std::remove((db + "-shm").c_str());
    ts::fill_disk(full, "filler2");  // the room the -shm held
    // the disk is full: a -shm of 32 KiB cannot be made (what SQLite's own reader would need)
    if (const int fd = ::open((full / "probe").c_str(), O_WRONLY | O_CREAT, 0644); fd >= 0) {
      const bool room = ::write(fd, "x", 1) == 1;
      ::close(fd);
      if (room) return 16;
    }
    try {
      namespace ss = embedscope::sessions;
      const ss::SessionReader r(db);
      launch51fd_say(dir / "seen.txt", std::to_string(r.steps().size()) + " " + r.status());
      // the analysis `launch`'s table and `stats` make (figures_from_session): a second read-only
      // connection, the ops' stream, opens the same way
      const ss::RunStats st = ss::analyze(r);
      launch51fd_say(dir / "stats.txt", std::to_string(st.steps) + " " + st.ended);
    } catch (const std::exception& e) {
      launch51fd_say(dir / "why.txt", e.what());
      return 20;
    }
    const auto cli = ts::run_cli(EMBEDSCOPE_CLI, "stats --json " + db, dir);
    return cli.code == 0 ? 0 : 21;
  });
  if (rc == ts::kNoTmpfs) GTEST_SKIP() << "no tmpfs can be mounted here (not root, no user namespaces)";
  ASSERT_NE(rc, 16) << "the disk was not full";
  ASSERT_NE(rc, 20) << launch51fd_read(dir / "why.txt");
  ASSERT_NE(rc, 21) << launch51fd_read(dir / "err.txt");
  ASSERT_EQ(rc, 0);
  // the 10 committed steps, all in the -wal (wal_required: no checkpoint ran), and how it ended
  EXPECT_EQ(launch51fd_read(dir / "seen.txt"), "10 write_failed");
  EXPECT_EQ(launch51fd_read(dir / "stats.txt"), "10 write_failed");
  const std::string out = launch51fd_read(dir / "out.txt");
  EXPECT_NE(out.find(R"("steps":10)"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("ended":"write_failed")"), std::string::npos) << out;
  fs::remove_all(dir);
}

// The reader opens its file through an SQLite URI (file:PATH?mode=ro): a '?' or '#' in the file
// name must be percent-encoded, or SQLite reads the name up to it ("x?y#z.db" opened "x", which
// does not exist: "cannot open"). A session of such a name is read, its steps and its ops' stream
// (the second read-only connection) alike.
TEST(Launch51FullDiskReader, ASessionNamedWithQuestionMarkHashAndPercentIsRead) {
  namespace ss = embedscope::sessions;
  const fs::path dir = launch51fd_scratch("uri");
  const std::string db = (dir / "x?y#z%41.db").string();
  {
    ss::SessionWriter w(db);
    w.set_metadata(ss::meta::kWorldSize, "1");
    w.add_lane({0, 0, "compute", "thread"});
    for (int64_t s = 0; s < 3; ++s) w.add_step({s, 0, s * 1'000'000, (s + 1) * 1'000'000, 0.5, 0, 0});
    w.close("complete");
  }
  ASSERT_FALSE(fs::exists(dir / "x"));
  const ss::SessionReader r(db);
  EXPECT_EQ(r.steps().size(), 3u);
  EXPECT_EQ(r.status(), "complete");
  EXPECT_EQ(ss::analyze(r).steps, 3);
  EXPECT_FALSE(fs::exists(dir / "x"));  // nothing made under the name cut at '?'
  fs::remove_all(dir);
}
