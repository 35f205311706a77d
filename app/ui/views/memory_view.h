#pragma once
// The memory view: per rank, allocated / reserved bytes and fragmentation over the steps (with
// OOM markers), and the segment and block map of a snapshot, like PyTorch's allocator state
// history: one row per segment, blocks coloured by tag when allocated, grey when free, the
// largest free block outlined; hovering a block shows its size, requested size and tag.

#include <QWidget>

#include <memory>
#include <vector>

#include "charts/block_map.h"
#include "embedscope/sessions/store/session.h"

class QCustomPlot;
class QComboBox;
class QLabel;

namespace embedscope::ui {

class MemoryView : public QWidget {
  Q_OBJECT

 public:
  explicit MemoryView(std::shared_ptr<const sessions::SessionReader> session, QWidget* parent = nullptr);
  void show_rank(int rank);
  void show_snapshot(int index);
  BlockMap* map() { return map_; }

 private:
  std::shared_ptr<const sessions::SessionReader> session_;
  std::vector<sessions::MemoryCounter> counters_;
  std::vector<sessions::MemorySnapshot> snapshots_;
  QComboBox *rank_box_, *snapshot_box_;
  QCustomPlot* plot_;
  BlockMap* map_;
  QLabel* why_;  // the OOM explanation, shown with the OOM snapshot
};

}  // namespace embedscope::ui
