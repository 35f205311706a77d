#pragma once
// The memory view of one session. With a memory history (an imported PyTorch memory snapshot,
// or an engine run's allocator events), per rank:
//  - the active memory timeline (charts/active_timeline.h: live blocks as stacked bands over
//    the trace entries, hover for size, stack and lifetime; click to scrub there);
//  - the segment timeline (charts/segment_timeline_chart.h: reserved segments as stacked bands,
//    their active share shaded; hover for address, bytes, stream, pool, stack and lifetime;
//    click to scrub there with the segment's row marked on the block map);
//  - fragmentation and the largest free block over the trace, and at every OOM the request
//    against the largest free block;
//  - the allocator state after any entry: the segment/block map of sessions MemoryHistory's
//    replay (checkpointed: a scrub step costs the entries since the last checkpoint), scrubbed
//    with the slider or the keyboard (arrows, Page Up/Down, Home/End on the slider);
//  - clicking a block: its stack, size, requested size and the entry that made it;
//  - the stacks holding the most bytes at the peak and at each OOM, the allocator settings, and
//    the Replay panel (views/memory_replay.h).
// Every session also has the by-step chart (allocated, reserved, fragmentation with OOM
// markers) and its recorded snapshots, whose picker names warm-up steps as such. The history is
// read and analysed off the GUI thread (jobs/analysis_job.h).

#include <QWidget>

#include <array>
#include <memory>
#include <vector>

#include "charts/active_timeline.h"
#include "charts/block_map.h"
#include "charts/segment_timeline_chart.h"
#include "embedscope/sessions/analysis/memory_analysis.h"
#include "embedscope/sessions/store/session.h"

class QCustomPlot;
class QComboBox;
class QLabel;
class QScrollArea;
class QSlider;
class QSplitter;
class QSpinBox;
class QTableWidget;
class QTabWidget;

namespace embedscope::ui {

class AnalysisJob;
class MemoryReplayPanel;

/// What the view's job computes for one rank (off the GUI thread).
struct MemoryViewData {
  std::shared_ptr<const sessions::MemoryHistory> history;
  sessions::RankMemoryAnalysis analysis;
  std::vector<sessions::TimelineColumn> columns;
  sessions::SegmentTimeline segments;  ///< the segment timeline, in as many columns as `columns`
  std::vector<sessions::MemoryFrame> frames;
  std::vector<sessions::MemoryStackFrame> stacks;
  int64_t capacity = 0;  ///< the device's bytes when known (an OOM's device_free, the run's memory_bytes)
};
/// Loads and analyses `rank`'s history from the session at `path` (its own reader).
MemoryViewData load_memory_view_data(const std::string& path, int32_t rank, int64_t columns = 1200);

/// The fragmentation chart's MiB axis label where its scale leaves out the first entries (the
/// largest free block of a fresh segment before the weights fill it flattened the rest: tester43
/// F13): the axis is scaled to the entries from `skip` on (skip = the first 1 % of the trace,
/// at least 1) and the OOMs, the first entries' higher values clipped. skip 9: "MiB (scaled to
/// entries 9 on: entries 0-8, the first 1%, clipped)"; skip 1: "MiB (scaled to entries 1 on:
/// entry 0 clipped)" (tester54 F10: "MiB (after entry 9)" did not say what it meant).
QString clipped_scale_label(int64_t skip);
/// The titles the fragmentation chart's MiB axis may take where its scale leaves out the first
/// entries, fullest first (set_label_choices: the first that fits the axis's height): the
/// clipped_scale_label, the same in two lines (broken after its ':'), "MiB (entry 0 clipped)" /
/// "MiB (entries 0-8 clipped)", "MiB" (tester59 F8: "MiB (scaled to entries 1 on: entry 0
/// clippe" on a report's 190 px axis).
QStringList clipped_scale_label_choices(int64_t skip);
/// The fragmentation axes' titles, fullest first: "fragmentation %", "frag. %", "%".
QStringList fragmentation_label_choices();

/// The least height of each chart over the trace on the Memory page (the active and segment
/// timelines; the fragmentation / by-step charts get 30 px more for their legend row), px; the
/// splitter between them and the map gives them more. The page
/// scrolls inside its tab below its minimum height and its parts sit in splitters, so these
/// never raise the window's minimum size (tester56 F4: the page held the window at 1557x946).
inline constexpr int kMemoryChartMinPx = 100;
/// The least height of the segment/block map's viewport, px: the memory visualizer's main view,
/// and the largest share of the page's height (tester56 F4: a 15 px strip, none at 1000x650).
inline constexpr int kMemoryMapMinPx = 160;

/// The heights of the Memory page's charts splitter's four panes (active timeline, segment
/// timeline, fragmentation / by-step charts, the scrubber with the block map) in `height` px: the
/// map's pane what it wants to show the whole map (`map_pane_wants`: controls, map, frame), at
/// most 45 %, at least `map_pane_min` (its controls and kMemoryMapMinPx of map; at most
/// `height`); the rest 35 / 27 / 38 % to the charts. QSplitter then raises any pane to its
/// minimum. 1000 px, min 250, a map pane of 900 px: {192, 148, 210, 450}; of 200 px: {262, 202,
/// 286, 250}.
std::array<int, 4> memory_split_sizes(int height, int map_pane_min, int map_pane_wants);

/// The height (px) the Memory page's right pane (the clicked block, the stacks, the settings,
/// the replay) gives its `content` at `width` px in a viewport `viewport_height` px high: the
/// viewport's, or more where the content's layout needs more at that width, each word-wrapped
/// label at its height for the width (QLayout::totalMinimumHeightForWidth), the rest at their
/// minimum. The pane scrolls past the viewport; no two of its widgets overlap.
int side_content_height(QWidget* content, int width, int viewport_height);

class MemoryView;
/// What a screenshot (embedscope-ui SESSION.db --screenshot) shows of the Memory pages on screen:
/// for each visible MemoryView under `root`, once its history is in, the Replay run at its
/// default settings as its Replay button runs it (and as --report runs it), then waits for its
/// jobs (wait_for_analyses, up to `timeout_ms` each time) so the image holds the replay's rows,
/// not an empty table beside the recorded figures (tester59 F8). The panes keep their widths (a
/// report widens the right one; a screenshot's window is smaller). Returns how many pages it ran;
/// hidden pages are left as they are. Nothing is replayed on a page without a history.
int finish_shown_memory_pages(QWidget* root, int timeout_ms = 120000);

class MemoryView : public QWidget {
  Q_OBJECT

