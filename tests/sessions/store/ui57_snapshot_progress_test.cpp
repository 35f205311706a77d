// A snapshot copy made in parts (copy_session_snapshot with a progress callback, as the workbench
// copies a live session on a worker): every part is reported, a writer committing between parts
// is not seen (one read transaction holds the snapshot), and a copy cancelled or failed half-way
// leaves no file.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "embedscope/sessions/store/snapshot_copy.h"
#include "support/live_session_wait.h"

using namespace embedscope::sessions;
namespace fs = std::filesystem;

namespace {

fs::path ui57_dir() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_ui57_snap_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// Steps [from, to) of rank 0, each with 200 ops (named apart, so that the file takes pages).
void ui57_add_steps(SessionWriter& w, int from, int to) {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (int k = 0; k < 200; ++k) n.push_back("lookup_" + std::to_string(k));
    return n;
  }();
  for (int s = from; s < to; ++s) {
    std::vector<OpEvent> ops;
    for (int k = 0; k < 200; ++k)
      ops.push_back({0, Lane::compute, OpCategory::lookup, names[static_cast<size_t>(k)].c_str(), s,
                     1'000'000LL * s + 1000 * k, 1'000'000LL * s + 1000 * k + 500, 0, 0});
    w.add_ops(ops);
    w.add_step({s, 0, 1'000'000LL * s, 1'000'000LL * s + 900'000, 0.5, 64, 64});
  }
}

size_t ui57_committed_steps(const std::string& path) { return embedscope::test_support::committed_steps(path); }

bool ui57_wait_steps(const std::string& path, size_t steps) {
  return embedscope::test_support::wait_until([&] { return ui57_committed_steps(path) == steps; });
}

int64_t ui57_page_count(const std::string& path) {
  sqlite3* db = nullptr;
  int64_t pages = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "PRAGMA page_count", -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
      pages = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return pages;
}

std::string ui57_closed_session(const std::string& name, int steps) {
  const std::string path = (ui57_dir() / name).string();
  SessionWriter w(path, true);
  w.set_metadata(meta::kWorldSize, "1");
  w.add_lane({0, 0, "compute", "thread"});
  ui57_add_steps(w, 0, steps);
  w.close("complete");
  return path;
}

}  // namespace

// In parts of 4 pages: each part reported, the count rising to the copy's page count; the copy is
// the session (its steps and ops).
TEST(Ui57SnapshotCopy, CopiesInPartsAndReportsEachPart) {
  const std::string src = ui57_closed_session("parts.db", 10), dst = (ui57_dir() / "parts_copy.db").string();
  std::vector<std::pair<int64_t, int64_t>> calls;
  EXPECT_TRUE(copy_session_snapshot(
      src, dst, [&](int64_t copied, int64_t total) { return calls.emplace_back(copied, total), true; }, 4));
  const int64_t pages = ui57_page_count(dst);
  ASSERT_GT(pages, 12);  // at least 3 parts
  ASSERT_EQ(static_cast<int64_t>(calls.size()), (pages + 3) / 4);
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].second, pages);
    EXPECT_EQ(calls[i].first, std::min<int64_t>(4 * static_cast<int64_t>(i + 1), pages)) << i;
  }
  const SessionReader r(dst);
  EXPECT_EQ(r.steps().size(), 10u);
  EXPECT_EQ(r.all_ops().size(), 2000u);
  EXPECT_FALSE(fs::exists(dst + "-wal"));
  EXPECT_FALSE(fs::exists(dst + "-journal"));
}

// Cancelled after its second part: false, and neither the copy nor its journal is left; an
// earlier file of that name is gone too (the copy replaces it).
TEST(Ui57SnapshotCopy, ACancelledCopyLeavesNoFile) {
  const std::string src = ui57_closed_session("cancel.db", 10), dst = (ui57_dir() / "cancel_copy.db").string();
  ASSERT_TRUE(copy_session_snapshot(src, dst));  // an earlier copy there
  int parts = 0;
  EXPECT_FALSE(copy_session_snapshot(src, dst, [&](int64_t, int64_t) { return ++parts < 2; }, 4));
  EXPECT_EQ(parts, 2);
  EXPECT_FALSE(fs::exists(dst));
  EXPECT_FALSE(fs::exists(dst + "-journal"));
  // a copy that fails (its source is no session) leaves none either
  const std::string junk = (ui57_dir() / "junk.db").string();
  {
    std::FILE* f = std::fopen(junk.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("not an sqlite file at all, just text long enough to be read as a header........", f);
    std::fclose(f);
  }
  EXPECT_THROW(copy_session_snapshot(junk, dst, [](int64_t, int64_t) { return true; }, 4), SessionError);
  EXPECT_FALSE(fs::exists(dst));
}

// A writer that commits 4 more steps while the copy is between its parts: the copy holds the 6
// steps committed when it began, whole (a copy that read each part in a transaction of its own
// would restart, or mix, and hold 10).
TEST(Ui57SnapshotCopy, CommitsBetweenThePartsAreNotInTheCopy) {
  const std::string src = (ui57_dir() / "live.db").string(), dst = (ui57_dir() / "live_copy.db").string();
  SessionWriter w(src, true);
  w.set_metadata(meta::kWorldSize, "1");
  w.add_lane({0, 0, "compute", "thread"});
  ui57_add_steps(w, 0, 6);
  ASSERT_TRUE(ui57_wait_steps(src, 6));
  int parts = 0;
  bool committed = false;
  EXPECT_TRUE(copy_session_snapshot(
      src, dst,
      [&](int64_t, int64_t) {
        if (++parts == 1) {  // after the first part: the run commits more
          ui57_add_steps(w, 6, 10);
          committed = ui57_wait_steps(src, 10);
        }
        return true;
      },
      4));
  EXPECT_TRUE(committed);
  EXPECT_GT(parts, 2);
  const SessionReader r(dst);
  EXPECT_EQ(r.status(), "running");
  EXPECT_EQ(r.steps().size(), 6u);
  EXPECT_EQ(r.all_ops().size(), 1200u);
  w.close("complete");
  EXPECT_EQ(SessionReader(src).steps().size(), 10u);
}
