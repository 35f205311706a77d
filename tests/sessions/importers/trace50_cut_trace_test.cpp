// Two leftovers of tester49 F2 on a cut Kineto trace (the first 3,000,000 bytes of
// shared/data/traces/nccl_data.json.gz: no GPU event survives, the figures are the host threads'):
// 1. its record_param_comms `wait` spans (Work::wait: Collective name wait, Group size 1, 0
//    elements) were no collectives since fixd49 but still counted as communication time in the
//    overlap / exposed-communication figures and the collectives table: a wait is idle time, and
//    HTA counts only the collectives' kernels. They are stored as "record_param_comms (wait)"
//    and left out of every comm figure.
// 2. the 5 all-reduces of the DDP reducer's thread after ProfilerStep#5's end had step -1: the
//    cut fell inside step 5 on the main thread, so ProfilerStep#6's span (written after step 5's
//    ops there) was lost; in the whole trace they lie in ProfilerStep#6. They are kept as step 6,
//    incomplete (no window), and a second trace cut line says so.
// The whole trace keeps shared/data/README.md's numbers (fixd49_test checks them too).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/gpu_run.h"
#include "embedscope/sessions/importers/kineto_json/kineto_json.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/pickle.h"
#include "embedscope/sessions/model/wait_span.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace fs = std::filesystem;
namespace t50ss = embedscope::sessions;

const std::string kT50Nccl = std::string(EMBEDSCOPE_SHARED_DATA) + "/traces/nccl_data.json.gz";

fs::path t50_scratch() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / ("es_trace50_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::string t50_text() {
  static const std::string text = [] {
    std::stringstream s;
    s << std::ifstream(kT50Nccl, std::ios::binary).rdbuf();
    return t50ss::pickle::gunzip(s.str(), kT50Nccl, int64_t{64} << 20);
  }();
  return text;
}

// The trace's first `bytes` bytes imported into NAME.db (the whole trace when bytes is 0).
std::string t50_import(const std::string& name, size_t bytes) {
  const std::string trace = (t50_scratch() / (name + ".json")).string();
  std::ofstream(trace, std::ios::binary) << (bytes ? t50_text().substr(0, bytes) : t50_text());
  const std::string db = (t50_scratch() / (name + ".db")).string();
  t50ss::SessionWriter w(db, true);
  t50ss::importers::import_kineto_json({trace}, w, {});
  w.close("complete");
  return db;
}

int32_t t50_name_id(const t50ss::SessionReader& r, const std::string& name) {
  const auto& s = r.strings();
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == name) return static_cast<int32_t>(i);
  return -1;
}
}  // namespace

