// tester48's import and compare findings:
// F7   a Kineto trace cut short imported as a complete session whose GPU busy line concluded
//      "host-bound" (the GPU events after the cut were lost, not idle): the verdict is withheld and
//      a "trace cut" line names the import problem, in stats, compare, Summary and Compare view
//      (all print sessions::gpu_run_text).
// F11  an Nsight kernel whose streamId (or deviceId) is not an integer went to an invented
//      "stream 0": now bad_stream (data_loss) naming table, row and value, the row skipped.
// F13  compare of imported traces showed only the stream-level overlap, never HTA's comm/comp
//      overlap that import and stats print: a row "GPU kernels overlap % (HTA's comm/comp overlap)".
// F14.2 run's table storage block had a `rows` column where stats has `hash_size`.
// F14.3 stats printed the import's sources as raw JSON.
// F14.5 compare printed a difference that rounds to zero as "-0.00000 (-0.0 %)".
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sqlite3.h>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/analysis/gpu_run.h"
#include "embedscope/sessions/importers/importer.h"
#include "embedscope/sessions/importers/nsys_sqlite/nsys_sqlite.h"
#include "embedscope/sessions/model/units.h"
#include "import_test_support.h"
#include "nsys_fixture.h"

namespace {
namespace fs = std::filesystem;
namespace g48ss = embedscope::sessions;
namespace g48si = embedscope::sessions::importers;
using embedscope::sessions::SessionReader;
using embedscope::sessions::SessionWriter;
using embedscope::sessions::testing::import_scratch;
using embedscope::sessions::testing::problem;
using embedscope::sessions::testing::problem_count;
using embedscope::sessions::testing::scratch_db;
using embedscope::sessions::testing::trace_fixture;

const std::string kG48Traces = std::string(EMBEDSCOPE_SHARED_DATA) + "/traces";

struct G48Run {
  int code = -1;
  std::string out, err;
};

// `cd dir && embedscope args`: relative file names, as a user types them (the import records them so)
G48Run g48_cli(const fs::path& dir, const std::string& args) {
  const std::string out = (dir / "g48_out.txt").string(), err = (dir / "g48_err.txt").string();
  const int st = std::system(("cd '" + dir.string() + "' && '" + std::string(EMBEDSCOPE_CLI) + "' " + args + " >'" + out +
                              "' 2>'" + err + "'").c_str());
  auto slurp = [](const std::string& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  };
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(out), slurp(err)};
}

// The line of `text` that starts with `head` ("" when none).
std::string g48_line(const std::string& text, const std::string& head) {
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (l.rfind(head, 0) == 0) return l;
  return "";
}

// The whole inflated text of a .json.gz ("" when it cannot be read).
std::string g48_gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return "";
  std::string s;
  char buf[1 << 16];
  for (int n; (n = gzread(f, buf, sizeof buf)) > 0;) s.append(buf, static_cast<size_t>(n));
  gzclose(f);
  return s;
}

const std::string kG48Cut =
    " was cut short (import problem truncated, data_loss): its events after the cut are missing, not idle; GPU busy, "
    "overlap and exposed communication count only the GPU work written before the cut";
const std::string kG48NoVerdict = ": no verdict on what bounds the step: the trace was cut short (trace cut, below)";
}  // namespace

