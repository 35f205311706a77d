// The `embedscope` CLI as a user runs it: exit codes, messages and the --json summary.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <thread>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <iterator>
#include <sstream>

#include <map>

#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {
// A fresh scratch directory per process (ctest runs tests in parallel). Emptied first: a
// directory left by an earlier process with the same pid (pids are reused; several people run
// the suite on one machine) held its h.db, and `run -o h.db` refused to overwrite it.
std::filesystem::path scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("es_cli_" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

using Result = embedscope::test_support::CliResult;
Result cli(const std::string& args) { return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, scratch()); }
const std::string kData = EMBEDSCOPE_TEST_DATA;
}  // namespace

TEST(Cli, RunJsonSummary) {
  const std::string db = (scratch() / "run.db").string();
  Result r = cli("run --preset tiny --devices 3 --sharding row_wise --steps 4 --json -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["steps"], 4);
  EXPECT_EQ(j["ended"], "complete");
  for (const char* k : {"mean", "p50", "p99"}) EXPECT_GT(j["step_time_ns"][k].get<double>(), 0) << k;
  EXPECT_GT(j["samples_per_s"].get<double>(), 0);
  EXPECT_TRUE(j["loss_first"].is_number());
  EXPECT_TRUE(j["loss_last"].is_number());
  ASSERT_EQ(j["ranks"].size(), 3u);
  for (const auto& rk : j["ranks"]) {
    EXPECT_GT(rk["ids_looked_up"].get<int64_t>(), 0);
    EXPECT_GT(rk["bytes_sent"].get<int64_t>(), 0);
    EXPECT_GT(rk["bytes_received"].get<int64_t>(), 0);
    EXPECT_GT(rk["memory_bytes"].get<int64_t>(), 0);
  }
  EXPECT_EQ(j["sharding"]["tables"][0]["sharding_type"], "row_wise");
  EXPECT_NE(r.err.find("step 4/4"), std::string::npos) << r.err;  // progress on stderr
  EXPECT_EQ(j["session"], db);

  // the session agrees with the run's own summary, exactly
  Result st = cli("stats --json " + db);
  ASSERT_EQ(st.code, 0) << st.err;
  auto s = nlohmann::json::parse(st.out);
  EXPECT_EQ(s["ended"], "complete");
  EXPECT_EQ(s["steps"], 4);
  EXPECT_EQ(s["simulated"], false);
  ASSERT_EQ(s["ranks"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(s["ranks"][i]["ids_looked_up"], j["ranks"][i]["ids_looked_up"]) << i;
    EXPECT_EQ(s["ranks"][i]["bytes_sent"], j["ranks"][i]["bytes_sent"]) << i;
    EXPECT_EQ(s["ranks"][i]["bytes_received"], j["ranks"][i]["bytes_received"]) << i;
  }
  EXPECT_EQ(s["step_time_ns"]["p50"], j["step_time_ns"]["p50"]);
  EXPECT_EQ(s["loss"], j["loss"]);
  for (const char* k : {"overlap_pct", "exposed_comm_ns", "samples_per_s"}) EXPECT_TRUE(s[k].is_number()) << k;
  EXPECT_GE(s["imbalance"]["lookups_max_over_mean"].get<double>(), 1.0);
  // the critical path tiles each step from its first op on the path to the step's last op: it is
  // never longer than the steps, and its entries add up to it
  int64_t on_path = 0;
  for (const auto& e : s["critical_path"]["ops"]) on_path += e["ns"].get<int64_t>();
  EXPECT_EQ(on_path, s["critical_path"]["total_ns"].get<int64_t>());
  EXPECT_GT(on_path, 0);
  EXPECT_LE(on_path, 4 * s["step_time_ns"]["max"].get<int64_t>());
  std::set<std::string> collective_names;
  for (const auto& c : s["collectives"]) {
    collective_names.insert(c["name"].get<std::string>());
    EXPECT_LE(c["exposed_ns"].get<int64_t>(), c["time_ns"].get<int64_t>());
    EXPECT_EQ(c["count"].get<int64_t>() % 3, 0);  // every instance on all 3 ranks
  }
  EXPECT_TRUE(collective_names.count("output_dist/reduce_scatter")) << st.out;
  // row_wise only: no table_wise / column_wise shard, so no (empty) pooled all-to-all (tester33 D11)
  EXPECT_FALSE(collective_names.count("output_dist/all_to_all")) << st.out;

  const std::string trace = (scratch() / "t.json").string();
  Result ex = cli("export " + db + " --format chrome -o " + trace);
  ASSERT_EQ(ex.code, 0) << ex.err;
  std::ifstream tf(trace);
  auto t = nlohmann::json::parse(tf);
  EXPECT_GT(t["traceEvents"].size(), 100u);
  Result csv = cli("export " + db + " --format csv -o " + (scratch() / "csv").string());
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_TRUE(std::filesystem::exists(scratch() / "csv" / "events.csv"));
  EXPECT_TRUE(std::filesystem::exists(scratch() / "csv" / "ranks.csv"));
}

TEST(Cli, OutputFilesAreNeverClobberedSilently) {
  const std::string db = (scratch() / "keep.db").string();
  ASSERT_EQ(cli("run --preset tiny --steps 2 -o " + db).code, 0);
  Result r = cli("run --preset tiny --steps 2 -o " + db);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("keep.db: already exists"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("embedscope run:"), std::string::npos) << "refused before announcing the run: " << r.err;
  EXPECT_EQ(cli("run --preset tiny --steps 3 --force-overwrite -o " + db).code, 0);
  EXPECT_EQ(nlohmann::json::parse(cli("stats --json " + db).out)["steps"], 3);
  r = cli("run --preset tiny --steps 2 -o /dev/null");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/dev/null: exists and is not a regular file"), std::string::npos) << r.err;
  r = cli("export " + db + " --format chrome -o " + db);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("is the session being exported"), std::string::npos) << r.err;
  EXPECT_EQ(cli("stats " + db).code, 0);  // still a session
  r = cli("stats");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.find("unknown command"), std::string::npos) << r.err;
}

