// Import honesty and the Chrome round trip of GPU traces:
// - `export --format chrome` of an imported 2-rank Kineto trace keeps its GPU stream lanes (cat
//   kernel, args device / stream / correlation) and `import` reads them back as streams, so `stats`
//   of import -> export chrome -> import is the original's. Hand figures of the fixture (the
//   tester's mk.py): rank 0 gemm_kernel_a 1100-1300 us, its all-reduce kernel 1250-1500, gemm_kernel_b
//   1550-1700, gemm_kernel_c in the last step (2100-2200); rank 1 the same with its all-reduce at
//   1260-1500. Stream level: overlap (50 + 40) / (250 + 240) = 18.37%, exposed 200 us per rank,
//   comm 250 / 240 us. HTA (last step dropped): overlap 50/250 = 20.00% and 40/240 = 16.67%, kernel
//   time 600 us, idle 50, compute 350, non-compute 200, 3 GPU events. Before, the re-import was
//   thread level: 17.0%, comm 270 us (the host record_param_comms span counted), no HTA block.
// - a trace of an NCCL job without GPU events says so (info no_gpu_events: CUDA activity off?).
// - `import --strict` exits 3 after writing the session when a data_loss problem was recorded
//   (a cut .json.gz, a dropped duplicate rank file), 0 without --strict and 0 for a clean import.
#include <gtest/gtest.h>

#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/store/session.h"
#include "import_test_support.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;
namespace i60t = embedscope::sessions::testing;

fs::path i60_scratch() {
  static const fs::path dir = embedscope::test_support::fresh_scratch("es_imp60_" + std::to_string(getpid()));
  return dir;
}

embedscope::test_support::CliResult i60_cli(const std::string& args) {
  return embedscope::test_support::run_cli(std::string(EMBEDSCOPE_CLI), args, i60_scratch());
}

// One rank's Kineto trace (the tester's mk.py): two 1 ms profiler steps from 1000 us, three
// kernels on stream 7 and an NCCL all-reduce on stream 20 at nccl_ts (us) for nccl_dur, each
// launched by a cudaLaunchKernel with its correlation; `gpu` false leaves every GPU and runtime
// event out (a profile without its CUDA activity); `backend` distributedInfo.backend.
json i60_trace(int rank, int nccl_ts, int nccl_dur, bool gpu = true, const std::string& backend = "nccl") {
  json ev = json::array();
  auto x = [&](json e) {
    e["ph"] = "X";
    ev.push_back(std::move(e));
  };
  x({{"cat", "cpu_op"}, {"name", "ProfilerStep#1"}, {"pid", 1}, {"tid", 1}, {"ts", 1000}, {"dur", 1000}, {"args", json::object()}});
  x({{"cat", "cpu_op"}, {"name", "ProfilerStep#2"}, {"pid", 1}, {"tid", 1}, {"ts", 2000}, {"dur", 1000}, {"args", json::object()}});
  x({{"cat", "cpu_op"},
     {"name", "record_param_comms"},
     {"pid", 1},
     {"tid", 1},
     {"ts", 1055},
     {"dur", 20},
     {"args",
      {{"Collective name", "allreduce"}, {"In msg nelems", 1024}, {"Out msg nelems", 1024}, {"dtype", "Float"},
       {"Group size", 2}, {"Process Group Ranks", "[0, 1]"}}}});
  struct K {
    const char* name;
    int ts, dur, stream, corr, launch;
  };
  const K kernels[] = {{"gemm_kernel_a", 1100, 200, 7, 1, 1050},
                       {"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", nccl_ts,
                        nccl_dur, 20, 2, 1060},
                       {"gemm_kernel_b", 1550, 150, 7, 3, 1070},
                       {"gemm_kernel_c", 2100, 100, 7, 4, 2050}};
  if (gpu)
    for (const K& k : kernels) {
      x({{"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"pid", 1}, {"tid", 1}, {"ts", k.launch}, {"dur", 5},
         {"args", {{"correlation", k.corr}}}});
      x({{"cat", "kernel"}, {"name", k.name}, {"pid", 0}, {"tid", k.stream}, {"ts", k.ts}, {"dur", k.dur},
         {"args", {{"device", 0}, {"stream", k.stream}, {"correlation", k.corr}}}});
    }
  return {{"schemaVersion", 1},
          {"distributedInfo", {{"backend", backend}, {"rank", rank}, {"world_size", 2}}},
          {"deviceProperties", json::array({{{"id", 0}, {"name", "FakeGPU"}}})},
          {"traceEvents", ev},
          {"baseTimeNanoseconds", 0}};
}

void i60_write(const fs::path& p, const json& j) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << j.dump();
}