// F7 on a fixture: hta_small/rank0.json with its text ending right after the last event (no ']',
// no '}': "truncated"). Every event survives, so the GPU busy figure is the intact trace's; only
// the verdict gives way to the trace cut line.
TEST(Fixg48Import, ACutTraceWithholdsTheGpuVerdictAndSaysTheCut) {
  const fs::path dir = import_scratch() / "g48_cut";
  fs::create_directories(dir);
  std::ifstream in(trace_fixture("hta_small/rank0.json"));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string whole = ss.str();
  const size_t end_of_events = whole.rfind("\n],");
  ASSERT_NE(end_of_events, std::string::npos);
  const std::string cut = (dir / "cut.json").string();
  std::ofstream(cut) << whole.substr(0, end_of_events);
  std::string texts[2];
  for (int i = 0; i < 2; ++i) {
    const std::string db = scratch_db(i == 0 ? "g48_whole.db" : "g48_cut.db");
    {
      SessionWriter w(db, true);
      g48si::import_kineto_json({i == 0 ? trace_fixture("hta_small/rank0.json") : cut}, w, {});
      w.close("complete");
    }
    const SessionReader r(db);
    texts[i] = g48ss::gpu_run_text(r, g48ss::analyze(r));
  }
  const std::string busy = g48_line(texts[0], "GPU busy     ");
  ASSERT_FALSE(busy.empty()) << texts[0];
  EXPECT_EQ(busy.substr(0, 19), "GPU busy     53.3% ");
  EXPECT_NE(busy.find("): partly host-bound: the GPU waits for the host part of each step"), std::string::npos) << busy;
  EXPECT_EQ(texts[0].find("trace cut"), std::string::npos) << texts[0];
  // the verdict withheld, then the cut named with its file, and the step whose runtime and GPU
  // events the cut lost (step 3, which ends after the last event before the cut, at 220 us: out
  // of the step figures, so the figure is steps 1 and 2's)
  const std::string cut_busy = g48_line(texts[1], "GPU busy     ");
  EXPECT_EQ(cut_busy.substr(cut_busy.find("): ") + 1), kG48NoVerdict) << texts[1];
  EXPECT_NE(texts[1].find("\ntrace cut    " + cut + kG48Cut + "\ntrace cut    rank 0: the cut lost GPU events of step 3: the "
                          "file's runtime and GPU events stop at the cut at trace ts 220.000 us, before its end"),
            std::string::npos)
      << texts[1];
}

// F7 on the real trace, as tester48 cut it (its first 5,000,000 bytes): stats and compare.
TEST(Fixg48Import, TheRealCutTraceHasNoHostBoundVerdictInStatsAndCompare) {
  const std::string gz = kG48Traces + "/nccl_data.json.gz";
  if (!fs::exists(gz)) GTEST_SKIP() << gz << " is absent (../shared/data)";
  const fs::path dir = import_scratch() / "g48_real_cut";
  fs::create_directories(dir);
  const std::string text = g48_gunzip(gz);
  ASSERT_GT(text.size(), 5'000'000u);
  std::ofstream(dir / "nccl_cut.json") << text.substr(0, 5'000'000);
  ASSERT_EQ(g48_cli(dir, "import nccl_cut.json -o cut.db").code, 0);
  ASSERT_EQ(g48_cli(dir, "import '" + gz + "' -o whole.db").code, 0);
  G48Run s = g48_cli(dir, "stats cut.db");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(g48_line(s.out, "GPU busy     "),
            "GPU busy     4.9% of the whole trace (no complete profiler step: the trace was cut), mean over ranks (a "
            "kernel or copy running on the rank's streams)" +
                kG48NoVerdict);  // steps 4-6 lost runtime and GPU events with the cut: none is measured (it had steps)
  EXPECT_EQ(g48_line(s.out, "trace cut    "), "trace cut    nccl_cut.json" + kG48Cut);
  s = g48_cli(dir, "stats --json cut.db");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(nlohmann::json::parse(s.out)["trace_cut"], true);
  s = g48_cli(dir, "compare cut.db whole.db");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(g48_line(s.out, "A: trace cut "), "A: trace cut    nccl_cut.json" + kG48Cut);
  EXPECT_NE(g48_line(s.out, "A: GPU busy ").find(kG48NoVerdict), std::string::npos) << s.out;
  // the intact trace keeps its verdict, and no cut line
  EXPECT_NE(g48_line(s.out, "B: GPU busy     23.6% ").find("): host-bound"), std::string::npos) << s.out;
  EXPECT_EQ(g48_line(s.out, "B: trace cut"), "");
}