TEST(Cli, StatsOnBadFilesExitsTwo) {
  Result r = cli("stats " + kData + "/specs/small_ok.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("small_ok.json: not an SQLite database"), std::string::npos) << r.err;
  r = cli("stats /nonexistent.db");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/nonexistent.db: cannot open"), std::string::npos) << r.err;
  r = cli("export /nonexistent.db --format pdf -o x");
  EXPECT_EQ(r.code, 2);
}

// scratch() of a process whose pid an earlier process used starts empty (ctest runs one test
// per process, so scratch() is first called in the child here).
TEST(Cli, ScratchDirectoryStartsEmpty) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const auto stale = std::filesystem::temp_directory_path() / ("es_cli_" + std::to_string(getpid()));
    std::filesystem::create_directories(stale);
    std::ofstream(stale / "h.db") << "left by an earlier process";
    _exit(std::filesystem::exists(scratch() / "h.db") ? 1 : 0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(Cli, RunWorkloadFileHumanSummary) {
  Result r = cli("run " + kData + "/specs/small_ok.json --sharding column_wise -o " + (scratch() / "h.db").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step time    mean"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("column_wise"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("loss         first"), std::string::npos) << r.out;
}

TEST(Cli, BadInputExitsTwoWithAClearMessage) {
  Result r = cli("run " + kData + "/specs/bad_dim.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad_dim.json: /tables/1/embedding_dim: must be > 0, got 0"), std::string::npos) << r.err;
  r = cli("run /nonexistent/w.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/nonexistent/w.json: cannot open"), std::string::npos) << r.err;
  r = cli("run --preset tiny --sharding diagonal");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--sharding"), std::string::npos) << r.err;
  r = cli("run --preset nope");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("criteo_kaggle"), std::string::npos) << r.err;  // lists the known presets
  r = cli("run --preset tiny --steps 0");
  EXPECT_EQ(r.code, 2);
  // a word where a number goes is named as such, not "not in range"
  r = cli("plan --preset tiny --steps abc");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--steps: Failed parsing abc"), std::string::npos) << r.err;
  r = cli("plan --preset tiny --network-bandwidth fast");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--network-bandwidth: not a number of bytes/s (got 'fast'); give e.g. 1e9"), std::string::npos)
      << r.err;
  r = cli("frobnicate");
  EXPECT_EQ(r.code, 2);
  r = cli("run " + kData + "/specs/too_small.json");
  EXPECT_EQ(r.code, 2);
  // the pooled embeddings and their gradients of its two features (4 samples x 4 or 8 floats, a
  // 512 B block each) already exceed the 256 B device, under any plan (tester46 F10): one line,
  // not a line a rank
  EXPECT_NE(r.err.find("/devices/memory_bytes: what every rank holds under any sharding plan or storage option does not "
                       "fit a device: the dense part 0 B (parameters and gradients 0 B, activations 0 B) and the pooled "
                       "embeddings with their gradients 2.0 KiB need 2.0 KiB > 256 B; no sharding type or storage option "
                       "can fit it: not one sample a rank fits (2.0 KiB for one): give the devices more memory"),
            std::string::npos)
      << r.err;
}