json i60_stats(const fs::path& db) {
  const auto r = i60_cli("stats " + db.string() + " --json");
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(r.out);
}

// The hand figures of the fixture, in `stats --json` of a session imported from it.
void i60_expect_hand_figures(const json& s, const std::string& which) {
  SCOPED_TRACE(which);
  EXPECT_NEAR(s["overlap_pct"].get<double>(), 100.0 * 90 / 490, 1e-9);  // (50 + 40) / (250 + 240)
  EXPECT_NE(s["overlap_definition"].get<std::string>().find("stream level"), std::string::npos);
  EXPECT_EQ(s["exposed_comm_ns"], 200000);
  ASSERT_EQ(s["ranks"].size(), 2u);
  EXPECT_EQ(s["ranks"][0]["comm_ns"], 250000);
  EXPECT_EQ(s["ranks"][1]["comm_ns"], 240000);
  EXPECT_EQ(s["ranks"][0]["exposed_comm_ns"], 200000);
  EXPECT_EQ(s["ranks"][0]["compute_ns"], 450000);
  EXPECT_EQ(s["ranks"][0]["idle_ns"], 1350000);
  EXPECT_EQ(s["ranks"][0]["bytes_sent"], 4096);  // a 2-rank ring all-reduce of 1024 floats sends B
  const json& k = s["gpu_kernels"]["ranks"];
  ASSERT_EQ(k.size(), 2u);
  EXPECT_NEAR(k[0]["overlap_pct"].get<double>(), 20.0, 1e-9);
  EXPECT_NEAR(k[1]["overlap_pct"].get<double>(), 100.0 * 40 / 240, 1e-9);
  for (const json& r : k) {
    EXPECT_EQ(r["kernel_time_ns"], 600000);
    EXPECT_EQ(r["idle_ns"], 50000);
    EXPECT_EQ(r["compute_ns"], 350000);
    EXPECT_EQ(r["non_compute_ns"], 200000);
    EXPECT_EQ(r["gpu_events"], 3);
    EXPECT_EQ(r["dropped_last_step_events"], 1);
    EXPECT_EQ(r["dropped_no_launch_events"], 0);
  }
}
}  // namespace

