// A run stopped at once (a second Ctrl-C or SIGTERM) while its writer was still closing the
// session: the stop's end mark (mark_session_ended, its own connection) was committed, then the
// writer's close committed its own end ("complete") over it a moment later, before the process
// ended (exit 130): the session read complete while the user had been told "recorded as cancelled
// by the user". The writer's end is now written only over ended = running: the first end recorded
// stays. Both orders are played here in one thread, without timing.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/end_mark.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace ss = embedscope::sessions;

// A writer at `name` whose header (ended = running) is committed: the writer thread commits it
// on its own, waited for as a condition (bounded), not a duration.
std::string end_mark_first_path(const std::string& name) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("es_end_first_" + name + "_" + std::to_string(getpid()) + ".db")).string();
  std::filesystem::remove(path);
  return path;
}

bool header_committed(const std::string& path) {
  for (int i = 0; i < 600000; ++i) {
    try {
      if (ss::SessionReader(path).meta(ss::meta::kEnded) == "running") return true;
    } catch (const std::exception&) {
    }
    usleep(100);
  }
  return false;
}
}  // namespace

TEST(EndMarkFirst, AWritersCloseAfterAStopMarkKeepsTheMark) {
  const std::string path = end_mark_first_path("marked");
  {
    ss::SessionWriter w(path);
    ASSERT_TRUE(header_committed(path));
    ASSERT_TRUE(ss::mark_session_ended(path, "cancelled", "stopped at once by a second Ctrl-C (or SIGTERM)"));
    w.close("complete", "");
  }
  const ss::SessionReader r(path);
  EXPECT_EQ(r.meta(ss::meta::kEnded), "cancelled");
  EXPECT_EQ(r.meta(ss::meta::kEndMessage), "stopped at once by a second Ctrl-C (or SIGTERM)");
  EXPECT_EQ(r.status(), "cancelled");
  std::filesystem::remove(path);
}

TEST(EndMarkFirst, AWritersCloseWithoutAMarkRecordsItsEnd) {
  const std::string path = end_mark_first_path("unmarked");
  {
    ss::SessionWriter w(path);
    ASSERT_TRUE(header_committed(path));
    w.close("cancelled", "cancelled after step 3 (SIGTERM)");
  }
  const ss::SessionReader r(path);
  EXPECT_EQ(r.meta(ss::meta::kEnded), "cancelled");
  EXPECT_EQ(r.meta(ss::meta::kEndMessage), "cancelled after step 3 (SIGTERM)");
  // a mark after the close still replaces it (a launcher that went away: run.cpp says so after the close)
  ASSERT_TRUE(ss::mark_session_ended(path, "cancelled", "launcher went away"));
  EXPECT_EQ(ss::SessionReader(path).meta(ss::meta::kEndMessage), "launcher went away");
  std::filesystem::remove(path);
}
