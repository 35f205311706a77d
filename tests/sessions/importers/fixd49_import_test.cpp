// tester49's import and collectives findings:
// F1  a Kineto trace cut before its GPU events read "overlap 100.0%, exposed communication 0.00 ms"
//     with no "trace cut" caveat (the line went with the GPU busy line, absent without GPU
//     events): the caveat now shows whenever the trace was cut, and says the figures fell back
//     to host-thread level when no GPU event survived (stats, compare, Summary: gpu_run_text).
// F2  the cut trace's record_param_comms `wait` spans (group size 1, 0 elements) became
//     collectives; skipped now, as a trace with its GPU events never makes one of them.
// F7  the collectives tables' `bytes` were sent + received, unlabelled: they show bytes sent and
//     bytes received apart (stats text, --json bytes_sent / bytes_received, Summary).
// (F7 also on an engine run: the collectives' bytes sent add up to the rank table's.)
// F8  a memory snapshot whose segment is smaller than its own blocks imported with "import
//     problems: none": import problem segment_smaller_than_blocks naming it and the figures.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/gpu_run.h"
#include "embedscope/sessions/importers/kineto_json/kineto_json.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/pickle.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
namespace d49ss = embedscope::sessions;
using nlohmann::json;

fs::path d49_scratch() {
  static const fs::path dir = embedscope::test_support::fresh_scratch("es_fixd49_" + std::to_string(::getpid()));
  return dir;
}

using D49Run = embedscope::test_support::CliResult;

// `cd scratch && embedscope args`: relative file names, as a user types them (cli_run.h's run_cli:
// its stdout and stderr in scratch/out.txt and scratch/err.txt)
D49Run d49_cli(const std::string& args) {
  const fs::path dir = d49_scratch();
  return embedscope::test_support::run_cli("cd '" + dir.string() + "' && '" + std::string(EMBEDSCOPE_CLI) + "'", args, dir);
}

// The line of `text` that starts with `prefix` ("" when none).
std::string d49_line(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (l.rfind(prefix, 0) == 0) return l;
  return "";
}

// The line starting with `prefix` after the collectives table's title (the critical path table
// above it names the same ops).
std::string d49_collectives_line(const std::string& text, const std::string& prefix) {
  const size_t at = text.find("\ncollectives, per step");
  return at == std::string::npos ? std::string() : d49_line(text.substr(at), prefix);
}

std::string d49_read(const std::string& path) {
  std::stringstream s;
  s << std::ifstream(path, std::ios::binary).rdbuf();
  return s.str();
}

const std::string kD49Nccl = std::string(EMBEDSCOPE_SHARED_DATA) + "/traces/nccl_data.json.gz";

const std::string kD49HostLevel =
    " was cut short (import problem truncated, data_loss) and no GPU event survived the cut: overlap and exposed "
    "communication fell back to host-thread level (the record_param_comms spans against the host ops around them), "
    "not the GPU streams' figures of a whole trace";

// tests/data/traces/gloo/rank0.json (a CPU rank: its record_param_comms spans are its collectives,
// two all-reduces of 1000 floats on 2 ranks) with a Work::wait span in step 0 as PyTorch records
// it: Collective name wait, Group size 1, In/Out msg nelems 0, no process group.
std::string d49_gloo_with_wait() {
  json j = json::parse(d49_read(std::string(EMBEDSCOPE_TEST_DATA) + "/traces/gloo/rank0.json"));
  j["traceEvents"].push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "record_param_comms"}, {"pid", 1}, {"tid", 1},
                              {"ts", 1075.0}, {"dur", 5.0},
                              {"args", {{"Collective name", "wait"}, {"In msg nelems", 0}, {"Out msg nelems", 0},
                                        {"Group size", 1}, {"dtype", "Float"}, {"In split size", "[]"},
                                        {"Out split size", "[]"}}}});
  const std::string path = (d49_scratch() / "gloo_wait.json").string();
  std::ofstream(path) << j.dump();
  return path;
}
}  // namespace

