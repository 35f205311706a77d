// tester53 F3: `export --format chrome` / `--format kineto` of a pipelined run, or of a run that
// crashed, did not carry the pipeline, the planned steps nor how the run ended, so `stats` of the
// import counted a semi_sync run's 2 drain steps as measured steps (step mean 4.66 ms over 2
// counted steps became 2.88 ms over 4) and a crashed run's import read "complete". Both exports
// now write them in flat keys of their top-level "embedscope" object, the import records them
// (metadata pipeline, exported_run_*), and `stats` of the import counts the steps, the step times
// and the drain steps as the original's and says how the exported run ended beside the import's
// own "complete". A foreign trace imports as before; a malformed key is an import problem naming
// it, and the trace then imports as a foreign one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/run_end.h"
#include "embedscope/sessions/exporters/export.h"
#include "embedscope/sessions/exporters/kineto_export.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "import_test_support.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
namespace c54 = embedscope::sessions;
using json = nlohmann::json;

fs::path c54_dir(const std::string& name) {
  const fs::path d = c54::testing::import_scratch() / ("carry54_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

embedscope::test_support::CliResult c54_cli(const std::string& args, const fs::path& dir) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, dir);
}

json c54_stats_json(const std::string& db, const fs::path& dir) {
  const auto r = c54_cli("stats " + db + " --json", dir);
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(r.out, nullptr, false);
}

/// The original's step-time figures, computed here from its step rows (an independent reference):
/// per measured step the slowest rank's window, the last `drain` steps left out; mean and the
/// nearest-rank p50 (the lower middle of an even count).
struct C54Steps {
  int64_t steps = 0;
  double mean = 0;
  int64_t p50 = 0;
};
C54Steps c54_reference(const std::string& db, int64_t drain) {
  std::map<int64_t, int64_t> longest;
  for (const auto& s : c54::SessionReader(db).steps())
    if (s.step >= 0) longest[s.step] = std::max(longest[s.step], s.end_ns - s.start_ns);
  C54Steps r;
  r.steps = static_cast<int64_t>(longest.size());
  std::vector<int64_t> counted;
  for (const auto& [step, t] : longest)
    if (step < r.steps - drain) counted.push_back(t);
  if (counted.empty()) return r;
  double sum = 0;
  for (int64_t t : counted) sum += static_cast<double>(t);
  r.mean = sum / static_cast<double>(counted.size());
  std::sort(counted.begin(), counted.end());
  r.p50 = counted[(counted.size() + 1) / 2 - 1];
  return r;
}

/// `db` exported as chrome (one file) and kineto (a folder), each imported: {chrome import, kineto import}.
std::pair<std::string, std::string> c54_round_trips(const std::string& db, const fs::path& dir) {
  const std::string chrome = (dir / "x.json").string(), kin = (dir / "kin").string();
  const std::string back_c = (dir / "back_chrome.db").string(), back_k = (dir / "back_kineto.db").string();
  for (const std::string& args : {"export " + db + " --format chrome -o " + chrome, "import " + chrome + " -o " + back_c,
                                  "export " + db + " --format kineto -o " + kin, "import " + kin + " -o " + back_k}) {
    const auto r = c54_cli(args, dir);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.out << r.err;
  }
  return {back_c, back_k};
}

