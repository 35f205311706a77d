#pragma once
// The memory view's Replay panel: the rank's memory history replayed (engine replay_history, the
// library code of `embedscope replay-memory`) under the caching and expandable allocators, a
// max_split_size and a garbage_collection_threshold, at a device capacity, off the GUI thread; side by side per setting the peak
// reserved bytes, fragmentation at the peak and whether and where it would run out of memory.

#include <QString>
#include <QWidget>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "embedscope/engine/memory/replay.h"
#include "embedscope/sessions/analysis/memory_history.h"

class QCheckBox;
class QDoubleSpinBox;
class QLabel;
class QPushButton;
class QTableWidget;

namespace embedscope::ui {

class AnalysisJob;

class MemoryReplayPanel : public QWidget {
  Q_OBJECT

 public:
  explicit MemoryReplayPanel(QWidget* parent = nullptr);
  /// The history to replay and the device's capacity (bytes; 0 unknown: the peak reserved bytes
  /// are offered, and said so; below `peak_reserved`, e.g. free + reserved at an OOM while
  /// another process held memory: the peak reserved bytes are offered, and said so, as the
  /// recorded run held them); `recorded` names the recorded settings (for the label).
  void set_history(std::shared_ptr<const sessions::MemoryHistory> history, int64_t capacity, int64_t peak_reserved,
                   const std::string& recorded);
  /// The recorded layout when reserved bytes first reached their peak (RankMemoryAnalysis::
  /// at_peak_reserved, its entry): the moment each replay's "frag. at peak reserved" is taken,
  /// shown in the note, and compared with the replay of the recorded settings (tester41 #7).
  /// Call after set_history; entry < 0: unknown (nothing said).
  void set_recorded_at_peak_reserved(int64_t entry, double fragmentation, int64_t reserved);
  /// How the recording ended, also compared after a replay: its first OOM entry (-1: none) and
  /// an imported snapshot's dump, its segments and reserved bytes (-1: no dump, an engine run).
  /// Call after set_recorded_at_peak_reserved.
  void set_recorded_outcome(int64_t first_oom_entry, int64_t dump_segments, int64_t dump_reserved);
  /// After a replay: whether the replay of the recorded settings reproduces the recording, and
  /// why not where it does not: engine::recorded_replay_verdict, the sentence `embedscope
  /// replay-memory` prints (peak reserved, fragmentation there, the OOM, the dump; snap54,
  /// tester54 F9). "" when no row replays the recorded settings or no recorded figure was
  /// given. Pure: `results` rows, `recorded` as set_history's.
  static QString recorded_comparison(const std::vector<engine::ReplayResult>& results, const std::string& recorded,
                                     int64_t recorded_entry, double recorded_fragmentation, int64_t recorded_reserved,
                                     int64_t recorded_oom = -1, int64_t dump_segments = -1, int64_t dump_reserved = -1,
                                     bool capacity_assumed = false);
  /// The recorded settings named by `recorded` (set_history's: "caching", "expandable_segments,
  /// max_split_size 128.0 MiB", "caching, garbage_collection_threshold 0.5") at `capacity`;
  /// nullopt for "unknown" or another allocator. Pure.
  static std::optional<engine::AllocatorConfig> recorded_config(const std::string& recorded, int64_t capacity);
  /// Whether the history is a PyTorch program's (an imported snapshot; the default) or an
  /// Embedscope run's: the advice for an OOM for want of room differs (advise_snapshot_rows).
  void set_pytorch_program(bool pytorch) { pytorch_program_ = pytorch; }
  /// The settings the controls ask for: caching and/or expandable, caching with the
  /// max_split_size when it is > 0, and caching with the garbage_collection_threshold when it is
  /// > 0 (set_history sets it to the recorded one, 0 when none was recorded).
  std::vector<engine::AllocatorConfig> settings() const;
  /// Starts the replay (what the Replay button does).
  void replay();
  const std::vector<engine::ReplayResult>& results() const { return results_; }
  QTableWidget* table() { return table_; }
  /// The table's height (px) to show its header and `rows` rows whole (its rows' heights as
  /// laid out, default sections beyond them), and the horizontal scroll bar where its columns
  /// are wider than it. The table is held at this height for its rows (two before a replay).
  int table_height_for(int rows) const;
  /// Under the table: each setting that runs out of memory with the whole message `embedscope
  /// replay-memory` prints for it ("caching: out of memory at entry 4: ..."), one a line; hidden
  /// when none does. The table's result column says only where (its tooltip the rest), and a
  /// report cannot hover (tester46 F15).
  QLabel* verdicts() { return verdicts_; }

 signals:
  /// A replay's rows are in the table (and verdicts() under it).
  void replayed();

 public:
  /// The line under the controls: the recorded settings and where the capacity comes from.
  QLabel* note() { return note_; }
  AnalysisJob* job() { return job_; }

 protected:
  void resizeEvent(QResizeEvent* e) override;

 private:
  void fit_table_height();
  std::shared_ptr<const sessions::MemoryHistory> history_;
  QCheckBox *caching_, *expandable_;
  QDoubleSpinBox *max_split_mib_, *gc_threshold_, *capacity_mib_;
  QPushButton* button_;
  QLabel* note_;
  QTableWidget* table_;
  QLabel* verdicts_;
  AnalysisJob* job_;
  std::vector<engine::ReplayResult> results_;
  QString base_note_;
  std::string recorded_;
  bool pytorch_program_ = true;
  bool capacity_unknown_ = false;  ///< set_history had no capacity: the recorded peak is offered
  double recorded_gc_threshold_ = 0;  ///< the recording's garbage_collection_threshold (0: none)
  int64_t recorded_entry_ = -1, recorded_reserved_ = 0;
  int64_t recorded_oom_ = -1, dump_segments_ = -1, dump_reserved_ = -1;
  double recorded_fragmentation_ = 0;
};

}  // namespace embedscope::ui