TEST(Imp60ChromeRoundTrip, GpuStreamsComeBackAsStreamsAndStatsAgree) {
  const fs::path dir = i60_scratch() / "rt";
  i60_write(dir / "in" / "rank0.json", i60_trace(0, 1250, 250));
  i60_write(dir / "in" / "rank1.json", i60_trace(1, 1260, 240));
  const fs::path a = dir / "a.db", chrome = dir / "a_chrome.json", b = dir / "b.db";
  auto r = i60_cli("import " + (dir / "in").string() + " -o " + a.string());
  ASSERT_EQ(r.code, 0) << r.err;
  r = i60_cli("export " + a.string() + " --format chrome -o " + chrome.string());
  ASSERT_EQ(r.code, 0) << r.err;
  r = i60_cli("import " + chrome.string() + " -o " + b.string());
  ASSERT_EQ(r.code, 0) << r.err;

  // the file: valid JSON for Perfetto (int pid / tid, ts and dur in us), each GPU op as Kineto
  // writes one, its launch with the same correlation, each rank's GPU as a process label
  std::ifstream in(chrome);
  const json t = json::parse(in);
  int kernels = 0, labels = 0;
  for (const json& e : t["traceEvents"]) {
    if (e.contains("pid")) EXPECT_TRUE(e["pid"].is_number_integer());
    if (e.contains("tid")) EXPECT_TRUE(e["tid"].is_number_integer());
    if (e["name"] == "process_labels") {
      ++labels;
      EXPECT_EQ(e["args"]["labels"].get<std::string>().rfind("FakeGPU (cuda:0", 0), 0u) << e.dump();
    }
    if (e["ph"] != "X" || e.value("cat", "") != "kernel") continue;
    ++kernels;
    EXPECT_EQ(e["args"]["device"], 0);
    if (e["name"].get<std::string>().rfind("ncclKernel", 0) == 0 && e["pid"] == 0) {
      EXPECT_EQ(e["args"]["stream"], 20);
      EXPECT_EQ(e["args"]["correlation"], 2);
      EXPECT_EQ(e["args"]["embedscope category"], "comm");
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 250.0);  // 1250 us - the origin, 1000 us
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 250.0);
    }
  }
  EXPECT_EQ(kernels, 8);
  EXPECT_EQ(labels, 2);

  const json sa = i60_stats(a), sb = i60_stats(b);
  i60_expect_hand_figures(sa, "the import");
  i60_expect_hand_figures(sb, "the round trip");
  EXPECT_EQ(sa["ranks"], sb["ranks"]);
  EXPECT_EQ(sa["gpu_kernels"], sb["gpu_kernels"]);
  EXPECT_EQ(sa["collectives"], sb["collectives"]);
  EXPECT_EQ(sa["gpus"], sb["gpus"]);
  EXPECT_EQ(sa["critical_path"], sb["critical_path"]);
  // the lanes and the rank's GPU as they were
  const embedscope::sessions::SessionReader ra(a.string()), rb(b.string());
  const auto la = ra.lanes(), lb = rb.lanes();
  ASSERT_EQ(la.size(), lb.size());
  for (size_t i = 0; i < la.size(); ++i) {
    EXPECT_EQ(la[i].name, lb[i].name);
    EXPECT_EQ(la[i].kind, lb[i].kind);
  }
  EXPECT_EQ(lb[2].name, "stream 20 (cuda:0 FakeGPU)");
  EXPECT_EQ(rb.ranks().at(1).device, ra.ranks().at(1).device);
  const auto ca = ra.collectives(), cb = rb.collectives();
  ASSERT_EQ(ca.size(), 2u);
  ASSERT_EQ(cb.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(cb[i].start_ns, ca[i].start_ns);
    EXPECT_EQ(cb[i].end_ns, ca[i].end_ns);
    EXPECT_EQ(cb[i].bytes_sent, 4096);
    EXPECT_EQ(cb[i].step, 1);
  }
}

// A trace of an NCCL job with no GPU event: said, with the likely cause; a Gloo job's CPU trace
// and a trace with its kernels are not.
TEST(Imp60NoGpuEvents, AnNcclTraceWithoutKernelsSaysItIsHostThreadLevel) {
  const fs::path dir = i60_scratch() / "nogpu";
  i60_write(dir / "nogpu.json", i60_trace(0, 1250, 250, false));
  i60_write(dir / "gloo.json", i60_trace(0, 1250, 250, false, "gloo"));
  i60_write(dir / "gpu.json", i60_trace(0, 1250, 250));
  const auto sum = i60t::import_into({(dir / "nogpu.json").string()}, "imp60_nogpu.db");
  const auto* p = i60t::problem(sum.problems, "no_gpu_events");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->severity, "info");
  EXPECT_EQ(p->count, 1);
  EXPECT_NE(p->example.find("nogpu.json (rank 0): distributedInfo.backend nccl but no GPU (kernel) events"),
            std::string::npos)
      << p->example;
  EXPECT_NE(p->example.find("host-thread level"), std::string::npos);
  EXPECT_NE(p->example.find("ProfilerActivity.CUDA"), std::string::npos);
  // stored in the session, as every import problem
  EXPECT_NE(i60t::problem(embedscope::sessions::SessionReader(i60t::scratch_db("imp60_nogpu.db")).import_stats(),
                          "no_gpu_events"),
            nullptr);
  EXPECT_EQ(i60t::problem(i60t::import_into({(dir / "gloo.json").string()}, "imp60_gloo.db").problems, "no_gpu_events"),
            nullptr);
  EXPECT_EQ(i60t::problem(i60t::import_into({(dir / "gpu.json").string()}, "imp60_gpu.db").problems, "no_gpu_events"),
            nullptr);
}

