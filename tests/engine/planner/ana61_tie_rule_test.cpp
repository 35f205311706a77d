// plan --auto's tie rule (search.h kCriticalPathTie, tie_break_order): critical paths within 0.1 %
// of the fastest are a tie, which the plan with the least memory on its fullest device wins. By
// hand, on scored plans: the rule changes the winner, stops at 0.1 %, and leaves the rest in order.
#include <gtest/gtest.h>

#include <vector>

#include "embedscope/engine/planner/search.h"

namespace {
namespace es = embedscope::engine;
constexpr int64_t kMiB = 1 << 20;
}  // namespace

// 100,000 ns at 10 MiB, 100,050 ns (+0.05 %) at 5 MiB, 100,200 ns (+0.2 %) at 1 MiB: the tie
// reaches 100,000 x 1.001 = 100,100 ns, so the second plan wins on memory (without the rule the
// first would), and the third, leaner still, is no tie.
TEST(Ana61TieRule, ANearTieGoesToTheLeanerPlan) {
  const std::vector<es::ScoredPlan> plans{{100'000, 10 * kMiB}, {100'050, 5 * kMiB}, {100'200, 1 * kMiB}};
  EXPECT_EQ(es::tie_break_order(plans), (std::vector<size_t>{1, 0, 2}));
  // the fastest listed last: sorted first by critical path, then the rule
  const std::vector<es::ScoredPlan> shuffled{{100'200, 1 * kMiB}, {100'050, 5 * kMiB}, {100'000, 10 * kMiB}};
  EXPECT_EQ(es::tie_break_order(shuffled), (std::vector<size_t>{1, 2, 0}));
}

// The edge: 100,100 ns is exactly 0.1 % over 100,000 (a tie, inclusive); 100,101 is not.
TEST(Ana61TieRule, TheTieIsInclusiveAtOneTenthOfAPercent) {
  EXPECT_EQ(es::tie_break_order({{100'000, 10 * kMiB}, {100'100, 9 * kMiB}}), (std::vector<size_t>{1, 0}));
  EXPECT_EQ(es::tie_break_order({{100'000, 10 * kMiB}, {100'101, 9 * kMiB}}), (std::vector<size_t>{0, 1}));
}

// Within the tie the least memory wins, the earliest of equal memory; the others keep their
// (critical path, memory) order: {100,000 8 MiB, 100,020 3 MiB, 100,040 3 MiB, 100,060 6 MiB}
// -> the 100,020 plan, then 100,000, 100,040, 100,060. Equal critical paths rank by memory.
TEST(Ana61TieRule, TheLeanestOfTheTieFirstTheRestInOrder) {
  EXPECT_EQ(es::tie_break_order({{100'000, 8 * kMiB}, {100'020, 3 * kMiB}, {100'040, 3 * kMiB}, {100'060, 6 * kMiB}}),
            (std::vector<size_t>{1, 0, 2, 3}));
  EXPECT_EQ(es::tie_break_order({{5'000, 4 * kMiB}, {5'000, 2 * kMiB}}), (std::vector<size_t>{1, 0}));
  EXPECT_EQ(es::tie_break_order({{5'000, 2 * kMiB}}), (std::vector<size_t>{0}));
  EXPECT_TRUE(es::tie_break_order({}).empty());
}
