// The GPU kernel breakdown (HTA's get_gpu_kernel_breakdown; tester60c F6) and the critical path's
// top rows (tester60c F7) in `embedscope stats`, on the tester's straggler trace
// (tests/data/traces/straggler) and the shared real traces. Hand-computed figures in the comments.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/kernel_breakdown.h"
#include "import_test_support.h"
#include "support/cli_run.h"

namespace {
namespace ss = embedscope::sessions;
namespace fs = std::filesystem;
using nlohmann::json;
using ss::importers::KernelClass;

embedscope::test_support::CliResult breakdown_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, ss::testing::import_scratch());
}

bool has(const std::string& out, const std::string& what) { return out.find(what) != std::string::npos; }

std::string straggler_db() {
  static const std::string db = [] {
    const std::string d = ss::testing::scratch_db("ana60_breakdown_strag.db");
    std::remove(d.c_str());
    const auto r = breakdown_cli("import " + ss::testing::trace_fixture("straggler") + " -o " + d);
    EXPECT_EQ(r.code, 0) << r.err << r.out;
    return d;
  }();
  return db;
}
}  // namespace

// Durations 200, 300 (name 1, computation) and 100 ns (name 2, communication): total 600 ns.
TEST(Ana60KernelBreakdown, PerNameAndTypeFromSpans) {
  const std::vector<ss::GpuSpan> spans = {{0, 200, KernelClass::computation, 1},
                                          {1000, 1300, KernelClass::computation, 1},
                                          {2000, 2100, KernelClass::communication, 2}};
  const ss::KernelBreakdown b = ss::kernel_breakdown(spans);
  EXPECT_EQ(b.total_ns, 600);
  EXPECT_EQ(b.events, 3);
  ASSERT_EQ(b.kernels.size(), 2u);
  EXPECT_EQ(b.kernels[0].name_id, 1);
  EXPECT_EQ(b.kernels[0].count, 2);
  EXPECT_EQ(b.kernels[0].total_ns, 500);
  EXPECT_EQ(b.kernels[0].min_ns, 200);
  EXPECT_EQ(b.kernels[0].max_ns, 300);
  EXPECT_DOUBLE_EQ(b.kernels[0].mean_ns, 250.0);
  EXPECT_DOUBLE_EQ(b.kernels[0].share, 500.0 / 600.0);
  EXPECT_EQ(b.kernels[1].cls, KernelClass::communication);
  EXPECT_DOUBLE_EQ(b.kernels[1].share, 100.0 / 600.0);
  ASSERT_EQ(b.types.size(), 2u);
  EXPECT_EQ(b.types[0].cls, KernelClass::computation);
  EXPECT_EQ(b.types[0].count, 2);
  EXPECT_EQ(b.types[0].total_ns, 500);
  EXPECT_TRUE(ss::kernel_breakdown({}).kernels.empty());
}

// The straggler trace, last profiler step dropped as HTA drops it (gemm_kernel_c, launched in
// step 2): rank 0 gemm_kernel_a 200 us, all-reduce 250, gemm_kernel_b 150; rank 1 300, 100, 150.
// Total 1150 us: gemm_kernel_a 2 x, 500 us, 43.5%, mean 250, min 200, max 300; the all-reduce
// 350 us 30.4% (100 / 250); gemm_kernel_b 300 us 26.1%. Computation 800 us 69.6%, communication
// 350 us 30.4%.
TEST(Ana60KernelBreakdown, StragglerTraceByHand) {
  auto r = breakdown_cli("stats " + straggler_db());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "summed over ranks; the GPU events above, whole us): 1.15 ms of GPU event time, the shares' 100%\n")) << r.out;
  EXPECT_TRUE(has(r.out, "  computation            4     800.0 us   69.6%\n"
                         "  communication          2     350.0 us   30.4%\n"))
      << r.out;
  EXPECT_TRUE(has(r.out, "  gemm_kernel_a                          computation        2   500.0 us   43.5%   250.0 us "
                         "  200.0 us   300.0 us\n"
                         "  ncclKernel_AllReduce_RING_LL_Sum_float communication      2   350.0 us   30.4%   175.0 us "
                         "  100.0 us   250.0 us\n"
                         "  gemm_kernel_b                          computation        2   300.0 us   26.1%   150.0 us "
                         "  150.0 us   150.0 us\n"))
      << r.out;
  EXPECT_FALSE(has(r.out, "... and 0 more")) << r.out;
  // --top 2: the third kernel in one line with its share
  r = breakdown_cli("stats --top 2 " + straggler_db());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "   100.0 us   250.0 us\n  ... and 1 more (share 26.1%; --top 0 lists all, --json has every row)\n"))
      << r.out;
  r = breakdown_cli("stats --json --top 1 " + straggler_db());
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  const json& b = j["gpu_kernel_breakdown"];
  EXPECT_EQ(b["total_ns"], 1150000);
  EXPECT_EQ(b["events"], 6);
  ASSERT_EQ(b["kernels"].size(), 3u);  // every kernel, whatever --top
  EXPECT_EQ(b["kernels"][0]["name"], "gemm_kernel_a");
  EXPECT_EQ(b["kernels"][0]["type"], "computation");
  EXPECT_EQ(b["kernels"][0]["count"], 2);
  EXPECT_EQ(b["kernels"][0]["total_ns"], 500000);
  EXPECT_EQ(b["kernels"][0]["min_ns"], 200000);
  EXPECT_EQ(b["kernels"][0]["max_ns"], 300000);
  EXPECT_DOUBLE_EQ(b["kernels"][0]["mean_ns"].get<double>(), 250000.0);
  EXPECT_DOUBLE_EQ(b["kernels"][0]["share"].get<double>(), 500.0 / 1150.0);
  EXPECT_EQ(b["types"][1], (json{{"type", "communication"}, {"count", 2}, {"total_ns", 350000}, {"share", 350.0 / 1150.0}}));
  // the last step kept: gemm_kernel_c's 100 us on each rank too, 1350 us
  r = breakdown_cli("stats --json --keep-last-step " + straggler_db());
  ASSERT_EQ(r.code, 0) << r.err;
  j = json::parse(r.out);
  EXPECT_EQ(j["gpu_kernel_breakdown"]["total_ns"], 1350000);
  EXPECT_EQ(j["gpu_kernel_breakdown"]["kernels"][3]["name"], "gemm_kernel_c");
  EXPECT_EQ(j["gpu_kernel_breakdown"]["kernels"][3]["total_ns"], 200000);
}

