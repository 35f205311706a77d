// tester45's import findings left open:
// F12.6  a directory's config.json was listed as severity `error`, as real damage is: it is info
//        now, and a file of the directory that could not be read far enough to tell (a .json.gz
//        cut short in its first bytes) has its own data_loss row;
// F12.11 two files named one by one that claim one rank: one was dropped (duplicate_rank, exit 0);
//        now refused, naming both; found in a directory, the second is still left out and said.
// tester46 F7: an empty (or blank) file was "not a format embedscope import reads" with the list of
//        formats; now "the file is empty (0 bytes): nothing to import", as stats says.
// tester46 F2: an Nsight export's start/end stored as text, a fraction or a negative start read
//        as 0 (a kernel of 770 ms), with no problem: now bad_timestamp (data_loss), row skipped.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <sqlite3.h>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/importers/importer.h"
#include "embedscope/sessions/importers/nsys_sqlite/nsys_sqlite.h"
#include "import_test_support.h"
#include "nsys_fixture.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using embedscope::sessions::SessionReader;
using embedscope::sessions::SessionWriter;
using embedscope::sessions::testing::import_scratch;
using embedscope::sessions::testing::problem;
using embedscope::sessions::testing::problem_count;
using embedscope::sessions::testing::scratch_db;
using embedscope::sessions::testing::trace_fixture;
namespace fix46_si = embedscope::sessions::importers;

// A one-step Kineto trace of `rank` (distributedInfo) at `dir/name`.
std::string fix46_trace(const fs::path& dir, const std::string& name, int rank) {
  fs::create_directories(dir);
  const nlohmann::json ev = nlohmann::json::array(
      {{{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#1"}, {"pid", 1}, {"tid", 1}, {"ts", 1000}, {"dur", 100}},
       {{"ph", "X"}, {"cat", "cpu_op"}, {"name", "aten::mm"}, {"pid", 1}, {"tid", 1}, {"ts", 1001}, {"dur", 2}}});
  const nlohmann::json j{{"schemaVersion", 1},
                         {"distributedInfo", {{"backend", "nccl"}, {"rank", rank}, {"world_size", 2}}},
                         {"traceEvents", ev}};
  const std::string p = (dir / name).string();
  std::ofstream(p) << j.dump();
  return p;
}
}  // namespace

// F12.6: config.json beside the traces is info ("left out"); the first 12 bytes of a .json.gz
// (a gzip header, nothing that inflates) are damage: data_loss, since that may have been a rank.
TEST(Fix46Import, ADirectorysConfigJsonIsInfoAndADamagedGzipIsDataLoss) {
  const fs::path dir = import_scratch() / "fix46_cfg_dir";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"rank0.json", "rank1.json"})
    fs::copy_file(trace_fixture("hta_small/") + f, dir / f, fs::copy_options::overwrite_existing);
  { std::ofstream(dir / "config.json") << "{\"lr\": 0.1}\n"; }
  {
    std::ifstream in(trace_fixture("whole.json.gz"), std::ios::binary);
    std::string head(12, '\0');
    in.read(head.data(), 12);
    std::ofstream(dir / "rank2.json.gz", std::ios::binary) << head;
  }
  const auto sel = fix46_si::select_inputs({dir.string()});
  EXPECT_EQ(sel.files, (std::vector<std::string>{(dir / "rank0.json").string(), (dir / "rank1.json").string()}));
  EXPECT_TRUE(sel.named.empty());  // found in a directory, not named
  ASSERT_EQ(sel.skipped.size(), 2u);
  const std::string db = scratch_db("fix46_cfg.db");
  {
    SessionWriter w(db, true);
    const auto sum = fix46_si::import_paths({dir.string()}, w, {});
    w.close("complete");
    EXPECT_EQ(sum.ranks, (std::vector<int32_t>{0, 1}));
  }
  const auto stored = SessionReader(db).import_stats();
  const auto* cfg = problem(stored, "skipped_not_a_trace");
  ASSERT_NE(cfg, nullptr);
  EXPECT_EQ(cfg->severity, "info");
  EXPECT_EQ(cfg->count, 1);
  EXPECT_EQ(cfg->source, (dir / "config.json").string());
  EXPECT_EQ(cfg->example.rfind("not a format embedscope import reads", 0), 0u) << cfg->example;
  const auto* bad = problem(stored, "skipped_damaged_file");
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->severity, "data_loss");
  EXPECT_EQ(bad->count, 1);
  EXPECT_EQ(bad->source, (dir / "rank2.json.gz").string());
  EXPECT_EQ(bad->example.rfind("gzip data cut short or damaged after 0 uncompressed bytes", 0), 0u) << bad->example;
  EXPECT_NE(bad->example.find("if it was a rank's trace, that rank is missing"), std::string::npos) << bad->example;
  // named on its own, the damaged file is refused with the same reason (detect)
  try {
    fix46_si::detect((dir / "rank2.json.gz").string());
    ADD_FAILURE() << "a damaged gzip was detected as a format";
  } catch (const fix46_si::ImportError& e) {
    EXPECT_EQ(std::string(e.what()).rfind((dir / "rank2.json.gz").string() + ": gzip data cut short or damaged", 0), 0u)
        << e.what();
  }
}

