// The CLI as the docs describe it, end to end: -o makes a missing folder (run, launch, import,
// merge, export); scaling's and inspect-input's --help list no flag they refuse, inspect-input
// refuses the flags that change nothing there and reads a cuda workload without a GPU;
// --network-bandwidth names a word as --network-latency does; run --help's --local-world-size
// names the three sharding types it applies to; stats on a file that is neither a session nor a
// file import reads says so without guessing; compare's "within noise" is a test of the means with batch-means standard errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
namespace ss = embedscope::sessions;

fs::path docs57_scratch() {
  static const fs::path dir = embedscope::test_support::fresh_scratch("es_docs57_" + std::to_string(getpid()));
  return dir;
}
embedscope::test_support::CliResult docs57_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, docs57_scratch());
}

// The option lines of `COMMAND --help` (those that start with two spaces and a dash).
std::vector<std::string> docs57_help_flags(const std::string& command) {
  const auto r = docs57_cli(command + " --help");
  std::vector<std::string> flags;
  size_t at = 0;
  while (at < r.out.size()) {
    const size_t nl = r.out.find('\n', at);
    const std::string line = r.out.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    if (line.rfind("  -", 0) == 0) flags.push_back(line.substr(2, line.find(' ', 2) - 2));
    at = nl == std::string::npos ? r.out.size() : nl + 1;
  }
  return flags;
}

bool docs57_lists(const std::vector<std::string>& flags, const std::string& flag) {
  for (const auto& f : flags)
    if (f == flag) return true;
  return false;
}

// A one-rank session of hand-set step times (ms), `samples` samples a step.
std::string docs57_steps_session(const std::string& name, const std::vector<int64_t>& step_ms) {
  const fs::path path = docs57_scratch() / name;
  fs::remove(path);
  ss::SessionWriter w(path.string());
  w.set_metadata("world_size", "1");
  w.set_metadata("backend", "cpu");
  w.set_metadata("workload_name", "hand");
  w.set_metadata("samples_per_step", "8");
  w.add_lane({0, 0, "compute", "thread"});
  int64_t t = 0;
  for (size_t s = 0; s < step_ms.size(); ++s) {
    w.add_step({static_cast<int64_t>(s), 0, t, t + step_ms[s] * 1'000'000, 0.5, 0, 0});
    t += step_ms[s] * 1'000'000;
  }
  w.close("complete");
  return path.string();
}
}  // namespace

// `run -o base/tiny.db` in an empty folder failed ("cannot create the session file: No such
// file or directory") where scenario -o makes its folder: every -o now makes a missing folder.
TEST(Docs57Cli, OutputFoldersAreMadeForRunLaunchImportMergeAndExport) {
  const fs::path d = docs57_scratch() / "folders";
  fs::remove_all(d);
  const std::string run_db = (d / "base" / "tiny.db").string();
  auto r = docs57_cli("run --preset tiny --steps 2 -o " + run_db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ss::SessionReader(run_db).status(), "complete");
  const std::string lm_db = (d / "lm" / "x.db").string();  // an lm_embedding run's -o too
  r = docs57_cli("run --preset llama3_8b_embedding_scaled --devices 1 --simulate h100_sxm --steps 1 -o " + lm_db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(lm_db));
  const fs::path launched = d / "launch" / "deeper" / "r.db";
  r = docs57_cli("launch -n 2 run --preset tiny --steps 2 -o " + launched.string());
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* f : {"r.db", "r.rank0.db", "r.rank1.db"}) EXPECT_TRUE(fs::exists(launched.parent_path() / f)) << f;
  const std::string imported = (d / "imp" / "k.db").string();
  r = docs57_cli("import " + std::string(EMBEDSCOPE_TEST_DATA) + "/traces/hta_small -o " + imported);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ss::SessionReader(imported).status(), "complete");
  const std::string merged = (d / "merged" / "all.db").string();
  r = docs57_cli("merge " + (launched.parent_path() / "r.rank0.db").string() + " " +
                 (launched.parent_path() / "r.rank1.db").string() + " -o " + merged);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(merged));
  r = docs57_cli("export " + run_db + " --format chrome -o " + (d / "exp" / "t.json").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(d / "exp" / "t.json"));
  r = docs57_cli("export " + run_db + " --format csv -o " + (d / "exp" / "csv" / "tables").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(d / "exp" / "csv" / "tables" / "steps.csv"));
  // a file where the folder would go: bad input naming -o, the path and the folder, nothing written
  std::ofstream(d / "afile") << "x";
  const std::string blocked = (d / "afile" / "x.db").string();
  r = docs57_cli("run --preset tiny --steps 2 -o " + blocked);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("error: -o " + blocked + ": cannot make the folder " + (d / "afile").string() + ": "),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("embedscope run:"), std::string::npos) << r.err;  // refused before the run is announced
}

