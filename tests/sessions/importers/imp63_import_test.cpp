// Events of a category the Kineto importer does not know (import problem unknown_category): on a
// GPU's process without args.stream they go to the GPU track of their tid's stream (its GPU
// annotation lane, out of the GPU figures), elsewhere to their thread; Kineto's "stream 7 "
// thread names lose their trailing blank. Ranks of different files on one device are on different
// GPUs in `import` and `merge` alike unless their hosts say otherwise. A cut trace that lost every
// step says "no complete profiler step", not "no profiler steps".
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <fmt/format.h>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/gpu_run.h"
#include "embedscope/sessions/analysis/gpu_sharing.h"
#include "embedscope/sessions/importers/kineto_json/kineto_json.h"
#include "embedscope/sessions/merge/merge.h"
#include "embedscope/sessions/store/session.h"
#include "import_test_support.h"

namespace {
namespace fs = std::filesystem;
namespace i63 = embedscope::sessions;
using i63::testing::problem;

std::string i63_write(const std::string& name, const std::string& text) {
  const fs::path p = i63::testing::import_scratch() / "imp63" / name;
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

// One ProfilerStep (1 s .. 1.1 s) on host pid 10 tid 10 launching one kernel (stream 7 of
// device 0, pid 0 tid 7, 100 us at 1.001 s), Kineto's thread_name "stream 7 " for that track,
// and `extra` events appended.
std::string i63_trace(const std::string& extra) {
  return R"({"schemaVersion":1,"deviceProperties":[{"id":0,"name":"NVIDIA A100","totalGlobalMem":1000}],)"
         R"("traceEvents":[)"
         R"({"ph":"M","name":"thread_name","pid":0,"tid":7,"args":{"name":"stream 7 "}},)"
         R"({"ph":"M","name":"thread_name","pid":10,"tid":10,"args":{"name":"python"}},)"
         R"({"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":10,"tid":10,"ts":1000000,"dur":100000},)"
         R"({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":10,"tid":10,"ts":1000010,"dur":5,"args":{"correlation":1}},)"
         R"({"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":1001000,"dur":100,"args":{"device":0,"stream":7,"correlation":1}})" +
         extra + "]}";
}

// i63_trace as rank `rank` of 2
std::string i63_rank_trace(int rank) {
  std::string t = i63_trace("");
  t.insert(1, fmt::format(R"("distributedInfo":{{"rank":{},"world_size":2}},)", rank));
  return t;
}

// lane name -> (kind, ops on it)
std::map<std::string, std::pair<std::string, size_t>> i63_lanes(const i63::SessionReader& r) {
  std::map<std::string, std::pair<std::string, size_t>> out;
  for (const auto& l : r.lanes()) out[l.name] = {l.kind, r.lane_ops(l.rank, l.lane).size()};
  return out;
}
}  // namespace