// F2 + F7 on a fixture: the wait span is no collective; the two all-reduces each send and receive
// 2 (n-1)/n x 4000 B = 4000 B (n = 2), so the collectives table holds 8000 B sent and 8000 B
// received over the 2 steps (it held "bytes" 16000, their sum).
TEST(Fixd49Import, AWaitSpanIsNoCollectiveAndBytesSplitSentAndReceived) {
  const std::string trace = d49_gloo_with_wait();
  const std::string db = (d49_scratch() / "gloo_wait.db").string();
  {
    d49ss::SessionWriter w(db, true);
    d49ss::importers::import_kineto_json({trace}, w, {});
    w.close("complete");
  }
  const d49ss::SessionReader r(db);
  const auto colls = r.collectives();
  ASSERT_EQ(colls.size(), 2u);
  for (const auto& c : colls) {
    EXPECT_EQ(c.op, "all_reduce");
    EXPECT_EQ(c.bytes_sent, 4000);
    EXPECT_EQ(c.bytes_received, 4000);
  }
  const d49ss::RunStats st = d49ss::analyze(r);
  int64_t sent = 0, received = 0, both = 0;
  for (const auto& c : st.collectives) sent += c.bytes_sent, received += c.bytes_received, both += c.bytes;
  EXPECT_EQ(sent, 8000);
  EXPECT_EQ(received, 8000);
  EXPECT_EQ(both, 16000);  // the old figure, kept as `bytes` (sent + received)
  // stats --json says the same, per name; the text labels the columns
  D49Run s = d49_cli("stats --json gloo_wait.db");
  ASSERT_EQ(s.code, 0) << s.err;
  const json js = json::parse(s.out);
  int64_t js_sent = 0, js_received = 0;
  for (const auto& c : js["collectives"]) js_sent += c["bytes_sent"].get<int64_t>(), js_received += c["bytes_received"].get<int64_t>();
  EXPECT_EQ(js_sent, 8000);
  EXPECT_EQ(js_received, 8000);
  s = d49_cli("stats gloo_wait.db");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_NE(s.out.find("  (bytes sent: what the ranks put on the wire to their peers, as the rank table's; a ring "
                       "all-reduce of B bytes on n ranks sends 2(n-1)/n x B per rank, B itself at n = 2; in whole "
                       "elements, 2(n-1) x B over the ranks)\n"),
            std::string::npos)
      << s.out;
  const std::string header = d49_collectives_line(s.out, "  name");
  EXPECT_NE(header.find("bytes sent bytes received"), std::string::npos) << header;
  // record_param_comms: 8000 B sent over 2 steps -> 3.9 KiB a step each way; its 2 spans over 2
  // steps -> 1.0 a step (the wait's span, "record_param_comms (wait)", is idle time, no
  // communication: trace50; it counted here as 1.5 a step)
  const std::string row = d49_collectives_line(s.out, "  record_param_comms");
  EXPECT_NE(row.find("    1.0      3.9 KiB        3.9 KiB"), std::string::npos) << s.out;
  EXPECT_EQ(d49_collectives_line(s.out, "  record_param_comms (wait)"), "") << s.out;
}

// F1 + F2 on the real trace as tester49 cut it (its first 3,000,000 bytes: no GPU event left).
TEST(Fixd49Import, ARealTraceCutBeforeItsGpuEventsSaysItsFiguresAreHostThreadLevel) {
  if (!fs::exists(kD49Nccl)) GTEST_SKIP() << kD49Nccl << " is absent (../shared/data)";
  const std::string text = d49ss::pickle::gunzip(d49_read(kD49Nccl), kD49Nccl, int64_t{64} << 20);
  ASSERT_GT(text.size(), 3'000'000u);
  std::ofstream(d49_scratch() / "nccl_cut.json") << text.substr(0, 3'000'000);
  ASSERT_EQ(d49_cli("import nccl_cut.json -o cut.db").code, 0);
  D49Run s = d49_cli("stats cut.db");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(d49_line(s.out, "GPU busy"), "");  // no GPU event survived
  EXPECT_NE(d49_line(s.out, "overlap      ").find("(thread level"), std::string::npos) << s.out;
  EXPECT_EQ(d49_line(s.out, "trace cut    "), "trace cut    nccl_cut.json" + kD49HostLevel);
  s = d49_cli("stats --json cut.db");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(json::parse(s.out)["trace_cut"], true);
  // the Summary page and compare print gpu_run_text: the same line
  const d49ss::SessionReader r((d49_scratch() / "cut.db").string());
  const std::string lines = d49ss::gpu_run_text(r, d49ss::analyze(r));
  // and a second line: the cut fell inside ProfilerStep#5 and lost ProfilerStep#6's span (trace50, imp57)
  EXPECT_EQ(lines, "trace cut    nccl_cut.json" + kD49HostLevel +
                       "\ntrace cut    rank 0: the cut fell inside ProfilerStep#5 on its thread: its events after the "
                       "cut are lost, so step 5 is incomplete and out of the step figures (its 4426 events kept); "
                       "ProfilerStep#6's span was lost with it: the 2400 events after step 5's end (5 collectives) "
                       "are kept as step 6, incomplete and out of the step figures too\n");
  // F2: 15 all-reduces and 4 broadcasts, no `wait` (there were 4: 23 in all)
  std::map<std::string, int> ops;
  for (const auto& c : r.collectives()) ++ops[c.op];
  EXPECT_EQ(ops, (std::map<std::string, int>{{"all_reduce", 15}, {"broadcast", 4}}));
}