// scaling --help listed --devices, --nodes, --sharding, --local-world-size and --backend, every
// one refused ("the scaling study sets it for every point"); they are hidden now, still refused.
TEST(Docs57Cli, ScalingHelpListsNoFlagItRefuses) {
  const auto flags = docs57_help_flags("scaling");
  ASSERT_TRUE(docs57_lists(flags, "--gpus")) << ::testing::PrintToString(flags);
  ASSERT_TRUE(docs57_lists(flags, "--simulate")) << ::testing::PrintToString(flags);
  for (const char* f : {"--devices", "--nodes", "--sharding", "--local-world-size", "--backend"})
    EXPECT_FALSE(docs57_lists(flags, f)) << f;
  const auto r = docs57_cli("scaling --preset tiny --simulate h100_sxm --gpus 2 --sharding row_wise");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("error: --sharding: the scaling study sets it for every point (use --gpus, --gpus-per-node, "
                       "--shardings)"),
            std::string::npos)
      << r.err;
}

// inspect-input took --qcomms, --pipeline, --simulate, --network-* ... and ignored them, and
// refused --backend cuda for lack of a GPU though it runs nothing on a backend.
TEST(Docs57Cli, InspectInputRefusesFlagsThatChangeNothingAndReadsACudaWorkloadWithoutAGpu) {
  const auto flags = docs57_help_flags("inspect-input");
  for (const char* f : {"--devices", "--steps", "--warmup-steps", "--batch-size", "--json"})
    EXPECT_TRUE(docs57_lists(flags, f)) << f << ": " << ::testing::PrintToString(flags);
  for (const char* f : {"--sharding", "--local-world-size", "--backend", "--pipeline", "--qcomms", "--dense-precision",
                        "--simulate", "--nodes", "--gpus-per-node", "--network-bandwidth", "--network-latency",
                        "--sequence-parallel"})
    EXPECT_FALSE(docs57_lists(flags, f)) << f;
  for (const std::string given : {"--qcomms fp16", "--pipeline sparse_dist", "--simulate h100_sxm",
                                  "--network-bandwidth 1e9", "--backend cuda", "--sharding row_wise"}) {
    const auto r = docs57_cli("inspect-input --preset tiny " + given);
    EXPECT_EQ(r.code, 2) << given << "\n" << r.err;
    EXPECT_NE(r.err.find("error: " + given.substr(0, given.find(' ')) +
                         ": not for inspect-input: it reads the batches a run would train on, which only the "
                         "workload's input, --devices, --steps, --warmup-steps and --batch-size change"),
              std::string::npos)
        << r.err;
  }
  // a workload of the cuda backend: its batches, on any machine (tiny: 2 devices x 30 steps of 8)
  const fs::path cuda = docs57_scratch() / "tiny_cuda.json";
  {
    std::ifstream in(std::string(EMBEDSCOPE_SOURCE_DIR) + "/resources/workloads/tiny.json");
    nlohmann::json w = nlohmann::json::parse(in);
    w["devices"]["backend"] = "cuda";
    std::ofstream(cuda) << w.dump();
  }
  auto r = docs57_cli("inspect-input " + cuda.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("tiny: synthetic input; 60 batches ((warmup 0 + steps 30) x 2 devices) of 8 samples = 480 "
                       "samples"),
            std::string::npos)
      << r.out;
  r = docs57_cli("inspect-input --preset tiny --devices 3 --steps 2");  // the overrides it keeps
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("6 batches ((warmup 0 + steps 2) x 3 devices) of 8 samples = 48 samples"), std::string::npos)
      << r.out;
}