// A cuda_graph_node and a gpu_mem_weird event on pid 0 tid 7 (the GPU's process, stream 7's
// track) without args.stream, and a mystery_host event on the host thread. Before: both GPU-track
// events made a host lane "thread 7 (stream 7 )" (kind thread, trailing blank) beside "stream 7",
// and nothing was said. Now: on "annotations of stream 7 (device 0)" (Perfetto draws them on that
// track; HTA counts no event without args.stream as a kernel), the kernel figures untouched (one
// kernel on the stream), and one info problem naming each category and its count.
TEST(Imp63UnknownCategory, GpuTrackEventsGoToTheirStreamsTrack) {
  const std::string f = i63_write(
      "unknown.json",
      i63_trace(R"(,{"ph":"X","cat":"cuda_graph_node","name":"graph node","pid":0,"tid":7,"ts":1002000,"dur":50,"args":{}})"
                R"(,{"ph":"X","cat":"gpu_mem_weird","name":"weird","pid":0,"tid":7,"ts":1003000,"dur":20})"
                R"(,{"ph":"B","cat":"gpu_mem_weird","name":"weird span","pid":0,"tid":7,"ts":1004000},{"ph":"E","pid":0,"tid":7,"ts":1004010})"
                R"(,{"ph":"X","cat":"mystery_host","name":"host thing","pid":10,"tid":10,"ts":1050000,"dur":10})"));
  const auto sum = i63::testing::import_into({f}, "unknown.db");
  const auto* p = problem(sum.problems, "unknown_category");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->severity, "info");
  EXPECT_EQ(p->count, 4);
  EXPECT_NE(p->example.find("('cuda_graph_node' 1, 'gpu_mem_weird' 2, 'mystery_host' 1; first at line 1"),
            std::string::npos)
      << p->example;
  EXPECT_NE(p->example.find("3 on a GPU's process (pid of its streams) are kept on the GPU annotation lane of their "
                            "tid's stream (first: annotations of stream 7 (device 0))"),
            std::string::npos)
      << p->example;
  EXPECT_NE(p->example.find("1 on host threads are kept there as host ops"), std::string::npos) << p->example;
  EXPECT_EQ(p->byte_offset, static_cast<int64_t>(i63_trace("").size() - 2 + 1));  // the first unknown event's '{'

  const i63::SessionReader r(i63::testing::scratch_db("unknown.db"));
  const auto lanes = i63_lanes(r);
  for (const auto& [name, kind_ops] : lanes) {
    EXPECT_NE(name.back(), ' ') << name;
    EXPECT_EQ(name.find("thread 7"), std::string::npos) << name;
  }
  ASSERT_EQ(lanes.count("annotations of stream 7 (device 0)"), 1u);
  EXPECT_EQ(lanes.at("annotations of stream 7 (device 0)"), (std::pair<std::string, size_t>{"gpu_annotation", 3}));
  ASSERT_EQ(lanes.count("stream 7 (cuda:0 NVIDIA A100)"), 1u);
  EXPECT_EQ(lanes.at("stream 7 (cuda:0 NVIDIA A100)"), (std::pair<std::string, size_t>{"stream", 1}));
  ASSERT_EQ(lanes.count("thread 10 (python)"), 1u);
  EXPECT_EQ(lanes.at("thread 10 (python)"), (std::pair<std::string, size_t>{"thread", 2}));  // the launch and the host thing
  EXPECT_EQ(lanes.size(), 3u);
}

// Kineto's thread_name of a stream's track ends in a blank ("stream 7 "): a thread lane on that
// tid (here an unknown event on a pid that has no GPU event: not a GPU's process) is named
// "thread 7 (stream 7)", without it. Before: "thread 7 (stream 7 )".
TEST(Imp63UnknownCategory, ThreadNamesLoseTheirTrailingBlank) {
  const std::string f = i63_write(
      "blank.json",
      R"({"schemaVersion":1,"traceEvents":[{"ph":"M","name":"thread_name","pid":0,"tid":7,"args":{"name":"stream 7 "}},)"
      R"({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":0,"tid":7,"ts":1000000,"dur":10}]})");
  const auto sum = i63::testing::import_into({f}, "blank.db");
  EXPECT_EQ(problem(sum.problems, "unknown_category"), nullptr);
  const i63::SessionReader r(i63::testing::scratch_db("blank.db"));
  const auto lanes = i63_lanes(r);
  ASSERT_EQ(lanes.size(), 1u);
  EXPECT_EQ(lanes.begin()->first, "thread 7 (stream 7)");
}

// The known categories of the real traces (cpu_op, user_annotation, cuda_runtime, kernel,
// gpu_memcpy, gpu_memset, gpu_user_annotation, Trace, flows) are said nothing of.
TEST(Imp63UnknownCategory, RealTracesHaveNone) {
  const std::string t = std::string(EMBEDSCOPE_SHARED_DATA) + "/traces/nccl_data.json.gz";
  if (!fs::exists(t)) GTEST_SKIP() << t << " is absent (../shared/data)";
  const auto sum = i63::testing::import_into({t}, "nccl63.db");
  EXPECT_EQ(problem(sum.problems, "unknown_category"), nullptr);
}

