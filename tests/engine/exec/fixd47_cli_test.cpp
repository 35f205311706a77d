// tester47 findings fixed by fixd47, each end to end where the user met it.
// F16: lm_embedding sessions recorded no lookup time (every load counter's lookup_ns 0) and
// `stats` / `compare` showed that 0/0 as "lookup time max/mean 1.00" (balanced): the LM runs
// (threaded and simulated) now time their forward "lookup" op, and a session without any
// lookup time reads "not recorded" (null in --json, "-" in compare).
// F12: a KJT file cut short or whose header miscounts its batches was found only when the run
// reached the bad batch; a file whose writer was killed (N = 0, batches intact) was refused.
// F13: `import` of one memory snapshot twice made twice the ranks. F4: a directory given as a
// plan, a text to tokenize or a token file gave a raw stream error, exit 1. F9: `compare` did
// not say that a pipeline's drain steps are left out of its figures.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/input/kjt_file.h"
#include "embedscope/engine/program/lm_program.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"
#include "support/input_files.h"

namespace {
namespace fs = std::filesystem;
namespace es = embedscope::engine;
namespace ss = embedscope::sessions;

fs::path fixd47_dir() {
  static const fs::path d = [] {
    const auto p = fs::temp_directory_path() / ("es_fixd47_" + std::to_string(getpid()));
    fs::create_directories(p);
    return p;
  }();
  return d;
}

embedscope::test_support::CliResult fixd47_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, fixd47_dir());
}

/// vocab_parallel, V 64, H 8, sequence 8, 2 sequences, 2 ranks, 2 steps.
es::LmWorkloadSpec fixd47_lm_spec() {
  es::LmWorkloadSpec s;
  s.vocab_size = 64;
  s.hidden_size = 8;
  s.sequence_length = 8;
  s.micro_batch_size = 2;
  s.world_size = 2;
  s.steps = 2;
  return s;
}

/// Per (rank, step): the load counter's lookup_ns and the duration of the rank's "lookup" span.
struct Fixd47Lookup {
  int64_t counter_ns = 0, span_ns = 0;
};
std::map<std::pair<int, int64_t>, Fixd47Lookup> fixd47_lookups(const std::string& path) {
  std::map<std::pair<int, int64_t>, Fixd47Lookup> out;
  const ss::SessionReader session(path);
  for (const auto& c : session.load()) out[{c.rank, c.step}].counter_ns += c.lookup_ns;
  for (const auto& op : session.all_ops())
    if (op.category == ss::OpCategory::lookup && session.name(op.name_id) == "lookup")
      out[{op.rank, op.step}].span_ns += op.end_ns - op.start_ns;
  return out;
}
}  // namespace

TEST(Fixd47LmLookupTime, MeasuredRunRecordsTheLookupSpanAsLookupNs) {
  const std::string path = (fixd47_dir() / "lm_measured.db").string();
  es::LmRunOptions opt;
  opt.session_path = path;
  opt.overwrite = true;
  es::run_lm(fixd47_lm_spec(), opt);
  const auto got = fixd47_lookups(path);
  ASSERT_EQ(got.size(), 4u);  // 2 ranks x 2 steps
  for (const auto& [key, v] : got) {
    SCOPED_TRACE(testing::Message() << "rank " << key.first << " step " << key.second);
    EXPECT_GT(v.span_ns, 0);
    // the counter times the op around its span: at least the span, never 0
    EXPECT_GE(v.counter_ns, v.span_ns);
  }
  const auto st = ss::analyze(ss::SessionReader(path));
  ASSERT_TRUE(st.lookup_time_max_over_mean.has_value());
  EXPECT_GE(*st.lookup_time_max_over_mean, 1.0);
}