// --network-bandwidth abc said CLI11's "Failed parsing abc as a FLOAT" where --network-latency
// abc names what to give; --local-world-size's help named table_row_wise only.
TEST(Docs57Cli, NetworkBandwidthWordIsNamedAndLocalWorldSizeHelpNamesItsThreeTypes) {
  auto r = docs57_cli("plan --preset tiny --network-bandwidth abc");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--network-bandwidth: not a number of bytes/s (got 'abc'); give e.g. 1e9"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("Failed parsing"), std::string::npos) << r.err;
  r = docs57_cli("plan --preset tiny --network-bandwidth 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--network-bandwidth: 0 bytes/s is out of range: give 1 to 1.13e+15 bytes/s, e.g. 1e9"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(docs57_cli("plan --preset tiny --network-bandwidth 1e9").code, 0);
  r = docs57_cli("run --help");
  std::string help = r.out;
  for (char& c : help)  // CLI11 wraps the description: one line to search
    if (c == '\n') c = ' ';
  std::string squeezed;
  for (char c : help)
    if (c != ' ' || squeezed.empty() || squeezed.back() != ' ') squeezed += c;
  EXPECT_NE(squeezed.find("the node in which table_row_wise, table_column_wise and grid_shard place a table's shards"),
            std::string::npos)
      << r.out;
}

// `stats hosts` (a plain text file) answered "a trace or a memory snapshot? import it first":
// a guess import then refused. It now says what the file is not; a trace is still sent to import.
TEST(Docs57Cli, StatsOnAFileNoToolReadsSaysWhatItIsNot) {
  const fs::path text = docs57_scratch() / "hosts";
  std::ofstream(text) << "127.0.0.2 slots=2\n127.0.0.3 slots=2\n";
  auto r = docs57_cli("stats " + text.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: " + text.string() + ": not a session (not an SQLite database), nor a file embedscope "
                       "import reads (PyTorch profiler traces, Nsight Systems exports and reports, PyTorch CUDA memory "
                       "snapshots); stats reads the sessions (.db) that run, import, merge and launch write"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("import it first"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('?'), std::string::npos) << r.err;  // no guess
  const std::string trace = std::string(EMBEDSCOPE_TEST_DATA) + "/traces/hta_small/rank0.json";
  r = docs57_cli("stats " + trace);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("; its content is PyTorch profiler (Kineto) Chrome-trace JSON (.json, .json.gz): import it first: "
                       "embedscope import " + trace),
            std::string::npos)
      << r.err;
  const std::string snapshot = std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/training_p2.pickle";
  r = docs57_cli("stats " + snapshot);
  EXPECT_NE(r.err.find("; its content is a PyTorch CUDA memory snapshot: import it first: embedscope import " + snapshot),
            std::string::npos)
      << r.err;
}

// compare called a 2x change "within noise" where one slow step widened each session's min -
// max. The test of the means: A, 18 steps of 550 ms then one of 200 and one of 900 (lag-1
// autocorrelation -122500 / 245000 = -0.5); B, 18 of 250 then 100 and 600 (mean 260: -51100 /
// 143000 = -0.357); both within 1.96 / sqrt(20) = 0.438, so Welch's t on the steps: se sd /
// sqrt(20), 113.55 / 4.472 = 25.392 ms and 86.75 / 4.472 = 19.399 ms: sqrt(25.392^2 + 19.399^2)
// = 31.954 ms, t -290 / 31.954 = -9.076, df (644.74 + 376.32)^2 / ((644.74^2 + 376.32^2) / 19) =
// 35.54 (df 30's 2.042): they differ, though each mean lies in the other's [min, max]. C, A's
// steps shifted by 10 ms: t 0.278, df 38 (2.042), within the steps' noise. No repeats: within-run
// only, said so.
TEST(Docs57Cli, CompareCallsANoisyTwoFoldChangeADifference) {
  std::vector<int64_t> a(18, 550), b(18, 250);
  a.push_back(200), a.push_back(900);
  b.push_back(100), b.push_back(600);
  std::vector<int64_t> c = a;
  for (auto& v : c) v += 10;
  const std::string da = docs57_steps_session("w_a.db", a), db = docs57_steps_session("w_b.db", b),
                    dc = docs57_steps_session("w_c.db", c);
  auto r = docs57_cli("compare " + da + " " + db + " " + dc);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step times B vs A (Welch's t on the steps, 95 %; lag-1 autocorrelation -0.50 and -0.36, within "
                       "+-0.44): -290.00 ms (-52.7 %), t -9.08, df 35.5, critical 2.042: "
                       "they differ within this pair of runs; run-to-run noise not measured (run the baseline twice to "
                       "measure it)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("step times C vs A (Welch's t on the steps, 95 %; lag-1 autocorrelation -0.50 and -0.50, within "
                       "+-0.44): +10.00 ms (+1.8 %), t 0.28, df 38.0, critical 2.042: "
                       "within the steps' noise\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("run-to-run noise: not measured (no two sessions ran the same configuration)"), std::string::npos)
      << r.out;
  r = docs57_cli("compare --json " + da + " " + db + " " + dc);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& b_diff = j.at("differences").at(0);
  EXPECT_NEAR(b_diff.at("step_time_test").at("t").get<double>(), -9.0756, 1e-3);
  EXPECT_NEAR(b_diff.at("step_time_test").at("df").get<double>(), 35.5436, 1e-3);
  EXPECT_DOUBLE_EQ(b_diff.at("step_time_test").at("critical").get<double>(), 2.042);
  EXPECT_EQ(b_diff.at("step_time_test").at("method"), "welch_steps");
  EXPECT_NEAR(b_diff.at("step_time_test").at("lag1_autocorrelation").at("baseline").get<double>(), -0.5, 1e-12);
  EXPECT_NEAR(b_diff.at("step_time_test").at("lag1_autocorrelation").at("session").get<double>(), -51100.0 / 143000, 1e-12);
  EXPECT_TRUE(b_diff.at("machine_difference").is_null());
  EXPECT_NEAR(b_diff.at("step_time_test").at("baseline").at("se_ns").get<double>(), 25.391669e6, 1);
  EXPECT_NEAR(b_diff.at("step_time_test").at("session").at("se_ns").get<double>(), 19.398861e6, 1);
  EXPECT_EQ(b_diff.at("step_time_test").at("baseline").at("batch_size"), 4);
  EXPECT_EQ(b_diff.at("step_time_verdict"), "differ");
  EXPECT_EQ(b_diff.at("verdict_scope"), "within_run");
  EXPECT_FALSE(b_diff.at("same_configuration").get<bool>());
  EXPECT_FALSE(j.at("run_to_run_noise").at("measured").get<bool>());
  EXPECT_TRUE(j.at("run_to_run_noise").at("spread_pct").is_null());
  EXPECT_TRUE(b_diff.at("step_time_test").at("differs").get<bool>());
  EXPECT_FALSE(b_diff.at("figures").at("step_time_mean_ns").at("within_noise").get<bool>());
  EXPECT_FALSE(b_diff.at("figures").at("throughput_per_s").at("within_noise").get<bool>());
  const auto& c_diff = j.at("differences").at(1);
  EXPECT_FALSE(c_diff.at("step_time_test").at("differs").get<bool>());
  EXPECT_TRUE(c_diff.at("figures").at("step_time_mean_ns").at("within_noise").get<bool>());
  // too few steps for a test: no verdict, said so
  const std::string few = docs57_steps_session("w_few.db", {550, 560, 540});
  r = docs57_cli("compare " + da + " " + few);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step times B vs A: no within-run test (B has 3 counted steps; it needs 5 in each)\n"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find(", within noise"), std::string::npos) << r.out;
}