// 1. The cut trace's 4 wait spans (steps 4 and 5, on the main thread, under the "## forward ##"
// range only) last 36.688 + 41.730 + 33.253 + 42.380 us = 154,051 ns and overlap no other comm
// op. The cut fell inside step 5 (that step is incomplete, out of the step figures), so the
// figures are step 4's: its 2 waits (78,418 ns) taken out, its thread-level comm time drops from
// 2,121,320 ns to 2,042,902 ns (both computed apart from the JSON in Python: the union of the
// record_param_comms / nccl: / c10d:: host spans clipped to ProfilerStep#4's span, with and
// without the waits). Every comm span is on the main thread inside the aten op that called it (or
// under the "## forward ##" range, a record_function range: no compute), and no other thread
// computes meanwhile, so none of it is hidden: overlap 0, exposed 2,042,902 ns (before the
// same-thread rule the spans around each call made it 100 % hidden). The collectives table's
// record_param_comms: 9 spans -> 7, time 1,452,914 -> 1,374,496 ns.
TEST(Trace50CutTrace, WaitSpansAreNoCommunicationTime) {
  if (!fs::exists(kT50Nccl)) GTEST_SKIP() << kT50Nccl << " is absent (../shared/data)";
  const t50ss::SessionReader r(t50_import("cut3", 3'000'000));
  const int32_t wait = t50_name_id(r, t50ss::kImportedWaitSpanName);
  ASSERT_GE(wait, 0);
  int waits = 0;
  int64_t wait_ns = 0;
  for (const auto& o : r.all_ops())
    if (o.name_id == wait) {
      ++waits;
      wait_ns += o.end_ns - o.start_ns;
      EXPECT_EQ(o.category, t50ss::OpCategory::comm);
    }
  EXPECT_EQ(waits, 4);
  EXPECT_EQ(wait_ns, 154'051);
  const t50ss::RunStats st = t50ss::analyze(r);
  ASSERT_EQ(st.ranks.size(), 1u);
  EXPECT_EQ(st.steps, 1);
  EXPECT_EQ(st.ranks[0].comm_ns, 2'042'902);
  EXPECT_EQ(st.ranks[0].overlap_ns, 0);
  EXPECT_EQ(st.ranks[0].exposed_comm_ns, 2'042'902);
  EXPECT_EQ(st.ranks[0].by_category_ns[static_cast<size_t>(t50ss::OpCategory::comm)], 2'042'902);
  EXPECT_DOUBLE_EQ(st.overlap_pct, 0.0);
  ASSERT_EQ(st.collectives.size(), 1u);
  EXPECT_EQ(r.name(st.collectives[0].name_id), "record_param_comms");
  EXPECT_EQ(st.collectives[0].count, 7);  // 5 all-reduces + 2 broadcasts of step 4
  EXPECT_EQ(st.collectives[0].time_ns, 1'374'496);
  // bytes are the collectives' (the waits had none): step 4's, 97.7 MiB each way
  EXPECT_EQ(st.collectives[0].bytes_sent, 102'441'032);
  EXPECT_EQ(st.ranks[0].bytes_sent, 102'441'032);
}

// 1. on the whole trace: its 6 waits are renamed too, its figures are its GPU streams' (host
// spans left out), so shared/data/README.md's numbers and the stream-level overlap stay.
TEST(Trace50CutTrace, TheWholeTraceKeepsItsFigures) {
  if (!fs::exists(kT50Nccl)) GTEST_SKIP() << kT50Nccl << " is absent (../shared/data)";
  const t50ss::SessionReader r(t50_import("whole", 0));
  const int32_t wait = t50_name_id(r, t50ss::kImportedWaitSpanName);
  int waits = 0;
  for (const auto& o : r.all_ops()) waits += o.name_id == wait ? 1 : 0;
  EXPECT_EQ(waits, 6);
  const t50ss::RunStats st = t50ss::analyze(r);
  ASSERT_EQ(st.ranks.size(), 1u);
  EXPECT_TRUE(st.stream_ranks);
  EXPECT_EQ(st.steps, 3);
  std::map<int64_t, int> all_reduces;  // by step
  for (const auto& c : r.collectives())
    if (c.op == "all_reduce") ++all_reduces[c.step];
  EXPECT_EQ(all_reduces, (std::map<int64_t, int>{{4, 5}, {5, 5}, {6, 5}}));
  EXPECT_EQ(t50ss::trace_cut_text(r), "");
}

// 2. The cut trace's last all-reduces: step 6 (where the whole trace has them), not -1. Their
// bytes are the whole trace's step-6 all-reduces': 2,049,000 + 7,875,584 + 6,563,840 + 6,637,568
// + 2,431,040 floats = 102,228,128 B sent (world size 2: 2 (n-1)/n = 1). Step 6 has no window
// (its span was lost), nor has step 5, the step the cut fell in (imp57: its main-thread events
// after the cut are lost; its 4,426 surviving events keep step 5): no figure counts them (step 4
// only: the rank's bytes are step 4's 102,441,032), and the trace cut caveat says so on a second
// line. The 2,400 events after step 5's end (the reducer thread's) are kept under step 6 (both
// counts apart in Python).
TEST(Trace50CutTrace, TheLastStepsAllReducesGoToTheStepWhoseSpanTheCutLost) {
  if (!fs::exists(kT50Nccl)) GTEST_SKIP() << kT50Nccl << " is absent (../shared/data)";
  const std::string db = t50_import("cut3b", 3'000'000);
  const t50ss::SessionReader r(db);
  std::map<int64_t, int> all_reduces;
  int64_t step6_sent = 0;
  for (const auto& c : r.collectives())
    if (c.op == "all_reduce") {
      ++all_reduces[c.step];
      if (c.step == 6) step6_sent += c.bytes_sent;
    }
  EXPECT_EQ(all_reduces, (std::map<int64_t, int>{{4, 5}, {5, 5}, {6, 5}}));
  EXPECT_EQ(step6_sent, 102'228'128);
  {  // the whole trace's step-6 all-reduces: the same bytes
    const t50ss::SessionReader whole(t50_import("whole_b", 0));
    int64_t whole6 = 0;
    for (const auto& c : whole.collectives())
      if (c.op == "all_reduce" && c.step == 6) whole6 += c.bytes_sent;
    EXPECT_EQ(whole6, step6_sent);
  }
  int64_t step6_ops = 0;
  for (const auto& o : r.all_ops()) step6_ops += o.step == 6 ? 1 : 0;
  EXPECT_EQ(step6_ops, 2400);
  int64_t step5_ops = 0;
  for (const auto& o : r.all_ops()) step5_ops += o.step == 5 ? 1 : 0;
  EXPECT_EQ(step5_ops, 4426);
  const auto steps = r.steps();
  ASSERT_EQ(steps.size(), 1u);  // no window for steps 5 and 6
  EXPECT_EQ(steps.back().step, 4);
  const t50ss::RunStats st = t50ss::analyze(r);
  EXPECT_EQ(st.steps, 1);
  ASSERT_EQ(st.ranks.size(), 1u);
  EXPECT_EQ(st.ranks[0].bytes_sent, 102'441'032);  // step 4's
  ASSERT_EQ(st.collectives.size(), 1u);
  EXPECT_EQ(st.collectives[0].count, 7);  // steps 5 and 6's collectives are not in the per-step table
  const std::string lost =
      "rank 0: the cut fell inside ProfilerStep#5 on its thread: its events after the cut are lost, so step 5 is "
      "incomplete and out of the step figures (its 4426 events kept); ProfilerStep#6's span was lost with it: the 2400 "
      "events after step 5's end (5 collectives) are kept as step 6, incomplete and out of the step figures too";
  int found = 0;
  for (const auto& p : r.import_stats())
    if (p.name == "last_step_cut") {
      ++found;
      EXPECT_EQ(p.severity, "data_loss");
      EXPECT_EQ(p.example, lost);
    }
  EXPECT_EQ(found, 1);
  const std::string cut = (t50_scratch() / "cut3b.json").string();
  EXPECT_EQ(t50ss::gpu_run_text(r, st),
            "trace cut    " + cut +
                " was cut short (import problem truncated, data_loss) and no GPU event survived the cut: overlap and "
                "exposed communication fell back to host-thread level (the record_param_comms spans against the host "
                "ops around them), not the GPU streams' figures of a whole trace\n"
                "trace cut    " + lost + "\n");
}

// 2. A cut that fell after the last step's end on the steps' thread lost no step span (the first
// 5,000,000 bytes: every ProfilerStep and every host op survive, the cut is among the runtime
// calls and kernels): the whole-trace rule, no last_step_cut.
TEST(Trace50CutTrace, ACutPastTheLastStepLosesNoStep) {
  if (!fs::exists(kT50Nccl)) GTEST_SKIP() << kT50Nccl << " is absent (../shared/data)";
  const t50ss::SessionReader r(t50_import("cut5", 5'000'000));
  // every step's span survived, but the cut fell among the runtime calls and kernels inside step
  // 4: steps 4, 5, 6 lost their later GPU events (cut_lost_gpu_events), no window
  EXPECT_EQ(r.steps().size(), 0u);
  for (const auto& p : r.import_stats()) EXPECT_NE(p.name, "last_step_cut");
  for (const auto& o : r.all_ops()) EXPECT_LE(o.step, 6);
}