// F11: the hand-made export (nsys_fixture.h: kernels on streams 7 and 13, a copy on 7) with kernel
// row 2's streamId 'abc' and the copy's deviceId 0.5: both skipped and said; no stream 0 appears.
TEST(Fixg48Import, AnNsysStreamOrDeviceThatIsNotAnIntegerIsBadStream) {
  const std::string file = (import_scratch() / "g48_bad_stream.sqlite").string();
  embedscope::sessions::testing::write_nsys_fixture(file, {});
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  for (const char* sql : {"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = 'abc' WHERE rowid = 2",
                          "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET deviceId = 0.5 WHERE rowid = 1"})
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  sqlite3_close(db);
  const std::string out = scratch_db("g48_bad_stream.db");
  g48si::ImportSummary sum;
  {
    SessionWriter w(out, true);
    sum = g48si::import_nsys_sqlite({file}, w, {});
    w.close("complete");
  }
  auto n = [&](const char* kind) { return sum.events.count(kind) ? sum.events.at(kind) : 0; };
  EXPECT_EQ(n("kernels"), 1);
  EXPECT_EQ(n("memcpy"), 0);
  const auto* p = problem(sum.problems, "bad_stream");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->count, 2);
  EXPECT_EQ(p->severity, "data_loss");
  EXPECT_EQ(p->example, "CUPTI_ACTIVITY_KIND_KERNEL row 2: streamId 'abc' is text, not an integer, skipped");
  const SessionReader r(out);
  for (const auto& l : r.lanes()) EXPECT_EQ(l.name.rfind("stream 0 ", 0), std::string::npos) << l.name;
  int streams = 0;
  for (const auto& l : r.lanes()) streams += l.kind == "stream";
  EXPECT_EQ(streams, 1);  // the kernel of stream 7 only
}

// F13: compare of the two real traces shows HTA's figure beside the stream-level one: 14.31 %
// and 68.80 %, as `import` prints them (the data README's HTA table).
TEST(Fixg48Import, CompareOfImportedTracesShowsHtasOverlap) {
  const std::string a = kG48Traces + "/nccl_data.json.gz", b = kG48Traces + "/trace_diff_test.json.gz";
  if (!fs::exists(a) || !fs::exists(b)) GTEST_SKIP() << "the real traces of ../shared/data are absent";
  const fs::path dir = import_scratch() / "g48_hta";
  fs::create_directories(dir);
  ASSERT_EQ(g48_cli(dir, "import '" + a + "' -o nccl.db").code, 0);
  ASSERT_EQ(g48_cli(dir, "import '" + b + "' -o tdiff.db").code, 0);
  G48Run c = g48_cli(dir, "compare nccl.db tdiff.db");
  ASSERT_EQ(c.code, 0) << c.err;
  const std::string row = g48_line(c.out, "GPU kernels overlap % (HTA's comm/comp overlap)");
  ASSERT_FALSE(row.empty()) << c.out;
  std::istringstream cells(row.substr(std::string("GPU kernels overlap % (HTA's comm/comp overlap)").size()));
  std::string v1, u1, v2, u2, d, points;
  cells >> v1 >> u1 >> v2 >> u2 >> d >> points;
  EXPECT_EQ(v1 + " " + u1, "14.3 %");
  EXPECT_EQ(v2 + " " + u2, "68.8 %");
  EXPECT_EQ(d + " " + points, "+54.5 points");
  c = g48_cli(dir, "compare --json nccl.db tdiff.db");
  ASSERT_EQ(c.code, 0) << c.err;
  const auto j = nlohmann::json::parse(c.out);
  EXPECT_NEAR(j["sessions"][0]["figures"]["hta_overlap_pct"].get<double>(), 14.31, 0.005);
  EXPECT_NEAR(j["sessions"][1]["figures"]["hta_overlap_pct"].get<double>(), 68.80, 0.005);
  // an engine run has none (no row in the text table: checked by value here)
  g48ss::ComparedSession run;
  run.stats.steps = 1;
  EXPECT_FALSE(g48ss::compare_value(run, g48ss::CompareFigure::HtaOverlap).has_value());
}

