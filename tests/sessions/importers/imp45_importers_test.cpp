// tester45's importer / exporter findings:
// F14 a Kineto "E" before its "B" was stored as an op of negative duration (exported "dur": -50);
// F13 `import --align collectives` of two jobs with no collective in common skipped the disjoint
//     refusal (a 19,184-day session, exit 0);
// F15 `export --format kineto` of a memory snapshot session wrote an empty folder, exit 0;
// F5  a damaged gzip was "not a format embedscope import reads"; a .nsys-rep was chosen by name,
//     not content; distributedInfo.rank -3 gave bad_rank and no_rank both.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/exporters/export.h"
#include "embedscope/sessions/model/did_not_end.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "import_test_support.h"
#include "nsys_fixture.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using embedscope::sessions::SessionReader;
using embedscope::sessions::testing::import_into;
using embedscope::sessions::testing::import_scratch;
using embedscope::sessions::testing::problem;
using embedscope::sessions::testing::problem_count;
using embedscope::sessions::testing::scratch_db;

std::string imp45_write(const std::string& name, const std::string& text) {
  const std::string p = (import_scratch() / name).string();
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

embedscope::test_support::CliResult imp45_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, import_scratch());
}

// A Kineto trace of `rank` with a ProfilerStep at `ts_us` (100 us), an aten::mm inside it, and
// (when `pg` is not empty) one record_param_comms all_reduce of process group `pg`, seq 1.
std::string imp45_trace(const std::string& name, int rank, int64_t ts_us, const std::string& pg) {
  nlohmann::json ev = nlohmann::json::array();
  ev.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#1"}, {"pid", 1}, {"tid", 1},
                {"ts", ts_us}, {"dur", 100}});
  ev.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "aten::mm"}, {"pid", 1}, {"tid", 1}, {"ts", ts_us + 1}, {"dur", 2}});
  if (!pg.empty())
    ev.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "record_param_comms"}, {"pid", 1}, {"tid", 1},
                  {"ts", ts_us + 10}, {"dur", 20},
                  {"args", {{"Collective name", "allreduce"}, {"Process Group Name", pg}, {"Seq", 1},
                            {"Group size", 2}, {"dtype", "Float"}, {"In msg nelems", 1024}, {"Out msg nelems", 1024}}}});
  const nlohmann::json j{{"schemaVersion", 1},
                         {"distributedInfo", {{"backend", "nccl"}, {"rank", rank}, {"world_size", 2}}},
                         {"traceEvents", ev}};
  return imp45_write(name, j.dump());
}
}  // namespace

// F14: B "open" at 100 us, its E at 50 us, a stray E at 700 us, beside a valid op at 10..110 us.
// The pair is the negative "dur" case: negative_duration, a zero-length op at the B (90 us after
// the origin at 10 us) named "open (did not end)"; no op ends before it starts; the Chrome and
// CSV exports hold no negative duration.
TEST(Imp45BeforeBegin, AnEndBeforeItsBeginIsAnOpThatDidNotEnd) {
  const std::string f = imp45_write(
      "imp45_be.json",
      R"({"traceEvents": [
{"ph": "X", "cat": "cpu_op", "name": "valid", "pid": 1, "tid": 1, "ts": 10, "dur": 100},
{"ph": "B", "cat": "cpu_op", "name": "open", "pid": 1, "tid": 1, "ts": 100},
{"ph": "E", "pid": 1, "tid": 1, "ts": 50},
{"ph": "E", "pid": 1, "tid": 1, "ts": 700}]})");
  const auto sum = import_into({f}, "imp45_be.db");
  EXPECT_EQ(problem_count(sum.problems, "negative_duration"), 1);
  EXPECT_EQ(problem_count(sum.problems, "unmatched_end"), 1);  // the E at 700
  const auto* nd = problem(sum.problems, "negative_duration");
  ASSERT_NE(nd, nullptr);
  EXPECT_EQ(nd->severity, "error");
  EXPECT_NE(nd->example.find("an \"E\" 50.000 us before its \"B\""), std::string::npos) << nd->example;
  EXPECT_EQ(sum.events.at("did_not_end"), 1);
  EXPECT_EQ(sum.start_ns, 0);
  EXPECT_EQ(sum.end_ns, 100000);  // the valid op only
  const SessionReader r(scratch_db("imp45_be.db"));
  bool found = false;
  for (const auto& o : r.all_ops()) {
    EXPECT_GE(o.end_ns, o.start_ns) << r.name(o.name_id);
    if (r.name(o.name_id) == "open (did not end)") {
      found = true;
      EXPECT_EQ(o.start_ns, 90000);
      EXPECT_EQ(o.end_ns, 90000);
      EXPECT_TRUE(embedscope::sessions::did_not_end(o.start_ns, o.end_ns, r.name(o.name_id)));
    }
  }
  EXPECT_TRUE(found);
  std::ostringstream chrome;
  embedscope::sessions::export_chrome_trace(r, chrome);
  const auto j = nlohmann::json::parse(chrome.str());
  const auto& evs = j.is_array() ? j : j.at("traceEvents");
  for (const auto& e : evs) {
    if (e.contains("dur")) {
      EXPECT_GE(e["dur"].get<double>(), 0.0) << e.dump();
    }
  }
}

