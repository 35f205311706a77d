// `embedscope compare` (ux41 #2): the workbench's Compare figures on the command line, the same
// numbers as sessions::compare_value (the computation CompareModel shows), files that share a
// name told apart, and bad input named with exit 2. `stats` of a crashed run (ux41 #9).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/store/session.h"
#include "import_test_support.h"
#include "support/cli_run.h"
#include "support/gpu_run_session.h"

namespace {
namespace ss = embedscope::sessions;

embedscope::test_support::CliResult ux41_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, ss::testing::import_scratch());
}

// run1/gpu.db (the default shape) and run3/gpu.db (host waits 200 and 100 us, gemm 600 us)
struct Ux41Pair {
  std::string a, b;
  Ux41Pair() {
    const auto root = ss::testing::import_scratch() / "ux41_compare";
    std::filesystem::create_directories(root / "run1");
    std::filesystem::create_directories(root / "run3");
    a = embedscope::test_support::gpu_run_session((root / "run1" / "gpu.db").string());
    b = embedscope::test_support::gpu_run_session((root / "run3" / "gpu.db").string(), {800, 600, 600});
  }
};
}  // namespace

TEST(Ux41CompareCli, TextSaysBothExposedCommunicationsAndTheDifferences) {
  const Ux41Pair p;
  const auto r = ux41_cli("compare " + p.a + " " + p.b);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("A (baseline)  run1/gpu.db: hand, complete on 2 ranks sharing 1 GPU (NVIDIA H200 (cuda:0)), cuda\n"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("B  run3/gpu.db: hand, complete on 2 ranks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("A: GPU busy     30.0% of the measured steps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("B: host         the ranks' threads waited in collectives 0.15 ms per rank"), std::string::npos)
      << r.out;
  // the rows, a column per session and one difference (widths from the widest cell)
  auto row = [&](const std::string& name) {
    const size_t at = r.out.find("\n" + name + " ");
    return at == std::string::npos ? std::string() : r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
  };
  const std::string host = row("exposed communication, host threads (per rank and step)");
  EXPECT_NE(host.find("300.0 us  "), std::string::npos) << host;
  EXPECT_NE(host.find("150.0 us  "), std::string::npos) << host;
  EXPECT_NE(host.find("-150.0 us (-50.0 %)"), std::string::npos) << host;
  const std::string streams = row("exposed communication (per rank and step)");
  EXPECT_NE(streams.find("50.0 us"), std::string::npos) << streams;
  EXPECT_NE(row("GPU busy (mean over ranks)").find("+10.0 points"), std::string::npos) << r.out;
  EXPECT_NE(row("throughput").find("8000 samples/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("B - A"), std::string::npos) << r.out;
  // no cell is marked ", within noise" (one step each, different times): no legend of the mark (tester45 F4)
  EXPECT_EQ(r.out.find("within noise"), std::string::npos) << r.out;
  // per rank: B's rank 0 waited 0.20 ms on its host threads, its GPU busy 20 %
  EXPECT_NE(r.out.find("B        0           0.10 ms            0.20 ms     20.0%"), std::string::npos) << r.out;
}

TEST(Ux41CompareCli, JsonHasTheNumbersTheWorkbenchComputes) {
  const Ux41Pair p;
  const auto r = ux41_cli("compare --json " + p.a + " " + p.b);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["sessions"].size(), 2u);
  EXPECT_EQ(j["baseline"], "A");
  EXPECT_EQ(j["sessions"][1]["name"], "run3/gpu.db");
  EXPECT_EQ(j["sessions"][1]["throughput_unit"], "samples/s");
  // every figure is compare_value's (what CompareModel shows) for the same session
  for (int i = 0; i < 2; ++i) {
    const ss::SessionReader reader(i == 0 ? p.a : p.b);
    ss::RunStats st = ss::analyze(reader);
    const ss::ComparedSession c{st, {st.samples_per_s, "samples"}, false};
    for (int k = 0; k < ss::kCompareFigureCount; ++k) {
      const auto f = static_cast<ss::CompareFigure>(k);
      const auto v = ss::compare_value(c, f);
      const auto& got = j["sessions"][i]["figures"][ss::compare_figure_key(f)];
      if (v) {
        EXPECT_DOUBLE_EQ(got.get<double>(), *v) << ss::compare_figure_key(f);
      } else {
        EXPECT_TRUE(got.is_null()) << ss::compare_figure_key(f);
      }
    }
  }
  EXPECT_DOUBLE_EQ(j["sessions"][0]["figures"]["host_exposed_comm_ns_per_rank_step"].get<double>(), 300'000);
  const auto& d = j["differences"][0]["figures"];
  EXPECT_DOUBLE_EQ(d["host_exposed_comm_ns_per_rank_step"]["difference"].get<double>(), -150'000);
  EXPECT_DOUBLE_EQ(d["host_exposed_comm_ns_per_rank_step"]["percent"].get<double>(), -50.0);
  EXPECT_DOUBLE_EQ(d["gpu_busy_pct"]["difference"].get<double>(), 10.0);
  EXPECT_TRUE(d["gpu_busy_pct"]["percent"].is_null());
  EXPECT_TRUE(d["lookups_max_over_mean"].is_null());  // no load counters in these sessions
  EXPECT_EQ(j["sessions"][1]["ranks"][1]["host_exposed_comm_ns"], 100'000);
  EXPECT_DOUBLE_EQ(j["sessions"][1]["ranks"][1]["gpu_busy_pct"].get<double>(), 60.0);
}

TEST(Ux41CompareCli, BadInputNamesTheFileAndExitsTwo) {
  const Ux41Pair p;
  auto r = ux41_cli("compare " + p.a);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("compare needs two sessions or more (the first is the baseline); got only " + p.a), std::string::npos)
      << r.err;
  const std::string missing = (ss::testing::import_scratch() / "ux41_missing.db").string();
  r = ux41_cli("compare " + p.a + " " + missing);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
  const std::string text = (ss::testing::import_scratch() / "ux41_not_a_session.db").string();
  {
    std::FILE* f = std::fopen(text.c_str(), "w");
    std::fputs("{\"traceEvents\": []}\n", f);
    std::fclose(f);
  }
  r = ux41_cli("compare --json " + p.a + " " + text);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(text), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("import it first"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["ended"], "bad_input");
}

// ux41 #9: a crashed run that completed no step says where it stopped, not "measured" and "0
// measured steps"; its kernel note does not name warm-up steps it did not have
TEST(Ux41CompareCli, StatsOfACrashedRunSaysWhereItStopped) {
  const std::string db = (ss::testing::import_scratch() / "ux41_crashed.db").string();
  std::filesystem::remove(db);
  {
    ss::SessionWriter w(db);
    w.set_metadata("world_size", "1");
    w.set_metadata("backend", "cuda");
    w.set_metadata("workload_name", "hand");
    w.set_metadata("warmup_steps", "0");
    w.add_rank({0, "h", "NVIDIA H200 (cuda:0)", 1 << 30});
    w.add_lane({0, 0, "compute", "thread"});
    w.add_lane({0, 2, "gpu_compute", "stream"});
    // set-up (step -1) and step 0's ops; no step row: it never completed
    w.add_ops({ss::OpEvent{0, ss::Lane::gpu_compute, ss::OpCategory::other, "init_kernel", -1, 0, 1000, 0, 0},
               ss::OpEvent{0, ss::Lane::compute, ss::OpCategory::dense, "dense", 0, 2000, 5000, 0, 0},
               ss::OpEvent{0, ss::Lane::gpu_compute, ss::OpCategory::dense, "sm90_xmma_gemm", 0, 2000, 3000, 0, 0}});
    w.close("crashed", "rank 0: CUDA error: an illegal memory access was encountered");
  }
  const auto r = ux41_cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(crashed in step 0; no step completed)\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("measured)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("0 measured steps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no measured step completed (steps of 0 samples)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no measured steps: nothing to analyse (crashed in step 0; no step completed)"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("warm-up steps left out"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 GPU event of set-up (the run had no warm-up steps) left out"), std::string::npos) << r.out;
  std::filesystem::remove(db);
}

// ux41 #11: `stats --json` gpus: the device's busy share and the ranks' arenas apart from the
// device's memory (a cuda run does not record the device's: null)
TEST(Ux41CompareCli, StatsJsonGpusSayTheDeviceBusyAndTheRankArenasApart) {
  const Ux41Pair p;
  const auto r = ux41_cli("stats --json " + p.a);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["gpus"].size(), 1u);
  EXPECT_DOUBLE_EQ(j["gpus"][0]["busy_pct"].get<double>(), 40.0);
  EXPECT_TRUE(j["gpus"][0]["memory_capacity_bytes"].is_null());
  EXPECT_EQ(j["gpus"][0]["rank_memory_bytes"],
            nlohmann::json::parse(R"([{"rank": 0, "bytes": 1073741824}, {"rank": 1, "bytes": 1073741824}])"));
  const auto t = ux41_cli("stats " + p.a);
  EXPECT_NE(t.out.find("GPU busy     per GPU: NVIDIA H200 (cuda:0) 40.0% (ranks 0, 1 together"), std::string::npos) << t.out;
}

// tester45 F12.2: a simulated session's communication and overlap figures are the cost model's
// ops per rank; the "not the same measure" line called them host threads' spans.
TEST(Ux41CompareCli, NotTheSameMeasureSaysWhatASimulatedSessionsFiguresAre) {
  const Ux41Pair p;
  const auto root = ss::testing::import_scratch() / "tester45_compare";
  std::filesystem::create_directories(root);
  const std::string cpu = (root / "cpu.db").string(), sim = (root / "sim.db").string();
  ASSERT_EQ(ux41_cli("run --preset tiny --steps 1 --force-overwrite -o " + cpu).code, 0);
  ASSERT_EQ(ux41_cli("run --preset tiny --steps 1 --simulate h100_sxm --force-overwrite -o " + sim).code, 0);
  const auto r = ux41_cli("compare " + cpu + " " + p.a + " " + sim);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("not the same measure: the communication, overlap and idle figures of B are its GPU streams' "
                       "(kernels and copies), those of A its host threads' spans, those of C the cost model's compute "
                       "and comm ops per simulated rank;"),
            std::string::npos) << r.out;
}
