// `embedscope import` of traces whose ranks' time ranges do not overlap (crit42, tester42 F12:
// nccl_data and trace_diff_test, 19,183.8 days apart, were imported with an "error" problem, exit
// 0, and analysed as one job): refused, exit 2, naming both files, no session written, as
// `merge` refuses the rank sessions of different runs; --allow-disjoint imports them anyway.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "import_test_support.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using embedscope::sessions::testing::import_scratch;
using embedscope::sessions::testing::scratch_db;

// A Kineto trace of `rank` (world size 2) with one ProfilerStep span at `ts_us` for 100 us and
// one aten::mm inside it, written to scratch/<name>; returns the path.
std::string f12_trace(const std::string& name, int rank, int64_t ts_us) {
  nlohmann::json ev = nlohmann::json::array();
  ev.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#1"}, {"pid", 1}, {"tid", 1}, {"ts", ts_us},
                {"dur", 100}});
  ev.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "aten::mm"}, {"pid", 1}, {"tid", 1}, {"ts", ts_us + 1}, {"dur", 2}});
  const nlohmann::json j{{"schemaVersion", 1},
                         {"distributedInfo", {{"backend", "nccl"}, {"rank", rank}, {"world_size", 2}}},
                         {"traceEvents", ev}};
  const std::string p = (import_scratch() / name).string();
  std::ofstream(p) << j.dump();
  return p;
}

embedscope::test_support::CliResult f12_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, import_scratch());
}
}  // namespace

TEST(DisjointImport, RanksOfDifferentJobsAreRefusedUnlessAllowed) {
  const std::string a = f12_trace("f12_a.json", 0, 1000);
  const std::string c = f12_trace("f12_c.json", 1, 1'000'000'001'000);  // 11.6 days after a ends
  const std::string db = scratch_db("f12.db");
  fs::remove(db);
  auto r = f12_cli("import " + a + " " + c + " -o " + db);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("refused: rank 1 (" + c + ") spans 1000000.000000 .. 1000000.000100 s and rank 0 (" + a +
                       ") 0.000000 .. 0.000100 s"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(11.6 days apart)"), std::string::npos) << r.err;
  // offsets from the earliest input's first event, not the recorded clock values (tester45 F5.4)
  EXPECT_NE(r.err.find("0.000100 s from the earliest input's first event, on the recorded clocks: they do not overlap"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--allow-disjoint"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db));
  // the ranks of one job overlap: imported as before
  const std::string y = f12_trace("f12_y.json", 1, 1050);
  r = f12_cli("import " + a + " " + y + " -o " + db);
  EXPECT_EQ(r.code, 0) << r.err;
  // allowed: imported, the problem kept and said
  r = f12_cli("import " + a + " " + c + " --allow-disjoint --force-overwrite -o " + db + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  bool said = false;
  for (const auto& p : j["problems"])
    if (p["name"] == "disjoint_time_ranges") said = p["severity"] == "error";
  EXPECT_TRUE(said) << r.out;
}

// The files of tester42 F12: HTA's nccl_data (rank 0, A100) and trace_diff_test (rank 1, V100).
TEST(DisjointImport, TheSharedTracesOfTwoJobsAreRefusedNamingBoth) {
  const std::string dir = std::string(EMBEDSCOPE_SHARED_DATA) + "/traces";
  if (!fs::exists(dir + "/nccl_data.json.gz")) GTEST_SKIP() << dir << " is absent (shared test data)";
  const std::string db = scratch_db("f12_both.db");
  fs::remove(db);
  const auto r = f12_cli("import " + dir + "/nccl_data.json.gz " + dir + "/trace_diff_test.json.gz -o " + db);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("nccl_data.json.gz"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("trace_diff_test.json.gz"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(19183.8 days apart)"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db));
}
