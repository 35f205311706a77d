// A reader in the process of a live writer never breaks it. POSIX (fcntl) locks belong to a
// process and a file: closing any descriptor of the file drops them all, SQLite's included. The
// writer's connection holds a shared lock on its file for its whole life (WAL mode); after a
// probe of the same process (the workbench opening the session its own run is writing: the
// header read, the writer-lock probe, the cut-short check) had closed its descriptor, the lock
// was gone, and another process's read-write connection (the sqlite3 shell, Python) closing
// last took the exclusive lock, checkpointed and deleted the -wal and -shm under the live
// writer: its later commits went to an unlinked -wal that no reader saw (and a killed run lost).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "embedscope/sessions/importers/importer.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "store/held_files.h"
#include "store/writer_lock.h"

using namespace embedscope::sessions;
namespace fs = std::filesystem;

namespace {

fs::path h56_dir() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_held56_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// Whether /proc/locks lists a POSIX lock of this process on `path`'s file (SQLite's shared lock
// of a WAL-mode connection: a READ lock on bytes 1073741826-1073742335).
bool h56_posix_lock_held(const std::string& path) {
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0) return false;
  const std::string inode = ":" + std::to_string(sb.st_ino) + " ";
  const std::string pid = " " + std::to_string(getpid()) + " ";
  std::ifstream locks("/proc/locks");
  for (std::string line; std::getline(locks, line);)
    if (line.find("POSIX") != std::string::npos && line.find(pid) != std::string::npos &&
        line.find(inode) != std::string::npos)
      return true;
  return false;
}

void h56_add_steps(SessionWriter& w, int from, int to) {
  for (int s = from; s < to; ++s) w.add_step({s, 0, 1000 * s, 1000 * s + 500, 0.5, 64, 64});
}

// Steps the in-process reader sees, waiting up to 30 s for `want` (the writer commits within its
// commit interval). Each try opens a SessionReader: a probe of the live file.
size_t h56_wait_for_steps(const std::string& path, size_t want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  size_t seen = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      seen = SessionReader(path).steps().size();
    } catch (const SessionError&) {
      seen = 0;
    }
    if (seen == want) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return seen;
}

bool h56_have_python() { return std::system("python3 -c 'import sqlite3' >/dev/null 2>&1") == 0; }

// What another process's read-write SQLite connection says, then closes (python3's sqlite3).
std::string h56_python(const std::string& path, const std::string& sql, bool read_only) {
  const std::string target = read_only ? "'file:" + path + "?mode=ro', uri=True" : "'" + path + "'";
  const std::string cmd = "python3 -c \"import sqlite3; c = sqlite3.connect(" + target +
                          "); print(c.execute('" + sql + "').fetchone()[0]); c.close()\" 2>&1";
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[256];
    while (fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

// Every in-process read of a live session (the reader, the header read of the importers, the
// writer-lock probe, the live-writer check) leaves the writer's SQLite lock in place; the
// descriptors it kept close with the writer.
TEST(HeldFiles56, InProcessReadsOfALiveSessionKeepTheWritersSqliteLock) {
  const std::string path = (h56_dir() / "live.db").string();
  {
    SessionWriter w(path, true);
    w.set_metadata(meta::kWorldSize, "1");
    h56_add_steps(w, 0, 3);
    ASSERT_EQ(h56_wait_for_steps(path, 3), 3u);
    EXPECT_EQ(importers::read_head(path, 16), std::string("SQLite format 3\0", 16));
    EXPECT_EQ(detail::probe_writer_lock(path), detail::WriterLock::held);
    EXPECT_FALSE(detail::live_writer(path).empty());
    EXPECT_TRUE(h56_posix_lock_held(path)) << "an in-process read dropped the writer's SQLite lock";
    EXPECT_GT(detail::kept_descriptors(), 0);  // kept for the writer's close
  }
  EXPECT_EQ(detail::kept_descriptors(), 0);  // closed with it
  EXPECT_FALSE(h56_posix_lock_held(path));
  EXPECT_EQ(SessionReader(path).steps().size(), 3u);
  // a file no writer of this process holds: the descriptor is closed at once
  EXPECT_EQ(importers::read_head(path, 16), std::string("SQLite format 3\0", 16));
  EXPECT_EQ(detail::kept_descriptors(), 0);
}

// The whole failure, end to end: after the in-process reads, another process's read-write
// connection opens and closes the live session; the -wal must still be there, and the writer's
// next commit visible to a new reader (it was not: the -wal and -shm were deleted, and the reader
// kept seeing the steps before).
TEST(HeldFiles56, AnotherProcessClosingLastLeavesTheLiveWritersWalInPlace) {
  if (!h56_have_python()) GTEST_SKIP() << "needs python3 with sqlite3 for the other process's connection";
  const std::string path = (h56_dir() / "live2.db").string();
  SessionWriter w(path, true);
  w.set_metadata(meta::kWorldSize, "1");
  h56_add_steps(w, 0, 3);
  ASSERT_EQ(h56_wait_for_steps(path, 3), 3u);  // in-process probes of the live file
  (void)importers::read_head(path, 16);
  EXPECT_EQ(h56_python(path, "SELECT count(*) FROM steps", false), "3");  // read-write, closes last
  EXPECT_TRUE(fs::exists(path + "-wal")) << "the other process's close deleted the live writer's -wal";
  EXPECT_TRUE(fs::exists(path + "-shm"));
  h56_add_steps(w, 3, 5);
  ASSERT_EQ(h56_wait_for_steps(path, 5), 5u);
  EXPECT_EQ(h56_python(path, "SELECT count(*) FROM steps", true), "5");
  w.close("complete", "");
  EXPECT_EQ(SessionReader(path).steps().size(), 5u);
}