TEST(Fixd47LmLookupTime, SimulatedRunRecordsTheLookupOpsModelledTime) {
  const std::string path = (fixd47_dir() / "lm_simulated.db").string();
  es::LmSimulateOptions opt;
  opt.session_path = path;
  opt.overwrite = true;
  opt.hardware = "h100_sxm";
  es::simulate_lm(fixd47_lm_spec(), opt);
  const auto got = fixd47_lookups(path);
  ASSERT_EQ(got.size(), 4u);
  for (const auto& [key, v] : got) {
    SCOPED_TRACE(testing::Message() << "rank " << key.first << " step " << key.second);
    EXPECT_GT(v.span_ns, 0);
    EXPECT_EQ(v.counter_ns, v.span_ns);  // the modelled op's time, exactly
  }
}

TEST(Fixd47LmLookupTime, NoRecordedLookupTimeIsNotRecordedNeverBalanced) {
  // 2 ranks, 1 step: ids 30 and 10 (max/mean 1.5), lookup_ns 0 on both (what LM sessions held)
  const std::string path = (fixd47_dir() / "no_lookup_ns.db").string();
  fs::remove(path);
  {
    ss::SessionWriter w(path);
    w.set_metadata("world_size", "2");
    w.set_metadata("samples_per_step", "8");
    w.set_metadata("workload_name", "fixd47");
    for (int r = 0; r < 2; ++r) {
      w.add_lane({r, 0, "compute", "thread"});
      w.add_step({0, r, 1'000'000, 2'000'000, 0.5, 0, 0});
      ss::LoadCounter c;
      c.step = 0;
      c.rank = r;
      c.shard = r;
      c.ids = r == 0 ? 30 : 10;
      w.add_load(c);
    }
    w.add_ops({{0, ss::Lane::compute, ss::OpCategory::lookup, "lookup", 0, 1'000'000, 1'300'000, 0, 0},
               {1, ss::Lane::compute, ss::OpCategory::lookup, "lookup", 0, 1'000'000, 1'100'000, 0, 0}});
    w.close("complete");
  }
  const auto st = ss::analyze(ss::SessionReader(path));
  EXPECT_DOUBLE_EQ(st.lookups_max_over_mean, 1.5);
  EXPECT_FALSE(st.lookup_time_max_over_mean.has_value());
  auto r = fixd47_cli("stats " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("1.50 of the run's totals); lookup time not recorded"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("lookup time max/mean"), std::string::npos) << r.out;
  r = fixd47_cli("stats " + path + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("imbalance").at("lookup_time_max_over_mean").is_null()) << j.at("imbalance");
  EXPECT_DOUBLE_EQ(j.at("imbalance").at("lookups_max_over_mean").get<double>(), 1.5);
  r = fixd47_cli("compare " + path + " " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto at = r.out.find("imbalance: lookup time (max/mean)");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  EXPECT_EQ(line.find("1.00"), std::string::npos) << line;
  EXPECT_NE(line.find(" -"), std::string::npos) << line;
}

namespace {
// test_support::small_kjt_bytes (50 bytes of header, 80 a batch) as fixd47_dir()/name, then `cut`
// bytes taken off the end.
std::string fixd47_kjt(const std::string& name, int batches, uint64_t claimed, int cut = 0) {
  const std::string path = (fixd47_dir() / name).string();
  std::ofstream(path, std::ios::binary) << embedscope::test_support::small_kjt_bytes(batches, claimed);
  if (cut > 0) fs::resize_file(path, fs::file_size(path) - static_cast<uintmax_t>(cut));
  return path;
}

std::string fixd47_kjt_error(const std::string& path) {
  try {
    es::KjtFileReader r(path);
    r.check_layout();
  } catch (const es::InputFileError& e) {
    return e.what();
  }
  return "(no InputFileError)";
}
}  // namespace

TEST(Fixd47KjtLayout, AFileCutShortOrMiscountedIsRefusedUpFrontWithTheByteOffset) {
  ASSERT_EQ(fs::file_size(fixd47_kjt("whole.kjt", 3, 3)), 50u + 3 * 80);
  EXPECT_EQ(fixd47_kjt_error(fixd47_kjt("whole.kjt", 3, 3)), "(no InputFileError)");
  // 3 batches, the last 37 bytes cut: batch 2 starts at 50 + 160 = 210, 253 - 210 = 43 remain
  std::string p = fixd47_kjt("cut.kjt", 3, 3, 37);
  EXPECT_EQ(fixd47_kjt_error(p), p + ": the header says 3 batches, but the file ends inside batch 2 (batch 2 at byte offset "
                                     "210 needs 80 bytes, 43 remain; the file is 253 bytes): cut short?");
  // the header says 5, the file holds 3 whole batches (290 bytes)
  p = fixd47_kjt("over.kjt", 3, 5);
  EXPECT_EQ(fixd47_kjt_error(p), p + ": the header says 5 batches, but the file holds 3 (it ends at byte offset 290, after "
                                     "batch 2): cut short, or the header's count is wrong");
  // the header says 1, the file holds 2: the second's 80 bytes from 130 are extra
  p = fixd47_kjt("extra.kjt", 2, 1);
  EXPECT_EQ(fixd47_kjt_error(p),
            p + ": 80 bytes after the last of its 1 batches, from byte offset 130 (the header's count is wrong?)");
  // the batch source (what a run builds before its first step) refuses it: nothing trains
  es::WorkloadSpec spec;
  spec.name = "fixd47_kjt";
  spec.tables = {{"t", 50, 4, es::Pooling::sum, {"a"}}};
  spec.features = {es::FeatureSpec{"a", {}, {}}};
  spec.batch_size = 1;
  spec.steps = 3;
  spec.devices.count = 2;
  spec.input.kind = es::InputKind::kjt;
  spec.input.paths = {fixd47_kjt("over_run.kjt", 3, 5)};
  try {
    es::KjtBatchSource source(spec);
    ADD_FAILURE() << "a file whose header over-counts its batches was accepted";
  } catch (const es::InputFileError& e) {
    EXPECT_NE(std::string(e.what()).find("the header says 5 batches, but the file holds 3"), std::string::npos) << e.what();
  }
}

TEST(Fixd47KjtLayout, AWriterKilledBeforeCloseHasItsBatchesCounted) {
  // N = 0 in the header (write_kjt.py patches it in close()), 3 whole batches: counted
  const std::string p = fixd47_kjt("killed.kjt", 3, 0);
  es::KjtFileReader r(p);
  EXPECT_EQ(r.header().num_batches, 3u);
  EXPECT_TRUE(r.header().count_recovered);
  EXPECT_NO_THROW(r.check_layout());
  es::KjtFileBatch b;
  for (int n = 0; n < 3; ++n) {
    ASSERT_TRUE(r.next(b)) << n;
    EXPECT_EQ(b.ids, (std::vector<int64_t>{3 + n, 4 + n, 5 + n, 6 + n}));
  }
  EXPECT_FALSE(r.next(b));
  // killed in the middle of a batch: not whole batches, so no count, and the reason why
  const std::string cut = fixd47_kjt("killed_cut.kjt", 3, 0, 37);
  EXPECT_EQ(fixd47_kjt_error(cut), cut + ": holds no batches (N = 0 in its header), and its bytes after the header are not "
                                         "whole batches to count (2 whole, then batch 2 at byte offset 210 needs 80 bytes, "
                                         "43 remain)");
  const std::string empty = fixd47_kjt("killed_empty.kjt", 0, 0);
  EXPECT_EQ(fixd47_kjt_error(empty), empty + ": holds no batches (N = 0 in its header), and nothing follows its header");
}

TEST(Fixd47SnapshotTwice, OneMemorySnapshotNamedTwiceIsRefused) {
  const std::string P = std::string(EMBEDSCOPE_SOURCE_DIR) + "/tests/data/memory_snapshots/training_p4.pickle";
  ASSERT_TRUE(fs::exists(P)) << P;
  const std::string out = (fixd47_dir() / "snap_twice.db").string();
  auto r = fixd47_cli("import " + P + " " + P + " -o " + out);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(P + ": given twice (" + P + " and " + P + "); each memory snapshot is one process's: name it once"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out));
  // another spelling of the same path
  const std::string dotted = fs::path(P).parent_path().string() + "/./training_p4.pickle";
  r = fixd47_cli("import " + P + " " + dotted + " -o " + out);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(": given twice ("), std::string::npos) << r.err;
  // the file and its gzip copy: the same snapshot by content
  const std::string gz = (fixd47_dir() / "training_p4.pickle.gz").string();
  ASSERT_EQ(std::system(("gzip -c " + P + " > " + gz).c_str()), 0);
  r = fixd47_cli("import " + P + " " + gz + " -o " + out);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(gz + ": the same memory snapshot as " + P + " (identical segments and trace entries"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out));
  // two different snapshots are still two processes
  const std::string other = std::string(EMBEDSCOPE_SOURCE_DIR) + "/tests/data/memory_snapshots/midway_p4.pickle";
  r = fixd47_cli("import " + P + " " + other + " -o " + out);
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST(Fixd47DirectoryInput, ADirectoryAsPlanTextOrTokenFileIsNamedBadInput) {
  const fs::path d = fixd47_dir() / "a_dir";
  fs::create_directories(d);
  auto r = fixd47_cli("run --preset tiny --plan " + d.string() + " -o " + (fixd47_dir() / "dir_plan.db").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--plan " + d.string() + ": is a directory, not a plan file"), std::string::npos) << r.err;
  r = fixd47_cli("tokenize --vocab-size 1000 --input " + d.string() + " -o " + (fixd47_dir() / "t.bin").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--input " + d.string() + ": is a directory, not a text file"), std::string::npos) << r.err;
  const fs::path wl = fixd47_dir() / "w_dir.json";
  std::ofstream(wl) << nlohmann::json{{"model", "lm_embedding"},
                                      {"vocab_size", 100},
                                      {"hidden_size", 16},
                                      {"sequence_length", 8},
                                      {"devices", {{"count", 2}}},
                                      {"token_ids", {{"file", d.string()}, {"dtype", "uint16"}}}}
                           .dump();
  r = fixd47_cli("run " + wl.string() + " -o " + (fixd47_dir() / "dir_tok.db").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("/token_ids/file"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(d.string() + ": is a directory, not a token file"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("basic_filebuf"), std::string::npos) << r.err;
}

TEST(Fixd47CompareDrain, ComparesSaysWhichDrainStepsItsFiguresLeaveOut) {
  // semi_sync over 4 steps: its last 2 drain the pipeline (stats: "steps 2-3 drain ...")
  const std::string ss_db = (fixd47_dir() / "semi.db").string(), base = (fixd47_dir() / "base.db").string();
  auto r = fixd47_cli("run --preset tiny --pipeline semi_sync --steps 4 -o " + ss_db + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  r = fixd47_cli("run --preset tiny --steps 4 -o " + base + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  r = fixd47_cli("stats " + ss_db);
  ASSERT_EQ(r.code, 0) << r.err;
  // stats' own line (its wording is stats.h drain_steps_text's), which compare must repeat
  const auto at = r.out.find("(steps 2-3 drain the semi_sync pipeline: recorded, not in ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string note = r.out.substr(at, r.out.find('\n', at) - at);
  EXPECT_NE(note.find("; 2 of 4 measured steps counted)"), std::string::npos) << note;
  r = fixd47_cli("compare " + base + " " + ss_db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("B: " + note + "\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("A: (steps"), std::string::npos) << r.out;  // the base pipeline has no drain
}

// F14 nits 1, 2, 4: a flag that does nothing is refused; a text named twice is refused; a fit
// range past the distinct ids is said in the flags' terms.
TEST(Fixd47Nits, HeldOutBatchesWhereNothingIsEvaluatedAndTokenizeInputs) {
  auto r = fixd47_cli("run --preset tiny --simulate h100_sxm --held-out-batches 5 -o " +
                      (fixd47_dir() / "nit_sim.db").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--held-out-batches: not with --simulate (a simulated run trains no model to evaluate)"),
            std::string::npos)
      << r.err;
  r = fixd47_cli("run --preset llama3_8b_embedding_scaled --steps 1 --held-out-batches 3 -o " +
                 (fixd47_dir() / "nit_lm.db").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--held-out-batches: not for an lm_embedding workload"), std::string::npos) << r.err;
  const fs::path text = fixd47_dir() / "nit.txt";
  std::ofstream(text) << "the cat sat on the mat\nthe dog sat on the log\n";
  const std::string dotted = (fixd47_dir() / "." / "nit.txt").string();
  r = fixd47_cli("tokenize --vocab-size 30 --input " + text.string() + " --input " + dotted + " -o " +
                 (fixd47_dir() / "nit.bin").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--input " + dotted + ": given twice (" + text.string() + " and " + dotted + ")"), std::string::npos)
      << r.err;
  r = fixd47_cli("tokenize --vocab-size 30 --input " + text.string() + " -o " + (fixd47_dir() / "nit2.bin").string() +
                 " --force-overwrite --fit-first-rank 5000 --fit-last-rank 6000");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--fit-first-rank 5000: the tokens hold "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("fit_zipf"), std::string::npos) << r.err;
}

// F8: the workbench given a workload JSON with a syntax error said "not a format embedscope import
// reads"; it now gives run's error with line and column (the headless report path: exit 2).
TEST(Fixd47WorkbenchWorkload, AWorkloadWithAJsonErrorGetsLineAndColumn) {
  const std::string ui = EMBEDSCOPE_UI;
  if (ui.empty() || !fs::exists(ui)) GTEST_SKIP() << "the workbench is not built";
  std::ifstream in(std::string(EMBEDSCOPE_SOURCE_DIR) + "/resources/workloads/tiny.json");
  const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const fs::path cut = fixd47_dir() / "trunc_wl.json";
  std::ofstream(cut) << whole.substr(0, whole.size() / 2);  // the tester's file: tiny.json's first half
  const std::string cli_err = fixd47_cli("run " + cut.string()).err;  // run's own message
  const auto at = cli_err.find("line ");
  ASSERT_NE(at, std::string::npos) << cli_err;
  const auto r = embedscope::test_support::run_cli("QT_QPA_PLATFORM=offscreen " + ui, cut.string(), fixd47_dir());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(cut.string() + ": a workload JSON? " + cli_err.substr(at, cli_err.find('\n', at) - at)),
            std::string::npos)
      << r.err << "\n" << cli_err;
  EXPECT_EQ(r.err.find("not a format embedscope import reads"), std::string::npos) << r.err;
}

// A session Embedscope ran stores its workload JSON (keys "tables", "batch_size"): with no display
// the workbench still writes its report, not "a workload JSON? ..." (retest47 R10: the F8 check
// above read the SQLite file's bytes as a broken workload and refused every run session).
TEST(Fixd47WorkbenchWorkload, ASessionWithNoDisplayStillGetsItsReport) {
  const std::string ui = EMBEDSCOPE_UI;
  if (ui.empty() || !fs::exists(ui)) GTEST_SKIP() << "the workbench is not built";
  const fs::path session = fixd47_dir() / "r10.db";
  const auto run = fixd47_cli("run --preset tiny --steps 1 --warmup-steps 0 -o " + session.string());
  ASSERT_EQ(run.code, 0) << run.err;
  const auto r = embedscope::test_support::run_cli("QT_QPA_PLATFORM=offscreen " + ui, session.string(), fixd47_dir());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("a workload JSON?"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(fixd47_dir() / "r10-report" / "index.html")) << r.out << r.err;
}
