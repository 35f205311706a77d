// core/timeline_nav.h: what the step box names for a view, the view a search jump shows, a match's
// place among all matches, against hand-computed values and a brute-force count.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "core/timeline_nav.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
const std::map<int64_t, ViewRange> kSteps = {{0, {0, 500}}, {1, {500, 1000}}, {2, {1000, 1500}}};
const std::map<int64_t, ViewRange> kWarmSteps = {{-2, {0, 100}}, {-1, {100, 200}}, {0, {200, 500}},
                                                 {1, {500, 1000}}, {2, {1000, 1500}}};

sessions::OpRecord ui57_op(int64_t start, int64_t end, int32_t name) {
  sessions::OpRecord o;
  o.start_ns = start;
  o.end_ns = end;
  o.name_id = name;
  return o;
}
}  // namespace

TEST(Ui57TimelineNav, ShownStepsTakesTheCentreAndTheWholeSteps) {
  EXPECT_EQ(shown_steps(kSteps, {0, 1500}), (ShownSteps{1, 0, 2}));
  EXPECT_EQ(shown_steps(kSteps, {0, 1000}), (ShownSteps{1, 0, 1}));   // centre 500: step 1's start
  EXPECT_EQ(shown_steps(kSteps, {400, 1100}), (ShownSteps{1, 1, 1}));  // one whole step
  EXPECT_EQ(shown_steps(kSteps, {600, 800}), (ShownSteps{1, 1, 1}));
  EXPECT_EQ(shown_steps(kSteps, {0, 499}), (ShownSteps{0, 0, 0}));     // no step whole: the centre's
  EXPECT_FALSE(shown_steps(kSteps, {600, 800})->several());
  EXPECT_EQ(shown_steps({}, {0, 10}), std::nullopt);
}

TEST(Ui57TimelineNav, ShownStepsNameSaysWhichSteps) {
  EXPECT_EQ(shown_steps_name({1, 0, 2}, kSteps, 0), "all steps");
  EXPECT_EQ(shown_steps_name({1, 0, 1}, kSteps, 0), "steps 0-1");
  EXPECT_EQ(shown_steps_name({1, 1, 2}, kSteps, 0), "steps 1-2");
  EXPECT_EQ(shown_steps_name({1, 1, 1}, kSteps, 0), "step 1");
  // with two warm-up steps: the measured ones alone, everything, or from the warm-up on
  EXPECT_EQ(shown_steps_name({1, 0, 2}, kWarmSteps, 2), "all measured steps");
  EXPECT_EQ(shown_steps_name({0, -2, 2}, kWarmSteps, 2), "all steps");
  EXPECT_EQ(shown_steps_name({0, -1, 1}, kWarmSteps, 2), "warm-up 2 of 2 - step 1");
  EXPECT_EQ(shown_steps_name({-2, -2, -2}, kWarmSteps, 2), "warm-up 1 of 2");
}

TEST(Ui57TimelineNav, MatchViewZoomsToASubPixelMatch) {
  // 1000 px over 1 ms: 1 us a px; a 100 ns op is 0.1 px -> a 12.5 us view centred on it (8 px)
  EXPECT_EQ(match_view({0, 1'000'000}, 1000, 500'000, 500'100), (ViewRange{493'800, 506'300}));
  // a 100 us op (100 px): centred at the same zoom
  EXPECT_EQ(match_view({0, 1'000'000}, 1000, 100'000, 200'000), (ViewRange{-350'000, 650'000}));
  // wider than 80 % of the view: the op and a tenth either side
  EXPECT_EQ(match_view({0, 100'000}, 1000, 200'000, 300'000), (ViewRange{190'000, 310'000}));
  // 8 px exactly: not zoomed; 7.9 px: zoomed to 8
  EXPECT_EQ(match_view({0, 1'000'000}, 1000, 0, 8'000), (ViewRange{-496'000, 504'000}));
  const ViewRange z = match_view({0, 1'000'000}, 1000, 0, 7'900);
  EXPECT_EQ(z.t1 - z.t0, 987'500);
  EXPECT_NEAR(7'900.0 / static_cast<double>(z.t1 - z.t0) * 1000, 8.0, 1e-9);
  // a zero-length op: the narrowest view around it (the time scale clamps it to 1 us)
  const ViewRange p = match_view({0, 1'000'000}, 1000, 42, 42);
  EXPECT_EQ(p.t1 - p.t0, 1);
}

// Positions against a brute-force sort of every match by (start, row, index): random rows with
// ties in start across rows and inside one, more than one block of 64 per row.
TEST(Ui57TimelineNav, MatchIndexPositionIsTheFindOrder) {
  std::mt19937 rng(57);
  std::vector<std::vector<sessions::OpRecord>> rows(4);
  for (auto& row : rows) {
    int64_t t = 0;
    for (int k = 0; k < 300; ++k) {
      t += static_cast<int64_t>(rng() % 3) * 10;  // repeated starts
      row.push_back(ui57_op(t, t + 5, static_cast<int32_t>(rng() % 4)));
    }
  }
  std::vector<const std::vector<sessions::OpRecord>*> ptrs;
  for (const auto& r : rows) ptrs.push_back(&r);
  const std::vector<bool> match = {false, true, false, true};  // names 1 and 3
  const MatchIndex index(ptrs, match);
  std::vector<std::tuple<int64_t, size_t, size_t>> all;
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t i = 0; i < rows[r].size(); ++i)
      if (match[static_cast<size_t>(rows[r][i].name_id)]) all.emplace_back(rows[r][i].start_ns, r, i);
  std::sort(all.begin(), all.end());
  ASSERT_EQ(index.total(), static_cast<int64_t>(all.size()));
  ASSERT_GT(all.size(), 400u);
  for (size_t k = 0; k < all.size(); ++k) {
    const auto [start, r, i] = all[k];
    ASSERT_EQ(index.position({r, i}), static_cast<int64_t>(k + 1)) << "row " << r << " op " << i;
  }
  // find_op walks the same order: the match after the 10th is the 11th
  const auto [s10, r10, i10] = all[9];
  const auto next = find_op(ptrs, match, OpRef{r10, i10}, true);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(index.position(*next), 11);
  EXPECT_THROW((void)index.position({9, 0}), std::out_of_range);
  EXPECT_EQ(MatchIndex(ptrs, {}).total(), 0);
}
