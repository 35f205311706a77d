// imp50: tester50 F5 (a session that cannot be written fails `scaling` and `scenario` with exit 1,
// naming the file, the OS's side and the sessions written; scenario keeps its table) and F12
// (the network latency in us / ms, --network-bandwidth's range in words, compare's difference
// that its text would round to zero). A file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) stands in
// for a full disk, as Fixe49WriteFailed does.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "embedscope/sessions/analysis/compare.h"
#include "support/build_paths.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;

fs::path imp50c_scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("es_imp50c_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// `embedscope ARGS` with files limited to `kib` KiB (bash's ulimit -f, 1 KiB blocks), SIGXFSZ ignored: a write
// past the limit fails (EFBIG) as on a full disk; stdout and stderr together
embedscope::test_support::CliResult imp50c_limited(int kib, const std::string& args) {
  return embedscope::test_support::run_merged("bash -c \"trap '' XFSZ; ulimit -f " + std::to_string(kib) + "; exec " +
                                              std::string(EMBEDSCOPE_CLI) + " " + args + "\"");
}
}  // namespace

// F5 (a): the first point's session cannot be made: exit 1 (was 2 with SQLite's bare text), the
// point's row says write_failed with the file and the limit, the later point is not run.
TEST(Imp50WriteFailed, ScalingFirstPointFailsTheStudy) {
  const fs::path dir = imp50c_scratch("scal0");
  const auto r = imp50c_limited(300, "scaling --preset tiny --simulate h100_sxm --gpus 8,64 --shardings table_wise "
                                     "--steps 3 -o " + (dir / "s").string());
  EXPECT_EQ(r.code, 1) << r.out;
  const std::string db = (dir / "s" / "table_wise_8.db").string();
  EXPECT_NE(r.out.find("table_wise            8     1  write_failed: " + db), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("this process may write files of at most 300.0 KiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("table_wise           64     8  not run (table_wise 8's session could not be written)"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("error: scaling: table_wise at 8 GPUs: write_failed: " + db), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sessions written: none"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(db));
}

// F5 (b): a later point's session cannot be written: exit 1 (was 0), the sessions written named.
TEST(Imp50WriteFailed, ScalingLaterPointFailsTheStudy) {
  const fs::path dir = imp50c_scratch("scal1");
  // table_wise_8.db is 448 KiB, table_wise_64.db more than 700 KiB (tiny, 3 steps)
  const auto r = imp50c_limited(700, "scaling --preset tiny --simulate h100_sxm --gpus 8,64 --shardings table_wise "
                                     "--steps 3 -o " + (dir / "s").string());
  EXPECT_EQ(r.code, 1) << r.out;
  const std::string ok = (dir / "s" / "table_wise_8.db").string(), bad = (dir / "s" / "table_wise_64.db").string();
  EXPECT_NE(r.out.find("table_wise           64     8  write_failed: " + bad), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("error: scaling: table_wise at 64 GPUs: write_failed: " + bad), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sessions written: " + ok + "\n"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(ok));
}

// F5 (c): scenario's first run cannot make its session: exit 1 (was 2), the table still printed
// with both runs' rows, the error after it naming the file and the limit.
TEST(Imp50WriteFailed, ScenarioKeepsItsTable) {
  const fs::path dir = imp50c_scratch("scn");
  const auto r = imp50c_limited(300, "scenario row_wise_vs_table_wise --steps 3 -o " + dir.string());
  EXPECT_EQ(r.code, 1) << r.out;
  const std::string db0 = (dir / "row_wise_vs_table_wise-0.db").string();
  EXPECT_NE(r.out.find("scenario row_wise_vs_table_wise: "), std::string::npos) << r.out;  // the table's title
  EXPECT_NE(r.out.find("run ended write_failed: " + db0), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not run (run 0's session could not be written)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("error: scenario: the session of run 0: " + db0), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("this process may write files of at most 300.0 KiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sessions written: none"), std::string::npos) << r.out;
}

// F12: a latency of 1 ms reads "1.00 ms", 1 us "1.00 us", below that ns (run's header and stats).
TEST(Imp50Nits, NetworkLatencyInItsUnit) {
  const fs::path dir = imp50c_scratch("lat");
  const std::string db = (dir / "l.db").string();
  auto r = embedscope::test_support::run_merged(std::string(EMBEDSCOPE_CLI) +
                                                " run --preset tiny --steps 1 --network-bandwidth 1e7 "
                                                "--network-latency 1000000 -o " + db);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string line = "network      intra_node 10 MB/s, 1.00 ms latency; inter_node 10 MB/s, 1.00 ms latency\n";
  EXPECT_NE(r.out.find(line), std::string::npos) << r.out;
  r = embedscope::test_support::run_merged(std::string(EMBEDSCOPE_CLI) + " stats " + db);
  EXPECT_NE(r.out.find(line), std::string::npos) << r.out;
  r = embedscope::test_support::run_merged(std::string(EMBEDSCOPE_CLI) + " run --preset tiny --steps 1 "
                                           "--network-latency 2500 -o " + (dir / "u.db").string());
  EXPECT_NE(r.out.find("intra_node unlimited bandwidth, 2.50 us latency; inter_node unlimited bandwidth, 2.50 us latency"),
            std::string::npos) << r.out;
}

// F12: --network-bandwidth 0 says its range in words (was CLI11's "Value 0 not in range 1.000000
// to 1125899906842624.000000").
TEST(Imp50Nits, BandwidthRangeInWords) {
  const auto r = embedscope::test_support::run_merged(std::string(EMBEDSCOPE_CLI) +
                                                      " plan --preset tiny --network-bandwidth 0");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--network-bandwidth: 0 bytes/s is out of range: give 1 to 1.13e+15 bytes/s, e.g. 1e9"),
            std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("1125899906842624"), std::string::npos) << r.out;
}

// F12: two losses shown as 0.66410 and 0.66409 differ by -2.6e-6: the difference reads
// -0.000003 (-0.0004 %), not 0.00000; equal texts keep their 0.
TEST(Imp50Nits, CompareDifferenceNeverContradictsItsColumns) {
  using namespace embedscope::sessions;
  ComparedSession a, b;
  a.stats.steps = b.stats.steps = 1;
  a.stats.loss = {0.664097};   // "0.66410"
  b.stats.loss = {0.6640944};  // "0.66409"
  ASSERT_EQ(compare_cell_text(a, CompareFigure::Loss), "0.66410");
  ASSERT_EQ(compare_cell_text(b, CompareFigure::Loss), "0.66409");
  EXPECT_EQ(compare_delta(a, b, CompareFigure::Loss).text, "-0.000003 (-0.0004 %)");
  b.stats.loss = {0.6640968};  // "0.66410" as a: the difference reads 0 as before
  EXPECT_EQ(compare_delta(a, b, CompareFigure::Loss).text, "0.00000 (0.0 %)");
}