// The whole trace keeps /work/shared/data/README.md's numbers and its 21 collectives (15 all-reduce,
// 6 broadcast); F7: its all-reduces send 306,684,384 B over the 3 measured steps (world size 2: each
// record's message, 2 (n-1)/n = 1) = 102,228,128 B = 97.5 MiB a step, and receive as much: the table
// showed 195.0 MiB, their sum. Broadcasts: 638,712 B over 3 steps = 212,904 B = 207.9 KiB a step.
TEST(Fixd49Import, TheWholeNcclTraceKeepsItsNumbersAndItsCollectivesBytesAreSentAndReceived) {
  if (!fs::exists(kD49Nccl)) GTEST_SKIP() << kD49Nccl << " is absent (../shared/data)";
  ASSERT_EQ(d49_cli("import '" + kD49Nccl + "' -o whole.db").code, 0);
  const d49ss::SessionReader r((d49_scratch() / "whole.db").string());
  std::map<std::string, int> ops;
  for (const auto& c : r.collectives()) ++ops[c.op];
  EXPECT_EQ(ops, (std::map<std::string, int>{{"all_reduce", 15}, {"broadcast", 6}}));
  D49Run s = d49_cli("stats whole.db");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(d49_line(s.out, "trace cut"), "");
  // HTA's figures (README of shared/data): overlap 14.31 %, kernel 435.586 ms, idle 338.781,
  // compute 75.169, non-compute 21.636 ms
  const std::string hta = d49_line(s.out, "  0         14.31%");
  EXPECT_NE(hta.find("435.586 ms     338.781 ms      75.169 ms      21.636 ms"), std::string::npos) << s.out;
  const std::string ar = d49_collectives_line(s.out, "  ncclKernel_AllReduce_RING_LL_Sum_float");
  EXPECT_NE(ar.find("    5.0     97.5 MiB       97.5 MiB"), std::string::npos) << s.out;
  const std::string bc = d49_collectives_line(s.out, "  ncclKernel_Broadcast_RING_LL_Sum_int8_t");
  EXPECT_NE(bc.find("    2.0    207.9 KiB      207.9 KiB"), std::string::npos) << s.out;
  s = d49_cli("stats --json whole.db");
  ASSERT_EQ(s.code, 0) << s.err;
  const json js = json::parse(s.out);
  ASSERT_EQ(js["collectives"].size(), 2u);
  std::map<std::string, json> by;
  for (const auto& c : js["collectives"]) by[c["name"].get<std::string>().substr(0, 18)] = c;
  EXPECT_EQ(by.at("ncclKernel_AllRedu")["bytes_sent"], 306684384);
  EXPECT_EQ(by.at("ncclKernel_AllRedu")["bytes_received"], 306684384);
  EXPECT_EQ(by.at("ncclKernel_AllRedu")["bytes"], 613368768);  // sent + received, as before
  EXPECT_EQ(by.at("ncclKernel_Broadca")["bytes_sent"], 638712);
  EXPECT_EQ(by.at("ncclKernel_Broadca")["bytes_received"], 638712);
  EXPECT_EQ(by.at("ncclKernel_AllRedu")["count"], 15);
}

