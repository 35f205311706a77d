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