TEST(Cli, PlanShowsShardsAndMemory) {
  Result r = cli("plan --preset criteo_kaggle --devices 4 --sharding table_row_wise --local-world-size 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tables"].size(), 26u);
  EXPECT_EQ(j["local_world_size"], 2);
  EXPECT_EQ(j["memory"].size(), 4u);
  int64_t weights = 0;
  for (const auto& m : j["memory"]) weights += m["weights_bytes"].get<int64_t>();
  // every row of the 26 tables, once, each shard's buffer rounded up to the allocator's 512 B
  int64_t rows = 0, rounded = 0;
  for (const auto& t : j["tables"])
    for (const auto& sh : t["shards"]) {
      const int64_t b = sh["num_rows"].get<int64_t>() * sh["num_cols"].get<int64_t>() * 4;
      rows += sh["num_rows"].get<int64_t>();
      rounded += (b + 511) / 512 * 512;
    }
  EXPECT_EQ(rows, 33762577);
  EXPECT_EQ(weights, rounded);
  EXPECT_LT(weights - int64_t{33762577} * 16 * 4, 52 * 512);  // 26 tables x 2 shards
  r = cli("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("run"), std::string::npos);
}

// Starts `embedscope run --preset tiny --steps 100000 -o db` and returns once the session has
// at least `steps` committed steps.
pid_t start_long_run(const std::string& db, int steps, const std::string& err = "/dev/null") {
  const pid_t child = fork();
  if (child == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
    execl(EMBEDSCOPE_CLI, EMBEDSCOPE_CLI, "run", "--preset", "tiny", "--steps", "100000", "-o", db.c_str(), nullptr);
    _exit(127);
  }
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Result probe = cli("stats --json " + db);
    if (probe.code == 0 && nlohmann::json::parse(probe.out)["steps"].get<int>() >= steps) break;
  }
  return child;
}