// Two rank files on cuda:0 (no host named: a Kineto trace has none). Imported together they read
// 2 GPUs; before, the same files imported one by one and merged read "ranks sharing 1 GPU
// (NVIDIA A100 (cuda:0))". Now the merge reads as the import.
TEST(Imp63GpusOfFiles, MergeAndImportAgree) {
  const std::string r0 = i63_write("gpus/rank0.json", i63_rank_trace(0));
  const std::string r1 = i63_write("gpus/rank1.json", i63_rank_trace(1));
  i63::testing::import_into({(i63::testing::import_scratch() / "imp63" / "gpus").string()}, "gpus_dir.db");
  i63::testing::import_into({r0}, "gpus_r0.db");
  i63::testing::import_into({r1}, "gpus_r1.db");
  i63::MergeOptions opt;
  opt.overwrite = true;
  i63::merge_sessions({i63::testing::scratch_db("gpus_r0.db"), i63::testing::scratch_db("gpus_r1.db")},
                      i63::testing::scratch_db("gpus_merged.db"), opt);
  const std::string two = " on 2 GPUs (NVIDIA A100 (cuda:0 of rank 0's host), NVIDIA A100 (cuda:0 of rank 1's host))";
  EXPECT_EQ(i63::gpus_text(i63::SessionReader(i63::testing::scratch_db("gpus_dir.db")).ranks()), two);
  EXPECT_EQ(i63::gpus_text(i63::SessionReader(i63::testing::scratch_db("gpus_merged.db")).ranks()), two);
  // each import alone: its one rank on cuda:0, as the trace says
  EXPECT_EQ(i63::gpus_text(i63::SessionReader(i63::testing::scratch_db("gpus_r1.db")).ranks()),
            " on 1 GPU (NVIDIA A100 (cuda:0))");
}

// The rule by hand: the same host named by every rank -> one GPU shared; a host unknown or
// different -> each file's ranks on their own GPU, named by the file's lowest rank on it; ranks of
// one file keep sharing; CPU devices and names already "of rank N's host" untouched.
TEST(Imp63GpusOfFiles, SameHostSharesOtherwiseApart) {
  std::vector<i63::RankDeviceSource> same{{0, "a.db", "h1", "H200 (cuda:0)"}, {1, "b.db", "h1", "H200 (cuda:0)"}};
  i63::separate_gpus_of_files(same);
  EXPECT_EQ(same[0].device, "H200 (cuda:0)");
  EXPECT_EQ(same[1].device, "H200 (cuda:0)");
  std::vector<i63::RankDeviceSource> v{{0, "a.db", "h1", "H200 (cuda:0)"},  {1, "a.db", "h1", "H200 (cuda:0)"},
                                       {2, "b.db", "", "H200 (cuda:0)"},    {3, "b.db", "", "H200 (cuda:0)"},
                                       {4, "c.db", "h3", "H200 (cuda:1)"},  {5, "d.db", "h4", "cpu (thread)"},
                                       {6, "e.db", "h4", "cpu (thread)"},   {7, "f.db", "", "H200 (cuda:2 of rank 7's host)"},
                                       {8, "g.db", "", "H200 (cuda:2 of rank 7's host)"}};
  i63::separate_gpus_of_files(v);
  EXPECT_EQ(v[0].device, "H200 (cuda:0 of rank 0's host)");
  EXPECT_EQ(v[1].device, "H200 (cuda:0 of rank 0's host)");
  EXPECT_EQ(v[2].device, "H200 (cuda:0 of rank 2's host)");
  EXPECT_EQ(v[3].device, "H200 (cuda:0 of rank 2's host)");
  EXPECT_EQ(v[4].device, "H200 (cuda:1)");  // alone on its device
  EXPECT_EQ(v[5].device, "cpu (thread)");
  EXPECT_EQ(v[6].device, "cpu (thread)");
  EXPECT_EQ(v[7].device, "H200 (cuda:2 of rank 7's host)");
  EXPECT_EQ(v[8].device, "H200 (cuda:2 of rank 7's host)");
  std::vector<i63::RankInfo> ranks;
  for (const auto& r : v) ranks.push_back({r.rank, r.host, r.device, 0});
  EXPECT_EQ(i63::gpus_text(ranks), " on 4 GPUs (ranks 0, 1 sharing H200 (cuda:0 of rank 0's host); ranks 2, 3 sharing "
                                   "H200 (cuda:0 of rank 2's host); rank 4 on H200 (cuda:1); ranks 7, 8 sharing H200 "
                                   "(cuda:2 of rank 7's host))");
}

