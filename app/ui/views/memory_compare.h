#pragma once
// Two (or more) sessions' device memory side by side on the same scales, e.g. a `caching` and
// an `expandable` run of one workload: allocated, reserved and fragmentation over the steps of
// a chosen rank in one chart, and each session's segment and block map at the same step, drawn
// on one bytes-to-pixels scale so that equal sizes have equal widths.

#include <QWidget>

#include <vector>

#include "models/labelled_session.h"

class QComboBox;
class QCustomPlot;
class QLabel;
class QSpinBox;

namespace embedscope::ui {

class BlockMap;

/// The snapshot of `rank` that shows its layout at the end of `step`: the last one taken at or
/// before that step (snapshots are only written when the layout changed), preferring an "oom"
/// snapshot of that very step. nullptr when there is none.
const sessions::MemorySnapshot* snapshot_at(const std::vector<sessions::MemorySnapshot>& snapshots, int32_t rank,
                                            int64_t step);

class MemoryCompare : public QWidget {
  Q_OBJECT

 public:
  MemoryCompare(const std::vector<LabelledSession>& sessions, QWidget* parent = nullptr);
  /// Shows `rank` (chart and maps) and the maps at the end of `step`.
  void show(int32_t rank, int64_t step);
  BlockMap* map(size_t i) { return maps_[i]; }
  QCustomPlot* plot() { return plot_; }
  /// The bytes that the maps' full width stands for (the widest segment shown in any of them).
  int64_t map_width_bytes() const { return map_width_; }

 private:
  struct Entry {
    LabelledSession s;
    std::vector<sessions::MemoryCounter> counters;
    std::vector<sessions::MemorySnapshot> snapshots;
  };
  std::vector<Entry> entries_;
  QComboBox* rank_box_;
  QSpinBox* step_box_;
  QCustomPlot* plot_;
  std::vector<BlockMap*> maps_;
  std::vector<QLabel*> map_labels_;
  int64_t map_width_ = 0;
};

}  // namespace embedscope::ui
