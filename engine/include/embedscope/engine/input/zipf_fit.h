#pragma once
// The Zipf exponent of a frequency table (issue 19): ordinary least squares of log frequency on
// log rank, the estimator of Zipf's own plots and of most corpus studies (Piantadosi 2014,
// Psychon. Bull. Rev. 21:1112-1130, section "Zipf's law" - who also shows its bias at the tail,
// so the fit range is part of the answer and is returned with it).

#include <cstdint>
#include <vector>

namespace embedscope::engine {

struct ZipfFit {
  double alpha = 0;          ///< the exponent: minus the slope of ln f on ln r (f ~ C / r^alpha)
  double log_c = 0;          ///< the intercept ln C
  double r_squared = 0;      ///< coefficient of determination of the fit, in [0, 1]
  int64_t first_rank = 0;    ///< the fit range: ranks [first_rank, last_rank], 1-based
  int64_t last_rank = 0;
  int64_t distinct = 0;      ///< ids with a nonzero count (the highest rank there is)
  int64_t total = 0;         ///< sum of the counts
};

/// Sorts the nonzero `counts` (per id, any order; zeros skipped) in decreasing order and fits
/// ln count_r = ln C - alpha ln r over ranks [first_rank, last_rank] (last_rank 0 or beyond the
/// distinct ids: the last nonzero rank). Example: counts {3, 12, 0, 4, 6} -> ranks 1..4 hold 12,
/// 6, 4, 3 = 12 / r, so alpha = 1, ln C = ln 12, r^2 = 1. std::invalid_argument when the range
/// holds fewer than two ranks, or first_rank < 1. Cost O(n log n).
ZipfFit fit_zipf(const std::vector<int64_t>& counts, int64_t first_rank = 1, int64_t last_rank = 0);

/// Counts of each id in [0, vocab_size) over `ids` (ids outside the range: std::out_of_range).
std::vector<int64_t> token_counts(const std::vector<int64_t>& ids, int64_t vocab_size);

}  // namespace embedscope::engine