// F12.11: `import a.json b.json`, both rank 1: exit 2 naming both, nothing written; the library's
// import_paths (the workbench's import) refuses the same; in a directory the second file is left
// out as duplicate_rank (data_loss) and the import goes on.
TEST(Fix46Import, TwoNamedFilesOfOneRankAreRefusedNamingBoth) {
  const fs::path dir = import_scratch() / "fix46_dup_named";
  fs::remove_all(dir);
  const std::string a = fix46_trace(dir, "a.json", 1);
  const std::string b = fix46_trace(dir, "b.json", 1);
  const std::string want = a + " and " + b + " both claim rank 1 (distributedInfo.rank)";
  const std::string db = scratch_db("fix46_dup_named.db");
  fs::remove(db);
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "import " + a + " " + b + " -o " + db, import_scratch());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("import them apart"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db));
  {
    SessionWriter w(scratch_db("fix46_dup_lib.db"), true);
    try {
      fix46_si::import_paths({a, b}, w, {});
      ADD_FAILURE() << "two named files of rank 1 were imported";
    } catch (const fix46_si::ImportError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
    w.close("failed");
  }
  // the same two files as a directory: a.json imported, b.json left out and said
  SessionWriter w(scratch_db("fix46_dup_dir.db"), true);
  const auto sum = fix46_si::import_paths({dir.string()}, w, {});
  w.close("complete");
  EXPECT_EQ(sum.ranks, (std::vector<int32_t>{1}));
  EXPECT_EQ(sum.files, (std::vector<std::string>{a}));
  const auto* d = problem(sum.problems, "duplicate_rank");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, "data_loss");
  EXPECT_EQ(problem_count(sum.problems, "duplicate_rank"), 1);
}

// The hand-made export (nsys_fixture.h) with four cells broken as tester46 broke fuser_h200's:
// kernel row 1's start 'abc' (text), runtime row 2's start -5 s, runtime row 3's end 2200.5 (a
// fraction), NVTX row 4's ('async region') start 'x'. Each row is skipped and counted; the rest
// imports as before (kernels 2 -> 1, runtime calls 3 -> 1, NVTX ranges 3 -> 2).
TEST(Fix46Import, NsysTimesThatAreNotIntegersOrBeforeTheCaptureAreBadTimestamps) {
  const std::string file = (import_scratch() / "fix46_bad_times.sqlite").string();
  embedscope::sessions::testing::write_nsys_fixture(file, {});
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  for (const char* sql : {"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'abc' WHERE rowid = 1",
                          "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = -5000000000 WHERE rowid = 2",
                          "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET \"end\" = 2200.5 WHERE rowid = 3",
                          "UPDATE NVTX_EVENTS SET start = 'x' WHERE rowid = 4"})
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  sqlite3_close(db);
  SessionWriter w(scratch_db("fix46_bad_times.db"), true);
  const auto sum = fix46_si::import_nsys_sqlite({file}, w, {});
  w.close("complete");
  auto n = [&](const char* kind) { return sum.events.count(kind) ? sum.events.at(kind) : 0; };
  EXPECT_EQ(n("kernels"), 1);
  EXPECT_EQ(n("runtime_calls"), 1);
  EXPECT_EQ(n("nvtx_ranges"), 2);
  EXPECT_EQ(n("memcpy"), 1);
  const auto* p = problem(sum.problems, "bad_timestamp");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->count, 4);
  EXPECT_EQ(p->severity, "data_loss");
  EXPECT_EQ(p->example, "CUPTI_ACTIVITY_KIND_KERNEL row 1: start 'abc' is text, not an integer of ns, skipped");
  // the time range of the valid events, 'step body' 100..9500 (as for the whole fixture): no
  // broken row read as a start at 0
  EXPECT_EQ(sum.start_ns, 100);
  EXPECT_EQ(sum.end_ns, 9500);
  EXPECT_EQ(problem_count(sum.problems, "unfinished_nvtx_range"), 1);  // an end that is NULL is no bad time
}

TEST(Fix46Import, AnEmptyOrBlankFileIsSaidToBeEmpty) {
  const fs::path dir = import_scratch() / "fix46_empty";
  fs::create_directories(dir);
  const std::string empty = (dir / "empty.json").string(), blank = (dir / "blank.json").string();
  { std::ofstream(empty) << ""; }
  { std::ofstream(blank) << " \n\t"; }
  auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "import " + empty + " -o " + scratch_db("fix46_e.db"), dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: " + empty + ": the file is empty (0 bytes): nothing to import\n");
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "import " + blank + " -o " + scratch_db("fix46_b.db"), dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: " + blank + ": the file holds only blanks (3 bytes): nothing to import\n");
  EXPECT_FALSE(fs::exists(scratch_db("fix46_e.db")));
}
