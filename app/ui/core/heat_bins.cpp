#include "core/heat_bins.h"

#include <algorithm>

namespace embedscope::ui {

HeatGrid bin_heat_grid(int ranks, const std::vector<std::string>& columns, const std::function<double(int, int)>& value,
                       const std::string& what, int max_rows, int max_cols) {
  HeatGrid g;
  const int n_ranks = std::max(ranks, 0), n_cols = static_cast<int>(columns.size());
  max_rows = std::max(max_rows, 1);
  max_cols = std::max(max_cols, 1);
  g.ranks_per_row = std::max(1, (n_ranks + max_rows - 1) / max_rows);
  g.columns_per_cell = std::max(1, (n_cols + max_cols - 1) / max_cols);
  g.rows = (n_ranks + g.ranks_per_row - 1) / g.ranks_per_row;
  g.cols = (n_cols + g.columns_per_cell - 1) / g.columns_per_cell;
  g.values.assign(static_cast<size_t>(g.rows) * static_cast<size_t>(g.cols), 0.0);
  for (int r = 0; r < n_ranks; ++r)
    for (int c = 0; c < n_cols; ++c) {
      double& cell = g.values[static_cast<size_t>(r / g.ranks_per_row) * static_cast<size_t>(g.cols) +
                              static_cast<size_t>(c / g.columns_per_cell)];
      const double v = value(r, c);
      cell = (r % g.ranks_per_row == 0 && c % g.columns_per_cell == 0) ? v : std::max(cell, v);
    }
  for (int c = 0; c < g.cols; ++c) {
    const int first = c * g.columns_per_cell, last = std::min(n_cols, first + g.columns_per_cell) - 1;
    g.names.push_back(first == last ? columns[static_cast<size_t>(first)]
                                    : columns[static_cast<size_t>(first)] + " .. " + columns[static_cast<size_t>(last)]);
  }
  std::vector<std::string> parts;
  if (g.ranks_per_row > 1)
    parts.push_back("ranks 0-" + std::to_string(n_ranks - 1) + " in " + std::to_string(g.rows) + " rows of " +
                    std::to_string(g.ranks_per_row));
  if (g.columns_per_cell > 1)
    parts.push_back(std::to_string(n_cols) + " " + what + " in " + std::to_string(g.cols) + " columns of " +
                    std::to_string(g.columns_per_cell));
  for (size_t i = 0; i < parts.size(); ++i) g.note += (i ? ", " : "") + parts[i];
  if (!g.note.empty()) g.note += " (each cell the largest it stands for)";
  return g;
}

std::string rank_ranges(std::vector<int32_t> ranks, size_t max_groups) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  size_t groups = 0;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (groups == max_groups) {
      out += ", ... (" + std::to_string(ranks.size()) + " ranks)";
      break;
    }
    out += (groups ? ", " : "") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
    ++groups;
    i = j + 1;
  }
  return out;
}

}  // namespace embedscope::ui