TEST(Cli, RunKilledHalfwayLeavesASessionThatSaysCrashed) {
  const std::string db = (scratch() / "killed.db").string();
  const pid_t child = start_long_run(db, 5);
  ASSERT_GT(child, 0);
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  Result r = cli("stats --json " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ended"], "crashed");
  EXPECT_GE(j["steps"].get<int>(), 5);
  EXPECT_GT(j["ranks"][0]["ids_looked_up"].get<int64_t>(), 0);
}

TEST(Cli, SigintCancelsAndKeepsTheSession) {
  const std::string db = (scratch() / "cancelled.db").string();
  const std::string err = (scratch() / "cancelled_err.txt").string();
  const pid_t child = start_long_run(db, 3, err);
  ASSERT_GT(child, 0);
  kill(child, SIGINT);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  Result r = cli("stats --json " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ended"], "cancelled");
  EXPECT_GE(j["steps"].get<int>(), 3);
  std::ifstream in(err);  // the Ctrl-C was heard at once, not only when the step ended
  const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(said.find("cancelling after the current step (Ctrl-C again stops at once)"), std::string::npos) << said;
}

// A run cancelled in its warmup has no measured step: stats says so, and that there is nothing
// to analyse, instead of stopping after the workload line.
TEST(Cli, StatsWithoutMeasuredStepsSaysSo) {
  const std::string db = (scratch() / "warmup_only.db").string();
  std::filesystem::remove(db);
  {
    embedscope::sessions::SessionWriter w(db);
    w.set_metadata("workload_name", "tiny");
    w.set_metadata("world_size", "1");
    w.add_step({-1, 0, 0, 1000, 0.5, 0, 0});  // a warmup step only
    w.close("cancelled");
  }
  const Result r = cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  // ux41 #9: no "0 measured steps", no "measured" beside how it ended
  EXPECT_NE(r.out.find(", no measured step completed (steps of 0 samples)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("0 measured steps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(cancelled before its first measured step)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no measured steps: nothing to analyse (cancelled before its first measured step)"),
            std::string::npos) << r.out;
}

// --pipeline, --qcomms and the network flags reach the workload, the plan, the run summary and
// the session; bf16 comms move half the bytes of the output dist (collective records).
TEST(Cli, PipelineQcommsAndNetworkFlags) {
  Result r = cli("plan --preset tiny --pipeline semi_sync --qcomms bf16 --network-bandwidth 1e9 --network-latency 5000 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["pipeline"], "semi_sync");
  EXPECT_EQ(j["qcomms"]["forward_precision"], "bf16");
  EXPECT_EQ(j["qcomms"]["backward_precision"], "bf16");
  const auto link = nlohmann::json::parse(R"({"bandwidth_bytes_per_s": 1000000000, "latency_ns": 5000})");
  EXPECT_EQ(j["network"]["intra_node"], link);
  EXPECT_EQ(j["network"]["inter_node"], link);
  r = cli("plan --preset tiny --network-bandwidth 1e9");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("network      intra_node 1 GB/s, 0 ns latency; inter_node 1 GB/s, 0 ns latency"),
            std::string::npos) << r.out;
  r = cli("run --preset tiny --pipeline async");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--pipeline: must be one of base, sparse_dist, semi_sync, got \"async\""), std::string::npos) << r.err;

  std::map<std::string, int64_t> output_bytes;  // precision -> output dist bytes sent, all ranks and steps
  for (const std::string p : {"fp32", "bf16"}) {
    const std::string db = (scratch() / ("q_" + p + ".db")).string();
    r = cli("run --preset tiny --devices 2 --sharding table_wise --steps 2 --pipeline sparse_dist --qcomms " + p +
            " --network-latency 1000 --force-overwrite --json -o " + db);
    ASSERT_EQ(r.code, 0) << r.err;
    j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["pipeline"], "sparse_dist");
    const double err = j["qcomms_error"]["forward_max_abs_error"].get<double>();
    if (p == "fp32") {
      EXPECT_EQ(err, 0.0);
    } else {
      EXPECT_GT(err, 0.0);
    }
    const embedscope::sessions::SessionReader s(db);
    EXPECT_EQ(s.meta("pipeline"), "sparse_dist");
    EXPECT_EQ(s.meta("qcomms_forward_precision"), p);
    EXPECT_EQ(nlohmann::json::parse(s.meta("network_json")),
              nlohmann::json::parse(R"({"intra_node": {"latency_ns": 1000}, "inter_node": {"latency_ns": 1000}})"));
    const Result stats = cli("stats " + db);  // stats says how the session was run
    EXPECT_NE(stats.out.find("pipeline     sparse_dist; qcomms forward " + p + " backward " + p +
                             "\nnetwork      intra_node unlimited bandwidth, 1.00 us latency; inter_node unlimited "
                             "bandwidth, 1.00 us latency\n"),
              std::string::npos) << stats.out;
    const auto sj = nlohmann::json::parse(cli("stats --json " + db).out);
    EXPECT_EQ(sj["pipeline"], "sparse_dist");
    EXPECT_EQ(sj["qcomms"]["backward_precision"], p);
    EXPECT_EQ(sj["network"]["inter_node"]["latency_ns"], 1000);
    for (const auto& c : s.collectives())
      if (c.name == "output_dist/all_to_all") {
        EXPECT_EQ(c.dtype, p == "bf16" ? "bfloat16" : "float32");
        output_bytes[p] += c.bytes_sent;
      }
  }
  EXPECT_GT(output_bytes["fp32"], 0);
  EXPECT_EQ(output_bytes["bf16"] * 2, output_bytes["fp32"]);
}

// `embedscope program`: the issue's example (tiny, 2 ranks, table_wise, base, rank 0): the input
// dist is 3 all-to-alls before any lookup, the DDP bucket follows the backward pass it is
// launched from.
TEST(Cli, ProgramPrintsTheStepOfOneRank) {
  Result r = cli("program --preset tiny --devices 2 --sharding table_wise --rank 0 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["rank"], 0);
  EXPECT_EQ(j["pipeline"], "base");
  std::vector<std::string> names;
  for (const auto& op : j["ops"]) names.push_back(op["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"input", "bucketize", "input_dist/splits", "input_dist/lengths",
                                             "input_dist/ids", "kjt_permute", "lookup", "output_dist/all_to_all",
                                             "dense_forward_backward", "dense_all_reduce", "grad_dist/all_to_all",
                                             "backward_fused_optimizer", "dense_optimizer"}));
  EXPECT_EQ(j["ops"][9]["launched_by"], 8);
  EXPECT_EQ(j["ops"][4]["collectives"][1]["kind"], "all_to_all");
  EXPECT_EQ(j["ops"][4]["collectives"][1]["send_elements"], nlohmann::json::parse("[16, 72]"));
  Result text = cli("program --preset tiny --devices 2 --pipeline semi_sync --rank 1");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("schedule: finish_output_dist(+0) lookup(+1, async) start_batch(+2, async) train(+0)"),
            std::string::npos)
      << text.out;
  Result bad = cli("program --preset tiny --devices 2 --rank 2");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--rank: 2 is outside [0, 2)"), std::string::npos) << bad.err;
  EXPECT_FALSE(j.contains("note")) << "no live rebalancing, no note";
  // a workload that rebalances live: the program is the starting plan's, and says so (tester35 D3)
  const std::string wl = (scratch() / "rebalancing.json").string();
  std::ofstream(wl) << R"({"name": "reb", "batch_size": 8, "steps": 4, "devices": {"count": 2},
    "tables": [{"name": "t", "num_embeddings": 100, "embedding_dim": 4, "feature_names": ["f"]}],
    "features": [{"name": "f", "pooling_factor": 2}],
    "dense": {"num_dense_features": 2, "bottom_mlp": [4], "interaction": "cat", "top_mlp": [4, 1]},
    "rebalance": {"every": 2}})";
  Result reb = cli("program " + wl + " --rank 0");
  ASSERT_EQ(reb.code, 0) << reb.err;
  EXPECT_NE(reb.out.find("note: the workload rebalances live (rebalance): this is the program of the plan the run "
                         "starts with"),
            std::string::npos)
      << reb.out;
  reb = cli("program " + wl + " --rank 0 --json");
  ASSERT_EQ(reb.code, 0) << reb.err;
  EXPECT_TRUE(nlohmann::json::parse(reb.out).contains("note"));
}

