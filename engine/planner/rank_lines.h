#pragma once
// Lines of a refusal that name ranks, folded (tester46 F10: `run` of dcnv2 on 1,024 simulated
// ranks printed 1,024 lines "rank N: needs 314.1 GiB ...", `plan --auto` one a rank). The one
// run-of-ranks folding of the planner's messages (check_memory_fits): internal to the engine.

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "embedscope/engine/sharding/sharding.h"

namespace embedscope::engine::detail {

/// Lines about ranks, added in increasing rank order. Consecutive ranks whose text is the same
/// become one line: "\n  rank 5: TEXT" alone, "\n  ranks 0-1023: TEXT each" for a run. Beyond
/// `max_lines` lines the first max_lines - 1 are kept, then the line of the rank with the most
/// `bytes` (the first such rank; "rank 600 (the fullest): TEXT") when it is not among them, then
/// "\n  and N more ranks (M lines left out), A to B each" (A, B: the least and most `bytes` of the
/// ranks left out, format_bytes). Example: ranks 0-2 "x" (bytes 1) then rank 3 "y" (bytes 2) ->
/// "\n  ranks 0-2: x each\n  rank 3: y". Cost O(lines) to add, O(lines) to print.
class RankLines {
 public:
  explicit RankLines(size_t max_lines = 6) : max_lines_(std::max<size_t>(max_lines, 2)) {}

  void add(int rank, std::string text, int64_t bytes) {
    if (!runs_.empty() && runs_.back().last + 1 == rank && runs_.back().text == text) {
      Run& r = runs_.back();
      r.last = rank;
      r.lo = std::min(r.lo, bytes);
      r.hi = std::max(r.hi, bytes);
      return;
    }
    runs_.push_back({rank, rank, std::move(text), bytes, bytes});
  }

  bool empty() const { return runs_.empty(); }

  std::string str() const {
    std::string out;
    if (runs_.size() <= max_lines_) {
      for (const Run& r : runs_) out += line(r, false);
      return out;
    }
    const size_t keep = max_lines_ - 1;
    size_t fullest = 0;
    for (size_t i = 1; i < runs_.size(); ++i)
      if (runs_[i].hi > runs_[fullest].hi) fullest = i;
    for (size_t i = 0; i < keep; ++i) out += line(runs_[i], false);
    int64_t ranks = 0, lo = INT64_MAX, hi = 0;
    size_t lines = 0;
    for (size_t i = keep; i < runs_.size(); ++i) {
      if (i == fullest) continue;
      ++lines;
      ranks += runs_[i].last - runs_[i].first + 1;
      lo = std::min(lo, runs_[i].lo);
      hi = std::max(hi, runs_[i].hi);
    }
    if (fullest >= keep) out += line(runs_[fullest], true);
    if (lines > 0)
      out += fmt::format("\n  and {} more rank{} ({} line{} left out), {}{} each", ranks, ranks == 1 ? "" : "s", lines,
                         lines == 1 ? "" : "s", format_bytes(lo), lo == hi ? "" : " to " + format_bytes(hi));
    return out;
  }

 private:
  struct Run {
    int first, last;
    std::string text;
    int64_t lo, hi;  // the least and most bytes of its ranks
  };
  static std::string line(const Run& r, bool fullest) {
    if (r.first == r.last) return fmt::format("\n  rank {}{}: {}", r.first, fullest ? " (the fullest)" : "", r.text);
    return fmt::format("\n  ranks {}-{}{}: {} each", r.first, r.last, fullest ? " (the fullest among them)" : "", r.text);
  }
  size_t max_lines_;
  std::vector<Run> runs_;
};

}  // namespace embedscope::engine::detail
