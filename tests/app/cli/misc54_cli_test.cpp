// misc54, end to end (tester54 F5, F7, F8): `compare` of a cpu run against an imported trace prints
// no difference between figures of two levels and says that no row compares them like for like,
// while a cuda run's host-threads row keeps its difference; `stats`' slowest step; a --simulate
// profile whose GPU is smaller than one segment is named as the fault, not the workload.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/sharding/sharding.h"  // segment_shortfall
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"
#include "support/gpu_run_session.h"

namespace {
namespace fs = std::filesystem;
namespace ss = embedscope::sessions;
namespace es = embedscope::engine;

fs::path misc54_scratch() {
  static const fs::path dir = embedscope::test_support::fresh_scratch("es_misc54_" + std::to_string(getpid()));
  return dir;
}
embedscope::test_support::CliResult misc54_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, misc54_scratch());
}

// One measured step [0, 1) ms of 2 ranks. A cpu run's host threads: rank 0 computes [0, 600) us
// then waits in a collective [600, 1000) (400 us exposed), rank 1 [0, 500) then [500, 900) (400
// us): 400 us per rank and step. An imported trace's streams: rank 0 a kernel [0, 100) and an NCCL
// kernel [200, 300) under nothing (100 us exposed), rank 1 a kernel [0, 400): 50 us per rank.
std::string cpu_session(const fs::path& path) {
  fs::remove(path);
  ss::SessionWriter w(path.string());
  w.set_metadata("world_size", "2");
  w.set_metadata("backend", "cpu");
  w.set_metadata("workload_name", "hand");
  w.set_metadata("samples_per_step", "8");
  for (int r = 0; r < 2; ++r) {
    w.add_lane({r, 0, "compute", "thread"});
    w.add_lane({r, 1, "comm", "thread"});
    w.add_step({0, r, 0, 1'000'000, 0.5, 0, 0});
  }
  using ss::Lane;
  using ss::OpCategory;
  w.add_ops({ss::OpEvent{0, Lane::compute, OpCategory::dense, "dense", 0, 0, 600'000, 0, 0},
             ss::OpEvent{0, Lane::comm, OpCategory::comm, "all_to_all", 0, 600'000, 1'000'000, 0, 0},
             ss::OpEvent{1, Lane::compute, OpCategory::dense, "dense", 0, 0, 500'000, 0, 0},
             ss::OpEvent{1, Lane::comm, OpCategory::comm, "all_to_all", 0, 500'000, 900'000, 0, 0}});
  w.close("complete");
  return path.string();
}
std::string trace_session(const fs::path& path) {
  fs::remove(path);
  ss::SessionWriter w(path.string());
  w.set_metadata("world_size", "2");
  w.set_metadata("imported", "1");
  w.set_metadata("import_format", "kineto_json");
  for (int r = 0; r < 2; ++r) {
    w.add_lane({r, 2, "gpu_compute", "stream"});
    w.add_lane({r, 3, "gpu_comm", "stream"});
    w.add_step({0, r, 0, 1'000'000, 0.0, 0, 0});
  }
  using ss::Lane;
  using ss::OpCategory;
  w.add_ops({ss::OpEvent{0, Lane::gpu_compute, OpCategory::dense, "gemm", 0, 0, 100'000, 0, 0},
             ss::OpEvent{0, Lane::gpu_comm, OpCategory::comm, "ncclKernel_AllReduce", 0, 200'000, 300'000, 0, 0},
             ss::OpEvent{1, Lane::gpu_compute, OpCategory::dense, "gemm", 0, 0, 400'000, 0, 0}});
  w.close("complete");
  return path.string();
}

// the table row that starts with `name`, "" when none
std::string row(const std::string& out, const std::string& name) {
  const size_t at = out.find("\n" + name + " ");
  return at == std::string::npos ? std::string() : out.substr(at + 1, out.find('\n', at + 1) - at - 1);
}
}  // namespace

TEST(Misc54CompareCli, ATraceAgainstACpuRunHasNoDifferenceAcrossLevels) {
  const std::string cpu = cpu_session(misc54_scratch() / "cpu.db"), trace = trace_session(misc54_scratch() / "trace.db");
  const auto r = misc54_cli("compare " + cpu + " " + trace);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string exposed = row(r.out, "exposed communication (per rank and step)");
  EXPECT_NE(exposed.find("400.0 us"), std::string::npos) << r.out;
  EXPECT_NE(exposed.find("50.0 us"), std::string::npos) << r.out;
  EXPECT_NE(exposed.find("not comparable (GPU streams vs host threads)"), std::string::npos) << r.out;
  EXPECT_EQ(exposed.find('%'), std::string::npos) << exposed;  // was "-350.0 us (-87.5 %)"
  const std::string overlap = row(r.out, "overlap %");
  EXPECT_NE(overlap.find("not comparable (GPU streams vs host threads)"), std::string::npos) << r.out;
  EXPECT_EQ(overlap.find("points"), std::string::npos) << overlap;
  EXPECT_NE(row(r.out, "exposed communication, host threads (per rank and step)").find("400.0 us"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("no row compares B like for like with A: B has no host-thread figures (an imported "
                       "trace's host threads are not analysed; the row 'exposed communication, host threads' is - for it)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("compares the host threads of all"), std::string::npos) << r.out;
  // --json: no difference for those figures, and why
  const auto j = misc54_cli("compare --json " + cpu + " " + trace);
  ASSERT_EQ(j.code, 0) << j.err;
  const auto d = nlohmann::json::parse(j.out)["differences"][0];
  EXPECT_TRUE(d["figures"]["exposed_comm_ns_per_rank_step"].is_null()) << d.dump();
  EXPECT_TRUE(d["figures"]["overlap_pct"].is_null()) << d.dump();
  EXPECT_EQ(d["not_comparable"], nlohmann::json::parse(R"({"exposed_comm_ns_per_rank_step": "GPU streams vs host threads",
                                                           "overlap_pct": "GPU streams vs host threads"})"));
  EXPECT_DOUBLE_EQ(d["figures"]["step_time_mean_ns"]["difference"].get<double>(), 0.0);  // 1 ms both
}

// A cuda run records its host threads beside its streams: that row compares like for like, and
// the note says so (gpu_run_session: host exposed (400 + 200) / 2 = 300 us, the cpu run 400 us).
TEST(Misc54CompareCli, ACudaRunsHostThreadsRowKeepsItsDifference) {
  const std::string cpu = cpu_session(misc54_scratch() / "cpu2.db");
  const std::string cuda = embedscope::test_support::gpu_run_session((misc54_scratch() / "cuda.db").string());
  const auto r = misc54_cli("compare " + cpu + " " + cuda);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(row(r.out, "exposed communication, host threads (per rank and step)").find("-100.0 us (-25.0 %)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(row(r.out, "exposed communication (per rank and step)").find("not comparable (GPU streams vs host threads)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("differences between GPU-stream figures and the others are not computed (not comparable); the row 'exposed "
                       "communication, host threads' compares the host threads of all\n"),
            std::string::npos)
      << r.out;
}

// tester54 F8: the profile's 1 MiB GPU, not the workload's devices, is named (plan and run, exit 2)
TEST(Misc54SimulateProfile, AGpuSmallerThanASegmentNamesTheProfile) {
  std::ifstream in(fs::path(EMBEDSCOPE_SOURCE_DIR) / "resources" / "hardware" / "h100_sxm.json");
  auto profile = nlohmann::json::parse(in);
  profile["gpu"]["memory_bytes"] = 1048576;
  const fs::path prof = misc54_scratch() / "prof_mem1m.json";
  std::ofstream(prof) << profile.dump();
  const std::string want = prof.string() +
                           ": /gpu/memory_bytes: 1.0 MiB is smaller than one 2.0 MiB segment of the caching allocator "
                           "(the workload's memory.allocator); give the profile's GPU more memory, or use \"memory\": "
                           "{\"allocator\": \"direct\"} in the workload (preset tiny)";
  for (const std::string cmd : {"plan", "run"}) {
    const auto r = misc54_cli(cmd + " --preset tiny --steps 2 --simulate " + prof.string() +
                              (cmd == "run" ? " -o " + (misc54_scratch() / "p.db").string() : std::string()));
    EXPECT_EQ(r.code, 2) << cmd << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("error: " + want + "\n"), std::string::npos) << cmd << ": " << r.err;
    EXPECT_EQ(r.err.find("/devices/memory_bytes"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(misc54_scratch() / "p.db"));
  // the rule behind it: a segmenting allocator below one 2 MiB segment; the direct allocator maps none
  es::WorkloadSpec spec = es::load_preset("tiny");
  spec.devices.memory_bytes = int64_t{1} << 20;
  EXPECT_EQ(es::segment_shortfall(spec), "1.0 MiB is smaller than one 2.0 MiB segment of the caching allocator");
  spec.devices.memory_bytes = int64_t{2} << 20;
  EXPECT_EQ(es::segment_shortfall(spec), "");
  spec.devices.memory_bytes = 1;
  spec.memory.allocator = es::AllocatorKind::direct;
  EXPECT_EQ(es::segment_shortfall(spec), "");
}
