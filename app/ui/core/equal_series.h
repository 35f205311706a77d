#pragma once
// Which of several compared series are equal to an earlier one (tester42 F26): drawn at one
// width, a later session's line covers an equal earlier one exactly, so the chart says "B = A".

#include <vector>

namespace embedscope::ui {

/// For each series i, the index of the first series j < i with exactly the same values (same
/// length, every value ==), or -1 when none is. An empty series equals only other empty ones.
/// Cost: O(n^2 x length) comparisons (n: a handful of compared sessions).
/// Example: {{1, 2}, {3}, {1, 2}, {3}} -> {-1, -1, 0, 1}.
std::vector<int> same_as_earlier(const std::vector<std::vector<double>>& series);

/// For each point (x[i], y[i]), the index of the first earlier point j < i that is drawn on it:
/// |x_i - x_j| <= tol_x and |y_i - y_j| <= tol_y; -1 when none is (tester42 F3: fp16 rows and
/// fp16 rows with stochastic rounding have the same bytes and loss, one point hid the other).
/// Points equal to a point that is itself "on" an earlier one name that earlier one. Sizes of
/// x and y must match (std::invalid_argument otherwise). Cost O(n^2).
/// Example: x {1, 5, 1.001}, y {2, 2, 2}, tol 0.01, 0.01 -> {-1, -1, 0}.
std::vector<int> coincident_with_earlier(const std::vector<double>& x, const std::vector<double>& y, double tol_x,
                                         double tol_y);

}  // namespace embedscope::ui
