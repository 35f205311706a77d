// tester52 F12: `export --format chrome` writes each collective as PyTorch's record_param_comms
// span with its arguments inside the comm op that ran it, and `import` of that file gives back
// every collective record (op, name, group, sequence, dtype, step, duration, bytes, peers, per-peer
// elements) and every op its step, duration and bytes. Before, the file carried no collectives (an
// imported chrome export read every collective 0 B), and the import gave ops the step of the step
// span holding them and no bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <vector>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/store/session.h"
#include "import_test_support.h"
#include "support/cli_run.h"

using embedscope::sessions::CollectiveRecord;
using embedscope::sessions::SessionReader;
using embedscope::sessions::testing::import_scratch;
using embedscope::sessions::testing::scratch_db;

namespace {

embedscope::test_support::CliResult chrome53_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, import_scratch());
}

using Chrome53Key = std::tuple<int32_t, std::string, uint64_t>;  // rank, group, sequence

std::map<Chrome53Key, CollectiveRecord> chrome53_by_key(const SessionReader& s) {
  std::map<Chrome53Key, CollectiveRecord> out;
  for (const auto& c : s.collectives()) out[{c.rank, c.group, c.sequence}] = c;
  return out;
}

// Runs `run_args`, exports the session to Chrome JSON, imports that back, and compares the
// collective records; returns the number of record_param_comms spans in the file.
// `same_stats`: stats' collective rows (count, bytes sent) equal too; a pipelined run's are not:
// its drain steps are not carried by the export (tester53 F3), so the import counts them.
void chrome53_round_trip(const std::string& tag, const std::string& run_args, bool same_stats = true) {
  const std::string src = scratch_db("c53_" + tag + ".db"), json = (import_scratch() / ("c53_" + tag + ".json")).string(),
                    back = scratch_db("c53_" + tag + "_back.db");
  auto r = chrome53_cli("run " + run_args + " --force-overwrite -o " + src);
  ASSERT_EQ(r.code, 0) << r.err;
  r = chrome53_cli("export " + src + " --format chrome --force-overwrite -o " + json);
  ASSERT_EQ(r.code, 0) << r.err;
  r = chrome53_cli("import " + json + " --force-overwrite -o " + back);
  ASSERT_EQ(r.code, 0) << r.err;
  const SessionReader a(src), b(back);
  const auto want = chrome53_by_key(a), got = chrome53_by_key(b);
  ASSERT_GT(want.size(), 0u);
  EXPECT_EQ(got.size(), want.size());
  for (const auto& [key, w] : want) {
    const auto it = got.find(key);
    ASSERT_NE(it, got.end()) << "rank " << w.rank << " " << w.group << " #" << w.sequence << " " << w.name;
    const CollectiveRecord& g = it->second;
    const std::string what = w.name + " rank " + std::to_string(w.rank) + " #" + std::to_string(w.sequence);
    EXPECT_EQ(g.op, w.op) << what;
    EXPECT_EQ(g.name, w.name) << what;
    EXPECT_EQ(g.dtype, w.dtype) << what;
    EXPECT_EQ(g.end_ns - g.start_ns, w.end_ns - w.start_ns) << what;
    EXPECT_EQ(g.bytes_sent, w.bytes_sent) << what;
    EXPECT_EQ(g.bytes_received, w.bytes_received) << what;
    EXPECT_EQ(g.peers, w.peers) << what;
    EXPECT_EQ(g.send_elements, w.send_elements) << what;
    EXPECT_EQ(g.recv_elements, w.recv_elements) << what;
    EXPECT_EQ(g.step, w.step) << what;
  }
  // the ops (GPU streams come back as threads): each keeps its step, duration and bytes
  // (a pipelined run's next-batch ops their batch's step, not the step span's that holds them)
  using OpKey = std::tuple<int32_t, std::string, int64_t, int64_t, int64_t, int>;  // rank, name, step, ns, bytes, category
  // (the export's record_param_comms spans come back as the records only, not as ops: tester53 F2)
  auto ops_of = [](const SessionReader& s) {
    std::multiset<OpKey> out;
    for (const auto& o : s.all_ops())
      out.insert({o.rank, s.name(o.name_id), o.step, o.end_ns - o.start_ns, o.bytes, static_cast<int>(o.category)});
    return out;
  };
  const auto ops_a = ops_of(a), ops_b = ops_of(b);
  EXPECT_EQ(ops_b.size(), ops_a.size());
  std::vector<OpKey> only_a, only_b;
  std::set_difference(ops_a.begin(), ops_a.end(), ops_b.begin(), ops_b.end(), std::back_inserter(only_a));
  std::set_difference(ops_b.begin(), ops_b.end(), ops_a.begin(), ops_a.end(), std::back_inserter(only_b));
  EXPECT_TRUE(only_a.empty()) << only_a.size() << " ops differ, first: rank " << std::get<0>(only_a.front()) << " "
                              << std::get<1>(only_a.front()) << " step " << std::get<2>(only_a.front()) << " bytes "
                              << std::get<4>(only_a.front()) << "; imported as step "
                              << (only_b.empty() ? -99 : std::get<2>(only_b.front())) << " bytes "
                              << (only_b.empty() ? -99 : std::get<4>(only_b.front()));
  // stats lists the collectives under the session's names, as for the original (tester53 F2: one
  // "record_param_comms" row)
  {
    const auto sa = chrome53_cli("stats --json " + src), sb = chrome53_cli("stats --json " + back);
    ASSERT_EQ(sa.code, 0) << sa.err;
    ASSERT_EQ(sb.code, 0) << sb.err;
    std::map<std::string, std::pair<double, int64_t>> rows_a, rows_b;  // name -> count, bytes sent
    const auto ja = nlohmann::json::parse(sa.out), jb = nlohmann::json::parse(sb.out);
    for (const auto& c : ja["collectives"])
      rows_a[c["name"].get<std::string>()] = {c["count"].get<double>(), c["bytes_sent"].get<int64_t>()};
    for (const auto& c : jb["collectives"])
      rows_b[c["name"].get<std::string>()] = {c["count"].get<double>(), c["bytes_sent"].get<int64_t>()};
    EXPECT_GT(rows_a.size(), 1u);
    if (same_stats) {
      EXPECT_EQ(rows_b, rows_a);
    } else {
      for (const auto& [name, row] : rows_a) EXPECT_TRUE(rows_b.count(name)) << name;
      EXPECT_EQ(rows_b.size(), rows_a.size());
    }
  }
  // each span sits inside a comm op of its rank's lane (Perfetto nests it there) with the args
  std::ifstream in(json);
  const auto doc = nlohmann::json::parse(in);
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> comm_ops;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "comm" && e["name"] != "record_param_comms")
      comm_ops[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back(
          {std::stod(e["ts"].dump()), std::stod(e["ts"].dump()) + std::stod(e["dur"].dump())});
  size_t spans = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X" || e["name"] != "record_param_comms") continue;
    ++spans;
    const double s = std::stod(e["ts"].dump()), t = s + std::stod(e["dur"].dump());
    bool inside = false;
    for (const auto& [os, ot] : comm_ops[{e["pid"].get<int>(), e["tid"].get<int>()}]) inside |= os <= s && t <= ot;
    EXPECT_TRUE(inside) << e.dump();
    EXPECT_TRUE(e["args"].contains("Collective name") && e["args"].contains("In msg nelems") &&
                e["args"].contains("Process Group Ranks") && e["args"].contains("embedscope collective"))
        << e.dump();
  }
  EXPECT_EQ(spans, want.size());
}

}  // namespace

