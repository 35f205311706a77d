#include "core/timeline_nav.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "embedscope/sessions/analysis/analysis.h"  // RunStats

namespace embedscope::ui {

std::optional<ShownSteps> shown_steps(const std::map<int64_t, ViewRange>& steps, ViewRange view) {
  const auto centre = step_at_centre(steps, view);
  if (!centre) return std::nullopt;
  ShownSteps s{*centre, *centre, *centre};
  std::optional<int64_t> first, last;
  for (const auto& [step, w] : steps) {
    if (w.t0 < view.t0 || w.t1 > view.t1) continue;
    if (!first) first = step;
    last = step;
  }
  if (first && *last > *first) {
    s.first = *first;
    s.last = *last;
  }
  return s;
}

std::string shown_steps_name(const ShownSteps& shown, const std::map<int64_t, ViewRange>& steps, int64_t warmup_steps) {
  if (!shown.several()) return step_name(shown.centre, warmup_steps);
  if (!steps.empty() && shown.last == steps.rbegin()->first) {
    if (shown.first == steps.begin()->first) return "all steps";  // the warm-up too, or none
    if (const auto m = steps.lower_bound(0); m != steps.end() && shown.first == m->first) return "all measured steps";
  }
  if (shown.first >= 0) return fmt::format("steps {}-{}", shown.first, shown.last);
  return step_name(shown.first, warmup_steps) + " - " + step_name(shown.last, warmup_steps);
}

ViewRange match_view(ViewRange view, double width_px, int64_t start_ns, int64_t end_ns, double min_px) {
  const int64_t span = std::max<int64_t>(1, view.t1 - view.t0), dur = std::max<int64_t>(0, end_ns - start_ns);
  if (dur > span * 8 / 10) return {start_ns - dur / 10, end_ns + dur / 10};
  int64_t want = span;
  const double px = static_cast<double>(dur) / static_cast<double>(span) * width_px;
  if (px < min_px && width_px > 0)  // zoom in until the op is min_px wide (rounded down: not narrower)
    want = std::max<int64_t>(1, static_cast<int64_t>(std::floor(static_cast<double>(dur) * width_px / min_px)));
  const int64_t t0 = start_ns + dur / 2 - want / 2;
  return {t0, t0 + want};
}

MatchIndex::MatchIndex(const std::vector<const std::vector<sessions::OpRecord>*>& rows, std::vector<bool> match)
    : rows_(rows), match_(std::move(match)) {
  block_counts_.resize(rows_.size());
  for (size_t r = 0; r < rows_.size(); ++r) {
    const auto& ops = *rows_[r];
    auto& counts = block_counts_[r];
    counts.reserve(ops.size() / kBlock + 1);
    int64_t n = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (i % kBlock == 0) counts.push_back(n);
      n += matches(ops[i]) ? 1 : 0;
    }
    total_ += n;
  }
}

bool MatchIndex::matches(const sessions::OpRecord& o) const {
  return o.name_id >= 0 && static_cast<size_t>(o.name_id) < match_.size() && match_[static_cast<size_t>(o.name_id)];
}

int64_t MatchIndex::before(size_t r, size_t i) const {
  if (i == 0) return 0;
  const auto& ops = *rows_[r];
  const size_t block = i / kBlock;
  int64_t n = block < block_counts_[r].size() ? block_counts_[r][block] : 0;
  for (size_t k = block * kBlock; k < i; ++k) n += matches(ops[k]) ? 1 : 0;
  return n;
}

int64_t MatchIndex::position(OpRef at) const {
  if (at.row >= rows_.size() || at.index >= rows_[at.row]->size())
    throw std::out_of_range(fmt::format("no op {} in row {} of the timeline", at.index, at.row));
  const int64_t start = (*rows_[at.row])[at.index].start_ns;
  int64_t n = 0;
  for (size_t r = 0; r < rows_.size(); ++r) {
    const auto& ops = *rows_[r];
    size_t i = at.index;  // the row of `at`: the ops before it (same start: lower index first)
    if (r != at.row) {    // other rows: the ops starting before it, and those starting with it on a row above
      const bool above = r < at.row;
      i = static_cast<size_t>(std::partition_point(ops.begin(), ops.end(), [&](const sessions::OpRecord& o) {
                                return above ? o.start_ns <= start : o.start_ns < start;
                              }) - ops.begin());
    }
    n += before(r, i);
  }
  return n + 1;
}

std::optional<int64_t> report_step(const sessions::RunStats& st, const std::map<int64_t, ViewRange>& steps) {
  if (!st.slowest_step || !steps.contains(*st.slowest_step)) return std::nullopt;
  return st.slowest_step;
}

}  // namespace embedscope::ui