// F13 (hand fixture): two jobs 11.6 days apart with collectives of different process groups:
// --align collectives aligns nothing, and the ranks are refused as without --align (exit 2, no
// session), the refusal saying the aligned clocks and not suggesting --align again;
// --allow-disjoint imports them with the problem. Ranks of one job that share the collective
// are aligned and imported as before.
TEST(Imp45AlignedDisjoint, NothingAlignedLeavesTwoJobsRefused) {
  const std::string a = imp45_trace("imp45_a.json", 0, 1000, "0");
  const std::string c = imp45_trace("imp45_c.json", 1, 1'000'000'001'000, "7");
  const std::string db = scratch_db("imp45_al.db");
  fs::remove(db);
  auto r = imp45_cli("import " + a + " " + c + " --align collectives -o " + db);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("refused: rank 1 (" + c + ") spans 1000000.000000 .. 1000000.000100 s and rank 0 (" + a +
                       ") 0.000000 .. 0.000100 s from the earliest input's first event, on the clocks aligned by collectives"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("(11.6 days apart)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--align collectives found no collective in common"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--allow-disjoint"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db));
  r = imp45_cli("import " + a + " " + c + " --align collectives --allow-disjoint -o " + db + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  int64_t disjoint = 0;
  for (const auto& p : j["problems"])
    if (p["name"] == "disjoint_time_ranges") disjoint = p["count"].get<int64_t>();
  EXPECT_EQ(disjoint, 1) << r.out;
  // one job (the same group, 5 us apart): aligned, no refusal
  const std::string y = imp45_trace("imp45_y.json", 1, 1005, "0");
  const std::string db2 = scratch_db("imp45_al2.db");
  fs::remove(db2);
  r = imp45_cli("import " + a + " " + y + " --align collectives -o " + db2);
  EXPECT_EQ(r.code, 0) << r.err;
}

// F13 on the shared traces of two jobs (nccl_data, trace_diff_test): refused with --align too.
TEST(Imp45AlignedDisjoint, TheSharedTracesOfTwoJobsAreRefusedWithAlign) {
  const std::string dir = std::string(EMBEDSCOPE_SHARED_DATA) + "/traces";
  if (!fs::exists(dir + "/nccl_data.json.gz") || !fs::exists(dir + "/trace_diff_test.json.gz"))
    GTEST_SKIP() << dir << " is absent (shared test data)";
  const std::string db = scratch_db("imp45_shared_al.db");
  fs::remove(db);
  const auto r = imp45_cli("import " + dir + "/nccl_data.json.gz " + dir + "/trace_diff_test.json.gz --align collectives -o " + db);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("(19183.8 days apart)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("on the clocks aligned by collectives"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db));
}

// F15: a memory snapshot session has no ops or kernels for HTA: refused, exit 2, no folder.
TEST(Imp45KinetoExport, AMemorySnapshotSessionIsRefused) {
  const std::string db = scratch_db("imp45_snap.db");
  fs::remove(db);
  auto r = imp45_cli("import " + std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/training_p4.pickle.gz -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string out = (import_scratch() / "imp45_snk").string();
  fs::remove_all(out);
  r = imp45_cli("export " + db + " --format kineto -o " + out);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(db + ": a memory snapshot has no ops or kernels for HTA; use --format chrome or csv"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("Holistic Trace Analysis: TraceAnalysis"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

// F5.1: gzip data damaged right after its header, named .json.gz: said as damaged gzip.
TEST(Imp45ImportMessages, DamagedGzipIsSaidAsSuch) {
  const std::string f = imp45_write("imp45_badgz.json.gz", std::string("\x1f\x8b\x08\x00garbage", 11));
  const auto r = imp45_cli("import " + f + " -o " + scratch_db("imp45_badgz.db"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(f + ": gzip data cut short or damaged after 0 uncompressed bytes"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("not a format embedscope import reads"), std::string::npos) << r.err;
}

// F5.1 on the shared trace cut to its first 100 bytes (the header and a little deflate data).
TEST(Imp45ImportMessages, GzipCutNearItsStartIsSaidAsCutShort) {
  const std::string src = std::string(EMBEDSCOPE_SHARED_DATA) + "/traces/nccl_data.json.gz";
  if (!fs::exists(src)) GTEST_SKIP() << src << " is absent (shared test data)";
  std::ifstream in(src, std::ios::binary);
  std::string head(100, '\0');
  in.read(head.data(), 100);
  const std::string f = imp45_write("imp45_gz100.json.gz", head);
  const auto r = imp45_cli("import " + f + " -o " + scratch_db("imp45_gz100.db"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(f + ": gzip data cut short or damaged after "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(the compressed stream ends before its end marker (file cut short))"), std::string::npos) << r.err;
}

// F5.2: an Nsight SQLite export named .nsys-rep is read as SQLite (no nsys needed); bytes that
// are no format are not called an Nsight Systems report outright.
TEST(Imp45ImportMessages, NsysRepIsChosenByContent) {
  const std::string rep = (import_scratch() / "imp45_fake.nsys-rep").string();
  embedscope::sessions::testing::write_nsys_fixture(rep, {});
  const std::string db = scratch_db("imp45_fake.db");
  fs::remove(db);
  auto r = embedscope::test_support::run_cli("PATH=/nonexistent " + std::string(EMBEDSCOPE_CLI),
                                             "import " + rep + " -o " + db, import_scratch());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("exporting"), std::string::npos) << r.err;
  EXPECT_EQ(SessionReader(db).meta(embedscope::sessions::meta::kImportFormat), "nsys_sqlite");
  const std::string rnd = imp45_write("imp45_rnd.nsys-rep", std::string("\x07\x93\xfe\x11 no report here", 20));
  r = embedscope::test_support::run_cli("PATH=/nonexistent " + std::string(EMBEDSCOPE_CLI),
                                        "import " + rnd + " -o " + scratch_db("imp45_rnd.db"), import_scratch());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(rnd + ": not a format embedscope import reads by its content"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("import: exporting"), std::string::npos) << r.err;
}

// F5.3: distributedInfo.rank -3 is bad_rank only (no contradicting no_rank).
TEST(Imp45ImportMessages, ANegativeRankIsBadRankOnly) {
  const std::string f = imp45_write(
      "imp45_negrank.json",
      R"({"distributedInfo": {"rank": -3, "world_size": 2}, "traceEvents": [
{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5}]})");
  const auto sum = import_into({f}, "imp45_negrank.db");
  EXPECT_EQ(problem_count(sum.problems, "bad_rank"), 1);
  EXPECT_EQ(problem_count(sum.problems, "no_rank"), 0);
  ASSERT_EQ(sum.ranks.size(), 1u);
  EXPECT_EQ(sum.ranks[0], 0);
}
