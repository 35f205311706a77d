// `embedscope export --format kineto` (sessions/exporters/kineto_export.h): a real two-rank run
// exported as per-rank Kineto traces and imported back through the Kineto importer, the fields
// Holistic Trace Analysis reads (hta/common/trace_file.py, trace_parser.py, trace.py, types.py;
// the expectations below are written by hand from those files), the refusals of the CLI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/gpu_kernels.h"
#include "embedscope/sessions/exporters/kineto_export.h"
#include "embedscope/sessions/importers/kineto_json/kineto_json.h"
#include "embedscope/sessions/model/ring_all_reduce.h"
#include "embedscope/sessions/store/session.h"
#include "import_test_support.h"
#include "support/cli_run.h"

namespace {

namespace fs = std::filesystem;
namespace ss = embedscope::sessions;
using json = nlohmann::json;

fs::path kx44_scratch() {
  static const fs::path d = [] {
    auto p = embedscope::sessions::testing::import_scratch() / "kineto_export";
    fs::create_directories(p);
    return p;
  }();
  return d;
}

embedscope::test_support::CliResult kx44_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, kx44_scratch());
}

/// A session of a real run (`run --preset tiny`: 2 CPU ranks, Gloo) or a simulated one, made once.
const std::string& kx44_session(bool simulated) {
  static std::map<bool, std::string> made;
  auto it = made.find(simulated);
  if (it != made.end()) return it->second;
  const std::string db = (kx44_scratch() / (simulated ? "sim.db" : "run.db")).string();
  const auto r = kx44_cli("run --preset tiny --steps 3 --force-overwrite -o " + db +
                          (simulated ? " --simulate h100_sxm" : ""));
  EXPECT_EQ(r.code, 0) << r.err;
  return made[simulated] = db;
}

/// Exports `db` with the CLI into a fresh folder `name` and returns it.
std::string kx44_export(const std::string& db, const std::string& name) {
  const fs::path dir = kx44_scratch() / name;
  fs::remove_all(dir);
  const auto r = kx44_cli("export " + db + " --format kineto -o " + dir.string());
  EXPECT_EQ(r.code, 0) << r.err;
  return dir.string();
}

json kx44_read(const std::string& path) {
  std::ifstream f(path);
  return json::parse(f);
}

std::string kx44_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/// (rank, lane, name, duration ns, category, step) of every op, sorted.
using Kx44Op = std::tuple<int32_t, int32_t, std::string, int64_t, int, int64_t>;
std::vector<Kx44Op> kx44_ops(const ss::SessionReader& s, bool skip_param_comms) {
  std::vector<Kx44Op> v;
  for (const auto& o : s.all_ops()) {
    const std::string& n = s.name(o.name_id);
    if (skip_param_comms && (n == "record_param_comms" || n.starts_with("cuda"))) continue;
    v.emplace_back(o.rank, o.lane, n, o.end_ns - o.start_ns, static_cast<int>(o.category), o.step);
  }
  std::sort(v.begin(), v.end());
  return v;
}

std::string kx44_import(const std::string& dir, const std::string& name) {
  const std::string db = (kx44_scratch() / name).string();
  fs::remove(db);
  ss::SessionWriter w(db, true);
  ss::importers::import_kineto_json(ss::importers::expand_inputs({dir}), w, {});
  w.close("complete");
  return db;
}

}  // namespace