// 2 ProfilerSteps, each launching 3 kernels written after every host event (as Kineto writes
// them); the JSON breaks after the first kernel: both steps lost kernels to the cut, so neither
// is complete and the figures are over the whole trace. Before: "no profiler steps", as for a
// trace that never had a ProfilerStep#N; now "no complete profiler step: the trace was cut".
TEST(Imp63CutTrace, NoCompleteProfilerStep) {
  std::string host, gpu;
  for (int k = 1; k <= 2; ++k) {
    const int64_t t = 1'000'000 + (k - 1) * 100'000;
    host += fmt::format(R"({{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{}","pid":10,"tid":10,"ts":{},"dur":99000}},)", k, t);
    for (int j = 0; j < 3; ++j) {
      host += fmt::format(R"({{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":10,"tid":10,"ts":{},"dur":5,"args":{{"correlation":{}}}}},)",
                          t + 20 + j * 10, 10 * k + j);
      gpu += fmt::format(R"({{"ph":"X","cat":"kernel","name":"gemm_{}","pid":0,"tid":7,"ts":{},"dur":100,"args":{{"device":0,"stream":7,"correlation":{}}}}},)",
                         j, t + 1000 + j * 200, 10 * k + j);
    }
  }
  const size_t first_kernel_end = gpu.find("},") + 1;
  gpu.insert(first_kernel_end, " GARBAGE, ");
  gpu.pop_back();
  const std::string f = i63_write(
      "cut_all.json", R"({"schemaVersion":1,"deviceProperties":[{"id":0,"name":"NVIDIA A100","totalGlobalMem":1000}],"traceEvents":[)" +
                          host + gpu + "]}");
  const auto sum = i63::testing::import_into({f}, "cut_all.db");
  ASSERT_NE(problem(sum.problems, "cut_lost_gpu_events"), nullptr);
  const i63::SessionReader r(i63::testing::scratch_db("cut_all.db"));
  EXPECT_TRUE(r.steps().empty());
  const i63::RunStats st = i63::analyze(r);
  EXPECT_TRUE(st.whole_trace);
  EXPECT_TRUE(st.whole_trace_cut);
  EXPECT_EQ(st.no_step_reason(), "no complete profiler step: the trace was cut");
  EXPECT_NE(i63::overlap_definition(st).find("over the whole trace (no complete profiler step: the trace was cut)"),
            std::string::npos)
      << i63::overlap_definition(st);
  const std::string gpu_text = i63::gpu_run_text(r, st);
  EXPECT_NE(gpu_text.find("of the whole trace (no complete profiler step: the trace was cut)"), std::string::npos)
      << gpu_text;
  EXPECT_EQ(gpu_text.find("no profiler steps"), std::string::npos) << gpu_text;
}

// A trace that never had a ProfilerStep#N still reads "no profiler steps".
TEST(Imp63CutTrace, ATraceWithoutStepsStillHasNone) {
  const std::string f = i63_write(
      "no_steps.json",
      R"({"schemaVersion":1,"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":10,"tid":10,"ts":1000000,"dur":10}]})");
  i63::testing::import_into({f}, "no_steps.db");
  const i63::RunStats st = i63::analyze(i63::SessionReader(i63::testing::scratch_db("no_steps.db")));
  EXPECT_TRUE(st.whole_trace);
  EXPECT_FALSE(st.whole_trace_cut);
  EXPECT_EQ(st.no_step_reason(), "no profiler steps");
}