// A cpu run: 4 ranks, a warm-up step (its collectives at step -1 come back there too).
TEST(Chrome53Collectives, ACpuRunsCollectivesComeBackFromItsChromeExport) {
  chrome53_round_trip("cpu", "--preset tiny --devices 4 --steps 2 --warmup-steps 1");
}

// A simulated GPU run: comm ops on GPU streams, split checks of zero duration.
TEST(Chrome53Collectives, ASimulatedRunsCollectivesComeBackFromItsChromeExport) {
  chrome53_round_trip("sim", "--preset tiny --devices 4 --steps 2 --warmup-steps 1 --simulate h100_sxm");
}

// A semi_sync run: the next batch's input_dist runs in the current step's window and keeps its
// batch's step (the "step" arg; the import took the step span's before), the pipeline's fill at -1.
TEST(Chrome53Collectives, APipelinedRunKeepsEachOpsAndCollectivesStep) {
  chrome53_round_trip("semi", "--preset tiny --devices 4 --steps 4 --warmup-steps 0 --pipeline semi_sync", false);
}

// tester52 F12's case: an lm_embedding run (vocab_parallel's all-reduces and all-gathers), whose
// bytes `stats` of the import read 0 B. A small vocabulary (8,000 x 64; gpt2_small_embedding's
// 50,257 x 768 took 19 s here and 240-275 s under ASan).
TEST(Chrome53Collectives, AnLmRunsCollectivesComeBackFromItsChromeExport) {
  const auto wl = import_scratch() / "c53_lm.json";
  std::ofstream(wl) << R"({"model": "lm_embedding", "name": "c53_lm", "vocab_size": 8000, "hidden_size": 64,
    "sequence_length": 64, "micro_batch_size": 2, "body_layers": 1, "devices": {"count": 2},
    "sharding": {"type": "vocab_parallel"}, "steps": 3})";
  chrome53_round_trip("lm", wl.string());
}