// --strict: exit 3 once the session is written when data was lost; 0 without it, 0 for a clean import.
TEST(Imp60Strict, DataLossExitsThreeWithStrictAfterWritingTheSession) {
  const fs::path dir = i60_scratch() / "strict";
  // a .json.gz cut in the middle of its deflate stream: gzip_cut_short and truncated (data_loss)
  const fs::path gz = dir / "cut.json.gz";
  fs::create_directories(dir);
  {
    json big = i60_trace(0, 1250, 250);
    for (int i = 0; i < 400; ++i)  // enough text that half the stream holds events
      big["traceEvents"].push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "aten::mm"}, {"pid", 1}, {"tid", 1},
                                    {"ts", 1100 + i}, {"dur", 1}, {"args", {{"seq", i}}}});
    const std::string text = big.dump();
    gzFile f = gzopen(gz.string().c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
    gzclose(f);
    fs::resize_file(gz, fs::file_size(gz) / 2);
  }
  // two files of rank 0 in one directory: the second is not imported (duplicate_rank, data_loss)
  i60_write(dir / "dup" / "a.json", i60_trace(0, 1250, 250));
  i60_write(dir / "dup" / "b.json", i60_trace(0, 1260, 240));
  i60_write(dir / "clean" / "rank0.json", i60_trace(0, 1250, 250));
  struct Case {
    std::string input, lost;
  };
  for (const Case& c : {Case{gz.string(), "gzip_cut_short"}, Case{(dir / "dup").string(), "duplicate_rank"}}) {
    SCOPED_TRACE(c.input);
    const fs::path db = dir / "s.db";
    auto r = i60_cli("import " + c.input + " -o " + db.string() + " --force-overwrite");
    EXPECT_EQ(r.code, 0) << r.err;
    r = i60_cli("import " + c.input + " -o " + db.string() + " --force-overwrite --strict");
    EXPECT_EQ(r.code, 3) << r.err;
    EXPECT_NE(r.err.find("--strict: data was lost (" + c.lost), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("session      " + db.string()), std::string::npos) << r.out;  // the summary as always
    // written, with what was read: the session reads, its problems stored
    const embedscope::sessions::SessionReader s(db.string());
    EXPECT_EQ(s.status(), "complete");
    EXPECT_NE(i60t::problem(s.import_stats(), c.lost), nullptr);
    EXPECT_FALSE(s.lanes().empty());
    r = i60_cli("import " + c.input + " -o " + db.string() + " --force-overwrite --strict --json");
    EXPECT_EQ(r.code, 3) << r.err;
    EXPECT_NO_THROW((void)json::parse(r.out));
  }
  const auto r = i60_cli("import " + (dir / "clean").string() + " -o " + (dir / "c.db").string() + " --strict");
  EXPECT_EQ(r.code, 0) << r.err;
}

// An Embedscope run's streams (a simulated run's compute and comm lanes) are written as threads
// named as they were, and their import says they came back as threads (their comm ops carry
// collective sequences, not launches): one streams_as_threads problem naming the first lane.
TEST(Imp60ChromeRoundTrip, ARunsStreamsComeBackAsThreadsAndTheImportSaysSo) {
  const fs::path dir = i60_scratch() / "sim";
  fs::create_directories(dir);
  const fs::path run = dir / "sim.db", chrome = dir / "sim.json", back = dir / "back.db";
  auto r = i60_cli("run --preset tiny --devices 2 --steps 2 --simulate h100_sxm -o " + run.string());
  ASSERT_EQ(r.code, 0) << r.err;
  r = i60_cli("export " + run.string() + " --format chrome -o " + chrome.string());
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(chrome);
  const json t = json::parse(in);
  int marked = 0;
  for (const json& e : t["traceEvents"]) {
    if (e["ph"] == "X") EXPECT_NE(e.value("cat", ""), "kernel") << e.dump();  // no GPU event written
    if (e["name"] == "thread_name" && e["args"].value("embedscope lane kind", "") == "stream") ++marked;
  }
  const embedscope::sessions::SessionReader sim(run.string());
  int streams = 0;
  std::string first;
  for (const auto& l : sim.lanes())
    if (l.kind == "stream" && streams++ == 0) first = l.name;
  ASSERT_GT(streams, 0);
  EXPECT_EQ(marked, streams);
  const auto sum = i60t::import_into({chrome.string()}, "imp60_sim_back.db");
  const auto* p = i60t::problem(sum.problems, "streams_as_threads");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->count, streams);
  EXPECT_NE(p->example.find("(first: " + first + ")"), std::string::npos) << p->example;
  const embedscope::sessions::SessionReader b(i60t::scratch_db("imp60_sim_back.db"));
  for (const auto& l : b.lanes()) EXPECT_EQ(l.kind, "thread") << l.name;
}
