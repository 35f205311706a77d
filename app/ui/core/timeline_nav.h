#pragma once
// Where the timeline's navigation goes, without Qt: what the step box names for a view (the step
// at its centre, or the whole steps it shows), the view that makes a search match visible and the
// match's place among all matches ("match 3 of 120"), and the slowest measured step (View > Go to
// Slowest Step, the report's timeline-step.png). The timeline widget and its page only apply them.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/timeline_math.h"

namespace embedscope::sessions {
struct RunStats;
}

namespace embedscope::ui {

/// The steps a view shows, as the step box names them.
struct ShownSteps {
  /// step_at_centre of the view: the step the box's arrows and Enter go on from.
  int64_t centre = 0;
  /// The steps whose windows lie wholly inside the view, when there are two or more (a run of
  /// step numbers: the windows follow one another); else both equal `centre`.
  int64_t first = 0, last = 0;
  bool several() const { return last > first; }
  bool operator==(const ShownSteps&) const = default;
};

/// What `view` shows of `steps` (step_windows' result): see ShownSteps. nullopt without steps.
/// Examples (steps 0 [0, 500), 1 [500, 1000), 2 [1000, 1500)): view [0, 1500) -> centre 1,
/// first 0, last 2; [0, 1000) -> centre 1 (750 is in step 1), 0..1; [400, 1100) -> centre 1, one
/// whole step: 1..1; [600, 800) -> 1..1. Cost O(steps).
std::optional<ShownSteps> shown_steps(const std::map<int64_t, ViewRange>& steps, ViewRange view);

/// The step box's text for `shown`: one step by step_name ("step 3", "warm-up 1 of 2"); several:
/// "all steps" when they are every step of `steps` (warm-up steps included, or no warm-up),
/// "all measured steps" when they are every measured step (step >= 0) but not the warm-up,
/// "steps 2-5", or "warm-up 1 of 2 - step 3" when they start in the warm-up. `warmup_steps` as
/// step_name's.
std::string shown_steps_name(const ShownSteps& shown, const std::map<int64_t, ViewRange>& steps, int64_t warmup_steps);

/// The least width a search match is given on screen, px: jumping to a narrower one zooms in.
inline constexpr double kMatchMinPx = 8.0;

/// The view that shows op [start_ns, end_ns) centred after a search jump, from `view` drawn
/// `width_px` wide: an op wider than 80% of the view gets the view of the op and a tenth of it
/// either side; an op narrower than `min_px` at the view's scale is zoomed to (the view narrowed,
/// centred on the op, until the op is `min_px` wide: a sub-pixel match was folded into its
/// neighbours' box, out of sight); any other op is centred at the same zoom. The caller's time
/// scale may clamp the result (its 1 us narrowest view: a 2 ns kernel stays narrower than 8 px
/// on a narrow timeline). Examples (1000 px): view [0, 1 ms), op [500 us, 500.1 us) (0.1 px)
/// -> [493.8 us, 506.3 us) (a 12.5 us view: the op 8 px wide); op [100 us, 200 us) -> [-350 us, 650 us).
ViewRange match_view(ViewRange view, double width_px, int64_t start_ns, int64_t end_ns, double min_px = kMatchMinPx);

/// The ops of a timeline's rows whose name id is marked in a search's `match` (find_op's
/// arguments), counted so that a match's place among them is found without a scan of every op:
/// per row, the matches before each block of 64 ops. Built in O(ops); position() costs
/// O(rows x (log ops + 64)). The rows must outlive it.
class MatchIndex {
 public:
  MatchIndex() = default;
  MatchIndex(const std::vector<const std::vector<sessions::OpRecord>*>& rows, std::vector<bool> match);
  /// How many ops match.
  int64_t total() const { return total_; }
  /// The place of op `at` among the matches in find_op's order (start_ns, row, index): 1 + the
  /// matches before it (so 1..total() for a matching op). Throws std::out_of_range for an op
  /// outside the rows.
  int64_t position(OpRef at) const;

 private:
  static constexpr size_t kBlock = 64;
  bool matches(const sessions::OpRecord& o) const;
  // the matches among ops [0, i) of row r
  int64_t before(size_t r, size_t i) const;
  std::vector<const std::vector<sessions::OpRecord>*> rows_;
  std::vector<bool> match_;
  std::vector<std::vector<int64_t>> block_counts_;  // [r][b]: matches among ops [0, b * kBlock) of row r
  int64_t total_ = 0;
};

/// The slowest measured step as `embedscope stats` measures it: RunStats::slowest_step (of
/// sessions::analyze_step_times: per counted step the slowest rank's own step time, the drain
/// steps left out, the lowest such step on a tie; tester54 F7: not the widest window across
/// ranks), the step a user looks into first. nullopt when `st` has none or the timeline has no
/// window for it (`steps`: the timeline's step windows; warm-up only, a trace without steps).
/// The report's timeline-step.png and View > Go to Slowest Step fit it.
std::optional<int64_t> report_step(const sessions::RunStats& st, const std::map<int64_t, ViewRange>& steps);

}  // namespace embedscope::ui