// A negative --iteration is bad input like one past the last step (it printed the default
// iteration instead, exit 0).
TEST(Cli, ProgramRefusesANegativeIteration) {
  Result r = cli("program --preset tiny --devices 2 --iteration -5");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("--iteration: -5 is outside [0, 30)"), std::string::npos) << r.err;
  Result last = cli("program --preset tiny --devices 2 --pipeline sparse_dist --iteration 29");
  EXPECT_EQ(last.code, 0) << last.err;
  EXPECT_NE(last.out.find("iteration 29 (step 29)"), std::string::npos) << last.out;
}

// docs55 D15: --help pointed to no documentation; its footer names the docs/ files, and each
// exists in the source tree.
TEST(Cli, HelpNamesTheDocumentationThatExists) {
  Result r = cli("--help");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Documentation: README.md and docs/ in the source tree"), std::string::npos) << r.out;
  std::set<std::string> named;  // docs/NAME.md
  for (size_t at = r.out.find("docs/"); at != std::string::npos; at = r.out.find("docs/", at + 1)) {
    size_t end = at + 5;
    while (end < r.out.size() && (std::islower(static_cast<unsigned char>(r.out[end])) || r.out[end] == '-')) ++end;
    if (r.out.compare(end, 3, ".md") == 0) named.insert(r.out.substr(at, end + 3 - at));
  }
  EXPECT_EQ(named.size(), 4u) << r.out;
  for (const auto& f : named)
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(EMBEDSCOPE_SOURCE_DIR) / f)) << f;
}

// tester55 F1: a host_cached table's cache starts empty, so `program --iteration 0` shows the cold
// start's host-link bytes (as --simulate runs them), not the steady state's; the default
// iteration is the first steady one, and a note says which. Table u: 10,000 x 16 fp32 (64 B a
// row), 1,000 cache slots, 2 ranks x 64 samples x 4 uniform ids = 512 ids a batch, 499.2
// distinct: the cold fetch 31.2 KiB (every distinct row missed); steady 28.1 KiB (90 % of them).
TEST(Cli, ProgramOfAHostCachedTableStartsCold) {
  const std::string wl = std::string(EMBEDSCOPE_TEST_DATA) + "/specs/host_cached_cold.json";
  Result cold = cli("program " + wl + " --iteration 0");
  ASSERT_EQ(cold.code, 0) << cold.err;
  EXPECT_NE(cold.out.find("host link: 31.2 KiB host -> device"), std::string::npos) << cold.out;
  EXPECT_NE(cold.out.find("note: the caches of the host_cached tables start empty: iterations 0-4 are built with the "
                          "cache model's cold-start expectation"),
            std::string::npos)
      << cold.out;
  Result steady = cli("program " + wl + " --json");
  ASSERT_EQ(steady.code, 0) << steady.err;
  const auto j = nlohmann::json::parse(steady.out);
  EXPECT_EQ(j["iteration"], 5);
  EXPECT_EQ(j["cold_start"], false);
  Result text = cli("program " + wl);
  EXPECT_NE(text.out.find("host link: 28.1 KiB host -> device"), std::string::npos) << text.out;
}

