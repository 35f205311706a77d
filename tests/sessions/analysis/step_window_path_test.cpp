// The critical path of a step lies within its step window (crit42, tester42 F1): in an async GPU
// trace the kernels of step N run past N's window, and the unclipped paths of consecutive steps
// overlapped (trace_diff_test: 946.88 ms of path over 6 steps whose windows sum to 744.4 ms). A
// step without a window (the partial step of a crashed run) says where the run stopped but is
// not in the totals, as the step statistics leave it out (kk.db: 3329.7 ms vs 3163.1 ms).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/run_end.h"
#include "embedscope/sessions/store/session.h"
#include "import_test_support.h"

namespace {
namespace ss = embedscope::sessions;
using SegKind = ss::PathSegment::Kind;

// Rank 0: step 0's window [0, 100), step 1's [100, 200); its kernel of step 0 runs on lane 1 from
// 40 to 150 (past the window), step 1's from 150 to 190; step 2 (the run crashed in it) has ops
// from 200 to 260 and no window. Rank 1: a window in step 0 only, and an op of step 1 [100, 195)
// (it has no window there: not in step 1's figures, nor its path).
std::string async_crashed_session() {
  const std::string db = ss::testing::scratch_db("step_window_path.db");
  std::remove(db.c_str());
  ss::SessionWriter w(db);
  w.set_metadata("world_size", "2");
  using ss::Lane;
  using ss::OpCategory;
  w.add_ops({
      {0, Lane::compute, OpCategory::other, "launch", 0, 0, 40},
      {0, Lane::comm, OpCategory::dense, "kernel", 0, 40, 150},
      {1, Lane::compute, OpCategory::other, "launch", 0, 0, 50},
      {0, Lane::compute, OpCategory::other, "launch", 1, 100, 130},
      {0, Lane::comm, OpCategory::dense, "kernel", 1, 150, 190},
      {1, Lane::compute, OpCategory::other, "straggler", 1, 100, 195},
      {0, Lane::compute, OpCategory::other, "launch", 2, 200, 260},
  });
  w.add_step({0, 0, 0, 100, 0.5, 0, 0});
  w.add_step({0, 1, 0, 100, 0.5, 0, 0});
  w.add_step({1, 0, 100, 200, 0.5, 0, 0});
  w.close("crashed");
  return db;
}
}  // namespace

TEST(StepWindowPath, EachStepsPathLiesInItsWindowAndThePartialStepIsOutOfTheTotals) {
  const ss::SessionReader r(async_crashed_session());
  const ss::RunStats st = ss::analyze(r);
  ASSERT_EQ(st.steps, 2);
  ASSERT_EQ(st.critical_paths.size(), 3u);  // steps 0, 1 and the partial step 2
  auto name_of = [&](const ss::PathSegment& s) { return s.kind == SegKind::gap ? std::string("gap") : r.name(s.name_id); };
  // step 0: launch [0, 40), then the kernel clipped at the window's end: [40, 100) (was [40, 150))
  const auto& p0 = st.critical_paths[0].segments;
  ASSERT_EQ(p0.size(), 2u);
  EXPECT_EQ(name_of(p0[0]), "launch");
  EXPECT_EQ(p0[0].start_ns, 0);
  EXPECT_EQ(p0[0].end_ns, 40);
  EXPECT_EQ(name_of(p0[1]), "kernel");
  EXPECT_EQ(p0[1].start_ns, 40);
  EXPECT_EQ(p0[1].end_ns, 100);
  // step 1: rank 1's op is not walked (no window of rank 1 in step 1): launch [100, 130), the
  // gap [130, 150), the kernel [150, 190), the gap [190, 200) to the window's end
  const auto& p1 = st.critical_paths[1].segments;
  ASSERT_EQ(p1.size(), 4u);
  EXPECT_EQ(name_of(p1[0]), "launch");
  EXPECT_EQ(p1[0].rank, 0);
  EXPECT_EQ(name_of(p1[1]), "gap");
  EXPECT_EQ(p1[1].start_ns, 130);
  EXPECT_EQ(p1[1].end_ns, 150);
  EXPECT_EQ(name_of(p1[2]), "kernel");
  EXPECT_EQ(p1[2].end_ns, 190);
  EXPECT_EQ(name_of(p1[3]), "gap");
  EXPECT_EQ(p1[3].start_ns, 190);
  EXPECT_EQ(p1[3].end_ns, 200);
  // step 2 is walked (where the run stopped) but not summed: 100 + 100 (each window), not
  // 150 + 95 + 60
  EXPECT_EQ(st.critical_paths[2].step, 2);
  EXPECT_EQ(st.critical_path_ns, 200);
  int64_t windows = 0;
  for (const auto& t : st.per_step) windows += t.window_ns;
  EXPECT_EQ(windows, 300);  // rank 0: 100 + 100, rank 1: 100
  EXPECT_EQ(ss::ended_text(st), "crashed in step 2, after 2 measured steps");
  int64_t kernel = 0, steps_bounded = 0;
  for (const auto& e : st.critical_path) {
    if (e.name_id >= 0 && r.name(e.name_id) == "kernel") kernel = e.ns;
    steps_bounded += e.steps_bounded;
  }
  EXPECT_EQ(kernel, 60 + 40);
  EXPECT_EQ(steps_bounded, 2);  // the partial step bounds nothing in the table
}

// The real trace of tester42 F1 (HTA's trace_diff_test): each step's path within its window,
// their sum within the sum of the windows (946.88 ms before; the windows sum to 744.40 ms).
TEST(StepWindowPath, TraceDiffTestsPathsFitTheirSteps) {
  const std::string file = std::string(EMBEDSCOPE_SHARED_DATA) + "/traces/trace_diff_test.json.gz";
  if (!std::filesystem::exists(file)) GTEST_SKIP() << file << " is absent (shared test data)";
  ss::testing::import_into({file}, "step_window_tdt.db");
  const ss::SessionReader r(ss::testing::scratch_db("step_window_tdt.db"));
  const ss::RunStats st = ss::analyze(r);
  ASSERT_EQ(st.steps, 6);
  ASSERT_EQ(st.per_step.size(), 6u);  // one rank (rank 1) with a trace
  int64_t windows = 0;
  for (const auto& t : st.per_step) windows += t.window_ns;
  EXPECT_EQ(windows, 744'401'000);  // 6 x 124.0668 ms: `embedscope stats` step time mean
  // one rank: its paths cover its windows exactly (an untraced start or end of a step is a gap
  // on its path; 744.35 ms before that)
  EXPECT_EQ(st.critical_path_ns, windows);
  ASSERT_EQ(st.critical_paths.size(), 6u);
  for (size_t i = 0; i < st.critical_paths.size(); ++i) {
    const auto& p = st.critical_paths[i];
    const auto& t = st.per_step[i];
    ASSERT_EQ(p.step, t.step);
    ASSERT_FALSE(p.segments.empty());
    int64_t len = 0;
    for (const auto& s : p.segments) len += s.end_ns - s.start_ns;
    EXPECT_LE(len, t.window_ns) << "step " << p.step;
  }
}
