// Warm-up and set-up in the timeline math: the measured steps' extent (the default view), the
// names of warm-up steps, set-up waits, the collective a hung run timed out in, and where an
// imported trace's session goes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/import_target.h"
#include "core/timeline_math.h"
#include "embedscope/sessions/importers/kineto_json/kineto_json.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope;
using namespace embedscope::ui;

TEST(MeasuredExtent, CoversTheMeasuredStepsOnly) {
  // warm-up -2 [0, 700) and -1 [700, 800); measured 0 [800, 900) and 1 [900, 1000)
  const std::map<int64_t, ViewRange> steps{{-2, {0, 700}}, {-1, {700, 800}}, {0, {800, 900}}, {1, {900, 1000}}};
  EXPECT_EQ(measured_extent(steps), (ViewRange{800, 1000}));
  EXPECT_EQ(measured_extent({{-1, {0, 5}}}), std::nullopt);  // ended in its warm-up
  EXPECT_EQ(measured_extent({}), std::nullopt);
  EXPECT_EQ(measured_extent({{0, {10, 20}}}), (ViewRange{10, 20}));
}

TEST(StepName, NamesWarmUpStepsAsWarmUp) {
  EXPECT_EQ(step_name(0, 2), "step 0");
  EXPECT_EQ(step_name(7, 0), "step 7");
  EXPECT_EQ(step_name(-2, 2), "warm-up 1 of 2");
  EXPECT_EQ(step_name(-1, 2), "warm-up 2 of 2");
  EXPECT_EQ(step_name(-3, 2), "warm-up (step -3)");  // the count does not cover it
  EXPECT_EQ(step_name(-1, 0), "warm-up (step -1)");
}

