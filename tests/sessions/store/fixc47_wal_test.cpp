// tester47 F11: `stats` on a killed run whose -wal is damaged or cut short checkpointed the
// readable prefix and deleted the -wal: steps recorded after the damage were lost without a word.
// scan_wal finds the bytes SQLite does not read; checkpoint_abandoned_session keeps a copy of
// such a -wal (FILE.db-wal.damaged) before it checkpoints.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/end_mark.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace fixc47_ss = embedscope::sessions;

// A killed run's session: a child writes its metadata and one step, waits for both to commit,
// then _exits without closing (FILE.db + FILE.db-wal stay, as after SIGKILL).
std::string fixc47_killed_session(const std::string& name) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("es_fixc47_" + name + "_" + std::to_string(getpid()) + ".db")).string();
  for (const char* ext : {"", "-wal", "-shm", "-wal.damaged"}) std::filesystem::remove(path + ext);
  const pid_t child = fork();
  if (child == 0) {
    fixc47_ss::SessionWriter w(path);
    fixc47_ss::StepMetric s{};
    s.end_ns = 1000;
    w.add_step(s);
    bool stepped = false;  // a condition, bounded: the metadata and the step committed
    for (int i = 0; i < 600000 && !stepped; ++i) {
      try {
        const fixc47_ss::SessionReader r(path);
        stepped = r.meta(fixc47_ss::meta::kEnded) == "running" && r.steps().size() == 1;
      } catch (const std::exception&) {
      }
      if (!stepped) usleep(100);
    }
    _exit(stepped ? 9 : 5);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 9);
  return path;
}

}  // namespace

TEST(Fixc47Wal, AnIntactWalIsReadWhole) {
  const std::string path = fixc47_killed_session("intact");
  const fixc47_ss::WalScan w = fixc47_ss::scan_wal(path);
  ASSERT_TRUE(w.present);
  EXPECT_EQ(w.page_size, 16384);  // the writer's PRAGMA page_size
  EXPECT_GT(w.committed_frames, 0);
  EXPECT_EQ(w.readable_bytes, 32 + w.committed_frames * (24 + 16384));
  EXPECT_EQ(w.readable_bytes, w.file_bytes);  // every frame committed
  EXPECT_EQ(w.unread_bytes, 0);
  EXPECT_EQ(w.problem, "");
  EXPECT_EQ(fixc47_ss::describe_unread_wal(path, w), "");
  std::string kept = "x";
  EXPECT_TRUE(fixc47_ss::checkpoint_abandoned_session(path, nullptr, nullptr, &kept));
  EXPECT_EQ(kept, "");  // nothing unread: no copy
  EXPECT_FALSE(std::filesystem::exists(path + "-wal.damaged"));
  EXPECT_FALSE(fixc47_ss::scan_wal(path + "-none").present);
}

// A -wal cut short (an interrupted copy): 100 bytes of a frame more than the committed ones.
TEST(Fixc47Wal, ACutWalIsKeptBesideTheCheckpoint) {
  const std::string path = fixc47_killed_session("cut");
  const int64_t whole = fixc47_ss::scan_wal(path).file_bytes;
  {
    std::ofstream(path + "-wal", std::ios::binary | std::ios::app) << std::string(100, '\0');
  }
  const fixc47_ss::WalScan w = fixc47_ss::scan_wal(path);
  EXPECT_EQ(w.file_bytes, whole + 100);
  EXPECT_EQ(w.readable_bytes, whole);
  EXPECT_EQ(w.unread_bytes, 100);
  EXPECT_EQ(w.unread_frames, 0);
  const int64_t frames = (whole - 32) / 16408;
  EXPECT_EQ(w.problem, "cut short inside frame " + std::to_string(frames + 1) + " at byte " + std::to_string(whole));
  std::string kept, why;
  fixc47_ss::WalScan seen;
  EXPECT_TRUE(fixc47_ss::checkpoint_abandoned_session(path, &why, &seen, &kept)) << why;
  EXPECT_EQ(seen.unread_bytes, 100);
  EXPECT_EQ(kept, path + "-wal.damaged");
  ASSERT_TRUE(std::filesystem::exists(kept));
  EXPECT_EQ(static_cast<int64_t>(std::filesystem::file_size(kept)), whole + 100);  // the whole -wal, as it was
  EXPECT_EQ(fixc47_ss::SessionReader(path).steps().size(), 1u);  // what SQLite read is the session
}

// A byte changed in the last frame's page: the checksum chain breaks there, its commit is not
// read; the frame and the step it held are kept in the copy, not deleted.
TEST(Fixc47Wal, AChecksumBreakIsFoundAndTheWalKept) {
  const std::string path = fixc47_killed_session("flip");
  const fixc47_ss::WalScan before = fixc47_ss::scan_wal(path);
  ASSERT_EQ(before.unread_bytes, 0);
  const int64_t last = 32 + (before.committed_frames - 1) * 16408;  // the last frame's header
  {
    std::fstream f(path + "-wal", std::ios::binary | std::ios::in | std::ios::out);
    f.seekg(last + 24 + 100);
    const char c = static_cast<char>(f.get());
    f.seekp(last + 24 + 100);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  const fixc47_ss::WalScan w = fixc47_ss::scan_wal(path);
  EXPECT_EQ(w.problem, "a checksum break in frame " + std::to_string(before.committed_frames) + " at byte " +
                           std::to_string(last));
  EXPECT_LT(w.committed_frames, before.committed_frames);
  EXPECT_EQ(w.unread_bytes, before.file_bytes - w.readable_bytes);
  EXPECT_EQ(w.unread_frames, before.committed_frames - w.committed_frames);
  EXPECT_NE(fixc47_ss::describe_unread_wal(path, w).find("cannot be read: a checksum break in frame"), std::string::npos);
  std::string kept;
  fixc47_ss::checkpoint_abandoned_session(path, nullptr, nullptr, &kept);
  // checkpointed (the metadata was in the readable prefix) with a copy, or not checkpointed at all
  // (not readable): either way the -wal's bytes are still on disk
  const std::string still = kept.empty() ? path + "-wal" : kept;
  ASSERT_TRUE(std::filesystem::exists(still));
  EXPECT_EQ(static_cast<int64_t>(std::filesystem::file_size(still)), before.file_bytes);
}