TEST(KinetoExport, RoundTripOfATwoRankRunKeepsOpsNamesDurationsRanksStepsAndCollectives) {
  const std::string db = kx44_session(false);
  const std::string dir = kx44_export(db, "run_kineto");
  ASSERT_TRUE(fs::exists(fs::path(dir) / "rank_0.json"));
  ASSERT_TRUE(fs::exists(fs::path(dir) / "rank_1.json"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "rank_2.json"));
  const ss::SessionReader orig(db);
  const ss::SessionReader back(kx44_import(dir, "run_back.db"));
  // ranks, and every op: its rank, lane, name, exact duration (ns), category and step
  std::vector<int32_t> ranks;
  for (const auto& r : back.ranks()) ranks.push_back(r.rank);
  EXPECT_EQ(ranks, (std::vector<int32_t>{0, 1}));
  const auto a = kx44_ops(orig, false), b = kx44_ops(back, true);
  ASSERT_GT(a.size(), 20u);
  EXPECT_EQ(a, b);
  // nothing added: the export's record_param_comms spans come back as the collective records
  // only (tester53 F2; before, one op each)
  EXPECT_EQ(back.op_count(), orig.op_count());
  // every op moved by one offset (the importer puts the earliest event of all ranks at 0)
  // (all_ops: by rank, lane, start; the exported ops in the same order)
  auto oa = orig.all_ops(), ob = back.all_ops();
  ASSERT_EQ(oa.size(), ob.size());
  std::set<int64_t> shifts;
  for (size_t i = 0; i < oa.size(); ++i) {
    EXPECT_EQ(orig.name(oa[i].name_id), back.name(ob[i].name_id));
    shifts.insert(oa[i].start_ns - ob[i].start_ns);
  }
  EXPECT_EQ(shifts.size(), 1u);
  // steps: the same numbers, ranks and durations
  auto step_key = [](const ss::SessionReader& s) {
    std::vector<std::tuple<int64_t, int32_t, int64_t>> v;
    for (const auto& m : s.steps()) v.emplace_back(m.step, m.rank, m.end_ns - m.start_ns);
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(step_key(orig), step_key(back));
  EXPECT_EQ(step_key(back).size(), 6u);  // 3 steps x 2 ranks
  // collectives: op, group, sequence, dtype, bytes, peers, splits and duration, rank by rank
  auto coll_key = [](const ss::SessionReader& s) {
    std::vector<std::tuple<int32_t, uint64_t, std::string, std::string, std::string, int64_t, int64_t, int64_t,
                           std::vector<int32_t>, std::vector<int64_t>, std::vector<int64_t>>> v;
    for (const auto& c : s.collectives())
      v.emplace_back(c.rank, c.sequence, c.op, c.group, c.dtype, c.bytes_sent, c.bytes_received, c.end_ns - c.start_ns,
                     c.peers, c.send_elements, c.recv_elements);
    std::sort(v.begin(), v.end());
    return v;
  };
  ASSERT_EQ(orig.collectives().size(), 66u);  // tiny, 3 steps: 11 collectives per step and rank
  EXPECT_EQ(coll_key(orig), coll_key(back));
}

TEST(KinetoExport, FilesHaveTheFieldsHolisticTraceAnalysisReads) {
  const std::string dir = kx44_export(kx44_session(false), "run_fields");
  for (int rank : {0, 1}) {
    const std::string path = (fs::path(dir) / ("rank_" + std::to_string(rank) + ".json")).string();
    const std::string text = kx44_text(path);
    // trace_file.py create_rank_to_trace_dict: the first line matching "rank":\s+(\d+)
    std::istringstream lines(text);
    std::string line;
    const std::regex rank_re(R"("rank":\s+(\d+))");
    std::smatch m;
    int found = -1;
    while (std::getline(lines, line))
      if (std::regex_search(line, m, rank_re)) {
        found = std::stoi(m[1]);
        break;
      }
    EXPECT_EQ(found, rank) << path;
    // trace_parser.py parse_metadata_ijson reads the keys before "traceEvents" only
    EXPECT_LT(text.find("\"distributedInfo\""), text.find("\"traceEvents\""));
    EXPECT_LT(text.find("\"embedscope\""), text.find("\"traceEvents\""));
    const json j = json::parse(text);
    EXPECT_EQ(j["distributedInfo"]["rank"], rank);
    EXPECT_EQ(j["distributedInfo"]["world_size"], 2);
    EXPECT_EQ(j["distributedInfo"]["backend"], "gloo");
    EXPECT_EQ(j["embedscope"]["simulated"], false);
    EXPECT_EQ(j["schemaVersion"], 1);
    int steps = 0, params = 0, ops = 0;
    const std::regex step_re(R"(^ProfilerStep#(\d+)$)");
    for (const auto& e : j["traceEvents"]) {
      if (e["ph"] == "M") continue;
      // _compress_df drops events without "dur" or "cat"; the rest need ts, name, pid, tid
      ASSERT_EQ(e["ph"], "X");
      ASSERT_TRUE(e.contains("cat") && e["cat"].is_string()) << e;
      ASSERT_TRUE(e["dur"].is_number() && e["ts"].is_number()) << e;
      ASSERT_TRUE(e["name"].is_string() && e["pid"].is_number_integer() && e["tid"].is_number_integer()) << e;
      EXPECT_NE(e["cat"], "kernel");  // a CPU run: host threads only
      const std::string name = e["name"];
      if (name.starts_with("ProfilerStep")) {
        EXPECT_TRUE(std::regex_match(name, step_re)) << name;
        EXPECT_EQ(e["cat"], "user_annotation");
        ++steps;
      } else if (name == "record_param_comms") {
        EXPECT_EQ(e["cat"], "cpu_op");
        if (params++ == 0) {  // rank's first collective: the split check of input_dist (all-gather of 4 int64)
          const json& a = e["args"];
          EXPECT_EQ(a["Collective name"], "_allgather_base");
          EXPECT_EQ(a["dtype"], "Long");
          EXPECT_EQ(a["In msg nelems"], 4);
          EXPECT_EQ(a["Out msg nelems"], 8);
          EXPECT_EQ(a["Group size"], 2);
          EXPECT_EQ(a["Process Group Name"], "world");
          EXPECT_EQ(a["Process Group Ranks"], json::array({0, 1}));
          EXPECT_EQ(a["Seq"], 1);
        }
      } else {
        EXPECT_EQ(e["cat"], "cpu_op");
        EXPECT_EQ(e["pid"], ss::kKinetoHostPidBase + rank);
        ++ops;
      }
    }
    EXPECT_EQ(steps, 3);
    EXPECT_EQ(params, 33);
    EXPECT_EQ(ops, 39);  // 13 ops per step
  }
}

TEST(KinetoExport, SimulatedSessionHasGpuKernelsHtaClassesAsTheSessionDoesAndSaysSimulated) {
  const std::string db = kx44_session(true);
  const std::string dir = kx44_export(db, "sim_kineto");
  const json j = kx44_read((fs::path(dir) / "rank_1.json").string());
  EXPECT_EQ(j["distributedInfo"]["backend"], "nccl (simulated)");
  EXPECT_EQ(j["embedscope"]["simulated"], true);
  EXPECT_NE(j["embedscope"]["note"].get<std::string>().find("SIMULATED"), std::string::npos);
  // hta/common/types.py: CommunicateKernelGroupingPattern, and ComputeKernelGroupingPattern's exclusions
  const std::regex comm_re(R"((^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*))");
  const std::regex not_compute_re(R"((^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel))");
  std::map<int64_t, int64_t> launch_ts;  // correlation -> ts (us x 1000)
  std::vector<int64_t> step_starts;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "cuda_runtime") {
      EXPECT_EQ(e["pid"], ss::kKinetoHostPidBase + 1);
      EXPECT_TRUE(launch_ts.emplace(e["args"]["correlation"].get<int64_t>(), std::llround(e["ts"].get<double>() * 1000)).second);
    } else if (e["ph"] == "X" && e["name"].get<std::string>().starts_with("ProfilerStep#")) {
      step_starts.push_back(std::llround(e["ts"].get<double>() * 1000));
    }
  ASSERT_EQ(step_starts.size(), 3u);
  int kernels = 0, comm = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X" || e["cat"] != "kernel") continue;
    ++kernels;
    const json& a = e["args"];
    // GPUKernelFilter: stream >= 0 and correlation >= 0; add_iteration: stream > 0
    EXPECT_GT(a["stream"].get<int64_t>(), 0);
    EXPECT_EQ(a["device"], 1);
    EXPECT_EQ(e["pid"], 1);
    EXPECT_EQ(e["tid"], a["stream"]);
    const int64_t c = a["correlation"];
    ASSERT_TRUE(launch_ts.count(c)) << e;  // _filter_irrelevant_gpu_kernels keeps launched kernels only
    const int64_t ts = std::llround(e["ts"].get<double>() * 1000);
    EXPECT_LE(launch_ts[c], ts);
    EXPECT_GE(launch_ts[c], step_starts.front());
    const std::string name = e["name"];
    if (a["embedscope category"] == "comm") {
      ++comm;
      EXPECT_TRUE(std::regex_match(name, comm_re)) << name;  // HTA: communication
      EXPECT_EQ(name, "nccl:" + a["embedscope name"].get<std::string>());
    } else {
      EXPECT_FALSE(std::regex_search(name, not_compute_re)) << name;  // HTA: computation
    }
  }
  EXPECT_EQ(kernels, 39);  // 13 ops per step, 3 steps
  EXPECT_EQ(comm, 18);     // 6 comm ops per step
  // imported back: the session's kernel names (not the nccl: ones), durations and categories
  const ss::SessionReader orig(db);
  const ss::SessionReader back(kx44_import(dir, "sim_back.db"));
  auto streams_only = [](std::vector<Kx44Op> v) {
    for (auto& o : v) std::get<1>(o) = 0;  // lanes renumbered: threads first on import
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(streams_only(kx44_ops(orig, false)), streams_only(kx44_ops(back, true)));
}