// With --plan, --sharding and --local-world-size were silently ignored (the plan ran, and the
// session's workload recorded the flag's sharding): they are refused, before any session is made.
TEST(Cli, PlanFileRefusesShardingFlags) {
  Result plan = cli("plan --preset tiny --devices 2 --json");
  ASSERT_EQ(plan.code, 0) << plan.err;
  const std::string file = (scratch() / "tiny_plan.json").string(), db = (scratch() / "refused.db").string();
  std::ofstream(file) << plan.out;
  Result r = cli("run --preset tiny --devices 2 --sharding row_wise --plan " + file + " -o " + db);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("--sharding: cannot be combined with --plan " + file), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(db));
  Result p = cli("program --preset tiny --devices 2 --local-world-size 1 --plan " + file);
  EXPECT_EQ(p.code, 2) << p.out;
  EXPECT_NE(p.err.find("--local-world-size: cannot be combined with --plan"), std::string::npos) << p.err;
  Result ok = cli("program --preset tiny --devices 2 --plan " + file);
  EXPECT_EQ(ok.code, 0) << ok.err;
}

// `run --plan`: a hand-edited plan of criteo_kaggle (a table moved from rank 0 to rank 1) runs as
// written; the session stores it as rows and the load counters follow it. The preset's 26 tables
// with their rows capped at 20,000 (workload file criteo_capped.json): every check below counts
// ids, shards and rows x cols, none depends on the rows; the full tables (33.8 M rows, 2.2 GB
// resident) made this test 4.9 s of CPU in Release and 12.8 s under ASan + UBSan (capped: 1.3 and
// 6.1 s; docs/ci-time.md).
TEST(Cli, RunsAHandEditedPlan) {
  embedscope::engine::WorkloadSpec capped = embedscope::engine::load_preset("criteo_kaggle");
  for (auto& t : capped.tables) t.num_embeddings = std::min<int64_t>(t.num_embeddings, 20000);
  const std::string workload = (scratch() / "criteo_capped.json").string();
  std::ofstream(workload) << embedscope::engine::to_json(capped).dump(2);
  Result plan = cli("plan " + workload + " --json");
  ASSERT_EQ(plan.code, 0) << plan.err;
  auto j = nlohmann::json::parse(plan.out);
  int moved = -1;
  for (size_t t = 0; t < j["tables"].size() && moved < 0; ++t)
    if (j["tables"][t]["shards"][0]["rank"] == 0) moved = static_cast<int>(t);
  ASSERT_GE(moved, 0);
  const std::string name = j["tables"][moved]["name"];
  j["tables"][moved]["shards"][0]["rank"] = 1;
  const std::string file = (scratch() / "moved.json").string(), db = (scratch() / "moved.db").string();
  std::ofstream(file) << j.dump(2);
  Result r = cli("run " + workload + " --steps 2 --warmup-steps 0 --plan " + file + " --json -o " + db +
                 " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto run = nlohmann::json::parse(r.out);
  embedscope::sessions::SessionReader s(db);
  int64_t rows = 0;
  for (const auto& sh : s.shards())
    if (sh.table_name == name) {
      EXPECT_EQ(sh.rank, 1);
      EXPECT_EQ(sh.sharding_type, "table_wise");
      rows = sh.num_rows;
      EXPECT_EQ(sh.planned_bytes, sh.num_rows * sh.num_cols * 4);  // sgd: no optimizer state
    }
  EXPECT_GT(rows, 0);
  std::map<int, int64_t> ids;  // per rank, from the load counters
  int64_t moved_ids = 0;
  for (const auto& c : s.load()) {
    ids[c.rank] += c.ids;
    if (c.table == moved) {
      EXPECT_EQ(c.rank, 1);
      moved_ids += c.ids;
    }
  }
  // 2 steps x 4 ranks x 512 samples x the feature's ids per bag (1 for criteo's categorical features)
  EXPECT_EQ(moved_ids, 2 * 4 * 512);
  for (const auto& rk : run["ranks"]) EXPECT_EQ(rk["ids_looked_up"].get<int64_t>(), ids[rk["rank"].get<int>()]);
  Result bad = cli("run --preset criteo_kaggle --plan " + kData + "/specs/does_not_exist.json -o " + db);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("does_not_exist.json: cannot open"), std::string::npos) << bad.err;
}

// --network-bandwidth nan passes CLI::Number and every range (no comparison with nan holds): it
// is refused naming the flag, not as the -9223372036854775808 it rounded to (issue 20, defect 7).
TEST(Cli, NetworkBandwidthNanNamesTheFlag) {
  for (const char* v : {"nan", "NaN", "-nan"}) {
    Result r = cli(std::string("plan --preset tiny --network-bandwidth ") + v);
    EXPECT_EQ(r.code, 2) << v;
    EXPECT_NE(r.err.find(std::string("--network-bandwidth: not a number of bytes/s (got '") + v + "')"), std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("-9223372036854775808"), std::string::npos) << r.err;
  }
  EXPECT_EQ(cli("plan --preset tiny --network-bandwidth 1e9").code, 0);
}

