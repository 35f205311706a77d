// `embedscope import` end to end: what it prints, exit codes, and refusing to overwrite.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
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
  // a trace has no ids looked up: no "imbalance max/mean 1.00" (tester34 D19)
  EXPECT_NE(r.out.find("imbalance    not measured: a trace has no load counters (the ids each rank looked up)"),
            std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("ids looked up max/mean"), std::string::npos) << r.out;
  // nor allocator counters: no "peak allocated 0 B" rows (tester37 D8)
  EXPECT_NE(r.out.find("memory       none recorded (a trace has no allocator counters"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("peak allocated"), std::string::npos) << r.out;
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
                       "20.0 MiB free on the device); fragmentation"),  // a 60 MiB device (make_fixtures.py)
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("activations (train.py:30)"), std::string::npos) << r.out;
  r = cli("stats --json " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["memory"].size(), 1u);
  EXPECT_EQ(j["memory"][0]["peak_allocated_bytes"], 40 << 20);
  EXPECT_EQ(j["memory"][0]["ooms"][0]["largest_free_block_bytes"], 38 << 20);
  EXPECT_EQ(j["memory"][0]["ooms"][0]["device_free_bytes"], 20 << 20);  // 60 MiB - the 40 MiB segment
  EXPECT_EQ(j["memory"][0]["ooms"][0]["fragmentation"], true);
  // a 40 MiB request comes from the large pool, whose block is the largest: the plain wording
  EXPECT_EQ(j["memory"][0]["ooms"][0]["pool"], "large");
  EXPECT_EQ(j["memory"][0]["ooms"][0]["largest_free_in_pool_bytes"], 38 << 20);
}

namespace {
// 40 generated rank files of 4,000 events each (about 0.4 MB) in scratch/many_ranks.
std::filesystem::path many_rank_traces() {
  const auto dir = import_scratch() / "many_ranks";
  if (std::filesystem::exists(dir)) return dir;
  std::filesystem::create_directories(dir);
  for (int r = 0; r < 40; ++r) {
    std::ofstream f(dir / ("rank" + std::to_string(r) + ".json"));
    f << "{\"distributedInfo\": {\"rank\": " << r << ", \"world_size\": 40},\n\"traceEvents\": [\n";
    for (int i = 0; i < 4000; ++i)
      f << (i ? ",\n" : "") << "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::op_" << i % 50
        << "\", \"pid\": 1, \"tid\": 1, \"ts\": " << 1000 + 2 * i << ", \"dur\": 1}";
    f << "\n]}\n";
  }
  return dir;
}

struct Interrupted {
  int status = 0;
  std::string err;
};
// `embedscope import many_ranks -o db [--force-overwrite]`, SIGINT once the first file was read.
Interrupted interrupt_import(const std::string& db, bool overwrite) {
  const auto dir = many_rank_traces();
  const std::string err = (import_scratch() / ("stderr_of_" + std::filesystem::path(db).filename().string())).string();
  std::remove(err.c_str());
  const pid_t child = fork();
  if (child == 0) {
    freopen("/dev/null", "w", stdout);
    freopen(err.c_str(), "w", stderr);
    if (overwrite)
      execl(EMBEDSCOPE_CLI, EMBEDSCOPE_CLI, "import", dir.c_str(), "-o", db.c_str(), "--force-overwrite", nullptr);
    else
      execl(EMBEDSCOPE_CLI, EMBEDSCOPE_CLI, "import", dir.c_str(), "-o", db.c_str(), nullptr);
    _exit(127);
  }
  auto said = [&] {
    std::ifstream in(err);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  for (int i = 0; i < 20000 && said().find("import: read ") == std::string::npos; ++i) usleep(500);
  kill(child, SIGINT);
  Interrupted r;
  waitpid(child, &r.status, 0);
  r.err = said();
  return r;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Files in the scratch directory whose name starts with `prefix` (staging leftovers).
int files_starting_with(const std::string& prefix) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(import_scratch()))
    if (e.path().filename().string().rfind(prefix, 0) == 0) ++n;
  return n;
}
}  // namespace