/// The figures the round trip must give back: steps, drain steps, step times, overlap, exposed
/// communication and each rank's compute / comm / exposed comm (and bytes where `bytes`).
void c54_expect_same_stats(const json& orig, const json& back, bool bytes, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(back["ended"], "complete");  // the import's own end
  EXPECT_EQ(back["steps"], orig["steps"]);
  EXPECT_EQ(back["drain_steps"], orig["drain_steps"]);
  for (const char* k : {"mean", "p50", "p99", "min", "max"}) EXPECT_EQ(back["step_time_ns"][k], orig["step_time_ns"][k]) << k;
  EXPECT_EQ(back["overlap_pct"], orig["overlap_pct"]);
  EXPECT_EQ(back["exposed_comm_ns"], orig["exposed_comm_ns"]);
  ASSERT_EQ(back["ranks"].size(), orig["ranks"].size());
  for (size_t i = 0; i < orig["ranks"].size(); ++i) {
    for (const char* k : {"compute_ns", "comm_ns", "exposed_comm_ns", "idle_ns"})
      EXPECT_EQ(back["ranks"][i][k], orig["ranks"][i][k]) << "rank " << i << " " << k;
    if (bytes) {
      for (const char* k : {"bytes_sent", "bytes_received"})
        EXPECT_EQ(back["ranks"][i][k], orig["ranks"][i][k]) << "rank " << i << " " << k;
    }
  }
  const json& ex = back["exported_run"];
  ASSERT_TRUE(ex.is_object()) << back.dump().substr(0, 400);
  EXPECT_EQ(ex["ended"], orig["ended"]);
  EXPECT_EQ(ex["pipeline"], orig["pipeline"]);
}

/// A run of `tiny` (2 ranks, 4 steps, pipeline `pipeline`) round-tripped through both exports.
void c54_pipelined_round_trip(const std::string& name, const std::string& flags, int64_t drain, bool kineto_bytes) {
  const fs::path dir = c54_dir(name);
  const std::string db = (dir / "run.db").string();
  const auto run = c54_cli("run --preset tiny --steps 4 " + flags + " -o " + db, dir);
  ASSERT_EQ(run.code, 0) << run.err;
  const json orig = c54_stats_json(db, dir);
  ASSERT_EQ(orig["steps"], 4);
  ASSERT_EQ(orig["drain_steps"], drain);  // sparse_dist drains its last step, semi_sync its last 2
  const C54Steps ref = c54_reference(db, drain);
  EXPECT_EQ(orig["step_time_ns"]["mean"].get<double>(), ref.mean);
  EXPECT_EQ(orig["step_time_ns"]["p50"].get<int64_t>(), ref.p50);
  const auto [back_c, back_k] = c54_round_trips(db, dir);
  for (const auto& [back, bytes] : {std::pair{back_c, true}, std::pair{back_k, kineto_bytes}}) {
    const json j = c54_stats_json(back, dir);
    c54_expect_same_stats(orig, j, bytes, back);
    EXPECT_EQ(j["step_time_ns"]["mean"].get<double>(), ref.mean) << back;  // not the mean over all 4 steps
    EXPECT_EQ(j["exported_run"]["planned_steps"], 4) << back;
    EXPECT_EQ(j["exported_run"]["ended"], "complete") << back;
  }
}

/// A session written here: 2 ranks, pipeline semi_sync, 7 planned steps of which it holds 0..5,
/// ended `ended` with `message`. Step s takes (s + 1) x 2 ms on rank 0 and 1 ms on rank 1.
std::string c54_crafted(const fs::path& dir, const std::string& ended, const std::string& message) {
  const std::string db = (dir / "crafted.db").string();
  c54::SessionWriter w(db, true);
  w.set_metadata(c54::meta::kWorldSize, "2");
  w.set_metadata(c54::meta::kSamplesPerStep, "16");
  w.set_metadata(c54::meta::kBackend, "cpu");
  w.set_metadata(c54::meta::kSimulated, "0");
  w.set_metadata(c54::meta::kWorkloadName, "crafted");
  w.set_metadata(c54::meta::kPipeline, "semi_sync");
  w.set_metadata(c54::meta::kWorkloadJson, R"({"name":"crafted","pipeline":"semi_sync","steps":7})");
  constexpr int64_t ms = 1000000;
  for (int32_t r : {0, 1}) {
    w.add_lane({r, 0, "compute", "thread"});
    for (int64_t s = 0; s < 6; ++s) {
      const int64_t b = 20 * ms * s, d = r == 0 ? (s + 1) * 2 * ms : ms;
      w.add_ops({c54::OpEvent{r, c54::Lane::compute, c54::OpCategory::dense, "dense_forward_backward", s, b, b + d, 0, 0}});
      w.add_step({s, r, b, b + d, 0.5, 0, 0});
    }
  }
  w.close(ended, message);
  return db;
}