// plan --json of a plan that does not fit prints one JSON document: the plan and the memory of
// every device, with the error inside (before: the plan, then a second document with the error).
TEST(Cli, PlanJsonThatDoesNotFitIsOneDocument) {
  Result r = cli("plan --preset tiny --batch-size 65536 --json");
  EXPECT_EQ(r.code, 2);
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(r.out)) << r.out;  // a second document would not parse
  EXPECT_EQ(j["fits"], false);
  EXPECT_EQ(j["ended"], "bad_input");
  // 65,536 samples of tiny's dense part and pooled embeddings alone exceed its 64 MiB (tester46 F10)
  EXPECT_NE(j["error"].get<std::string>().find("preset tiny: /devices/memory_bytes: what every rank holds under any "
                                               "sharding plan or storage option does not fit a device"),
            std::string::npos)
      << j["error"];
  ASSERT_EQ(j["memory"].size(), 2u);
  EXPECT_GT(j["memory"][0]["total_bytes"].get<int64_t>(), j["memory"][0]["capacity_bytes"].get<int64_t>());
  EXPECT_NE(r.err.find("error: preset tiny: /devices/memory_bytes"), std::string::npos) << r.err;
  r = cli("plan --preset tiny --json");
  EXPECT_EQ(r.code, 0);
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["fits"], true);
  EXPECT_FALSE(j.contains("error"));
  // what plan --json prints runs as a plan file (its fits key ignored like memory)
  const std::string plan_file = (scratch() / "fits_plan.json").string();
  std::ofstream(plan_file) << r.out;
  r = cli("run --preset tiny --steps 1 --plan " + plan_file + " --force-overwrite -o " + (scratch() / "fits.db").string());
  EXPECT_EQ(r.code, 0) << r.err;
}

