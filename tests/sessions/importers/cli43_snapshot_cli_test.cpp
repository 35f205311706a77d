// cli43 (tester42 F25): replay-memory's note on a --capacity below the trace's own peak reserved
// said "the recorded settings run out of memory where the recorded run did not" above "the
// recorded run ran out of memory at entry N"; now it says which ran out where. And `stats` of an
// imported snapshot that ends in an OOM read "(complete, IMPORTED ...)": it says the recorded
// program ran out of memory, and where. Fixtures: data/memory_snapshots (make_fixtures.py,
// expected.json). Each failed before its fix.
#include <gtest/gtest.h>

#include <string>

#include "import_test_support.h"
#include "support/cli_run.h"

using namespace embedscope::sessions::testing;

namespace {
embedscope::test_support::CliResult cli43_snap_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, import_scratch());
}
std::string cli43_snapshot(const std::string& name) { return std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/" + name; }
}  // namespace

// fragmented_oom_p4: entries segment_alloc, alloc 40 MiB (entry 1), free_requested,
// free_completed, alloc 2 MiB, oom (entry 5); peak reserved 40 MiB. At --capacity 30 MiB the
// first request (entry 1, 40 MiB) cannot be served: the replay runs out of memory there, sooner
// than the recorded run, which ran out at entry 5.
TEST(Cli43Snapshot, ReplayNoteSaysWhichRanOutWhere) {
  const std::string f = cli43_snapshot("fragmented_oom_p4.pickle");
  auto r = cli43_snap_cli("replay-memory " + f + " --capacity 31457280");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("the recorded run ran out of memory at entry 5\n"
                       "note: --capacity 30.0 MiB is below the trace's own peak reserved 40.0 MiB: the recorded settings "
                       "run out of memory at action 1, sooner than the recorded run, which reserved up to 40.0 MiB and ran "
                       "out of memory only at entry 5\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("where the recorded run did not"), std::string::npos) << r.out;
  // training_p4 (no oom entry; device 0's peak reserved 288 MiB): there it did not
  r = cli43_snap_cli("replay-memory " + cli43_snapshot("training_p4.pickle") + " --device 0 --capacity 1048576");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("the recorded run ran out of memory"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("note: --capacity 1.0 MiB is below the trace's own peak reserved 288.0 MiB: the recorded settings "
                       "run out of memory at action 1, where the recorded run did not run out of memory\n"),
            std::string::npos)
      << r.out;
}

TEST(Cli43Snapshot, StatsOfAnImportedOomSaysTheProgramRanOutOfMemory) {
  const std::string db = (import_scratch() / "cli43_fragmented_oom.db").string();
  auto r = cli43_snap_cli("import " + cli43_snapshot("fragmented_oom_p4.pickle") + " -o " + db + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  r = cli43_snap_cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')),
            "session      " + db + " (the recorded program ran out of memory: rank 0 at entry 5 of 6; IMPORTED from "
                                   "torch_memory_snapshot)");
  // a snapshot without an OOM stays complete
  const std::string ok = (import_scratch() / "cli43_training.db").string();
  r = cli43_snap_cli("import " + cli43_snapshot("training_p4.pickle") + " -o " + ok + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  r = cli43_snap_cli("stats " + ok);
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), "session      " + ok + " (complete, IMPORTED from torch_memory_snapshot)");
}

// tester43 F11: replay-memory's byte flags said "Value 4194304 not in range 20971520 to
// 1125899906842624" and refused "1e9"; a session file gave json's raw parse error.
TEST(Cli43Snapshot, ReplayByteFlagsSayBytesAndTakeExponents) {
  const std::string f = cli43_snapshot("fragmented_oom_p4.pickle");
  auto r = cli43_snap_cli("replay-memory " + f + " --max-split-size 4194304");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--max-split-size: 4194304 bytes is below the minimum 20971520 (20 MiB, PyTorch's rule"),
            std::string::npos) << r.err;
  r = cli43_snap_cli("replay-memory " + f + " --capacity 2.5");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("must be a whole number of bytes, got 2.5"), std::string::npos) << r.err;
  // 3e7 = 30,000,000 bytes: accepted as the integer (28.6 MiB, below the 40 MiB peak reserved)
  r = cli43_snap_cli("replay-memory " + f + " --capacity 3e7");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("note: --capacity 28.6 MiB is below the trace's own peak reserved 40.0 MiB"), std::string::npos)
      << r.out;
  // an embedscope session is named as such
  const std::string db = (import_scratch() / "cli43_replay_session.db").string();
  ASSERT_EQ(cli43_snap_cli("import " + f + " --force-overwrite -o " + db).code, 0);
  r = cli43_snap_cli("replay-memory " + db);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(db + ": an SQLite database (an embedscope session?), not an allocator trace"), std::string::npos)
      << r.err;
}
