#include "core/equal_series.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace embedscope::ui {

std::vector<int> same_as_earlier(const std::vector<std::vector<double>>& series) {
  std::vector<int> out(series.size(), -1);
  for (size_t i = 0; i < series.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (out[j] < 0 && series[j] == series[i]) {  // the group's first member: "C = A", not "C = B"
        out[i] = static_cast<int>(j);
        break;
      }
  return out;
}

std::vector<int> coincident_with_earlier(const std::vector<double>& x, const std::vector<double>& y, double tol_x,
                                         double tol_y) {
  if (x.size() != y.size())
    throw std::invalid_argument("coincident_with_earlier: " + std::to_string(x.size()) + " x values but " +
                                std::to_string(y.size()) + " y values");
  std::vector<int> out(x.size(), -1);
  for (size_t i = 0; i < x.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (out[j] < 0 && std::abs(x[i] - x[j]) <= tol_x && std::abs(y[i] - y[j]) <= tol_y) {
        out[i] = static_cast<int>(j);
        break;
      }
  return out;
}

}  // namespace embedscope::ui