// Reduced-precision and hashed tables (issue 16): `run --json` reports each table's stored bytes
// per rank, and `stats` shows the same from the session.
TEST(Cli, RunAndStatsReportTableStorage) {
  nlohmann::json w = nlohmann::json::parse(std::ifstream(kData + "/../../resources/workloads/tiny.json"));
  w["tables"][2]["data_type"] = "fp16";   // t_b: 100 x 6
  w["tables"][3]["data_type"] = "int8";   // t_c: 1000 ids x 12 on 100 rows
  w["tables"][3]["hash_size"] = 100;
  const auto path = scratch() / "compressed.json";
  std::ofstream(path) << w.dump();
  const std::string db = (scratch() / "compressed.db").string();
  Result r = cli("run " + path.string() + " --steps 10 --json -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["tables"].size(), 4u);
  auto total = [](const nlohmann::json& a) {
    int64_t s = 0;
    for (const auto& v : a) s += v.get<int64_t>();
    return s;
  };
  EXPECT_EQ(j["tables"][2]["data_type"], "fp16");
  EXPECT_EQ(total(j["tables"][2]["weight_bytes"]), 100 * 6 * 2);
  EXPECT_EQ(j["tables"][3]["data_type"], "int8");
  EXPECT_EQ(total(j["tables"][3]["weight_bytes"]), 100 * (12 + 8));
  EXPECT_EQ(total(j["tables"][1]["weight_bytes"]), 10 * 8 * 4);  // t_a stays fp32
  EXPECT_EQ(j["tables"][3]["hash_size"], 100);
  EXPECT_GT(j["tables"][3]["hash_collisions"].get<int64_t>(), 0);
  EXPECT_EQ(j["tables"][2]["hash_collisions"], 0);
  EXPECT_GT(j["tables"][3]["relative_error"].get<double>(), 0.0);
  EXPECT_LE(j["tables"][3]["relative_error"].get<double>(), 1.0 / 255);
  EXPECT_EQ(j["tables"][1]["relative_error"], 0.0);
  // per rank: the session keeps what run --json says (each rank's own batches), and they sum
  // to the table's total
  const auto per_rank = j["tables"][3]["hash_collisions_per_rank"];
  ASSERT_EQ(per_rank.size(), j["ranks"].size());
  EXPECT_EQ(total(per_rank), j["tables"][3]["hash_collisions"].get<int64_t>());
  for (size_t r = 0; r < per_rank.size(); ++r) EXPECT_EQ(per_rank[r], j["ranks"][r]["hash_collisions"]) << r;
  Result s = cli("stats " + db);
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_NE(s.out.find("collisions/step"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("by the rank whose batches collided:  rank 0 "), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("int8"), std::string::npos) << s.out;
  Result sj = cli("stats --json " + db);
  ASSERT_EQ(sj.code, 0) << sj.err;
  const auto sjj = nlohmann::json::parse(sj.out);
  ASSERT_EQ(sjj["ranks"].size(), j["ranks"].size());
  for (size_t r = 0; r < per_rank.size(); ++r) EXPECT_EQ(sjj["ranks"][r]["hash_collisions"], per_rank[r]) << r;
  const auto st = nlohmann::json::parse(sj.out);
  EXPECT_EQ(st["tables"], j["tables"]);
}

// `plan` prints each table's stored rows and bytes as the run will allocate them (issue 16):
// the same workload as above, planned: t_b fp16 100 x 6 (12 B a row), t_c int8 on 100 hashed
// rows of 12 columns (20 B a row); the JSON's table_storage is read back by run --plan.
TEST(Cli, PlanShowsEachTablesStoredBytes) {
  nlohmann::json w = nlohmann::json::parse(std::ifstream(kData + "/../../resources/workloads/tiny.json"));
  w["tables"][2]["data_type"] = "fp16";
  w["tables"][3]["data_type"] = "int8";
  w["tables"][3]["hash_size"] = 100;
  w["optimizer"] = {{"type", "rowwise_adagrad"}, {"learning_rate", 0.1}};
  const auto path = scratch() / "compressed_plan.json";
  std::ofstream(path) << w.dump();
  Result r = cli("plan " + path.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["table_storage"].size(), 4u);
  const auto& tb = j["table_storage"][2];
  EXPECT_EQ(tb["table"], "t_b");
  EXPECT_EQ(tb["data_type"], "fp16");
  EXPECT_EQ(tb["rows"], 100);
  EXPECT_EQ(tb["row_bytes"], 12);
  EXPECT_EQ(tb["weight_bytes"], 1200);
  EXPECT_EQ(tb["optimizer_state_bytes"], 400);  // rowwise_adagrad: one fp32 a row
  const auto& tc = j["table_storage"][3];
  EXPECT_EQ(tc["rows"], 100);
  EXPECT_EQ(tc["row_bytes"], 20);
  EXPECT_EQ(tc["weight_bytes"], 2000);
  EXPECT_EQ(j["table_storage"][1]["weight_bytes"], 10 * 8 * 4);
  Result t = cli("plan " + path.string());
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("row bytes"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("int8"), std::string::npos) << t.out;
  const std::string plan_file = (scratch() / "compressed_plan_out.json").string();
  std::ofstream(plan_file) << r.out;
  const std::string db = (scratch() / "compressed_plan.db").string();
  r = cli("run " + path.string() + " --steps 1 --plan " + plan_file + " --force-overwrite -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  // the session's shards carry the same stored bytes: t_c 100 x 20 + 100 x 4 (adagrad's row state)
  embedscope::sessions::SessionReader s(db);
  int64_t t_c = 0;
  for (const auto& sh : s.shards())
    if (sh.table_name == "t_c") t_c += sh.planned_bytes;
  EXPECT_EQ(t_c, 100 * 20 + 100 * 4);
}

// int4 tables (issue 16): an odd embedding_dim is bad input (exit 2, the pointer named); an even
// one runs, and `run --json` / `stats` say its rows are rounded stochastically (the int4 default).
TEST(Cli, Int4TablesRunAndOddDimsAreBadInput) {
  nlohmann::json w = nlohmann::json::parse(std::ifstream(kData + "/../../resources/workloads/tiny.json"));
  w["tables"][2]["data_type"] = "int4";  // t_b: 100 x 6
  w["tables"][1]["data_type"] = "fp16";  // t_a: 10 x 8, rounded to nearest
  const auto path = scratch() / "int4.json";
  std::ofstream(path) << w.dump();
  const std::string db = (scratch() / "int4.db").string();
  Result r = cli("run " + path.string() + " --steps 3 --json -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tables"][2]["data_type"], "int4");
  EXPECT_EQ(j["tables"][2]["stochastic_rounding"], true);
  EXPECT_EQ(j["tables"][1]["stochastic_rounding"], false);
  int64_t bytes = 0;
  for (const auto& b : j["tables"][2]["weight_bytes"]) bytes += b.get<int64_t>();
  EXPECT_EQ(bytes, 100 * (3 + 4));  // 6 codes in 3 bytes + fp16 scale and bias
  Result s = cli("stats " + db);
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_NE(s.out.find("stochastic"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("nearest"), std::string::npos) << s.out;

  w["tables"][2]["embedding_dim"] = 7;
  std::ofstream(path) << w.dump();
  r = cli("run " + path.string() + " --steps 1 -o " + db + " --force-overwrite");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/tables/2/embedding_dim: 7 is odd with data_type int4"), std::string::npos) << r.err;
}