TEST(KinetoExport, CliRefusesExistingTracesAFileAndAnUnwritablePathNamingThem) {
  const std::string db = kx44_session(false);
  const fs::path dir = kx44_scratch() / "refusals";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "rank_5.json") << "{}";  // another session's rank: HTA would read it too
  auto r = kx44_cli("export " + db + " --format kineto -o " + dir.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find((dir / "rank_5.json").string() + ": already exists"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--force-overwrite"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "rank_0.json"));
  r = kx44_cli("export " + db + " --format kineto -o " + dir.string() + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir / "rank_5.json"));  // the stale rank is gone
  EXPECT_TRUE(fs::exists(dir / "rank_0.json") && fs::exists(dir / "rank_1.json"));
  EXPECT_NE(r.err.find("TraceAnalysis(trace_dir="), std::string::npos) << r.err;
  // a regular file where the folder should be
  const fs::path file = kx44_scratch() / "a_file";
  std::ofstream(file) << "x";
  r = kx44_cli("export " + db + " --format kineto -o " + file.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(file.string() + ": exists and is not a directory"), std::string::npos) << r.err;
  // a folder that cannot be made (below a regular file)
  r = kx44_cli("export " + db + " --format kineto -o " + (file / "traces").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("-o " + (file / "traces").string() + ": cannot make the folder " + file.string() + ": "),
            std::string::npos)
      << r.err;
}

