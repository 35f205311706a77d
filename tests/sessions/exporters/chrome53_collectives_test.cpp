// tester52 F12: `export --format chrome` writes each collective as PyTorch's record_param_comms
// span with its arguments inside the comm op that ran it, and `import` of that file gives back
// every collective record (op, name, group, sequence, dtype, step, duration, bytes, peers, per-peer
// elements). Before, the file carried none: an imported chrome export read every collective 0 B.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
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
void chrome53_round_trip(const std::string& tag, const std::string& run_args) {
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

// tester52 F12's case: an lm_embedding run (vocab_parallel's all-reduces and all-gathers), whose
// bytes `stats` of the import read 0 B.
TEST(Chrome53Collectives, AnLmRunsCollectivesComeBackFromItsChromeExport) {
  chrome53_round_trip("lm", "--preset gpt2_small_embedding --devices 2 --steps 2");
}
