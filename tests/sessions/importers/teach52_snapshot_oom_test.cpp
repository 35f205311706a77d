// tester52 F9: an imported memory snapshot whose program ran out of memory read "the recorded
// program ran out of memory: ..." in `stats` but "complete" in `compare`'s session line (and the
// workbench's Summary: tests/ui/core/empty_pages_test.cpp). compare now says what stats says
// (sessions memory_analysis.h recorded_oom_text), in its line and as --json "recorded_oom".
// Fixtures: data/memory_snapshots (make_fixtures.py): fragmented_oom_p4 runs out of memory at
// entry 5 of its 6 entries; training_p4 does not.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "import_test_support.h"
#include "support/cli_run.h"

using namespace embedscope::sessions::testing;

namespace {
embedscope::test_support::CliResult teach52_snap_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, import_scratch());
}
std::string teach52_snapshot(const std::string& name) {
  return std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/" + name;
}
}  // namespace

TEST(Teach52SnapshotOom, CompareSaysTheEndedStateStatsSays) {
  const std::string oom = (import_scratch() / "teach52_oom.db").string();
  const std::string ok = (import_scratch() / "teach52_ok.db").string();
  auto r = teach52_snap_cli("import " + teach52_snapshot("fragmented_oom_p4.pickle") + " -o " + oom + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  r = teach52_snap_cli("import " + teach52_snapshot("training_p4.pickle") + " -o " + ok + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string phrase = "the recorded program ran out of memory: rank 0 at entry 5 of 6";
  r = teach52_snap_cli("stats " + oom);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_NE(r.out.substr(0, r.out.find('\n')).find("(" + phrase + "; IMPORTED"), std::string::npos) << r.out;
  r = teach52_snap_cli("compare " + ok + " " + oom);
  ASSERT_EQ(r.code, 0) << r.err;
  // B's line: what it ran, then how the recorded program ended, then its ranks
  const size_t b = r.out.find("\nB  teach52_oom.db: imported memory snapshot ");
  ASSERT_NE(b, std::string::npos) << r.out;
  const std::string b_line = r.out.substr(b + 1, r.out.find('\n', b + 1) - b - 1);
  EXPECT_NE(b_line.find(", " + phrase + "; 1 rank"), std::string::npos) << b_line;
  EXPECT_EQ(b_line.find("complete"), std::string::npos) << b_line;
  // A (no OOM recorded) stays complete
  const std::string a_line = r.out.substr(0, r.out.find('\n'));
  EXPECT_NE(a_line.find(", complete on "), std::string::npos) << a_line;
  EXPECT_EQ(a_line.find("ran out of memory"), std::string::npos) << a_line;
  // --json: the import's "ended" and the recorded program's end beside it
  r = teach52_snap_cli("compare " + ok + " " + oom + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("sessions")[0].at("recorded_oom").is_null());
  EXPECT_EQ(j.at("sessions")[1].at("recorded_oom"), phrase);
  EXPECT_EQ(j.at("sessions")[1].at("ended"), "complete");
}