/// `db` exported in-process to dir/crafted.json (chrome) and dir/kin (kineto).
void c54_export_in_process(const std::string& db, const fs::path& dir) {
  const c54::SessionReader s(db);
  std::ofstream out(dir / "crafted.json");
  c54::export_chrome_trace(s, out);
  out.close();
  c54::export_kineto_traces(s, (dir / "kin").string());
}

json c54_read(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}
void c54_write(const fs::path& p, const json& j) { std::ofstream(p) << j.dump(1); }

bool c54_has_meta(const std::string& db, const char* key) { return !c54::SessionReader(db).meta(key).empty(); }
}  // namespace

// semi_sync on 2 CPU ranks: steps 2-3 drain; both round trips leave them out again (main: 0 drain
// steps, the mean over all 4 steps) and give the same step times, overlap, compute and comm.
TEST(Carry54RoundTrip, SemiSyncCpuRunKeepsItsDrainStepsOut) {
  c54_pipelined_round_trip("semi", "--pipeline semi_sync", 2, true);
}

// sparse_dist simulated on h100_sxm: step 3 drains; the figures are the cost model's, the same
// exactly after both round trips (the kineto export has no record of a simulated split check, of
// no duration: its bytes are not compared, sim50).
TEST(Carry54RoundTrip, SparseDistSimulatedRunKeepsItsDrainStepOut) {
  c54_pipelined_round_trip("sparse", "--simulate h100_sxm --pipeline sparse_dist", 1, false);
}

// A semi_sync run SIGKILLed mid-run drained nothing (retest49 R2): its import counts every step
// too, and says the exported run crashed while the import itself completed (main: "complete"
// and 2 steps left out as drain steps).
TEST(Carry54KilledRun, ImportSaysTheRunCrashedAndCountsEveryStep) {
  const fs::path dir = c54_dir("killed");
  const std::string db = (dir / "k.db").string();
  const auto k = embedscope::test_support::kill_when(
      EMBEDSCOPE_CLI,
      {"run", "--preset", "tiny", "--steps", "3000", "--pipeline", "semi_sync", "--network-latency", "1000000", "-o", db},
      [&] { return fs::exists(db) && c54::SessionReader(db).steps().size() >= 12; });
  ASSERT_TRUE(k.ready) << "the run did not record 6 steps before the time limit";
  const json orig = c54_stats_json(db, dir);
  ASSERT_EQ(orig["ended"], "crashed");
  ASSERT_EQ(orig["drain_steps"], 0);
  ASSERT_GE(orig["steps"].get<int64_t>(), 6);
  const C54Steps ref = c54_reference(db, 0);
  EXPECT_EQ(orig["step_time_ns"]["mean"].get<double>(), ref.mean);
  const auto [back_c, back_k] = c54_round_trips(db, dir);
  {  // the import says it too
    const auto again = c54_cli("import " + (dir / "kin").string() + " -o " + (dir / "again.db").string(), dir);
    EXPECT_NE(again.out.find("source run   an Embedscope export of a semi_sync run (3000 planned steps) that ended crashed: "
                             "`stats` counts its steps as that run's\n"),
              std::string::npos)
        << again.out;
  }
  {  // compare: the import completed, the run it holds crashed
    const auto cmp = c54_cli("compare " + db + " " + back_c, dir);
    EXPECT_NE(cmp.out.find("complete (an export of a run that ended crashed) on 2 ranks"), std::string::npos) << cmp.out;
    const json cj = json::parse(c54_cli("compare " + db + " " + back_k + " --json", dir).out, nullptr, false);
    ASSERT_TRUE(cj.is_object());
    EXPECT_EQ(cj["sessions"][0]["exported_run_ended"], nullptr);
    EXPECT_EQ(cj["sessions"][1]["exported_run_ended"], "crashed");
    EXPECT_EQ(cj["sessions"][1]["drain_steps"], 0);
  }
  const auto text = c54_cli("stats " + db, dir);
  const std::string orig_end = text.out.substr(0, text.out.find('\n'));  // "session  k.db (crashed after N measured steps, measured)"
  for (const std::string& back : {back_c, back_k}) {
    const json j = c54_stats_json(back, dir);
    // bytes not compared: the SIGKILL can land between a step's collective records and the
    // block of the ops they ran in, and an export writes a collective inside its op (seen under
    // load: kineto, rank 0 sent 58,116 B back against 63,464 B); the other round trips compare them
    c54_expect_same_stats(orig, j, false, back);
    EXPECT_EQ(j["step_time_ns"]["mean"].get<double>(), ref.mean) << back;
    EXPECT_EQ(j["exported_run"]["planned_steps"], 3000) << back;
    // "crashed after N measured steps" (or "crashed in step N, after ..."), as the original's says it
    const std::string ended_text = j["exported_run"]["ended_text"].get<std::string>();
    EXPECT_EQ(ended_text.rfind("crashed ", 0), 0u) << ended_text;
    EXPECT_NE(ended_text.find("after " + std::to_string(orig["steps"].get<int64_t>()) + " measured steps"), std::string::npos)
        << ended_text;
    EXPECT_NE(orig_end.find("(" + ended_text + ", measured)"), std::string::npos) << orig_end;
    const auto t = c54_cli("stats " + back, dir);
    EXPECT_NE(t.out.find("(complete, IMPORTED from kineto_json)"), std::string::npos) << t.out.substr(0, 300);
    EXPECT_NE(t.out.find("source run   the exported run (semi_sync pipeline, 3000 planned steps) ended " + ended_text +
                         "; this import completed"),
              std::string::npos)
        << t.out.substr(0, 600);
  }
}

