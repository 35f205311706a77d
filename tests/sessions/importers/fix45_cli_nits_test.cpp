// tester45 F12 nits, through the CLI: (3) `launch ... run --simulate` is refused before any
// process starts, as an lm_embedding workload is; (4) `replay-memory /dev/zero` ended only when
// killed: a file that is no regular file, or empty, is refused at once; (10) `stats` of a JSON
// file embedscope wrote (a scaling study, a hardware profile) says what the file is instead of
// "import it first", which import then refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;

fs::path fix45_cli_scratch() {
  static const fs::path d = [] {
    auto p = fs::temp_directory_path() / ("es_fix45_cli_" + std::to_string(getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
  }();
  return d;
}

embedscope::test_support::CliResult fix45_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, fix45_cli_scratch());
}
}  // namespace

TEST(Fix45CliNits, LaunchRefusesSimulateBeforeAnyProcessStarts) {
  const auto out = fix45_cli_scratch() / "launched.db";
  for (const std::string sim : {"--simulate h100_sxm", "--simulate=h100_sxm"}) {
    const auto r = fix45_cli("launch -n 2 run --preset tiny --steps 1 " + sim + " -o " + out.string());
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("error: launch: --simulate times every rank in one process (one rank per process runs on the "
                         "cpu or cuda backend); run it without launch"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("SIMULATED"), std::string::npos) << r.err;         // no rank started
    EXPECT_EQ(r.err.find("rendezvous"), std::string::npos) << r.err;        // nor the launch itself
    EXPECT_FALSE(fs::exists(out));
  }
}

TEST(Fix45CliNits, ReplayMemoryRefusesADeviceAndAnEmptyFileAtOnce) {
  auto r = fix45_cli("replay-memory /dev/zero");  // was read until killed
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("/dev/zero: not a regular file (a device, FIFO or socket): replay-memory reads an allocator "
                       "trace (JSON) or a PyTorch memory snapshot (.pickle)"),
            std::string::npos)
      << r.err;
  const auto empty = fix45_cli_scratch() / "empty.json";
  std::ofstream(empty).close();
  r = fix45_cli("replay-memory " + empty.string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(empty.string() + ": the file is empty (not an allocator trace or a memory snapshot)"),
            std::string::npos)
      << r.err;
  r = fix45_cli("replay-memory " + fix45_cli_scratch().string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(": not a regular file (a directory)"), std::string::npos) << r.err;
}

TEST(Fix45CliNits, StatsSaysWhatAnEmbedscopeJsonFileIs) {
  const auto study = fix45_cli_scratch() / "sc.json";
  std::ofstream(study) << R"({"batch_size_per_gpu": 512, "points": []})";
  auto r = fix45_cli("stats " + study.string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(study.string() + ": not an SQLite database (not a session): a scaling study (embedscope scaling --json)"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("import it first"), std::string::npos) << r.err;
  const auto profile = fix45_cli_scratch() / "prof.json";
  std::ofstream(profile) << R"({"name": "this_machine", "gpu": {"memory_bytes": 1000}})";
  r = fix45_cli("stats " + profile.string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(profile.string() + ": not an SQLite database (not a session): a hardware profile: give it to --simulate"), std::string::npos)
      << r.err;
  // a trace is still pointed to import
  const auto trace = fix45_cli_scratch() / "t.json";
  std::ofstream(trace) << R"({"traceEvents": []})";
  r = fix45_cli("stats " + trace.string());
  EXPECT_NE(r.err.find("import it first: embedscope import " + trace.string()), std::string::npos) << r.err;
}

// `run --simulate FILE` with a session (an SQLite file) for the profile: the file named and what
// it is, not nlohmann's "invalid literal; last read: 'S'"
TEST(Fix45CliNits, SimulateWithASessionFileSaysWhatItIs) {
  const auto db = fix45_cli_scratch() / "tp.json";
  {
    std::ofstream f(db, std::ios::binary);
    f << std::string("SQLite format 3\0", 16) << std::string(84, '\0');
  }
  const auto r = fix45_cli("run --preset tiny --steps 1 --simulate " + db.string() + " -o " +
                           (fix45_cli_scratch() / "never.db").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(db.string() + ": an SQLite database (an embedscope session?), not a hardware profile (JSON)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("last read"), std::string::npos) << r.err;
}
