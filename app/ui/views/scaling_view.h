#pragma once
// The scaling study page (`embedscope scaling --json`, engine/exec/scaling_study.h): one line
// per sharding type over the simulated cluster sizes (x: GPUs, log 2) in four plots -
// throughput (samples/s), weak-scaling efficiency, the embedding communication share of the
// step, and memory per GPU (with the profile's device memory as a dashed line when known) - and
// a table of every point (its bytes on the wire per step too), the ones that did not fit with
// their reason, and a note naming the
// tables a point's plan did not give its type (ScalingPoint::other_types, plan45). Everything on
// it is SIMULATED, and says so.

#include <QWidget>

#include <vector>

#include "embedscope/engine/exec/scaling_study.h"

class QCustomPlot;
class QLabel;
class QTableWidget;

namespace embedscope::ui {

class ScalingView : public QWidget {
  Q_OBJECT

 public:
  explicit ScalingView(engine::ScalingStudy study, QWidget* parent = nullptr);
  const engine::ScalingStudy& study() const { return study_; }
  /// The plots, in order: throughput, scaling efficiency, embedding comm share, memory per GPU.
  /// Each has one graph per sharding type (in the study's order) holding the points that ran
  /// (x = GPUs; y = samples/s, percent, percent, GiB).
  QCustomPlot* plot(int i) const { return plots_[static_cast<size_t>(i)]; }
  /// The table of every point: sharding, GPUs, nodes, step p50, samples/s, per GPU, efficiency,
  /// emb comm, comm, wire/step (ScalingPoint::wire_bytes_per_step as `embedscope scaling`
  /// prints it, e.g. "2.8 MiB"; the exact bytes in its tooltip), memory/GPU, note.
  QTableWidget* table() const { return table_; }
  static constexpr int kWireColumn = 9;   ///< the table's wire/step column
  static constexpr int kNoteColumn = 11;  ///< the table's note column (placement, session, error)
  QLabel* caption() const { return caption_; }
  /// The note under the caption naming the tables kept in another type (kept_tables_text) and
  /// the types whose lines coincide (coinciding_types); hidden when there is neither.
  QLabel* kept_note() const { return kept_; }

 private:
  engine::ScalingStudy study_;
  std::vector<QCustomPlot*> plots_;
  QTableWidget* table_;
  QLabel* caption_;
  QLabel* kept_;
};

/// The tables each point's plan did not give the point's sharding type (ScalingPoint::
/// other_types: too few rows for a row split, kept table_wise), as the CLI notes them under a
/// row (tester44 F4), one sentence for the page: points of one type with the same tables are
/// grouped, e.g. for tiny under row_wise at 1, 2 and 4 GPUs
///   "Tables not in the point's sharding type: row_wise at 2, 4 GPUs: t_small table_wise (fewer
///   rows than the ranks a row split needs; `run --sharding row_wise` splits them into empty
///   shards instead)."
/// At most 8 tables a group are named, then "and N more". Studies since fixf49 have no such
/// tables but ScalingPoint::empty_shard_tables (the type with empty shards), grouped the same way:
///   "Tables split into empty shards (too few rows for a block of ceil(rows / ranks) on every
///   rank: the last ranks hold none), as `run --sharding TYPE` splits them: row_wise at 2, 4
///   GPUs: t_small (the planner would keep a table with fewer rows than ranks table_wise, which
///   adds a pooled all-to-all to the step)."
/// Plain text; "" when no point has any.
std::string kept_tables_text(const engine::ScalingStudy& study);

/// The sharding types whose figures are within 0.5 % of an earlier type's at every cluster size
/// of the study (step time, throughput, efficiency, comm shares and memory per GPU; sizes where
/// both ran), each as {type, the earlier type}, in the study's type order: on one node row_wise
/// and table_row_wise are the same plan, and the later line was drawn over the earlier with
/// nothing saying so (tester45 F3). Empty when no two coincide.
std::vector<std::pair<engine::ShardingType, engine::ShardingType>> coinciding_types(const engine::ScalingStudy& study);

/// True when the file at `path` is a scaling study (the JSON `embedscope scaling --json` writes:
/// an object whose first key is "batch_size_per_gpu"), by its first bytes.
bool is_scaling_study_file(const QString& path);
/// Reads a scaling study file. Throws engine::SpecError naming the file (and the JSON pointer,
/// or the line of a syntax error).
engine::ScalingStudy load_scaling_study_file(const QString& path);

}  // namespace embedscope::ui