// A run that hung inside its drain (7 planned steps, 0..5 held: it reached 1 of semi_sync's 2
// drain steps) with an end message: both round trips leave out exactly 1 drain step (without the
// planned steps it would be 0, without the end 2) and carry the message. Counted steps 0..4 at
// 2, 4, 6, 8, 10 ms: mean 6 ms, p50 6 ms (7 ms over all 6, 4 ms over 4).
TEST(Carry54EndMessage, HungRunInItsDrainComesBackWithItsEndAndOneDrainStep) {
  const fs::path dir = c54_dir("hang");
  const std::string msg = "rank 1: all_to_all 'output_dist/all_to_all' did not finish within 300 ms";
  const std::string db = c54_crafted(dir, "hang", msg);
  const c54::RunStats orig = c54::analyze(c54::SessionReader(db));
  ASSERT_EQ(orig.drain_steps, 1);
  ASSERT_DOUBLE_EQ(orig.step_time_ns.mean, 6e6);
  c54_export_in_process(db, dir);
  for (const std::string& in : {(dir / "crafted.json").string(), (dir / "kin").string()}) {
    SCOPED_TRACE(in);
    const std::string back = fs::path(in).stem().string() + "_back.db";
    const auto sum = c54::testing::import_into({in}, back);
    EXPECT_EQ(c54::testing::problem_count(sum.problems, "bad_exported_run_key"), 0);
    const c54::SessionReader r(c54::testing::scratch_db(back));
    EXPECT_EQ(r.meta(c54::meta::kPipeline), "semi_sync");
    EXPECT_EQ(r.meta(c54::meta::kExportedRunPlannedSteps), "7");
    EXPECT_EQ(r.meta(c54::meta::kExportedRunEnded), "hang");
    EXPECT_EQ(r.meta(c54::meta::kExportedRunEndMessage), msg);
    const c54::RunStats st = c54::analyze(r);
    EXPECT_EQ(st.ended, "complete");
    EXPECT_EQ(st.steps, 6);
    EXPECT_EQ(st.drain_steps, 1);
    EXPECT_DOUBLE_EQ(st.step_time_ns.mean, 6e6);
    EXPECT_EQ(st.step_time_ns.p50, 6000000);
    EXPECT_EQ(st.exported_run_ended, "hang");
    EXPECT_EQ(st.exported_run_end_message, msg);
    EXPECT_EQ(c54::exported_run_text(st), "the exported run (semi_sync pipeline, 7 planned steps) ended hang after 6 "
                                          "measured steps: " + msg + "; this import completed");
  }
}

