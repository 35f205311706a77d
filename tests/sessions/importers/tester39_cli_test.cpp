// tester39: what the CLI prints for long durations (import's time range, stats' step times),
// throughputs below one a second, and the GPU an imported Kineto trace ran on (deviceProperties).
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "import_test_support.h"
#include "support/cli_run.h"
#include "support/step_sessions.h"

using namespace embedscope::sessions::testing;

namespace {
embedscope::test_support::CliResult t39_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, import_scratch());
}

// A Kineto trace of `rank` (world size 2) with one ProfilerStep#1 [ts, ts + 100) us holding an
// aten::mm and, with `device` >= 0, a kernel on stream 7 of that device; deviceProperties lists
// devices 0 and 1 (A100-PG509-200, 42297524224 bytes) when `with_devices`.
std::string t39_trace(const std::string& name, int rank, int64_t ts, int device, bool with_devices) {
  nlohmann::json ev = nlohmann::json::array();
  ev.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#1"}, {"pid", 1}, {"tid", 1}, {"ts", ts}, {"dur", 100}});
  ev.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "aten::mm"}, {"pid", 1}, {"tid", 1}, {"ts", ts + 1}, {"dur", 20}});
  if (device >= 0)
    ev.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", "gemm"}, {"pid", device}, {"tid", 7}, {"ts", ts + 30}, {"dur", 10},
                  {"args", {{"device", device}, {"stream", 7}, {"correlation", 5}}}});
  nlohmann::json j{{"schemaVersion", 1},
                   {"distributedInfo", {{"backend", "nccl"}, {"rank", rank}, {"world_size", 2}}},
                   {"traceEvents", ev}};
  if (with_devices)
    j["deviceProperties"] = nlohmann::json::array(
        {{{"id", 0}, {"name", "NVIDIA A100-PG509-200"}, {"totalGlobalMem", 42297524224}},
         {{"id", 1}, {"name", "NVIDIA A100-PG509-200"}, {"totalGlobalMem", 42297524224}}});
  const std::string p = (import_scratch() / name).string();
  std::ofstream(p) << j.dump();
  return p;
}
}  // namespace

