#pragma once
// Timeline math without Qt: the time <-> pixel mapping under zoom and pan, and the level of
// detail that folds runs of sub-pixel ops into one box with a count (as Tracy does), so that
// painting reads a prepared list whatever the number of events.

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "embedscope/sessions/model/units.h"  // format_duration
#include "embedscope/sessions/store/session.h"

namespace embedscope::ui {

/// Maps [t0_ns, t1_ns) onto [0, width_px) pixels. Zoom and pan keep the view inside
/// [min_ns, max_ns] (the session's extent) and never narrower than 1 us.
class TimeScale {
 public:
  TimeScale(int64_t min_ns, int64_t max_ns, double width_px);
  double x(int64_t t_ns) const { return (static_cast<double>(t_ns - t0_) / static_cast<double>(t1_ - t0_)) * width_; }
  int64_t t(double x_px) const { return t0_ + static_cast<int64_t>(x_px / width_ * static_cast<double>(t1_ - t0_)); }
  int64_t t0() const { return t0_; }
  int64_t t1() const { return t1_; }
  double width() const { return width_; }
  double ns_per_px() const { return static_cast<double>(t1_ - t0_) / width_; }
  void set_width(double width_px);
  /// Shows [t0, t1) (clamped to the extent).
  void show(int64_t t0_ns, int64_t t1_ns);
  /// Zooms by `factor` (> 1 zooms in) keeping the time under `x_px` where it is.
  void zoom_at(double x_px, double factor);
  /// Moves the view by `dx_px` pixels (positive: later times come into view).
  void pan(double dx_px);
  void fit() { show(min_, max_); }

 private:
  int64_t min_, max_, t0_, t1_;
  double width_;
};

/// One drawable box of a lane: a single op, or a run of `count` > 1 consecutive ops narrower
/// than a pixel folded together, in the category with the most time (summed durations) in the
/// run (LaneIndex::dominant_category; before tester50 F10 the first op's, so a lane folded into
/// one run read "input" while dense was 88% of its time); `first` indexes the lane's op list.
struct LaneBox {
  double x0 = 0, x1 = 0;
  sessions::OpCategory category = sessions::OpCategory::other;
  int64_t count = 1;
  size_t first = 0;
};

/// The summary of a lane that lets fold_lane skip runs of small ops: per op its key =
/// max(duration, gap after the previous op's end) in ns, the maximum key of every block of 64
/// ops and of every 4096 ops, and the time per category of the ops before each block (prefix
/// sums). O(n) to build, about 9 bytes per op.
class LaneIndex {
 public:
  /// `ops` sorted by start, not nested.
  explicit LaneIndex(const std::vector<sessions::OpRecord>& ops);
  /// The first index k >= i whose key is >= threshold_ns (ops.size() when none): ops [i, k) are
  /// each narrower than threshold_ns and start less than threshold_ns after the previous op ends.
  size_t run_end(size_t i, double threshold_ns) const;
  /// The category with the most time among ops [i, k) of `ops` (the vector this index was built
  /// from; i < k <= ops.size()): durations end - start summed per category, ns. On a tie, ops[i]'s
  /// category if it is among the tied, else the lowest category value; a run of zero-length ops
  /// is ops[i]'s category. O(128 + categories): whole blocks of 64 from the prefix sums.
  /// Example: input 10 ns, dense 80 ns, input 10 ns, optimizer 30 ns -> dense.
  sessions::OpCategory dominant_category(const std::vector<sessions::OpRecord>& ops, size_t i, size_t k) const;

