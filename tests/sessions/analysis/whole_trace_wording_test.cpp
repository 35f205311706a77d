// The analyses' wording for a trace without profiler steps (RunStats::whole_trace): its overlap
// and GPU busy figures are over the whole trace, and the text says so instead of "clipped to
// step windows" / "of the measured steps"; a trace with steps keeps the step wording.
#include <gtest/gtest.h>

#include <string>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/gpu_run.h"

namespace ss = embedscope::sessions;

namespace {
// two GPU ranks, busy 20 % and 40 % of their windows (mean 30 %: below 50, host-bound)
ss::RunStats whole_trace_stats(bool whole_trace) {
  ss::RunStats st;
  st.stream_ranks = true;
  st.whole_trace = whole_trace;
  for (int r = 0; r < 2; ++r) {
    ss::RankStats rs;
    rs.rank = r;
    rs.window_ns = 1'000'000;
    rs.gpu_busy_pct = r == 0 ? 20.0 : 40.0;
    st.ranks.push_back(rs);
  }
  return st;
}
}  // namespace

TEST(WholeTraceWording, OverlapDefinitionSaysWholeTraceOrStepWindows) {
  ss::RunStats st;  // thread level (a cpu trace)
  EXPECT_EQ(ss::overlap_definition(st), "thread level: host spans of compute vs comm ops per rank, clipped to step windows");
  st.whole_trace = true;
  EXPECT_EQ(ss::overlap_definition(st),
            "thread level: host spans of compute vs comm ops per rank, over the whole trace (no profiler steps)");
  st.stream_ranks = true;
  EXPECT_EQ(ss::overlap_definition(st),
            "stream level: GPU kernels and copies of compute vs comm per rank with GPU streams (its host spans left "
            "out), over the whole trace (no profiler steps)");
  st.whole_trace = false;
  EXPECT_EQ(ss::overlap_definition(st),
            "stream level: GPU kernels and copies of compute vs comm per rank with GPU streams (its host spans left "
            "out), clipped to step windows");
}

TEST(WholeTraceWording, GpuBusyIsOfTheWholeTraceOrOfTheMeasuredSteps) {
  // imported: no host line; mean (20 + 40) / 2 = 30.0 %, least rank 0, most rank 1, host-bound (< 50)
  EXPECT_EQ(ss::gpu_busy_text(whole_trace_stats(true), true),
            "GPU busy     30.0% of the whole trace (no profiler steps), mean over ranks (a kernel or copy running on "
            "the rank's streams; least rank 0 20.0%, most rank 1 40.0%): host-bound: the host's work between GPU ops "
            "bounds the step, not the GPU\n");
  EXPECT_EQ(ss::gpu_busy_text(whole_trace_stats(false), true),
            "GPU busy     30.0% of the measured steps, mean over ranks (a kernel or copy running on the rank's streams; "
            "least rank 0 20.0%, most rank 1 40.0%): host-bound: the host's work between GPU ops bounds the step, not "
            "the GPU\n");
}