// Ctrl-C during an import: the importer stops before its next file, the session is closed
// "cancelled" and removed with its -wal and -shm (nothing half-written is left to be taken for
// an import), the CLI says so and exits 130. The signal is sent once the first of the 40 files
// has been read, long before the last.
TEST(ImportCli, CtrlCCancelsAndLeavesNoSession) {
  const std::string db = scratch_db("cancelled_import.db");
  std::remove(db.c_str());
  const Interrupted r = interrupt_import(db, false);
  ASSERT_TRUE(WIFEXITED(r.status)) << r.err;
  EXPECT_EQ(WEXITSTATUS(r.status), 130) << r.err;
  EXPECT_NE(r.err.find("import cancelled; nothing was kept (no " + db + " written)"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(db));
  EXPECT_FALSE(std::filesystem::exists(db + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(db + "-shm"));
  EXPECT_EQ(files_starting_with("cancelled_import.db"), 0);  // no temporary file left either
}

// tester34 D5: Ctrl-C during `import --force-overwrite` keeps the session it was to replace,
// byte for byte (the import writes under a temporary name and renames only when complete).
TEST(ImportCli, CtrlCWithForceOverwriteKeepsTheOldSession) {
  const std::string db = scratch_db("kept_on_cancel.db");
  std::remove(db.c_str());
  ASSERT_EQ(cli("import " + trace_fixture("hta_small") + " -o " + db).code, 0);
  const std::string before = file_bytes(db);
  ASSERT_GT(before.size(), 1000u);
  const Interrupted r = interrupt_import(db, true);
  ASSERT_TRUE(WIFEXITED(r.status)) << r.err;
  EXPECT_EQ(WEXITSTATUS(r.status), 130) << r.err;
  EXPECT_NE(r.err.find("nothing was kept (" + db + " is as it was)"), std::string::npos) << r.err;
  EXPECT_EQ(file_bytes(db), before);
  EXPECT_EQ(files_starting_with("kept_on_cancel.db"), 1);  // the session alone: no temporary file left
  Result s = cli("stats " + db + " --json");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(nlohmann::json::parse(s.out)["gpu_kernels"]["ranks"].size(), 2u);  // still hta_small's 2 ranks
  // a completed --force-overwrite import replaces it (40 ranks now), again with no leftovers
  Result ok = cli("import " + many_rank_traces().string() + " -o " + db + " --force-overwrite --json");
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(nlohmann::json::parse(ok.out)["ranks"].size(), 40u);
  EXPECT_EQ(files_starting_with("kept_on_cancel.db"), 1);
}

// tester34 D4: `import X -o X` would replace the trace (or snapshot) with the session: refused
// naming the file, with or without --force-overwrite, also when -o names a file of a directory
// input; the input is left as it was.
TEST(ImportCli, OutputThatIsAnInputIsRefused) {
  const auto dir = import_scratch() / "self_input";
  std::filesystem::create_directories(dir);
  const std::string trace = (dir / "rank0.json").string();
  std::filesystem::copy_file(trace_fixture("hta_small/rank0.json"), trace, std::filesystem::copy_options::overwrite_existing);
  const std::string snap = (import_scratch() / "self.pickle").string();
  std::filesystem::copy_file(std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/training_p4.pickle", snap,
                             std::filesystem::copy_options::overwrite_existing);
  const std::string trace_text = file_bytes(trace), snap_bytes = file_bytes(snap);
  for (const std::string flag : {"", " --force-overwrite"}) {
    Result r = cli("import " + trace + " -o " + trace + flag);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.err.find(trace + ": is an input of this import"), std::string::npos) << r.err;
    r = cli("import " + dir.string() + " -o " + dir.string() + "/./rank0.json" + flag);  // a directory's file, another spelling
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.err.find("is an input of this import (" + trace + ")"), std::string::npos) << r.err;
    r = cli("import " + snap + " -o " + snap + flag);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.err.find(snap + ": is an input of this import"), std::string::npos) << r.err;
  }
  EXPECT_EQ(file_bytes(trace), trace_text);
  EXPECT_EQ(file_bytes(snap), snap_bytes);
}

