// Step windows and the alignment of sessions on a step (sessions/analysis/step_windows.h).
#include "embedscope/sessions/analysis/step_windows.h"

#include <gtest/gtest.h>

#include "support/step_sessions.h"

using namespace embedscope;
using namespace embedscope::sessions;

TEST(StepWindows, AlignOffsetsPutStepKOfEverySessionAtZero) {
  // A: step 0 starts at 100 (rank 0) and 90 (rank 1), step 1 at 500; B: step 1 at 2000, no step 0
  std::vector<sessions::StepMetric> a{{0, 0, 100, 500}, {0, 1, 90, 500}, {1, 0, 500, 900}, {1, 1, 505, 900}};
  std::vector<sessions::StepMetric> b{{1, 0, 2000, 2600}, {2, 0, 2600, 3000}};
  EXPECT_EQ(align_offsets({a, b}, 1), (std::vector<int64_t>{500, 2000}));
  EXPECT_EQ(align_offsets({a, b}, 0), (std::vector<int64_t>{90, 2000}));  // B has no step 0: its first step
  EXPECT_EQ(align_offsets({{}}, 3), (std::vector<int64_t>{0}));
  EXPECT_FALSE(step_start(b, 0).has_value());
}

TEST(StepWindows, ARunThatEndedInsideAStepGetsTheSpanOfItsOps) {
  sessions::SessionReader oom(test_support::oom_in_step_session());
  const auto windows = step_windows(oom);
  ASSERT_EQ(windows.size(), 2u);
  EXPECT_EQ(windows[0].start_ns, 3'000'000);
  EXPECT_EQ(windows[0].end_ns, 3'500'000);
  EXPECT_EQ(step_start(windows, 0), 3'000'000);
}