// Traces that are not Embedscope exports import as before: no pipeline, no exported run, every
// profiler step counted, no problem - a PyTorch trace, one with an "embedscope" key of its own
// (not an object; an object another tool wrote), and an Embedscope export written before the keys.
TEST(Carry54ForeignTrace, ImportsAsBefore) {
  const fs::path dir = c54_dir("foreign");
  const std::string pytorch = c54::testing::trace_fixture("hta_small");
  {
    const auto sum = c54::testing::import_into({pytorch}, "c54_pytorch.db");
    const std::string db = c54::testing::scratch_db("c54_pytorch.db");
    for (const char* k : {c54::meta::kPipeline, c54::meta::kExportedRunEnded, c54::meta::kExportedRunPlannedSteps,
                          c54::meta::kExportedRunEndMessage})
      EXPECT_FALSE(c54_has_meta(db, k)) << k;
    const c54::RunStats st = c54::analyze(c54::SessionReader(db));
    EXPECT_TRUE(st.exported_run_ended.empty());
    EXPECT_EQ(st.drain_steps, 0);
    EXPECT_EQ(c54::testing::problem_count(sum.problems, "bad_exported_run_key"), 0);
    EXPECT_EQ(c54::testing::problem_count(sum.problems, "exported_run_mismatch"), 0);
    EXPECT_TRUE(c54_stats_json(db, dir)["exported_run"].is_null());
  }
  // the crafted semi_sync session's chrome export, its "embedscope" object replaced
  const std::string db = c54_crafted(dir, "complete", "");
  c54_export_in_process(db, dir);
  const json exported = c54_read(dir / "crafted.json");
  ASSERT_EQ(exported["embedscope"]["pipeline"], "semi_sync");
  ASSERT_EQ(exported["embedscope"]["planned_steps"], 7);
  ASSERT_EQ(exported["embedscope"]["ended"], "complete");
  json older = exported["embedscope"];  // an export written before the keys
  for (const char* k : {"pipeline", "planned_steps", "ended", "end_message"}) older.erase(k);
  const std::vector<std::pair<std::string, json>> cases{
      {"string", json("made by someone else")},
      {"other_tool", json{{"exporter", "other tool"}, {"pipeline", "semi_sync"}, {"ended", "crashed"}}},
      {"older_export", older}};
  for (const auto& [name, value] : cases) {
    SCOPED_TRACE(name);
    json j = exported;
    j["embedscope"] = value;
    c54_write(dir / (name + ".json"), j);
    const auto sum = c54::testing::import_into({(dir / (name + ".json")).string()}, "c54_" + name + ".db");
    const std::string back = c54::testing::scratch_db("c54_" + name + ".db");
    EXPECT_FALSE(c54_has_meta(back, c54::meta::kPipeline));
    EXPECT_FALSE(c54_has_meta(back, c54::meta::kExportedRunEnded));
    EXPECT_EQ(c54::testing::problem_count(sum.problems, "bad_exported_run_key"), 0);
    const c54::RunStats st = c54::analyze(c54::SessionReader(back));
    EXPECT_EQ(st.drain_steps, 0);  // every profiler step counted: 2..12 ms, mean 7 ms
    EXPECT_DOUBLE_EQ(st.step_time_ns.mean, 7e6);
  }
}