// tester34 D6: `export` refuses an existing output (a chrome file, a csv file in an existing
// folder) with exit 2 naming it, unless --force-overwrite; the file it would replace is kept.
TEST(ImportCli, ExportRefusesAnExistingOutputUnlessForced) {
  const std::string db = scratch_db("export_src.db");
  std::remove(db.c_str());
  ASSERT_EQ(cli("import " + trace_fixture("hta_small") + " -o " + db).code, 0);
  const std::string victim = scratch_db("victim.db");
  std::remove(victim.c_str());
  ASSERT_EQ(cli("import " + trace_fixture("hta_small/rank0.json") + " -o " + victim).code, 0);
  const std::string kept = file_bytes(victim);
  Result r = cli("export " + db + " --format chrome -o " + victim);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(victim + ": already exists; choose another output (-o) or allow overwriting it (embedscope "
                                "export --force-overwrite)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(file_bytes(victim), kept);
  r = cli("export " + db + " --format chrome -o " + victim + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_GT(nlohmann::json::parse(file_bytes(victim))["traceEvents"].size(), 10u);
  // csv: a new folder is written; the same folder again is refused on its first file; forced, replaced
  const auto dir = import_scratch() / "csv_out";
  std::filesystem::remove_all(dir);
  ASSERT_EQ(cli("export " + db + " --format csv -o " + dir.string()).code, 0);
  { std::ofstream(dir / "ranks.csv") << "mine\n"; }
  std::filesystem::remove(dir / "events.csv");  // the first file absent: the refusal names the next one there
  r = cli("export " + db + " --format csv -o " + dir.string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find((dir / "steps.csv").string() + ": already exists (the csv export writes steps.csv there)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(file_bytes((dir / "ranks.csv").string()), "mine\n");
  EXPECT_FALSE(std::filesystem::exists(dir / "events.csv"));  // nothing written before the refusal
  r = cli("export " + db + " --format csv -o " + dir.string() + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(file_bytes((dir / "ranks.csv").string()).rfind("rank,", 0), 0u);
  // an empty existing folder is fine without the flag
  const auto empty = import_scratch() / "csv_empty";
  std::filesystem::create_directories(empty);
  EXPECT_EQ(cli("export " + db + " --format csv -o " + empty.string()).code, 0);
}

// tester34 D15: what import and replay-memory say about files they do not read: the formats
// import reads include memory snapshots; a pickle of protocol 0 or 1 (gzip too) is named as such
// by both commands; a Kineto trace given to replay-memory points to import; --allocator names
// the kinds a replay takes, the same in its help and its error.
TEST(ImportCli, MessagesForPicklesOfOldProtocolsAndTracesGivenToReplayMemory) {
  const std::string p0 = scratch_db("p0.pickle"), p1 = scratch_db("p1.pickle");
  { std::ofstream(p0, std::ios::binary) << std::string("(dp0\nVsegments\np1\n(lp2\nsVdevice_traces\np3\n(lp4\n(lp5\nas."); }
  {
    std::ofstream(p1, std::ios::binary)
        << std::string("}q\x00(X\x08\x00\x00\x00segmentsq\x01]q\x02X\r\x00\x00\x00device_tracesq\x03]q\x04]q\x05au.", 45);
  }
  ASSERT_EQ(std::filesystem::file_size(p1), 45u);
  for (const auto& [file, protocol] : {std::pair{p0, 0}, std::pair{p1, 1}})
    for (const std::string command : {"import ", "replay-memory "}) {
      Result r = cli(command + file);
      EXPECT_EQ(r.code, 2) << command;
      EXPECT_NE(r.err.find(file + ": a pickle of protocol " + std::to_string(protocol) +
                           "; PyTorch memory snapshots are read in protocols 2-5"),
                std::string::npos)
          << command << r.err;
    }
  const std::string json = scratch_db("not_a_trace.json");
  { std::ofstream(json) << "{\"lr\": 0.1}\n"; }
  Result r = cli("import " + json);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("PyTorch CUDA memory snapshots (torch.cuda.memory._dump_snapshot: .pickle, .pickle.gz)"),
            std::string::npos)
      << r.err;
  const std::string trace = trace_fixture("hta_small/rank0.json");
  r = cli("replay-memory " + trace);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(trace + ": a trace embedscope import reads (PyTorch profiler (Kineto)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("import it with `embedscope import " + trace + "`"), std::string::npos) << r.err;
  const std::string snap = std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/fragmented_oom_p4.pickle";
  r = cli("replay-memory " + snap + " --allocator foo");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--allocator: must be one of caching, expandable, direct, got \"foo\""), std::string::npos) << r.err;
  r = cli("replay-memory --help");
  EXPECT_NE(r.out.find("caching, expandable, direct"), std::string::npos) << r.out;
}

// tester34 D17: stats gives the fragmentation at peak allocated and at peak reserved, each named,
// and replay-memory's table (the moment reserved bytes reach their peak) equals the second.
// small_oom_p4.pickle (make_tester34.py): 4 MiB allocated in the 20 MiB segment at entry 1 (one
// 16 MiB free block: memviz 256/400 = 0.64), 12 MiB at entry 2 (8 MiB free: 64/400 = 0.16).
TEST(ImportCli, FragmentationAtBothPeaksIsNamedAndMatchesReplayMemory) {
  const std::string snap = std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/small_oom_p4.pickle";
  const std::string db = scratch_db("small_oom.db");
  std::remove(db.c_str());
  ASSERT_EQ(cli("import " + snap + " -o " + db).code, 0);
  Result r = cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("  at peak allocated  fragmentation 0.0% (1 - largest free / free), memviz 0.160; largest free "
                       "block 8.0 MiB of 8.0 MiB free in segments"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  at peak reserved   fragmentation 0.0%, memviz 0.640; largest free block 16.0 MiB of 16.0 MiB "
                       "free (entry 1: reserved first at its peak"),
            std::string::npos)
      << r.out;
  r = cli("stats --json " + db);
  const auto s = nlohmann::json::parse(r.out)["memory"][0];
  EXPECT_EQ(s["peak_entry"], 2);
  EXPECT_EQ(s["peak_reserved_entry"], 1);
  EXPECT_DOUBLE_EQ(s["at_peak"]["memviz_fragmentation"].get<double>(), 0.16);
  EXPECT_DOUBLE_EQ(s["at_peak_reserved"]["memviz_fragmentation"].get<double>(), 0.64);
  r = cli("replay-memory " + snap + " --device 0 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rec = nlohmann::json::parse(r.out)["devices"][0]["results"][0];
  EXPECT_DOUBLE_EQ(rec["memviz_fragmentation_at_peak"].get<double>(), 0.64);
  EXPECT_DOUBLE_EQ(rec["fragmentation_at_peak"].get<double>(), s["at_peak_reserved"]["external_fragmentation"].get<double>());
  r = cli("replay-memory " + snap + " --device 0");
  EXPECT_NE(r.out.find("frag (peak rsvd)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(fragmentation, memviz and segments: the layout when reserved bytes reached their peak)"),
            std::string::npos)
      << r.out;
}

// tester34 D21: shrunk_oom_p4.pickle reserved 40 MiB, then freed a segment and ran out of memory
// with 2 MiB free on the device: free + reserved at the OOM is 22 MiB, below what the run held.
// The replay's capacity is the larger, said as such, so the recorded settings run to the
// recorded OOM (entry 8) instead of running out at the second segment (action 4, as before);
// a --capacity below the trace's peak gets a note.
TEST(ImportCli, ReplayCapacityIsNeverBelowTheTracesOwnPeakReserved) {
  const std::string snap = std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/shrunk_oom_p4.pickle";
  Result r = cli("replay-memory " + snap + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto d = nlohmann::json::parse(r.out)["devices"][0];
  EXPECT_EQ(d["capacity_bytes"], 40 << 20);
  EXPECT_EQ(d["capacity_source"], "peak_reserved");
  EXPECT_EQ(d["capacity_at_recorded_oom_bytes"], 22 << 20);
  EXPECT_EQ(d["trace_peak_reserved_bytes"], 40 << 20);
  EXPECT_EQ(d["results"][0]["oom_action"], 8);
  EXPECT_EQ(d["results"][0]["peak_reserved_bytes"], 40 << 20);
  EXPECT_NEAR(d["results"][0]["fragmentation_at_peak"].get<double>(), 1.0 - 11.0 / 13.0, 1e-12);  // 2 and 11 MiB free
  r = cli("replay-memory " + snap);
  EXPECT_NE(r.out.find("device capacity 40.0 MiB (the trace's own peak reserved; free + reserved at the recorded OOM is "
                       "only 22.0 MiB"),
            std::string::npos)
      << r.out;
  r = cli("replay-memory " + snap + " --capacity " + std::to_string(22 << 20));
  EXPECT_NE(r.out.find("note: --capacity 22.0 MiB is below the trace's own peak reserved 40.0 MiB"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("OOM at action 4"), std::string::npos) << r.out;  // as asked: the second segment does not fit
}

// tester34 D24: `import a.pickle b.pickle` and a directory of snapshots make one session of
// ranks 0..N-1 (argument order, name order in a directory); a trace among snapshots is refused
// naming both.
TEST(ImportCli, PerRankSnapshotsImportAsRanks) {
  const std::string dir = std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/";
  const std::string db = scratch_db("per_rank_snaps.db");
  std::remove(db.c_str());
  Result r = cli("import " + dir + "small_oom_p4.pickle " + dir + "shrunk_oom_p4.pickle -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("2 PyTorch memory snapshots as 2 ranks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  rank 0: cuda:0 of small_oom_p4.pickle (PyTorch memory snapshot)\n"
                       "  rank 1: cuda:0 of shrunk_oom_p4.pickle (PyTorch memory snapshot)"),
            std::string::npos)
      << r.out;
  r = cli("stats --json " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto mem = nlohmann::json::parse(r.out)["memory"];
  ASSERT_EQ(mem.size(), 2u);
  EXPECT_EQ(mem[0]["peak_allocated_bytes"], 12 << 20);
  EXPECT_EQ(mem[1]["peak_reserved_bytes"], 40 << 20);
  // a directory of them: name order (shrunk before small)
  const auto snaps = import_scratch() / "snaps";
  std::filesystem::create_directories(snaps);
  for (const char* f : {"small_oom_p4.pickle", "shrunk_oom_p4.pickle"})
    std::filesystem::copy_file(dir + f, snaps / f, std::filesystem::copy_options::overwrite_existing);
  r = cli("import " + snaps.string() + " -o " + db + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("  rank 0: cuda:0 of shrunk_oom_p4.pickle"), std::string::npos) << r.out;
  r = cli("import " + dir + "small_oom_p4.pickle " + trace_fixture("hta_small/rank0.json") + " -o " + db +
          " --force-overwrite");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(trace_fixture("hta_small/rank0.json") + ": not a PyTorch memory snapshot, among 2 files of which " +
                       dir + "small_oom_p4.pickle is"),
            std::string::npos)
      << r.err;
  // and says how to import each (tester45 F12.7)
  EXPECT_NE(r.err.find("snapshots and traces are imported apart: the snapshots (one per rank) by name or in a directory "
                       "of their own, the traces by naming their files"),
            std::string::npos)
      << r.err;
}

// tester34 D22: an imported memory snapshot exports its allocator timeline: a Chrome counter
// "device memory" (allocated / reserved / active bytes) per trace entry of each rank, and
// memory.csv. small_oom_p4: entry 4 (the 4 MiB block's free completed) leaves 8 MiB allocated,
// free gaps of 4 and 8 MiB in the 20 MiB segment: fragmentation 1 - 8/12, memviz 80/400.
TEST(ImportCli, ExportOfAMemorySnapshotWritesItsTimeline) {
  const std::string db = scratch_db("export_snap.db");
  std::remove(db.c_str());
  ASSERT_EQ(cli("import " + std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/small_oom_p4.pickle -o " + db).code, 0);
  const std::string chrome = scratch_db("export_snap.json");
  std::remove(chrome.c_str());
  Result r = cli("export " + db + " --format chrome -o " + chrome);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto t = nlohmann::json::parse(file_bytes(chrome));
  std::vector<nlohmann::json> counters;
  bool named = false;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "C" && e["name"] == "device memory") counters.push_back(e);
    if (e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "rank 0") named = true;
  }
  EXPECT_TRUE(named);
  ASSERT_EQ(counters.size(), 7u);  // device 1 has no entries
  EXPECT_EQ(counters[2]["args"]["allocated"], 12 << 20);
  EXPECT_EQ(counters[2]["args"]["reserved"], 20 << 20);
  EXPECT_DOUBLE_EQ(counters[2]["ts"].get<double>(), 20.0);  // entries 10 us apart from the first
  EXPECT_EQ(counters[4]["args"]["allocated"], 8 << 20);
  const auto dir = import_scratch() / "export_snap_csv";
  std::filesystem::remove_all(dir);
  r = cli("export " + db + " --format csv -o " + dir.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string csv = file_bytes((dir / "memory.csv").string());
  EXPECT_EQ(csv.rfind("rank,entry,action,time_ns,allocated_bytes,reserved_bytes,active_bytes,largest_free_block_bytes,"
                      "external_fragmentation,memviz_fragmentation\n0,0,segment_alloc,0,0,20971520,0,20971520,",
                      0),
            0u)
      << csv;
  EXPECT_NE(csv.find("\n0,4,free_completed,40000,8388608,20971520,8388608,8388608,0.333333,0.200000\n"),
            std::string::npos)
      << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 8);  // header + 7 entries
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

// trace_diff_test's TBE backward kernel name is 1,646 characters: stats cuts names in their middle
// (72 characters) so the critical path and collectives tables stay readable (tester34 D20: every
// row padded to 1,711 columns); --json keeps the whole name.
TEST(ImportCli, StatsCutsLongKernelNamesInTheirMiddle) {
  const std::string trace = std::string(EMBEDSCOPE_SHARED_DATA) + "/traces/trace_diff_test.json.gz";
  if (!std::filesystem::exists(trace)) GTEST_SKIP() << trace << " is absent (shared test data)";
  const std::string db = scratch_db("diff_names.db");
  std::filesystem::remove(db);
  Result r = cli("import " + trace + " -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  r = cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  int cut = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.find("split_embedding_backward_code") != std::string::npos) {
      EXPECT_LE(line.size(), 150u) << line.substr(0, 200);
      cut += line.find("...") != std::string::npos;
    }
  EXPECT_GT(cut, 0) << r.out.substr(0, 2000);
  r = cli("stats --json " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  size_t longest = 0;
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& e : j["critical_path"]["ops"]) longest = std::max(longest, e["name"].get<std::string>().size());
  EXPECT_GT(longest, 1000u);
}

// A hang in a warm-up step: stats names the step the collective waits in as warm-up (tester35
// D13: "step -1" alone read as a bug).
TEST(ImportCli, StatsNamesAWarmUpStepOfTheFlightRecorder) {
  const std::string db = scratch_db("warmup_hang.db");
  std::filesystem::remove(db);
  {
    SessionWriter w(db);
    w.set_metadata("world_size", "2");
    std::vector<FlightRecord> recs;
    for (int32_t r = 0; r < 2; ++r) {
      FlightRecord e;
      e.rank = r, e.reason = "collective timeout", e.record_id = 0, e.group = "world", e.members = "0,1";
      e.sequence = 1, e.op = "all_reduce", e.name = "dense_all_reduce", e.dtype = "float32", e.step = -1;
      e.state = r == 0 ? "started" : "completed", e.time_created_ns = 100, e.time_started_ns = 110;
      e.time_completed_ns = r == 0 ? -1 : 200, e.timeout_ms = 800;
      recs.push_back(e);
    }
    w.add_flight_records(recs);
    w.close("hang", "world#1 timed out");
  }
  const Result r = cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("all_reduce 'dense_all_reduce' (group world, sequence 1, step -1, warm-up)"), std::string::npos)
      << r.out;
}

// Tester35 D12: a trace that yields no event at all (truncated before its first event, or an
// empty traceEvents) is refused, exit 2, with the reason, and no session is written; an existing
// session at the output path is kept as it was (--force-overwrite does not destroy it for nothing).
TEST(ImportCli, ATraceWithNoEventIsRefusedAndWritesNothing) {
  const std::string dir = import_scratch();
  const std::string truncated = dir + "/no_event_truncated.json", empty = dir + "/no_event_empty.json";
  std::ofstream(truncated) << "{\"traceEvents\": [\n";
  std::ofstream(empty) << "{\"traceEvents\": []}\n";
  const std::string db = scratch_db("no_event.db");
  std::remove(db.c_str());
  Result r = cli("import " + truncated + " -o " + db);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("no_event_truncated.json: no event imported (the text ends at line 2, column 1 inside the trace"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("truncated after 0 events); no session written"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(db));
  r = cli("import " + empty + " -o " + db);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("no_event_empty.json: no event imported (the trace has no events)"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(db));
  // Over an existing session with --force-overwrite: refused, the old session is kept.
  ASSERT_EQ(cli("import " + trace_fixture("hta_small") + " -o " + db).code, 0);
  const auto size = std::filesystem::file_size(db);
  r = cli("import " + truncated + " -o " + db + " --force-overwrite");
  EXPECT_EQ(r.code, 2);
  ASSERT_TRUE(std::filesystem::exists(db));
  EXPECT_EQ(std::filesystem::file_size(db), size);
  EXPECT_EQ(cli("stats " + db).code, 0);
}

// tester37 #18: a valid 245-byte output name failed on its temporary "<name>.importing-PID" (File
// name too long), and a missing folder was reported under the temporary name. The temporary name
// now fits; a missing folder is made (as run -o and scenario -o make theirs), and a folder that
// cannot be made is named by the user's path.
TEST(ImportCli, ALongOutputNameImportsAndAMissingFolderIsMade) {
  const std::string name = std::string(240, 'o') + ".x.db";  // 245 bytes: a valid file name
  const std::string db = scratch_db(name);
  std::remove(db.c_str());
  Result r = cli("import " + trace_fixture("align/rank0.json") + " -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(SessionReader(db).status(), "complete");
  for (const auto& e : std::filesystem::directory_iterator(import_scratch()))  // no temporary left
    EXPECT_EQ(e.path().filename().string().find(".importing-"), std::string::npos) << e.path();
  std::filesystem::remove_all(import_scratch() / "no_such_folder");
  const std::string missing = (import_scratch() / "no_such_folder" / "x.db").string();
  r = cli("import " + trace_fixture("align/rank0.json") + " -o " + missing);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(SessionReader(missing).status(), "complete");
  const std::filesystem::path in_the_way = import_scratch() / "a_file_not_a_folder";
  std::ofstream(in_the_way) << "x";
  const std::string blocked = (in_the_way / "x.db").string();
  r = cli("import " + trace_fixture("align/rank0.json") + " -o " + blocked);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("-o " + blocked + ": cannot make the folder " + in_the_way.string()), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("importing-"), std::string::npos) << r.err;
}

// tester37: a killed import left ".OUT.importing-PID" (+ -wal, -shm) that nothing removed. The
// next import to the same output removes those of processes that are gone (and untouched for a
// minute), and keeps a live process's and a recently written one's.
TEST(ImportCli, TheNextImportRemovesTheStagedFilesOfAKilledOne) {
  const std::filesystem::path dir = import_scratch() / "stale_staging";
  std::filesystem::create_directories(dir);
  const pid_t gone = fork();  // a pid that no longer runs: a child that exited and was reaped
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);
  const auto staged = [&](long pid) { return (dir / (".k.db.importing-" + std::to_string(pid))).string(); };
  const auto old_time = std::filesystem::file_time_type::clock::now() - std::chrono::hours(2);
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::ofstream(staged(gone) + suffix) << "x";
    std::filesystem::last_write_time(staged(gone) + suffix, old_time);
    std::ofstream(staged(getpid()) + suffix) << "x";  // a live import (this test's process)
    std::filesystem::last_write_time(staged(getpid()) + suffix, old_time);
  }
  const std::string other_db = (dir / ".other.db.importing-1").string();  // another output's: not ours to judge
  std::ofstream(other_db) << "x";
  std::filesystem::last_write_time(other_db, old_time);
  Result r = cli("import " + trace_fixture("align/rank0.json") + " -o " + (dir / "k.db").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("import: removed " + staged(gone) + ", left by an import that was killed (pid " +
                       std::to_string(gone) + ")"),
            std::string::npos)
      << r.err;
  for (const char* suffix : {"", "-wal", "-shm"}) {
    EXPECT_FALSE(std::filesystem::exists(staged(gone) + suffix)) << suffix;
    EXPECT_TRUE(std::filesystem::exists(staged(getpid()) + suffix)) << suffix;
  }
  EXPECT_TRUE(std::filesystem::exists(other_db));
  // a gone process's file written within the last minute is kept (a live import on another host)
  std::ofstream(staged(gone)) << "x";
  r = cli("import " + trace_fixture("align/rank0.json") + " -o " + (dir / "k.db").string() + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(staged(gone)));
}
