// `embedscope import` end to end: what it prints, exit codes, and refusing to overwrite.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "import_test_support.h"
#include "support/cli_run.h"

using namespace embedscope::sessions::testing;

namespace {
using Result = embedscope::test_support::CliResult;
Result cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, import_scratch());
}
}  // namespace

TEST(ImportCli, DirectoryOfRanksPrintsRanksEventsAndHtaFigures) {
  const std::string db = scratch_db("cli_small.db");
  std::remove(db.c_str());
  Result r = cli("import " + trace_fixture("hta_small") + " -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("ranks        0, 1 (2 ranks)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kernels 8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("37.50%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no comm"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("import: reading"), std::string::npos) << r.err;  // progress on stderr
  // An existing output is refused (exit 2) unless --force-overwrite.
  r = cli("import " + trace_fixture("hta_small") + " -o " + db);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--force-overwrite"), std::string::npos) << r.err;
  r = cli("import " + trace_fixture("hta_small") + " -o " + db + " --force-overwrite --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ranks"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(j["events"]["collectives"], 2);
  EXPECT_EQ(j["gpu_kernels"]["ranks"][0]["overlap_pct"], 37.5);
  EXPECT_TRUE(j["gpu_kernels"]["ranks"][1]["overlap_pct"].is_null());  // no communication, not NaN
  EXPECT_EQ(j["gpu_kernels"]["ranks"][0]["idle_ns"], 30000);
  // stats shows the figures beside the thread-level ones, with the import problems.
  r = cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("IMPORTED from kineto_json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("overlap      37.5% of communication ran while the rank computed (stream level"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Holistic Trace Analysis"), std::string::npos) << r.out;
  r = cli("stats " + db + " --json --keep-last-step");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["gpu_kernels"]["ranks"][0]["idle_ns"], 80000);
}

TEST(ImportCli, UnknownFormatsAndMissingFilesAreBadInput) {
  Result r = cli("import " + std::string(EMBEDSCOPE_TEST_DATA) + "/sessions/v1.db -o " + scratch_db("x.db"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("an SQLite database"), std::string::npos) << r.err;
  r = cli("import /nonexistent/trace.json -o " + scratch_db("y.db"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no such file or directory"), std::string::npos) << r.err;
}

// `stats` on an imported memory snapshot: the allocator history instead of "nothing to analyse"
// (the figures the fixture generator counted: 40 MiB peak, a 40 MiB request against 38 MiB).
TEST(ImportCli, StatsOfAMemorySnapshotSaysWhatTheAllocatorDid) {
  const std::string db = scratch_db("cli_frag.db");
  std::remove(db.c_str());
  const std::string fixture = std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/fragmented_oom_p4.pickle";
  ASSERT_EQ(cli("import " + fixture + " -o " + db).code, 0);
  Result r = cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("nothing to analyse"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("peak allocated     40.0 MiB at entry 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("OOM at entry 5: asked 40.0 MiB; largest free block 38.0 MiB (38.0 MiB free in segments, "
                       "8.0 MiB free on the device); fragmentation"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("activations (train.py:30)"), std::string::npos) << r.out;
  r = cli("stats --json " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["memory"].size(), 1u);
  EXPECT_EQ(j["memory"][0]["peak_allocated_bytes"], 40 << 20);
  EXPECT_EQ(j["memory"][0]["ooms"][0]["largest_free_block_bytes"], 38 << 20);
  EXPECT_EQ(j["memory"][0]["ooms"][0]["device_free_bytes"], 8 << 20);
  EXPECT_EQ(j["memory"][0]["ooms"][0]["fragmentation"], true);
  // a 40 MiB request comes from the large pool, whose block is the largest: the plain wording
  EXPECT_EQ(j["memory"][0]["ooms"][0]["pool"], "large");
  EXPECT_EQ(j["memory"][0]["ooms"][0]["largest_free_in_pool_bytes"], 38 << 20);
}

// Ctrl-C during an import: the importer stops before its next file, the session is closed
// "cancelled" and removed with its -wal and -shm (nothing half-written is left to be taken for
// an import), the CLI says so and exits 130. 40 generated rank files of 4,000 events each
// (about 0.4 MB): the signal is sent once the first file has been read, long before the last.
TEST(ImportCli, CtrlCCancelsAndLeavesNoSession) {
  const auto dir = import_scratch() / "many_ranks";
  std::filesystem::create_directories(dir);
  for (int r = 0; r < 40; ++r) {
    std::ofstream f(dir / ("rank" + std::to_string(r) + ".json"));
    f << "{\"distributedInfo\": {\"rank\": " << r << ", \"world_size\": 40},\n\"traceEvents\": [\n";
    for (int i = 0; i < 4000; ++i)
      f << (i ? ",\n" : "") << "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::op_" << i % 50
        << "\", \"pid\": 1, \"tid\": 1, \"ts\": " << 1000 + 2 * i << ", \"dur\": 1}";
    f << "\n]}\n";
  }
  const std::string db = scratch_db("cancelled_import.db"), err = scratch_db("cancelled_import_err.txt");
  std::remove(db.c_str());
  std::remove(err.c_str());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    freopen("/dev/null", "w", stdout);
    freopen(err.c_str(), "w", stderr);
    execl(EMBEDSCOPE_CLI, EMBEDSCOPE_CLI, "import", dir.c_str(), "-o", db.c_str(), nullptr);
    _exit(127);
  }
  auto said = [&] {
    std::ifstream in(err);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  for (int i = 0; i < 20000 && said().find("import: read ") == std::string::npos; ++i) usleep(500);
  kill(child, SIGINT);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << said();
  EXPECT_EQ(WEXITSTATUS(status), 130) << said();
  EXPECT_NE(said().find("import cancelled; nothing was kept"), std::string::npos) << said();
  EXPECT_FALSE(std::filesystem::exists(db));
  EXPECT_FALSE(std::filesystem::exists(db + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(db + "-shm"));
}

// Events that did not end (tests/data/traces/unfinished_kernel.json: a kernel at 100 us, a host
// op at 200 us) are shown by `stats` (text and JSON) and exported as "B" events without their "E"
// under their own names (Perfetto's "Did not end"), which `import` reads back as the same marks.
TEST(ImportCli, StatsAndExportShowTheEventsThatDidNotEnd) {
  const std::string db = scratch_db("cli_unfinished.db"), json_out = scratch_db("cli_unfinished.json"),
                    again = scratch_db("cli_unfinished_again.db");
  for (const auto& f : {db, json_out, again}) std::remove(f.c_str());
  Result r = cli("import " + trace_fixture("unfinished_kernel.json") + " -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  r = cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("did not end  2 events, kept as zero-length ops"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gemm_kernel  at 100 us, step -1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("aten::mm  at 200 us"), std::string::npos) << r.out;
  r = cli("stats " + db + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["did_not_end"]["count"], 2);
  ASSERT_EQ(j["did_not_end"]["ops"].size(), 2u);
  EXPECT_EQ(j["did_not_end"]["ops"][0]["name"], "aten::mm");  // rank 0 lane 0 (the thread) first
  EXPECT_EQ(j["did_not_end"]["ops"][0]["start_ns"], 200000);
  EXPECT_EQ(j["did_not_end"]["ops"][1]["name"], "gemm_kernel");
  EXPECT_EQ(j["did_not_end"]["ops"][1]["start_ns"], 100000);
  EXPECT_EQ(j["gpu_kernels"]["ranks"][0]["overlap_pct"], 50.0);
  r = cli("export " + db + " --format chrome -o " + json_out);
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(json_out);
  const auto t = nlohmann::json::parse(in);
  int begins = 0;
  for (const auto& e : t["traceEvents"])
    if (e["ph"] == "B") {
      ++begins;
      EXPECT_TRUE(e["args"]["did_not_end"].get<bool>());
      EXPECT_TRUE(e["name"] == "gemm_kernel" || e["name"] == "aten::mm") << e.dump();
      EXPECT_EQ(e["ts"], e["name"] == "gemm_kernel" ? 100.0 : 200.0);
    }
  EXPECT_EQ(begins, 2);
  r = cli("import " + json_out + " -o " + again + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["events"]["did_not_end"], 2);
}