// A hand-edited export: each malformed or missing key is an error problem naming it and its value,
// and the trace imports as a foreign one (no pipeline, no exported run, every step counted);
// kineto files that disagree, or one without the keys, are exported_run_mismatch naming both.
TEST(Carry54Malformed, EachBadKeyIsNamedAndTheTraceImportsAsForeign) {
  const fs::path dir = c54_dir("malformed");
  const std::string db = c54_crafted(dir, "crashed", "");
  c54_export_in_process(db, dir);
  const json exported = c54_read(dir / "crafted.json");
  struct Case {
    std::string name, key;
    json value;  // null: the key removed
    std::string says;
  };
  const std::vector<Case> cases{
      {"steps_text", "planned_steps", "four", R"(is "four", not an integer in [1, 2^53])"},
      {"steps_zero", "planned_steps", 0, "is 0, not an integer in [1, 2^53]"},
      {"steps_negative", "planned_steps", -3, "is -3, not an integer"},
      {"steps_fraction", "planned_steps", 4.5, "is 4.5, not an integer"},
      {"pipeline_unknown", "pipeline", "turbo", R"(is "turbo", not a pipeline (base, sparse_dist or semi_sync))"},
      {"pipeline_missing", "pipeline", nullptr, "is missing"},
      {"ended_number", "ended", 7, "is 7, not how a run ends"},
      {"ended_unknown", "ended", "exploded", R"(is "exploded", not how a run ends)"},
      {"ended_missing", "ended", nullptr, "is missing"},
      {"message_number", "end_message", 12, "is 12, not a string"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    json j = exported;
    if (c.value.is_null()) j["embedscope"].erase(c.key);
    else j["embedscope"][c.key] = c.value;
    const fs::path file = dir / (c.name + ".json");
    c54_write(file, j);
    const auto sum = c54::testing::import_into({file.string()}, "c54_" + c.name + ".db");
    const c54::ImportStat* p = c54::testing::problem(sum.problems, "bad_exported_run_key");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->count, 1);
    EXPECT_EQ(p->severity, "error");
    EXPECT_NE(p->example.find("\"embedscope." + c.key + "\""), std::string::npos) << p->example;
    EXPECT_NE(p->example.find(c.says), std::string::npos) << p->example;
    EXPECT_NE(p->example.find("imported without the exported run's pipeline"), std::string::npos) << p->example;
    const std::string back = c54::testing::scratch_db("c54_" + c.name + ".db");
    EXPECT_FALSE(c54_has_meta(back, c54::meta::kPipeline));
    EXPECT_FALSE(c54_has_meta(back, c54::meta::kExportedRunEnded));
    const c54::RunStats st = c54::analyze(c54::SessionReader(back));
    EXPECT_EQ(st.steps, 6);
    EXPECT_EQ(st.drain_steps, 0);
    EXPECT_TRUE(st.exported_run_ended.empty());
  }
  // the kineto export: rank 1's file says another end, then carries none
  const fs::path kin = dir / "kin";
  const json rank1 = c54_read(kin / "rank_1.json");
  ASSERT_EQ(rank1["embedscope"]["ended"], "crashed");
  for (const bool drop : {false, true}) {
    SCOPED_TRACE(drop ? "rank 1 without the keys" : "rank 1 says complete");
    json j = rank1;
    if (drop)
      for (const char* k : {"pipeline", "planned_steps", "ended", "end_message"}) j["embedscope"].erase(k);
    else
      j["embedscope"]["ended"] = "complete";
    c54_write(kin / "rank_1.json", j);
    const std::string name = drop ? "c54_kin_drop.db" : "c54_kin_differ.db";
    const auto sum = c54::testing::import_into({kin.string()}, name);
    const c54::ImportStat* p = c54::testing::problem(sum.problems, "exported_run_mismatch");
    ASSERT_NE(p, nullptr);
    EXPECT_NE(p->example.find("rank_0.json"), std::string::npos) << p->example;
    EXPECT_NE(p->example.find("rank_1.json"), std::string::npos) << p->example;
    EXPECT_NE(p->example.find(drop ? "does not" : "ended crashed"), std::string::npos) << p->example;
    EXPECT_FALSE(c54_has_meta(c54::testing::scratch_db(name), c54::meta::kExportedRunEnded));
    EXPECT_EQ(c54::analyze(c54::SessionReader(c54::testing::scratch_db(name))).drain_steps, 0);
  }
}
