// A failed commit that wrote no frame of its own - the -wal already ended at the limit, a file
// size limit (RLIMIT_FSIZE) standing in for a disk filled to the page - still leaves a session
// that reads write_failed with the steps it kept: the writer copies the -wal into the database
// and writes the end mark into the emptied -wal (CI flake of Fixe49WriteFailed at -j3: the run
// said write_failed, its session read crashed).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::sessions;
namespace fs = std::filesystem;

namespace {
void em53_steps(SessionWriter& w, int64_t from, int64_t to) {
  for (int64_t s = from; s < to; ++s) {
    std::vector<OpEvent> ops;
    for (int i = 0; i < 200; ++i)  // about 8 KiB of packed ops a step: new pages every commit
      ops.push_back(OpEvent{0, Lane::compute, OpCategory::lookup, "lookup", s, s * 100000 + i * 100, s * 100000 + i * 100 + 50, 0, 0});
    w.add_ops(ops);
    w.add_step({s, 0, s * 100000, s * 100000 + 99999, 0.5, 0, 0});
  }
}
}  // namespace

TEST(EndMark53, AFailedCommitThatWroteNoFrameStillReadsWriteFailed) {
  const fs::path dir = fs::temp_directory_path() / ("es_em53_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "full.db").string();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG, as on a full disk
    int code = 0;
    try {
      SessionWriter w(path);
      w.set_metadata("world_size", "1");
      w.add_lane({0, 0, "compute", "thread"});
      for (int c = 0; c < 4; ++c) {  // four commits of 5 steps
        em53_steps(w, c * 5, c * 5 + 5);
        std::this_thread::sleep_for(kCommitInterval * 3);
      }
      // no file may grow past the -wal as it is now: the next commit cannot write a frame
      struct rlimit r{};
      r.rlim_cur = r.rlim_max = static_cast<rlim_t>(fs::file_size(path + "-wal"));
      if (setrlimit(RLIMIT_FSIZE, &r) != 0) _exit(3);
      em53_steps(w, 20, 40);
      for (int i = 0; i < 40 && !w.write_failed(); ++i) std::this_thread::sleep_for(kCommitInterval);
      if (!w.write_failed()) _exit(4);
      try {
        w.close("complete");
      } catch (const SessionError&) {  // the write error, as the run reports it
      }
    } catch (const std::exception&) {
      code = 5;
    }
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  ASSERT_EQ(WEXITSTATUS(status), 0) << "3: setrlimit, 4: no write failure, 5: the writer threw before the limit";
  const SessionReader s(path);
  EXPECT_EQ(s.status(), "write_failed");
  EXPECT_NE(s.meta(meta::kEndMessage).find("the session keeps 20 steps (through step 19)"), std::string::npos)
      << s.meta(meta::kEndMessage);
  EXPECT_EQ(s.steps().size(), 20u);
}
