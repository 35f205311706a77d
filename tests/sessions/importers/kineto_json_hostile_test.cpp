// The Kineto importer on inputs of tests/data/fuzz/kineto_json/ (the fuzz target
// tests/fuzz/kineto_json_fuzz.cpp reads them as seeds): each once broke the importer.
#include <gtest/gtest.h>

#include <string>

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