TEST(KinetoExport, CommArgsGiveBackTheRecordsBytesByTheImportersRule) {
  ss::CollectiveRecord c;
  c.peers = {0, 1, 2, 3};
  c.dtype = "float32";
  // all_reduce of 1000 float32 on 4 ranks: a ring sends 2 (n-1)/n x 4000 B = 6000 B
  c.op = "all_reduce";
  c.bytes_sent = c.bytes_received = 6000;
  auto a = ss::kineto_comm_args(c);
  EXPECT_EQ(a.name, "allreduce");
  EXPECT_EQ(a.dtype, "Float");
  EXPECT_EQ(a.in_nelems, 1000);
  EXPECT_EQ(a.out_nelems, 1000);
  // tester53 F7: 779 float32 on 3 ranks send floor(2 x 2 / 3 x 3116 B) = 4154 B; 4154 x 3 / 16 =
  // 778.875 elements: 779 (floor gave 778, which the importer counts as 4149 B)
  c.peers = {0, 1, 2};
  c.bytes_sent = c.bytes_received = 4154;
  a = ss::kineto_comm_args(c);
  EXPECT_EQ(a.in_nelems, 779);
  EXPECT_EQ(a.out_nelems, 779);
  // the same all-reduce recorded in whole elements (model/ring_all_reduce.h): chunks 260, 260,
  // 259; rank 0 sends 2 x (779 - 260) x 4 = 4,152 B, which only 779 elements give it (778: 4,144,
  // 780: 4,160)
  c.bytes_sent = c.bytes_received = 4152;
  a = ss::kineto_comm_args(c);
  EXPECT_EQ(a.in_nelems, 779);
  EXPECT_EQ(ss::ring_all_reduce_bytes(a.in_nelems, 3, 0, 4), 4152);
  c.peers = {0, 1, 2, 3};
  // reduce_scatter of 1000 float32 (no splits recorded): (n-1)/n x 4000 B = 3000 B; out 1000 / 4
  c.op = "reduce_scatter";
  c.bytes_sent = c.bytes_received = 3000;
  a = ss::kineto_comm_args(c);
  EXPECT_EQ(a.name, "_reduce_scatter_base");
  EXPECT_EQ(a.in_nelems, 1000);
  EXPECT_EQ(a.out_nelems, 250);
  // all_gather with the elements received from each peer: out = their sum, in = out / n
  c.op = "all_gather";
  c.dtype = "bfloat16";
  c.recv_elements = {5, 5, 5, 5};
  a = ss::kineto_comm_args(c);
  EXPECT_EQ(a.name, "_allgather_base");
  EXPECT_EQ(a.dtype, "BFloat16");
  EXPECT_EQ(a.out_nelems, 20);
  EXPECT_EQ(a.in_nelems, 5);
  // all_to_all: the splits as they are
  c.op = "all_to_all";
  c.dtype = "int64";
  c.send_elements = {1, 2, 3, 4};
  c.recv_elements = {4, 3, 2, 1};
  a = ss::kineto_comm_args(c);
  EXPECT_EQ(a.name, "all_to_allv");
  EXPECT_EQ(a.dtype, "Long");
  EXPECT_EQ(a.in_split, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(a.out_split, (std::vector<int64_t>{4, 3, 2, 1}));
  EXPECT_EQ(a.in_nelems, 10);
  EXPECT_EQ(a.out_nelems, 10);
}

namespace {

/// A cuda run's shape, written by hand (no GPU here): per rank host threads compute (0) and comm
/// (1), streams gpu_compute (2), gpu_comm (3), gpu_copy (4) and the sync lane (5); per step s
/// (b = 10 s ms, steps 0..2; times in us) a lookup kernel [b+200, b+2200), an NCCL kernel
/// [b+1200, b+3200) that starts after its host call [b+100, b+300) and collective record
/// [b+120, b+280) ended, a copy [b+3300, b+3400) and a stream sync [b+3400, b+3500). By hand,
/// HTA's overlap: computing while communicating [b+1200, b+2200) = 1,000 of 2,000 us of
/// communication = 50% per step. (Whole microseconds: HTA rounds ns-precision times to them.)
std::string kx44_cuda_like_session() {
  const std::string db = (kx44_scratch() / "cuda_like.db").string();
  fs::remove(db);
  ss::SessionWriter w(db);
  w.set_metadata("world_size", "2");
  w.set_metadata("backend", "cuda");
  for (int32_t r : {0, 1}) {
    w.add_rank({r, "node0", "NVIDIA H100 80GB HBM3", 85520809984});
    w.add_lane({r, 0, "compute", "thread"});
    w.add_lane({r, 1, "comm", "thread"});
    w.add_lane({r, 2, "gpu_compute", "stream"});
    w.add_lane({r, 3, "gpu_comm", "stream"});
    w.add_lane({r, 4, "gpu_copy", "stream"});
    w.add_lane({r, 5, "gpu_sync", "sync"});
    for (int64_t s = 0; s < 3; ++s) {
      const int64_t us = 1000, b = 10000 * us * s;  // ns
      using L = ss::Lane;
      using C = ss::OpCategory;
      w.add_ops({ss::OpEvent{r, L::compute, C::lookup, "lookup", s, b, b + 100 * us, 0, 0},
                 ss::OpEvent{r, L::comm, C::comm, "output_dist/all_to_all", s, b + 100 * us, b + 300 * us, 2048, static_cast<uint64_t>(s + 1)},
                 ss::OpEvent{r, L::gpu_compute, C::lookup, "split_embedding_codegen_forward_kernel", s, b + 200 * us, b + 2200 * us, 0, 0},
                 ss::OpEvent{r, L::gpu_comm, C::comm, "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", s, b + 1200 * us, b + 3200 * us, 2048, 0},
                 ss::OpEvent{r, L::gpu_copy, C::memcpy, "Memcpy HtoD (Pageable -> Device)", s, b + 3300 * us, b + 3400 * us, 1024, 0},
                 ss::OpEvent{r, static_cast<L>(5), C::other, "cudaStreamSynchronize", s, b + 3400 * us, b + 3500 * us, 0, 0}});
      ss::CollectiveRecord c;
      c.rank = r, c.op = "all_to_all", c.name = "output_dist/all_to_all", c.group = "world";
      c.sequence = static_cast<uint64_t>(s + 1), c.dtype = "float32", c.step = s;
      c.start_ns = b + 120 * us, c.end_ns = b + 280 * us, c.bytes_sent = c.bytes_received = 1024;
      c.peers = {0, 1}, c.send_elements = {256, 256}, c.recv_elements = {256, 256};
      w.add_collective(c);
      w.add_step({s, r, b, b + 10000 * us, 0.5, 0, 0});
    }
  }
  w.close("complete");
  return db;
}

}  // namespace

TEST(KinetoExport, CudaRunShapeGivesLaunchesInsideTheirCollectiveAndHtasOverlapBack) {
  const std::string db = kx44_cuda_like_session();
  const fs::path dir = kx44_scratch() / "cuda_like";
  fs::remove_all(dir);
  const ss::SessionReader orig(db);
  ASSERT_EQ(ss::export_kineto_traces(orig, dir.string()).size(), 2u);
  const json j = kx44_read((dir / "rank_1.json").string());
  EXPECT_EQ(j["distributedInfo"]["backend"], "nccl");
  EXPECT_EQ(j["deviceProperties"][0]["name"], "NVIDIA H100 80GB HBM3");
  std::map<int64_t, json> launch;  // by correlation
  std::map<std::string, json> gpu;  // by cat: the step-1 event of each
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["cat"] == "cuda_runtime") launch[e["args"]["correlation"].get<int64_t>()] = e;
    else if (e["pid"] == 1 && e["args"]["embedscope step"] == 1) gpu[e["cat"].get<std::string>() + "/" + std::to_string(e["tid"].get<int>())] = e;
  }
  ASSERT_EQ(launch.size(), 12u);  // 4 GPU ops x 3 steps
  // the NCCL kernel, named as it was (HTA calls it communication), with its collective's args;
  // launched on the comm thread inside the collective's span [10120, 10280) us: 1 ns before its end
  const json& nccl = gpu.at("kernel/4");
  EXPECT_EQ(nccl["name"], "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)");
  EXPECT_EQ(nccl["ts"], 11200.0);
  EXPECT_EQ(nccl["args"]["Collective name"], "all_to_allv");
  EXPECT_EQ(nccl["args"]["In split size"], json::array({256, 256}));
  const json& l = launch.at(nccl["args"]["correlation"].get<int64_t>());
  EXPECT_EQ(l["name"], "cudaLaunchKernel");
  EXPECT_EQ(l["tid"], 1);
  EXPECT_EQ(l["ts"], 10279.999);
  // the lookup kernel: launched from the launch thread at its start
  const json& k = gpu.at("kernel/3");
  EXPECT_EQ(k["name"], "split_embedding_codegen_forward_kernel");
  EXPECT_EQ(launch.at(k["args"]["correlation"].get<int64_t>())["tid"], ss::kKinetoLaunchTid);
  EXPECT_EQ(launch.at(k["args"]["correlation"].get<int64_t>())["ts"], 10200.0);
  // the copy and the sync, in Kineto's categories
  EXPECT_EQ(gpu.at("gpu_memcpy/5")["name"], "Memcpy HtoD (Pageable -> Device)");
  EXPECT_EQ(gpu.at("gpu_memcpy/5")["args"]["bytes"], 1024);
  EXPECT_EQ(launch.at(gpu.at("gpu_memcpy/5")["args"]["correlation"].get<int64_t>())["name"], "cudaMemcpyAsync");
  EXPECT_EQ(gpu.at("cuda_sync/6")["name"], "cudaStreamSynchronize");
  // imported back: the collectives with their bytes, the kernels by name, HTA's 50% overlap
  const ss::SessionReader back(kx44_import(dir.string(), "cuda_like_back.db"));
  ASSERT_EQ(back.collectives().size(), 6u);
  for (const auto& c : back.collectives()) {
    EXPECT_EQ(c.op, "all_to_all");
    EXPECT_EQ(c.bytes_sent, 1024);
    EXPECT_EQ(c.bytes_received, 1024);
    EXPECT_EQ(c.end_ns - c.start_ns, 2000000);  // timed by its NCCL kernel
  }
  EXPECT_EQ(back.op_count(), orig.op_count() + 24);  // + the launches (the record_param_comms spans: records only)
  auto streams = [](const ss::SessionReader& s) {
    std::vector<std::tuple<std::string, int64_t, int>> v;
    for (const auto& o : s.all_ops())
      if (o.lane >= 2 && !s.name(o.name_id).starts_with("cuda")) v.emplace_back(s.name(o.name_id), o.end_ns - o.start_ns, static_cast<int>(o.category));
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(streams(orig).size(), 18u);  // kernels, NCCL kernels and copies of 2 ranks x 3 steps
  const auto fo = ss::gpu_kernel_figures(orig), fb = ss::gpu_kernel_figures(back);
  ASSERT_EQ(fb.size(), 2u);
  ASSERT_EQ(fo.size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_DOUBLE_EQ(fo[r].overlap_pct, 50.0);
    EXPECT_DOUBLE_EQ(fb[r].overlap_pct, 50.0);
    EXPECT_EQ(fb[r].comm_ns, fo[r].comm_ns);
    EXPECT_EQ(fb[r].compute_ns, fo[r].compute_ns);
  }
}