 private:
  static constexpr size_t kBlock = 64;
  using CategoryNs = std::array<int64_t, sessions::kNumCategories>;
  std::vector<int64_t> key_, block_max_, super_max_;
  std::vector<CategoryNs> before_block_;  ///< [b]: ns per category of ops [0, b * kBlock); blocks + 1 entries
};

/// Takes out of one lane's ops (sorted by start) those that partially overlap an op still open
/// when they start (start inside it, end after it), which imported traces can hold (issue 12:
/// "kept, drawn on an overflow row"): the ops left follow one another or nest, and the timeline
/// draws the ones taken on a row of their own under the lane. Returns them in order (sorted by
/// start; they may overlap one another). O(n). Example: a [0, 10), b [5, 15), c [6, 8), d [20, 30)
/// -> returns {b}; ops = {a, c, d} (c nests in a).
std::vector<sessions::OpRecord> take_partial_overlaps(std::vector<sessions::OpRecord>& ops);

/// Boxes for `ops` (sorted by start, not nested) in the visible range of `scale`: ops that end
/// before the view or start after it are skipped by binary search; an op narrower than `min_px`
/// starts a run that takes every following op narrower than `min_px` starting less than
/// `min_px` after the previous one ends; the run is one box with their count (Tracy's folding).
/// With the lane's LaneIndex a run costs O(run / 64) at most, so painting follows the pixels.
std::vector<LaneBox> fold_lane(const std::vector<sessions::OpRecord>& ops, const LaneIndex& index, const TimeScale& scale,
                               double min_px = 1.0);
/// The same, building the index first (O(n): for tests and one-off use).
std::vector<LaneBox> fold_lane(const std::vector<sessions::OpRecord>& ops, const TimeScale& scale, double min_px = 1.0);

/// A visible time range [t0, t1), ns.
struct ViewRange {
  int64_t t0 = 0, t1 = 0;
  bool operator==(const ViewRange&) const = default;
};

/// Back / forward through the view ranges a user visited, as a browser's history: visiting a
/// new range drops the forward entries. `coalesce` replaces the current entry instead of adding
/// one (successive wheel notches or pans are one step of history).
class ZoomHistory {
 public:
  explicit ZoomHistory(ViewRange initial) : entries_{initial} {}
  void visit(ViewRange r, bool coalesce = false);
  bool can_back() const { return pos_ > 0; }
  bool can_forward() const { return pos_ + 1 < entries_.size(); }
  /// The previous / next range (the current one when there is none).
  ViewRange back();
  ViewRange forward();
  ViewRange current() const { return entries_[pos_]; }

