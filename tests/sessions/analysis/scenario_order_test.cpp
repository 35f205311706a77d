// The play order of a step and what each op waited for (sessions/analysis/scenario_order.h).
#include "embedscope/sessions/analysis/scenario_order.h"

#include <gtest/gtest.h>

#include "support/step_sessions.h"

using namespace embedscope;
using namespace embedscope::sessions;

TEST(ScenarioOrder, PlayOrderAndWhatEachOpWaitsFor) {
  sessions::SessionReader r(test_support::step_session("es_play", 0, {1'000'000, 1'000'000}));
  const auto play = play_order(r, 1);
  ASSERT_EQ(play.size(), 4u);
  // by start, then rank: both lookups at 1 ms, rank 0's all-to-all at +150 us, rank 1's at +320 us
  EXPECT_EQ(play[0].op.rank, 0);
  EXPECT_EQ(r.name(play[0].op.name_id), "lookup");
  EXPECT_EQ(play[1].op.rank, 1);
  EXPECT_EQ(play[2].op.start_ns, 1'150'000);
  EXPECT_EQ(play[3].op.start_ns, 1'320'000);
  EXPECT_EQ(play[0].waits_for, "nothing: it starts the step on its rank");
  EXPECT_EQ(play[2].waits_for, "rank 1 to join the collective (170.0 us later)");
  EXPECT_EQ(play[3].waits_for, "lookup on the compute lane (ended 20.0 us before)");
}

TEST(FormatDuration, UnitsAndDecimals) {
  EXPECT_EQ(format_duration(1'500'000), "1.50 ms");
  EXPECT_EQ(format_duration(999), "999 ns");
}