TEST(KinetoExport, AnImportedKinetoTraceExportsWithItsOwnLaunchesAndCollectiveSpans) {
  // tests/data/traces/hta_small: 2 ranks, 8 kernels, 2 copies, 10 launches, 2 record_param_comms
  // spans with args, 2 cpu ops, 3 steps each; HTA's overlap on rank 0 is 37.5% (import_cli_test)
  const auto first = ss::testing::import_into({ss::testing::trace_fixture("hta_small")}, "kx44_hta_small.db");
  const fs::path dir = kx44_scratch() / "hta_small_kineto";
  fs::remove_all(dir);
  const ss::SessionReader orig(ss::testing::scratch_db("kx44_hta_small.db"));
  ss::export_kineto_traces(orig, dir.string());
  // no launch placed by the exporter: every kernel has the trace's own
  const std::string text = kx44_text((dir / "rank_0.json").string());
  EXPECT_EQ(text.find("\"synthesized\":true"), std::string::npos);
  const ss::SessionReader back(kx44_import(dir.string(), "hta_small_back.db"));
  std::map<std::string, int64_t> events_back;
  {
    ss::SessionWriter w((kx44_scratch() / "hta_small_back2.db").string(), true);
    events_back = ss::importers::import_kineto_json(ss::importers::expand_inputs({dir.string()}), w, {}).events;
    w.close("complete");
  }
  EXPECT_EQ(events_back, first.events);  // collectives 2, cpu_ops 2, kernels 8, memcpy 2, runtime_calls 10, steps 6
  EXPECT_EQ(first.events.at("runtime_calls"), 10);
  EXPECT_EQ(kx44_ops(orig, false), kx44_ops(back, false));
  ASSERT_EQ(back.collectives().size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.collectives()[i].op, orig.collectives()[i].op);
    EXPECT_EQ(back.collectives()[i].bytes_sent, orig.collectives()[i].bytes_sent);
    EXPECT_EQ(back.collectives()[i].bytes_received, orig.collectives()[i].bytes_received);
  }
  const auto f = ss::gpu_kernel_figures(back);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_DOUBLE_EQ(f[0].overlap_pct, 37.5);
}
