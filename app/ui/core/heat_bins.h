#pragma once
// How many ranks and columns a heatmap draws (tester42 F19): a 1,024-rank row_wise session's
// rank x shard map had 1,024 x 26,624 cells, and the load page's row note listed every rank, so
// the report was 31,674 px wide and took 90 s. Views bin what does not fit and say so; the
// cells' colours and ticks stay the drawing function's.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace embedscope::ui {

/// The most rank rows and columns a heatmap draws before it bins them.
inline constexpr int kHeatMaxRows = 64;
inline constexpr int kHeatMaxColumns = 256;

/// A ranks x columns grid as drawn: rows x cols cells, each the largest value of the ranks
/// [row x ranks_per_row, ...) and columns [col x columns_per_cell, ...) it stands for (the
/// largest, so that one hot rank still shows in its bin). ranks_per_row = columns_per_cell = 1
/// and note "" when nothing was binned.
struct HeatGrid {
  int rows = 0, cols = 0;
  int ranks_per_row = 1, columns_per_cell = 1;
  std::vector<double> values;      ///< rows x cols, row-major
  std::vector<std::string> names;  ///< per drawn column: the column's name, or "first .. last" of a bin
  /// What was binned, for the chart's title: "ranks 0-1023 in 64 rows of 16, shards in 256 columns
  /// of 104 (each cell the largest it stands for)".
  std::string note;
  double at(int row, int col) const { return values[static_cast<size_t>(row) * static_cast<size_t>(cols) + static_cast<size_t>(col)]; }
};

/// Bins `ranks` x columns.size() values (value(rank, column)) into at most max_rows x max_cols
/// cells: per = ceil(n / max), cells = ceil(n / per) (1,024 ranks, 64 -> 64 rows of 16; 100 ->
/// 50 rows of 2). `what` names the columns in the note ("shards", "steps"). Cost: one value()
/// call per rank and column. max_rows, max_cols < 1 are taken as 1.
HeatGrid bin_heat_grid(int ranks, const std::vector<std::string>& columns, const std::function<double(int, int)>& value,
                       const std::string& what, int max_rows = kHeatMaxRows, int max_cols = kHeatMaxColumns);

/// Ranks as ranges, ascending, duplicates dropped: {0, 1, 2, 5, 7, 8} -> "0-2, 5, 7-8"; more than
/// `max_groups` groups: the first ones, then "... (N ranks)". {} -> "".
std::string rank_ranges(std::vector<int32_t> ranks, size_t max_groups = 8);

}  // namespace embedscope::ui