 public:
  explicit MemoryView(std::shared_ptr<const sessions::SessionReader> session, QWidget* parent = nullptr);
  void show_rank(int rank);
  void show_snapshot(int index);
  /// Shows the allocator state after history entry `entry` (clamped into the history).
  void scrub_to(int64_t entry);
  /// What the report (embedscope-ui --report, which cannot click) shows beyond the opening
  /// state: the Replay panel run with its default settings (it starts a job: wait_for_analyses)
  /// and the largest allocated block on the map shown as a click shows it. Nothing without a
  /// history.
  /// Then (and after each replay) the right pane is widened, up to half the view, to its
  /// tables' columns: the replay's result and the stacks' names were cut at the image's edge
  /// (tester46 F15).
  void show_for_report();
  /// The splitter between the charts (left) and the details, stacks and replay (right).
  QSplitter* splitter() { return split_; }
  /// The right pane's scroll area (its widget: the clicked block, the stacks, the settings and
  /// the replay, sized by side_content_height).
  QScrollArea* side_scroll() { return side_scroll_; }
  /// The scroll area of the segment/block map (map() is its widget).
  QScrollArea* map_scroll() { return map_scroll_; }
  BlockMap* map() { return map_; }
  ActiveTimeline* timeline() { return timeline_; }
  SegmentTimelineChart* segment_timeline() { return segments_; }
  /// Scrubs to `entry` and marks the segment at `segment_address` on the map, scrolled into view.
  void show_segment(int64_t entry, int64_t segment_address);
  QSlider* slider() { return slider_; }
  QCustomPlot* fragmentation_plot() { return frag_plot_; }
  QTableWidget* stacks_table() { return stacks_table_; }
  QLabel* details() { return details_; }
  /// The line above the charts: peaks and fragmentation at peak allocated and at peak reserved.
  QLabel* summary() { return summary_; }
  MemoryReplayPanel* replay() { return replay_; }
  AnalysisJob* job() { return job_; }
  /// The state the map shows (after slider()->value()); empty before the history arrives.
  const sessions::MemoryState& state() const { return state_; }
  const MemoryViewData& data() const { return data_; }
  /// The fragmentation chart's legend for its OOM circles, which mark the largest free block of
  /// the pool that serves each request (MemoryOom::largest_free_in_pool: PyTorch serves requests
  /// <= 1 MiB from the small pool): "OOM: largest free block then" where that is every OOM's
  /// largest free block of all; else it names the pool ("OOM: the small pool's largest free block
  /// then (it serves requests <= 1 MiB)"), or "the request's pool" when the OOMs are of both.
  static QString oom_free_block_legend(const std::vector<sessions::MemoryOom>& ooms);

 protected:
  /// Keeps the charts' splitter at its shares (share_charts_split) as it resizes, until dragged.
  bool eventFilter(QObject* watched, QEvent* e) override;

 private:
  void share_charts_split();
  void apply(MemoryViewData& d);
  void show_block(int index);
  void fill_fragmentation();
  void fill_stacks();
  void fit_side_pane();
  void fit_side_content();
  std::shared_ptr<const sessions::SessionReader> session_;
  std::vector<sessions::MemoryCounter> counters_;
  std::vector<sessions::MemorySnapshot> snapshots_;
  QComboBox *rank_box_, *snapshot_box_;
  QLabel* summary_;
  QSplitter* split_ = nullptr;
  QScrollArea* side_scroll_ = nullptr;  // the right pane
  QWidget* side_ = nullptr;             // its content
  QSplitter* charts_split_ = nullptr;  // left: the timelines, the fragmentation charts, the map's pane
  bool charts_split_dragged_ = false;  // the user set its shares
  bool report_ = false;  // show_for_report was called: the right pane follows its tables
  QTabWidget* charts_;
  ActiveTimeline* timeline_;
  SegmentTimelineChart* segments_;
  QScrollArea* map_scroll_;
  QCustomPlot* frag_plot_;
  QCustomPlot* plot_;  // by step
  QSlider* slider_;
  QSpinBox* entry_box_;
  QLabel* entry_label_;
  BlockMap* map_;
  QLabel* why_;  // the OOM explanation, shown with the OOM snapshot
  QLabel* details_;
  QTableWidget* stacks_table_;
  QLabel* settings_;
  MemoryReplayPanel* replay_;
  AnalysisJob* job_;
  MemoryViewData data_;
  sessions::MemoryState state_;
  int rank_ = -1;
};

}  // namespace embedscope::ui
