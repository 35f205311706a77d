// tester48 F14.9: the workbench Summary flagged "the plan under-estimated the measured peak: rank 2
// planned 268.0 KiB, peak 268.5 KiB (+512 B, 0.19 % of the plan)" - one 512 B allocator block,
// the estimate's rounding. The rule (sessions/analysis/estimate_rounding.h): one block or 0.1 %
// of the estimate, whichever is larger.
#include <gtest/gtest.h>

#include "embedscope/sessions/analysis/estimate_rounding.h"

namespace fixd48_estimate_rounding_test {

using namespace embedscope::sessions;

TEST(Fixd48EstimateRounding, OneBlockOrATenthOfAPercentWhicheverIsLarger) {
  const int64_t small = 268 * 1024;  // 274,432 B: 0.1 % is 274 B, less than a block
  EXPECT_EQ(estimate_rounding_bytes(small), 512);
  EXPECT_TRUE(over_within_estimate_rounding(small, small + 512));   // F14.9's rank 2
  EXPECT_FALSE(over_within_estimate_rounding(small, small + 513));  // more than one block
  EXPECT_FALSE(over_within_estimate_rounding(small, small));        // not above: nothing to exempt
  EXPECT_FALSE(over_within_estimate_rounding(small, small - 512));
  const int64_t large = int64_t{2} << 30;  // 2.0 GiB: 0.1 % is 2,147,483 B
  EXPECT_EQ(estimate_rounding_bytes(large), 2147483);
  EXPECT_TRUE(over_within_estimate_rounding(large, large + 2147483));
  EXPECT_FALSE(over_within_estimate_rounding(large, large + 2147484));
  EXPECT_FALSE(over_within_estimate_rounding(large, large + (int64_t{49} << 20) / 10));  // 4.9 MiB, tester38 #10
  EXPECT_EQ(estimate_rounding_bytes(0), 0);  // no estimate: nothing is rounding
  EXPECT_FALSE(over_within_estimate_rounding(0, 512));
}

}  // namespace fixd48_estimate_rounding_test
