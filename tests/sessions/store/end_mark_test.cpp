// ux42 (tester41 #21): a run stopped at once (a second Ctrl-C) records its end through a
// connection of its own while its writer is still open, then the process ends without closing
// the writer: the session reads "cancelled" with the message, not "crashed". A forked child
// plays the run (it _exits as the CLI does), so no timing is involved.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/end_mark.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace ss = embedscope::sessions;

// The child: a writer whose first metadata is committed, then the stop mark (mark = false: none), then _exit.
std::string ux42_stopped_session(const std::string& name, bool mark) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("es_ux42_end_" + name + "_" + std::to_string(getpid()) + ".db")).string();
  std::filesystem::remove(path);
  const pid_t child = fork();
  if (child == 0) {
    ss::SessionWriter w(path);
    // the writer thread commits its first metadata (ended = running) on its own: wait for it (a
    // condition, bounded, not a duration: a run is steps in when a user presses Ctrl-C twice)
    bool committed = false;
    for (int i = 0; i < 600000 && !committed; ++i) {
      try {
        committed = ss::SessionReader(path).meta(ss::meta::kEnded) == "running";
      } catch (const std::exception&) {
      }
      if (!committed) usleep(100);
    }
    if (!committed) _exit(4);
    const bool ok = !mark || ss::mark_session_ended(path, "cancelled", "stopped at once by a second Ctrl-C");
    _exit(ok ? 130 : 3);  // no destructor: the writer is never closed
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  return path;
}
}  // namespace

TEST(Ux42EndMark, ARunStoppedAtOnceReadsCancelledNotCrashed) {
  const ss::SessionReader r(ux42_stopped_session("marked", true));
  EXPECT_EQ(r.status(), "cancelled");
  EXPECT_EQ(r.meta(ss::meta::kEndMessage), "stopped at once by a second Ctrl-C");
  // without the mark the same stop reads crashed (the writer's process is gone)
  EXPECT_EQ(ss::SessionReader(ux42_stopped_session("unmarked", false)).status(), "crashed");
  // not a session: nothing written, false
  EXPECT_FALSE(ss::mark_session_ended("/nonexistent/dir/x.db", "cancelled", "m"));
}