// The straggler trace's critical path, 2.00 ms over 2 steps: (gap) 66.5%, gemm_kernel_a 15.0%,
// gemm_kernel_b 7.5%, then gemm_kernel_c 5.0%, the all-reduce 5.0% and cudaLaunchKernel 1.0%:
// --top 3 leaves 3 rows of 11.0%; --json keeps all 6.
TEST(Ana60KernelBreakdown, CriticalPathShowsTheTopRows) {
  auto r = breakdown_cli("stats --top 3 " + straggler_db());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto at = r.out.find("critical path: what bounded the steps");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string path = r.out.substr(at, r.out.find("\n\n", at) - at);
  EXPECT_TRUE(has(path, "  gemm_kernel_b ")) << path;
  EXPECT_FALSE(has(path, "gemm_kernel_c")) << path;
  EXPECT_TRUE(has(path, "\n  ... and 3 more (share 11.0%; --top 0 lists all, --json has every row)")) << path;
  r = breakdown_cli("stats --top 0 " + straggler_db());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "  cudaLaunchKernel ")) << r.out;
  EXPECT_FALSE(has(r.out, "... and")) << r.out;
  r = breakdown_cli("stats --json --top 3 " + straggler_db());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["critical_path"]["ops"].size(), 6u);
  r = breakdown_cli("stats --top -1 " + straggler_db());
  EXPECT_NE(r.code, 0);
}

// The shared real traces (../shared/data/traces), by an independent script of HTA's rules (last
// step dropped by launch time, times rounded to whole us): nccl_data 2516 GPU events (the data
// README's), 100,462 us in all, of which the NCCL kernels 24,278 us (the communication time HTA's
// overlap divides by), the memcpy / memset 1,015 us and the rest 75,169 us (the README's compute:
// one stream, so the sum is the union); its first kernel the all-reduce, 10 x, 24,204 us, min 1,689,
// max 3,306. trace_diff_test: 12515 events, 756,807 us, NCCL 190,234 us, memory 135,548 us, the
// top kernel ncclKernel_SendRecv, 35 x, 123,375 us.
TEST(Ana60KernelBreakdown, SharedTracesSumToTheirKernelTime) {
  const std::string dir = std::string(EMBEDSCOPE_SHARED_DATA) + "/traces";
  if (!fs::exists(dir + "/nccl_data.json.gz")) GTEST_SKIP() << dir << " is absent (shared test data)";
  struct Case {
    const char* file;
    int64_t events, total_us, comm_us, memory_us;
    const char* top;
    int64_t top_count, top_us;
  };
  for (const Case& k : {Case{"nccl_data.json.gz", 2516, 100462, 24278, 1015, "ncclKernel_AllReduce_RING_LL_Sum_float", 10, 24204},
                        Case{"trace_diff_test.json.gz", 12515, 756807, 190234, 135548, "ncclKernel_SendRecv_RING_SIMPLE", 35, 123375}}) {
    SCOPED_TRACE(k.file);
    const std::string db = ss::testing::scratch_db(std::string("ana60_") + k.file + ".db");
    std::remove(db.c_str());
    auto r = breakdown_cli("import " + dir + "/" + k.file + " -o " + db);
    ASSERT_EQ(r.code, 0) << r.err;
    r = breakdown_cli("stats --json " + db);
    ASSERT_EQ(r.code, 0) << r.err;
    const json b = json::parse(r.out)["gpu_kernel_breakdown"];
    EXPECT_EQ(b["events"], k.events);
    EXPECT_EQ(b["total_ns"], k.total_us * 1000);
    int64_t sum = 0, comm = 0, memory = 0;
    double shares = 0;
    for (const auto& x : b["kernels"]) {
      sum += x["total_ns"].get<int64_t>();
      shares += x["share"].get<double>();
    }
    for (const auto& t : b["types"]) {
      if (t["type"] == "communication") comm = t["total_ns"];
      if (t["type"] == "memory") memory = t["total_ns"];
    }
    EXPECT_EQ(sum, k.total_us * 1000);
    EXPECT_NEAR(shares, 1.0, 1e-9);
    EXPECT_EQ(comm, k.comm_us * 1000);
    EXPECT_EQ(memory, k.memory_us * 1000);
    EXPECT_EQ(b["kernels"][0]["name"].get<std::string>().rfind(k.top, 0), 0u) << b["kernels"][0]["name"];
    EXPECT_EQ(b["kernels"][0]["count"], k.top_count);
    EXPECT_EQ(b["kernels"][0]["total_ns"], k.top_us * 1000);
  }
}