TEST(SetupWaits, CommunicationBeforeEveryRankStartedIsSetUp) {
  // rank 0 starts at 0 and enters its all-to-all at 20 us; rank 1 starts at 600 us: rank 0's
  // [20, 600) us is set-up wait, its [600, 650) us ordinary communication; rank 1 waits for none
  const std::map<int32_t, int64_t> first{{0, 0}, {1, 600'000}};
  const std::map<int32_t, std::vector<ViewRange>> comm{
      {0, {{20'000, 650'000}, {700'000, 720'000}}}, {1, {{630'000, 650'000}}}};
  const auto w = setup_waits(first, comm);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w.at(0), (std::vector<ViewRange>{{20'000, 600'000}}));
  // overlapping comm ops of one rank (two lanes) give one merged wait
  const auto merged = setup_waits(first, {{0, {{300'000, 500'000}, {20'000, 400'000}}}});
  EXPECT_EQ(merged.at(0), (std::vector<ViewRange>{{20'000, 500'000}}));
  EXPECT_TRUE(setup_waits({{0, 0}}, comm).empty());  // one rank waits for nobody
}

TEST(HangSite, ParsesTheEnginesEndMessage) {
  const auto site = parse_hang_message(
      "rank 1: all_to_all 'input_dist/splits' (group world, sequence 2) did not finish within 300 ms (every rank arrived; "
      "the emulated network needs 320.0 ms for this rank's transfers)");
  ASSERT_TRUE(site);
  EXPECT_EQ(*site, (HangSite{1, "all_to_all", "input_dist/splits", "world", 2}));
  EXPECT_EQ(parse_hang_message("rank 0: out of memory allocating 16.0 KiB"), std::nullopt);
  // a wait that ended early because a peer's connection broke (tester 36, D8)
  const auto early = parse_hang_message(
      "rank 0: all_gather 'grad_dist/all_to_all/split_check' (group world, sequence 1352) failed after 10.2 ms, before "
      "its 3000 ms timeout: a peer's connection broke; rank(s) 2 did not arrive");
  ASSERT_TRUE(early);
  EXPECT_EQ(*early, (HangSite{0, "all_gather", "grad_dist/all_to_all/split_check", "world", 1352}));
}

TEST(HangSite, TheHungOpIsTheRanksLastOfThatName) {
  auto op = [](int64_t s, int64_t e, int32_t name, sessions::OpCategory c = sessions::OpCategory::comm) {
    sessions::OpRecord o;
    o.start_ns = s;
    o.end_ns = e;
    o.name_id = name;
    o.category = c;
    return o;
  };
  const std::vector<std::string> names{"lookup", "a2a", "other_comm"};
  const std::vector<sessions::OpRecord> r0{op(0, 10, 1)}, r1c{op(0, 5, 0, sessions::OpCategory::lookup)},
      r1m{op(10, 20, 1), op(30, 40, 2), op(50, 90, 1)};
  const std::vector<const std::vector<sessions::OpRecord>*> rows{&r0, &r1c, &r1m};
  const std::vector<int32_t> ranks{0, 1, 1};
  EXPECT_EQ(hung_op({1, "all_to_all", "a2a", "world", 2}, rows, ranks, names), (OpRef{2, 2}));
  // no op of that name: the rank's last communication op
  EXPECT_EQ(hung_op({1, "all_to_all", "missing", "", -1}, rows, ranks, names), (OpRef{2, 2}));
  EXPECT_EQ(hung_op({1, "all_to_all", "other_comm", "", -1}, rows, ranks, names), (OpRef{2, 1}));
  EXPECT_EQ(hung_op({5, "all_to_all", "a2a", "", -1}, rows, ranks, names), std::nullopt);
}

TEST(ImportTarget, BesideTheSourceElseInTheCacheFolder) {
  EXPECT_EQ(import_stem("/x/trace_diff_test.json.gz"), "trace_diff_test");
  EXPECT_EQ(import_stem("rank0.pt.trace.json.gz"), "rank0");
  EXPECT_EQ(import_stem("snap.pickle.gz"), "snap");
  EXPECT_EQ(import_stem("/x/capture.sqlite"), "capture");
  EXPECT_EQ(import_stem("/runs/job7/"), "job7");
  const auto dir = std::filesystem::temp_directory_path() / ("es_ui_target_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "src");
  const std::string src = (dir / "src" / "t.json").string();
  std::ofstream(src) << "{\"traceEvents\": []}";
  const std::string cache = (dir / "cache").string();
  auto t = import_target({src}, cache);
  EXPECT_EQ(t.path, (dir / "src" / "t.db").string());
  EXPECT_FALSE(t.reuse);
  EXPECT_FALSE(t.in_cache);
  {  // a session of another origin there: the next free name
    sessions::SessionWriter w(t.path);
    w.close("complete");
  }
  EXPECT_EQ(import_target({src}, cache).path, (dir / "src" / "t-2.db").string());
  if (geteuid() != 0) {  // root writes anywhere: the read-only case needs an ordinary user
    chmod((dir / "src").c_str(), 0555);
    t = import_target({src}, cache);
    EXPECT_TRUE(t.in_cache);
    EXPECT_EQ(t.path, (dir / "cache" / "t.db").string());
    chmod((dir / "src").c_str(), 0755);
  }
  std::filesystem::remove_all(dir);
}

// tester39 F12: a session was reused for any file whose path *as typed at the import*, resolved
// against today's folder, had the same size - another folder's same-size trace, or a trace edited
// in place to the same size, showed the old data. Now: the absolute path (however spelled), the
// size, and not modified after the import.
TEST(ImportTarget, ReusesOnlyTheSameUnchangedFile) {
  namespace fs = std::filesystem;
  const auto dir = fs::temp_directory_path() / ("es_ui_reuse_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "a");
  const std::string src = (dir / "a" / "t.json").string();
  std::ofstream(src) << R"({"traceEvents": [{"ph": "X", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]})";
  const auto import_to = [&](const std::string& session, const std::string& recorded) {
    sessions::SessionWriter w(session, true);
    sessions::importers::import_kineto_json({recorded}, w, {});
    w.close("complete");
  };
  const std::string cache = (dir / "cache").string();
  import_to((dir / "a" / "t.db").string(), src);  // recorded absolute
  fs::last_write_time(src, fs::last_write_time(dir / "a" / "t.db") - std::chrono::seconds(10));
  EXPECT_TRUE(import_target({src}, cache).reuse);
  EXPECT_TRUE(import_target({(dir / "a" / "." / "t.json").string()}, cache).reuse);  // another spelling
  // edited in place after the import, same size: imported again
  fs::last_write_time(src, fs::last_write_time(dir / "a" / "t.db") + std::chrono::seconds(10));
  auto t = import_target({src}, cache);
  EXPECT_FALSE(t.reuse);
  EXPECT_EQ(t.path, (dir / "a" / "t-2.db").string());
  // a session that recorded a relative path: which folder it meant is unknown, so not reused
  fs::last_write_time(src, fs::last_write_time(dir / "a" / "t.db") - std::chrono::seconds(10));
  const fs::path cwd = fs::current_path();
  fs::current_path(dir / "a");
  import_to((dir / "a" / "t.db").string(), "t.json");
  fs::current_path(cwd);
  fs::last_write_time(src, fs::last_write_time(dir / "a" / "t.db") - std::chrono::seconds(10));
  EXPECT_FALSE(import_target({src}, cache).reuse);
  fs::remove_all(dir);
}
