#pragma once
// Two (or more) sessions' device memory side by side on the same scales, e.g. a `caching` and
// an `expandable` run of one workload: allocated, reserved and fragmentation over the steps of
// a chosen rank in one chart, and each session's segment and block map at the same step, drawn
// on one bytes-to-pixels scale so that equal sizes have equal widths.

#include <QWidget>

#include <limits>
#include <map>
#include <set>
#include <vector>

#include "models/labelled_session.h"

class QCheckBox;
class QComboBox;
class QCPAxisRect;
class QCustomPlot;
class QLabel;
class QSpinBox;
class QTableWidget;

namespace embedscope::ui {

class BlockMap;

/// The snapshot of `rank` that shows its layout at the end of `step`: the last one taken at or
/// before that step (snapshots are only written when the layout changed), preferring an "oom"
/// snapshot of that very step. nullptr when there is none.
const sessions::MemorySnapshot* snapshot_at(const std::vector<sessions::MemorySnapshot>& snapshots, int32_t rank,
                                            int64_t step);

/// How a user names `step`: "step 3", or "the warm-up (before measured step 0)" for a step < 0
/// (warm-up steps are stored as negative steps; tester42 F23).
QString step_name(int64_t step);

/// A session's legend entry in the chart over the steps with its OOMs of the rank shown:
/// `name` alone without any, else "caching: OOM in the warm-up (before measured step 0)" or
/// "caching: OOM in step 4" (step_name of each distinct step, in the order given, ", "-joined).
/// The legend says it rather than a text in the chart, which covered the lines.
QString oom_legend_entry(const QString& name, const std::vector<int64_t>& oom_steps);

/// When the map shown for `step` was taken, as the map's caption says it: "snapshot of step 19",
/// "the layout of the warm-up (before measured step 0), unchanged up to step 19" (snapshots are
/// written only when the layout changed), "the layout at its OOM in step 4". `last_step`: the
/// session's own last step (its memory counters'); a `step` past it is not claimed: "the layout of
/// step 3, unchanged up to its last step 9 (it has no step 19)", "snapshot of its last step 9 (it
/// has no step 19)" (a shorter session compared with a longer one).
QString snapshot_when(const sessions::MemorySnapshot& shown, int64_t step,
                      int64_t last_step = std::numeric_limits<int64_t>::max());

/// The figures a map's caption gives (bytes): reserved (sum of its segments), allocated blocks
/// (not pending: the figure of the chart, `stats` and memory_counters), blocks whose free is
/// pending (free_requested, in use on another stream: neither allocated nor free), free blocks,
/// the largest free block, and external fragmentation as engine/memory/allocator.h MemoryStats:
/// 1 - largest free block / free bytes in segments (0 without free bytes).
struct MapFigures {
  int64_t segments = 0, reserved = 0, allocated = 0, pending_free = 0, free = 0, largest_free = 0;
  double fragmentation = 0;
};
MapFigures map_figures(const std::vector<sessions::MemoryBlockRecord>& blocks);

/// Why a comparison's Memory page has nothing to draw (none of `sessions` has memory counters),
/// session by session: "A: an imported PyTorch profiler (Kineto) trace, which records no allocations (import a
/// PyTorch memory snapshot, or run the workload, for the allocator's history)"; "B: schema
/// version 1, before memory was recorded"; "C: no memory records". Joined with "; ".
QString no_memory_records_text(const std::vector<LabelledSession>& sessions);

class MemoryCompare : public QWidget {
  Q_OBJECT

 public:
  MemoryCompare(const std::vector<LabelledSession>& sessions, QWidget* parent = nullptr);
  /// Shows `rank` (chart and maps) and the maps at the end of `step`.
  void show(int32_t rank, int64_t step);
  BlockMap* map(size_t i) { return maps_[i]; }
  /// Every device's fragmentation at the step shown: a row a rank (as the rank box), a column a
  /// session, "40.7% (16.0 MiB of 27.0 MiB free)" (map_figures of the map snapshot_at gives),
  /// "no snapshot"; the worst of a row in bold where the sessions differ. Clicking a row shows
  /// that rank's maps.
  QTableWidget* devices() { return devices_; }
  QCustomPlot* plot() { return plot_; }
  /// The fragmentation chart under the bytes chart (its own 0-100 % axis, sharing the steps):
  /// fragmentation drawn on a right axis over the allocated lines read as one of them (tester60a F3).
  QCPAxisRect* fragmentation_rect() { return frag_rect_; }
  /// The bytes that the maps' full width stands for: the widest segment shown in any of them, or
  /// with "cut blocks that dwarf the other segments" (on by default) the largest of their
  /// map_scale_bytes (blocks that dwarf it drawn cut, BlockMap::set_cut_big_blocks).
  int64_t map_width_bytes() const { return map_width_; }
  /// For each session, the earlier session whose curves (allocated, reserved, fragmentation at
  /// every step of the rank shown) it equals, or -1 (core/equal_series.h); its legend entry says
  /// "B = A".
  const std::vector<int>& same_as_earlier() const { return same_; }
  /// The width (px) of every session's lines but the baseline's and the size of its marker (session_marker).
  static constexpr double kLineWidth = 1.5;
  /// The baseline's (the first session's) lines: wider and translucent, drawn first, so that a later
  /// session's line on top of it leaves it visible on both sides (tester60a F3: A's blue lines
  /// vanished under C's green).
  static constexpr double kBaselineWidth = 5;
  static constexpr int kBaselineAlpha = 120;
  static constexpr double kMarkerSize = 7;
  /// Legend entries (one a session) in a row under the chart.
  static constexpr size_t kLegendColumns = 12;
  /// The most block maps in a row; more sessions take rows of map_columns(n) maps.
  static constexpr size_t kMapsPerRow = 6;
  /// The maps in a row for `sessions` sessions: all in one row up to kMapsPerRow, else the rows
  /// evenly filled (7 -> 4, 11 -> 6, 13 -> 5).
  static int map_columns(size_t sessions);

 private:
  struct Entry {
    LabelledSession s;
    std::vector<sessions::MemoryCounter> counters;
    std::vector<sessions::MemorySnapshot> snapshots;
    std::map<int64_t, MapFigures> figures;  ///< by snapshot id, read once
    std::set<int32_t> ranks;                 ///< the ranks its counters hold
    int64_t last_step = std::numeric_limits<int64_t>::min();  ///< its counters' last step
  };
  /// "no rank 2 (B has ranks 0-1)" where entry `i` has no such rank, else "no snapshot of rank R
  /// at or before step S" (`short_form`: "no rank 2" / "no snapshot", for the devices table).
  QString no_map_text(size_t i, int32_t rank, int64_t step, bool short_form) const;
  void fill_devices(int64_t step);
  std::vector<Entry> entries_;
  QComboBox* rank_box_;
  QSpinBox* step_box_;
  QCheckBox* cut_box_ = nullptr;
  QTableWidget* devices_ = nullptr;
  QCPAxisRect* frag_rect_ = nullptr;
  QCustomPlot* plot_;
  std::vector<BlockMap*> maps_;
  std::vector<QLabel*> map_labels_;
  int64_t map_width_ = 0;
  std::vector<int> same_;
};

}  // namespace embedscope::ui
