// The Kineto importer on inputs of tests/data/fuzz/kineto_json/ (the fuzz target
// tests/fuzz/kineto_json_fuzz.cpp reads them as seeds): each once broke the importer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "import_test_support.h"

using namespace embedscope::sessions;
using namespace embedscope::sessions::testing;

namespace {
std::string fuzz_fixture(const std::string& name) { return std::string(EMBEDSCOPE_TEST_DATA) + "/fuzz/kineto_json/" + name; }
}  // namespace

// hta_small/rank0.json with the all-reduce's "In msg nelems" set to 2^62: its bytes,
// 2 (n-1)/n x 2^62 x 4, overflowed int64 (UBSan: signed integer overflow). The record stays,
// without bytes, and the problem is counted; the all-to-all beside it is counted as before.
TEST(KinetoImportHostile, CollectiveArgumentsBeyondAnyRealOneKeepTheRecordWithoutBytes) {
  const auto sum = import_into({fuzz_fixture("huge_comm_elements.json")}, "huge_comm.db");
  EXPECT_EQ(problem_count(sum.problems, "bad_comm_args"), 1);
  ASSERT_NE(problem(sum.problems, "bad_comm_args"), nullptr);
  EXPECT_NE(problem(sum.problems, "bad_comm_args")->example.find("in/out elements 4611686018427387904 / 1000"),
            std::string::npos)
      << problem(sum.problems, "bad_comm_args")->example;
  const SessionReader r(scratch_db("huge_comm.db"));
  const auto c = r.collectives();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].op, "all_reduce");
  EXPECT_EQ(c[0].bytes_sent, 0);
  EXPECT_EQ(c[0].bytes_received, 0);
  EXPECT_EQ(c[1].op, "all_to_all");
  EXPECT_EQ(c[1].bytes_sent, (20 + 40 - 20) * 8);      // to the other peer: in split [20, 40], Long, rank 0
  EXPECT_EQ(c[1].bytes_received, (30 + 60 - 30) * 8);  // out split [30, 60]
}

// distributedInfo.rank -3 or 5000000000 (tester34 D1, D7): the first lost every event (a rank the
// session could not hold, exit 0), the second wrapped to 705032704. Both are said (bad_rank,
// error) and the trace is imported as the lowest free rank, its op kept.
TEST(KinetoImportHostile, ARankThatIsNoRankIsSaidAndTheTraceTakesTheLowestFreeRank) {
  for (const auto& [file, text] : {std::pair<std::string, std::string>{"rank_negative.json", "'-3'"},
                                   {"rank_huge.json", "'5000000000'"}}) {
    SCOPED_TRACE(file);
    const auto sum = import_into({fuzz_fixture(file)}, file + ".db");
    EXPECT_EQ(problem_count(sum.problems, "bad_rank"), 1);
    ASSERT_NE(problem(sum.problems, "bad_rank"), nullptr);
    EXPECT_NE(problem(sum.problems, "bad_rank")->example.find("distributedInfo.rank " + text +
                                                              " at line 1, column 41 is not a rank in [0, 1048575]: "
                                                              "imported as the lowest free rank"),
              std::string::npos)
        << problem(sum.problems, "bad_rank")->example;
    const SessionReader r(scratch_db(file + ".db"));
    ASSERT_EQ(r.ranks().size(), 1u);
    EXPECT_EQ(r.ranks()[0].rank, 0);
    const auto ops = r.all_ops();
    ASSERT_EQ(ops.size(), 1u);
    EXPECT_EQ(ops[0].end_ns - ops[0].start_ns, 20'000);
  }
}

// "ts" 1050 us + "dur" 9223372036854775 us passes int64 ns (tester34 D8: stored with a negative
// end, gone from every view without a word): skipped and counted (bad_duration, data_loss).
TEST(KinetoImportHostile, ADurationPastTheLargestTimeIsSkippedAndCounted) {
  const auto sum = import_into({fuzz_fixture("dur_overflow.json")}, "dur_overflow.db");
  EXPECT_EQ(problem_count(sum.problems, "bad_duration"), 1);
  const SessionReader r(scratch_db("dur_overflow.db"));
  const auto ops = r.all_ops();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(r.name(ops[0].name_id), "aten::mm");
  for (const auto& o : ops) EXPECT_GE(o.end_ns, o.start_ns);
}

// tester37 #3: distributedInfo.world_size 2,000,000 sized every per-rank list by it (the
// workbench's report ran for minutes); 20,000 listed 19,999 ranks one by one. A world size past
// the ranks a session holds is said (bad_world_size) and not taken; a rank at or past its own
// world size is said (rank_outside_world); the untraced ranks read as ranges.
TEST(KinetoImportHostile, AnAbsurdWorldSizeIsSaidAndUntracedRanksReadAsRanges) {
  const auto dir = import_scratch() / "world_sizes";
  std::filesystem::create_directories(dir);
  auto trace = [&](const std::string& name, const std::string& info) {
    std::ofstream(dir / name) << R"({"schemaVersion": 1, "distributedInfo": )" << info
                              << R"(, "traceEvents": [{"ph": "X", "name": "ProfilerStep#1", "cat": "user_annotation", "ts": 1000, "dur": 500, "pid": 1, "tid": 1},
{"ph": "X", "name": "aten::mm", "cat": "cpu_op", "ts": 1100, "dur": 100, "pid": 1, "tid": 1}]})";
    return (dir / name).string();
  };
  const auto huge = import_into({trace("huge.json", R"({"rank": 0, "world_size": 2000000})")}, "ws_huge.db");
  ASSERT_NE(problem(huge.problems, "bad_world_size"), nullptr);
  EXPECT_EQ(problem(huge.problems, "bad_world_size")->example,
            "distributedInfo.world_size 2000000 at line 1, column 41 is not in [0, 1048576]: the world is taken as the "
            "ranks the traces have");
  EXPECT_EQ(SessionReader(scratch_db("ws_huge.db")).meta(meta::kWorldSize), "1");

  const auto mid = import_into({trace("mid.json", R"({"rank": 0, "world_size": 20000})")}, "ws_mid.db");
  EXPECT_EQ(problem(mid.problems, "bad_world_size"), nullptr);
  const RunStats st = analyze(SessionReader(scratch_db("ws_mid.db")));
  ASSERT_EQ(st.untraced_ranks.size(), 19'999u);
  EXPECT_EQ(rank_list(st.untraced_ranks), "1-19999");

  const auto outside = import_into({trace("outside.json", R"({"rank": 5, "world_size": 2})")}, "ws_outside.db");
  ASSERT_NE(problem(outside.problems, "rank_outside_world"), nullptr);
  EXPECT_NE(problem(outside.problems, "rank_outside_world")->example.find("distributedInfo.rank 5 is not below its world_size 2"),
            std::string::npos);
}

TEST(KinetoImportHostile, RankListsJoinRunsOfThreeOrMore) {
  EXPECT_EQ(rank_list({}), "");
  EXPECT_EQ(rank_list({4}), "4");
  EXPECT_EQ(rank_list({0, 2}), "0, 2");
  EXPECT_EQ(rank_list({2, 3}), "2, 3");
  EXPECT_EQ(rank_list({1, 2, 3, 5, 7, 8}), "1-3, 5, 7, 8");
  EXPECT_EQ(rank_list({0, 1, 2, 3, 10, 11, 12}), "0-3, 10-12");
}