 private:
  std::vector<ViewRange> entries_;
  size_t pos_ = 0;
};

/// An op of a timeline row: rows[row][index].
struct OpRef {
  size_t row = 0, index = 0;
  bool operator==(const OpRef&) const = default;
};

/// The next (`forward`) or previous op after / before `from` in the order (start_ns, row, index)
/// whose name id is marked in `match` (indexed by name id; ids past its end do not match);
/// without `from`, the first such op starting at or after `from_ns` (forward) or the last one
/// starting before it (backward). nullopt when none. Each row is sorted by start.
std::optional<OpRef> find_op(const std::vector<const std::vector<sessions::OpRecord>*>& rows,
                             const std::vector<bool>& match, std::optional<OpRef> from, bool forward,
                             int64_t from_ns = 0);

/// Per op name (and per rank, or rank -1 for all ranks) over the ops that overlap [t0, t1):
/// how many, their time inside the range (each op clipped to [t0, t1)), ns, and their bytes.
struct OpTotal {
  int32_t name_id = 0;
  int32_t rank = -1;
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t bytes = 0;
};
/// Totals sorted by total_ns, largest first (ties by name id, then rank).
std::vector<OpTotal> range_totals(const std::vector<sessions::OpRecord>& ops, int64_t t0, int64_t t1, bool per_rank);

/// Each step's window over all ranks: earliest start to latest end (ns), by step number.
std::map<int64_t, ViewRange> step_windows(const std::vector<sessions::StepMetric>& steps);

/// The window covering every measured step (step >= 0) of `steps` (step_windows' result):
/// the first measured step's start to the last one's end; nullopt when no step is measured
/// (a run that ended in its warm-up). The timeline fits this by default, so that the warm-up
/// steps and the set-up before them do not squeeze the measured steps.
std::optional<ViewRange> measured_extent(const std::map<int64_t, ViewRange>& steps);

/// The step the view shows: of `steps` (step_windows' result), the one whose window holds the
/// centre of `view`; where windows overlap there (ranks offset), the one whose own centre is
/// nearest; where none holds it, the step whose window is nearest to it. nullopt for no steps.
/// The timeline's step box names it after every pan, zoom, search or history move (tester56
/// F1: it kept the last number typed). Cost: O(steps).
std::optional<int64_t> step_at_centre(const std::map<int64_t, ViewRange>& steps, ViewRange view);

/// How a step is named in every view but the memory view: "step 3" for a measured step
/// (step >= 0); "warm-up 1 of 2" for step -2 of a run with `warmup_steps` = 2 warm-up steps
/// (steps -warmup_steps..-1 are warm-up 1..warmup_steps); "warm-up (step -3)" when
/// `warmup_steps` does not cover the step (unknown count: pass 0). An imported trace has no
/// warm-up: with `imported`, a negative step (an op outside every ProfilerStep#N span) is
/// "outside any profiler step" (engine runs keep their warm-up names).
std::string step_name(int64_t step, int64_t warmup_steps, bool imported = false);

/// Set-up waits: on each rank, the part of its communication ops that lies before every rank
/// has started (the latest of the ranks' first op starts, "set-up end"). A rank that enters
/// the first collective while a slower rank is still building its tables and connections
/// waits there for the other rank's set-up, not for its step's work, so the timeline marks
/// this time as set-up rather than as exposed communication. `first_op_start`: per rank, its
/// earliest op start (ns); `comm`: per rank, its communication intervals. Returns per rank the
/// merged set-up-wait intervals, [comm start, min(comm end, set-up end)). O(total comm ops).
/// Example: ranks start at 0 and 600 us, rank 0's all-to-all runs [100, 650) us: rank 0 has
/// the set-up wait [100, 600) us; the 50 us after it are ordinary communication.
std::map<int32_t, std::vector<ViewRange>> setup_waits(const std::map<int32_t, int64_t>& first_op_start,
                                                       const std::map<int32_t, std::vector<ViewRange>>& comm);

/// The collective a hung run timed out in, as the engine's end message names it:
/// "rank 1: all_to_all 'input_dist/splits' (group world, sequence 2) did not finish within
/// 300 ms (...)" gives rank 1, op "all_to_all", name "input_dist/splits", group "world",
/// sequence 2; also "... failed after 10.2 ms, before its 300 ms timeout: ..." (the wait ended
/// early, a peer's connection broke). nullopt for any other message.
struct HangSite {
  int32_t rank = 0;
  std::string op, name, group;
  int64_t sequence = -1;  ///< -1 when the message names none
  bool operator==(const HangSite&) const = default;
};
std::optional<HangSite> parse_hang_message(const std::string& end_message);

/// The op of a row list that timed out: among `rows` of `site.rank` (rank of each row in
/// `row_ranks`), the communication op named `site.name` (name ids via `names`) that starts
/// last; the last communication op of the rank when none has the name. nullopt when the rank
/// has no communication op.
std::optional<OpRef> hung_op(const HangSite& site, const std::vector<const std::vector<sessions::OpRecord>*>& rows,
                             const std::vector<int32_t>& row_ranks, const std::vector<std::string>& names);

/// "12.5 ms", "340.0 us", "1.20 s": a readable duration (the sessions' formatter).
using sessions::format_duration;

/// The step between a time axis's ticks, in ns, for about `ticks` ticks over `span_ns`: the
/// 1-2-5 series of ns .. s below 10 minutes per tick, then clock steps (10, 15, 30 min; 1, 2, 3,
/// 6, 12 h; 1, 2, 5, 10 d, then 1-2-5 x 10 d), so that long axes read "30.0 min", "1.00 h" or
/// "2.00 d" instead of "1000000.00 s". At least 1 ns; `ticks` < 1 counts as 1.
int64_t axis_tick_ns(double span_ns, int ticks);

/// A time axis's tick label for `t_ns` (ns from the axis' origin) with ticks `tick_ns` apart:
/// format_duration's unit for `t_ns`, with as many decimals as tell ticks apart (at least the
/// unit's own, at most 9): at 2.91 s with ticks 50 ns apart "2.91000005 s", not "2.91 s" for
/// every tick (tester56 F10); 0 reads "0 ns" and a 1 ns tick integer ns where t < 1 us.
std::string axis_label(int64_t t_ns, int64_t tick_ns);

/// A time axis over [t0, t1) ns (labels relative to `origin` ns) drawn `width_px` wide: the
/// ticks at round values (axis_tick_ns) and their labels (axis_label), at most `max_ticks` and
/// as few as keep every label, measured by `label_px`, plus `gap_px` clear of the next one
/// (tester56 F5: at 800 px "100.00 ms200.00 ms" ran together). Ticks are (t ns, label) in order.
struct AxisTicks {
  int64_t tick_ns = 1;
  std::vector<std::pair<int64_t, std::string>> ticks;
};
AxisTicks axis_ticks(int64_t t0, int64_t t1, int64_t origin, double width_px,
                     const std::function<double(const std::string&)>& label_px, int max_ticks = 8, double gap_px = 12);

}  // namespace embedscope::ui