// F8: tester49's snap_badsize.pickle made in memory: one segment of total_size 100 holding a
// 1 KiB block and a 2 MiB - 1 KiB one (2,097,152 B), its trace's segment_alloc 2 MiB.
TEST(Fixd49Import, ASegmentSmallerThanItsBlocksIsAnImportProblem) {
  namespace ts = embedscope::sessions::torch_snapshot;
  ts::MemorySnapshotFile s;
  s.stacks.push_back({});
  ts::Segment seg;
  seg.address = 0x7f0000000000;
  seg.total_size = 100;
  seg.blocks = {{0x7f0000000000, 1024, 1024, ts::BlockState::active_allocated, 0, {}},
                {0x7f0000000400, (2 << 20) - 1024, 0, ts::BlockState::inactive, 0, {}}};
  s.segments.push_back(seg);
  s.device_traces = {{{ts::TraceAction::segment_alloc, 0x7f0000000000, 2 << 20, 0, 1000, 0, {}},
                      {ts::TraceAction::alloc, 0x7f0000000000, 1024, 0, 1001, 0, {}}}};
  const std::string path = (d49_scratch() / "badsize.db").string();
  ts::ImportSummary sum;
  {
    d49ss::SessionWriter w(path, true);
    sum = ts::import_torch_memory_snapshots({{&s, "snap_badsize.pickle"}}, w);
    w.close("complete");
  }
  const std::string want =
      "device 0 segment at 0x7f0000000000: total_size 100 B, but its 2 block(s) hold 2097152 B: the dump's reserved "
      "figures (segments, Memory page at the dump) count the segment's total_size, not its blocks";
  int found = 0;
  for (const auto& p : sum.import_stats)
    if (p.name == "segment_smaller_than_blocks") {
      ++found;
      EXPECT_EQ(p.severity, "error");
      EXPECT_EQ(p.example, want);
    }
  EXPECT_EQ(found, 1);
  // stats lists it (the session's import problems), no more "none"
  const d49ss::SessionReader r(path);
  int stored = 0;
  for (const auto& p : r.import_stats()) stored += p.name == "segment_smaller_than_blocks" ? 1 : 0;
  EXPECT_EQ(stored, 1);
  D49Run st = d49_cli("stats badsize.db");
  ASSERT_EQ(st.code, 0) << st.err;
  EXPECT_NE(st.out.find("segment_smaller_than_blocks"), std::string::npos) << st.out;
  EXPECT_EQ(st.out.find("import problems\n  none"), std::string::npos) << st.out;
}

// F7 on an engine run (tiny, row_wise, 2 ranks, 3 steps, as tester49 ran it): the collectives'
// bytes sent are the records' bytes_sent (sqlite: dense_all_reduce 18,696 B over 3 steps = 6,232 B
// a step, the figure the table doubled to 12.2 KiB), and over all names they add up to the rank
// table's bytes sent (37,456 B: the split checks' 192 B go with the op that holds them).
TEST(Fixd49Collectives, AnEngineRunsCollectivesShowBytesSentAsTheRankTable) {
  D49Run s = d49_cli("run --preset tiny --devices 2 --steps 3 --sharding row_wise -o rw.db");
  ASSERT_EQ(s.code, 0) << s.err;
  s = d49_cli("stats --json rw.db");
  ASSERT_EQ(s.code, 0) << s.err;
  const json js = json::parse(s.out);
  int64_t sent = 0, received = 0, rank_sent = 0, rank_received = 0;
  for (const auto& c : js["collectives"]) {
    // exp51 (tester51 F4): a collective's split check has its own figures, out of its bytes
    const int64_t check_sent = c["split_check"].is_null() ? 0 : c["split_check"]["bytes_sent"].get<int64_t>();
    const int64_t check_received = c["split_check"].is_null() ? 0 : c["split_check"]["bytes_received"].get<int64_t>();
    sent += c["bytes_sent"].get<int64_t>() + check_sent;
    received += c["bytes_received"].get<int64_t>() + check_received;
    EXPECT_EQ(c["bytes"].get<int64_t>(),
              c["bytes_sent"].get<int64_t>() + c["bytes_received"].get<int64_t>() + check_sent + check_received);
    if (c["name"] == "dense_all_reduce") {
      EXPECT_EQ(c["bytes_sent"], 18696);
      EXPECT_EQ(c["bytes_received"], 18696);
    }
  }
  for (const auto& r : js["ranks"]) rank_sent += r["bytes_sent"].get<int64_t>(), rank_received += r["bytes_received"].get<int64_t>();
  EXPECT_EQ(sent, 37456);
  EXPECT_EQ(sent, rank_sent);
  EXPECT_EQ(received, rank_received);
  const d49ss::SessionReader r((d49_scratch() / "rw.db").string());
  int64_t records_sent = 0;
  for (const auto& c : r.collectives()) records_sent += c.step >= 0 ? c.bytes_sent : 0;
  EXPECT_EQ(records_sent, 37456);
  s = d49_cli("stats rw.db");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_NE(d49_collectives_line(s.out, "  dense_all_reduce").find("    2.0      6.1 KiB        6.1 KiB"), std::string::npos)
      << s.out;
}