// F9: a 51.6-day range read "0.01 ms .. 4458677101.16 ms"; from 10 minutes on the CLI uses the
// workbench's min / h / d, below it ms as before. The JSON keeps ns.
TEST(Tester39Cli, ImportSaysALongTimeRangeInDays) {
  // rank 1 starts 4,458,677,101,000 us (51.605 d) after rank 0
  const auto a = t39_trace("t39_long_a.json", 0, 10, -1, false);
  const auto b = t39_trace("t39_long_b.json", 1, 4'458'677'101'010, -1, false);
  const std::string db = scratch_db("t39_long.db");
  std::filesystem::remove(db);
  // two ranks 51.6 days apart do not overlap: refused since tester42 F12 unless --allow-disjoint
  // (DisjointImport.*); allowed here, the range is what this test is about
  auto r = t39_cli("import " + a + " " + b + " --allow-disjoint -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("time range   0.00 ms .. 51.61 d (51.61 d; trace ts 10 us is 0)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("4458677101"), std::string::npos) << r.out;
  r = t39_cli("import " + a + " " + b + " --allow-disjoint -o " + db + " --force-overwrite --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  // ns, a number as before: rank 1's aten::mm ends at 4,458,677,101,031 us, 10 us after the origin
  EXPECT_EQ(j["end_ns"], 4'458'677'101'021'000) << r.out;
}

// F9 + throughput: 13.05-hour steps read "13.05 h", not "46974990.65 ms", and 8 samples a step
// "0.000170 samples/s", not "0 samples/s".
TEST(Tester39Cli, StatsOfHourLongStepsSayHoursAndASmallThroughput) {
  const int64_t step = 46'974'990'650'000;  // 13.05 h
  const std::string db = embedscope::test_support::step_session("t39_hours", 0, {step, step});
  auto r = t39_cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step time    mean 13.05 h  p50 13.05 h  p99 13.05 h"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("throughput   0.000170 samples/s"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("46974990"), std::string::npos) << r.out;
  // short figures stay in ms: (0.50 + 0.16) / 2 ms of exposed all-to-all per rank over 2 steps;
  // the ranks' idle time is hours
  EXPECT_NE(r.out.find("exposed communication 0.33 ms per rank (0.17 ms per step)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0.50 ms     26.10 h"), std::string::npos) << r.out;
  r = t39_cli("stats " + db + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["step_time_ns"]["mean"].get<double>(), static_cast<double>(step));
  std::filesystem::remove(db);
}

// F5/F11 enhancement: a trace's deviceProperties name the GPU of the rank's streams, with its
// memory; `gpus` was [] for them.
TEST(Tester39Cli, AnImportedTraceNamesTheGpuOfItsStreams) {
  const auto t = t39_trace("t39_gpu.json", 1, 1000, 1, true);  // rank 1's kernels on device 1
  const std::string db = scratch_db("t39_gpu.db");
  std::filesystem::remove(db);
  auto r = t39_cli("import " + t + " -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  r = t39_cli("stats " + db + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["gpus"].size(), 1u) << j["gpus"];
  EXPECT_EQ(j["gpus"][0]["device"], "NVIDIA A100-PG509-200 (cuda:1)");
  EXPECT_EQ(j["gpus"][0]["ranks"], nlohmann::json::array({1}));
  EXPECT_EQ(j["gpus"][0]["memory_capacity_bytes"], 42297524224);
  EXPECT_EQ(j["gpus_text"], "on 1 GPU (NVIDIA A100-PG509-200 (cuda:1))");
  r = t39_cli("stats " + db);
  EXPECT_NE(r.out.find("trace        world size 2, 1 profiler steps; ranks on 1 GPU (NVIDIA A100-PG509-200 (cuda:1)); rank 0 without "
                       "a trace"),
            std::string::npos) << r.out;
  // no stream lanes: the first device listed, marked imported, and no GPU claimed
  const auto host_only = t39_trace("t39_host.json", 0, 1000, -1, true);
  std::filesystem::remove(scratch_db("t39_host.db"));
  ASSERT_EQ(t39_cli("import " + host_only + " -o " + scratch_db("t39_host.db")).code, 0);
  r = t39_cli("stats " + scratch_db("t39_host.db") + " --json");
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gpus"], nlohmann::json::array());
  EXPECT_TRUE(j["gpus_text"].is_null());
}

// Two traces on the same device id: NCCL refuses two ranks of a communicator on one GPU, so they
// ran on two hosts; not "2 ranks sharing 1 GPU".
TEST(Tester39Cli, TwoTracesOnOneDeviceIdAreTwoGpusOfTwoHosts) {
  const auto a = t39_trace("t39_two_a.json", 0, 1000, 0, true);
  const auto b = t39_trace("t39_two_b.json", 1, 1010, 0, true);
  const std::string db = scratch_db("t39_two.db");
  std::filesystem::remove(db);
  ASSERT_EQ(t39_cli("import " + a + " " + b + " -o " + db).code, 0);
  const auto r = t39_cli("stats " + db + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["gpus"].size(), 2u) << j["gpus"];
  EXPECT_EQ(j["gpus"][0]["device"], "NVIDIA A100-PG509-200 (cuda:0 of rank 0's host)");
  EXPECT_EQ(j["gpus"][1]["device"], "NVIDIA A100-PG509-200 (cuda:0 of rank 1's host)");
  EXPECT_EQ(j["gpus_text"],
            "on 2 GPUs (NVIDIA A100-PG509-200 (cuda:0 of rank 0's host), NVIDIA A100-PG509-200 (cuda:0 of rank 1's host))");
}

// The real trace of ../shared/data (rank 0 of a DDP job on A100-PG509-200s, its kernels on
// device 0).
TEST(Tester39Cli, NcclDataTraceNamesItsA100) {
  const std::string trace = std::string(EMBEDSCOPE_SHARED_DATA) + "/traces/nccl_data.json.gz";
  if (!std::filesystem::exists(trace)) GTEST_SKIP() << trace << " is absent (shared test data)";
  const std::string db = scratch_db("t39_nccl.db");
  std::filesystem::remove(db);
  ASSERT_EQ(t39_cli("import " + trace + " -o " + db).code, 0);
  const auto r = t39_cli("stats " + db + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["gpus"].size(), 1u) << j["gpus"];
  EXPECT_EQ(j["gpus"][0]["device"], "NVIDIA A100-PG509-200 (cuda:0)");
  EXPECT_EQ(j["gpus"][0]["ranks"], nlohmann::json::array({0}));
  EXPECT_EQ(j["gpus"][0]["memory_capacity_bytes"], 42297524224);
  std::filesystem::remove(db);
}