// F14.5: a difference that its text rounds to zero reads 0, without a sign
TEST(Fixg48Import, ADifferenceThatRoundsToZeroReadsZero) {
  g48ss::ComparedSession a, b;
  a.stats.steps = b.stats.steps = 1;
  a.stats.loss = {0.50496};
  b.stats.loss = {0.504959999};
  EXPECT_EQ(g48ss::compare_delta(a, b, g48ss::CompareFigure::Loss).text, "0.00000 (0.0 %)");
  EXPECT_EQ(g48ss::compare_delta(b, a, g48ss::CompareFigure::Loss).text, "0.00000 (0.0 %)");
  b.stats.loss = {0.50490};
  EXPECT_EQ(g48ss::compare_delta(a, b, g48ss::CompareFigure::Loss).text, "-0.00006 (-0.0 %)");
  a.stats.overlap_pct = 15.6;
  b.stats.overlap_pct = 15.58;
  EXPECT_EQ(g48ss::compare_delta(a, b, g48ss::CompareFigure::Overlap).text, "0.0 points");
}

// F14.3 and F14.2 through the CLI: stats' `imported` line names the file, its rank and size in
// words; run and stats print the table storage block with the same columns (hash_size).
TEST(Fixg48Import, StatsNamesTheSourcesAndRunPrintsStatsColumns) {
  const fs::path dir = import_scratch() / "g48_sources";
  fs::create_directories(dir);
  fs::copy_file(trace_fixture("hta_small/rank0.json"), dir / "rank0.json", fs::copy_options::overwrite_existing);
  ASSERT_EQ(g48_cli(dir, "import rank0.json -o r0.db").code, 0);
  G48Run s = g48_cli(dir, "stats r0.db");
  ASSERT_EQ(s.code, 0) << s.err;
  const std::string line = g48_line(s.out, "imported     ");
  EXPECT_NE(line.find("; rank0.json (rank 0; " + g48ss::format_bytes(3105) + ")"), std::string::npos) << line;
  EXPECT_EQ(line.find("[{"), std::string::npos) << line;
  EXPECT_EQ(line.substr(line.size() - 1), ")");

  nlohmann::json w = nlohmann::json::parse(std::ifstream(std::string(EMBEDSCOPE_TEST_DATA) + "/../../resources/workloads/tiny.json"));
  w["tables"][2]["data_type"] = "fp16";
  w["tables"][3]["data_type"] = "int8";
  w["tables"][3]["hash_size"] = 100;
  std::ofstream(dir / "g48_hashed.json") << w.dump();
  const G48Run run = g48_cli(dir, "run g48_hashed.json --steps 2 -o hashed.db --force-overwrite");
  ASSERT_EQ(run.code, 0) << run.err;
  s = g48_cli(dir, "stats hashed.db");
  ASSERT_EQ(s.code, 0) << s.err;
  const std::string head = g48_line(run.out, "table                data_type ");
  EXPECT_NE(head.find(" hash_size "), std::string::npos) << run.out;
  EXPECT_EQ(head, g48_line(s.out, "table                data_type "));
  const std::string t_b = w["tables"][2]["name"].get<std::string>(), t_c = w["tables"][3]["name"].get<std::string>();
  auto cell = [](const std::string& l, int k) {  // the k-th whitespace-separated cell
    std::istringstream in(l);
    std::string c;
    for (int i = 0; i <= k; ++i) in >> c;
    return c;
  };
  // the storage rows: the name padded to 20, then its data_type
  const std::string b_row = std::string(t_b).append(20 - t_b.size(), ' ') + " fp16 ";
  const std::string c_row = std::string(t_c).append(20 - t_c.size(), ' ') + " int8 ";
  EXPECT_EQ(cell(g48_line(run.out, b_row), 4), "-");
  EXPECT_EQ(cell(g48_line(run.out, c_row), 4), "100");
  EXPECT_EQ(cell(g48_line(s.out, c_row), 4), "100");
}
