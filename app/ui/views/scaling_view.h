#pragma once
// The scaling study page (`embedscope scaling --json`): a DLRM study (engine/exec/scaling_study.h)
// or an lm_embedding one (engine/exec/lm_scaling_study.h), drawn by the same code
// (views/scaling_page.h): one line per sharding type over the simulated cluster sizes (x: GPUs,
// log 2) in four plots - throughput (samples/s, or tokens/s for an LM study), scaling
// efficiency, the embedding communication share of the step, and memory per GPU (with the
// device memory of a built-in profile as a dashed line, and each refused point marked at its GPU
// count, its reason under the plot's title) - and a table of every point (its bytes on the wire
// per step too; B/token for an LM study), the ones that did not fit with their reason, and a
// note naming the tables a point's plan did not give its type (ScalingPoint::other_types,
// plan45). Everything on it is SIMULATED, and says so.

#include <QWidget>

#include <optional>
#include <variant>
#include <vector>

#include "embedscope/engine/exec/lm_scaling_study.h"
#include "embedscope/engine/exec/scaling_study.h"

class QCustomPlot;
class QLabel;
class QTableWidget;

namespace embedscope::ui {

struct ScalingPage;

/// A scaling study file as the page opens it: a DLRM study (engine::ScalingStudy) or an
/// lm_embedding one (engine::LmScalingStudy), told apart by the JSON's "model".
using ScalingStudyFile = std::variant<engine::ScalingStudy, engine::LmScalingStudy>;

class ScalingView : public QWidget {
  Q_OBJECT

 public:
  /// The page of a DLRM study (engine::ScalingStudy) or an lm_embedding one
  /// (engine::LmScalingStudy). Loads the built-in hardware profile the study names, if it is
  /// one, for its device memory.
  explicit ScalingView(ScalingStudyFile study, QWidget* parent = nullptr);
  /// The DLRM study (empty for an LM one), and the LM study (nullopt for a DLRM one).
  const engine::ScalingStudy& study() const { return study_; }
  const std::optional<engine::LmScalingStudy>& lm_study() const { return lm_study_; }
  QString workload() const;  ///< the study's workload name
  QString hardware() const;  ///< the study's hardware profile name
  /// The plots, in order: throughput, scaling efficiency, embedding comm share, memory per GPU.
  /// Each has one graph per sharding type (in the study's order; an LM type with sequence
  /// parallelism is its own, "vocab_parallel+sp") holding the points that ran (x = GPUs; y =
  /// samples/s or tokens/s, percent, percent, and memory in the unit of the y label: B, KiB,
  /// MiB or GiB, the largest the largest point fills once). The memory plot also has a
  /// QCPItemStraightLine at the device memory when the study's hardware is a built-in profile
  /// and its largest point holds a tenth of it or more, a QCPItemText "✕" in the line's colour
  /// at each refused point's GPU count on the x axis, and under its title a QCPTextElement
  /// (8 pt) of the device memory when it is far above the points ("device memory NVIDIA H100
  /// 80GB HBM3: 79.6 GiB, far above the points") and one line per refusal reason ("✕ refused
  /// (does not fit): vocab_parallel at 1 GPU; data_parallel at 1, 2 GPUs"; the reason up to
  /// its first ':' or '(', past the "TYPE at N GPUs: " and the JSON pointer it may start with).
  QCustomPlot* plot(int i) const { return plots_[static_cast<size_t>(i)]; }
  /// The table of every point. DLRM: sharding, GPUs, nodes, step p50, samples/s, per GPU,
  /// efficiency, emb comm, comm, wire/step (ScalingPoint::wire_bytes_per_step as `embedscope
  /// scaling` prints it, e.g. "2.8 MiB"; the exact bytes in its tooltip), memory/GPU, note.
  /// LM (`embedscope scaling`'s LM columns): sharding (+sp), GPUs, nodes, step (as the CLI
  /// prints it, "0.12 ms"), tokens/s, per GPU, efficiency, emb comm, comm, wire/step, B/token
  /// (one decimal; the formula in its tooltip), memory/GPU, note (the session). A refused
  /// point has sharding, GPUs, nodes and its reason in the note column (red), no other items.
  /// The note column takes the table's remaining width and wraps; rows grow to their note's
  /// height (the whole reason readable, not elided).
  QTableWidget* table() const { return table_; }
  static constexpr int kWireColumn = 9;   ///< the table's wire/step column (both studies)
  static constexpr int kNoteColumn = 11;  ///< a DLRM study's note column (placement, session, error)
  static constexpr int kLmTokenBytesColumn = 10;  ///< an LM study's B/token column
  static constexpr int kLmNoteColumn = 12;        ///< an LM study's note column (session, error)
  int note_column() const { return note_column_; }  ///< kNoteColumn or kLmNoteColumn
  QLabel* caption() const { return caption_; }
  /// The note under the caption naming the tables kept in another type (kept_tables_text) and
  /// the types whose lines coincide (coinciding_types); hidden when there is neither.
  QLabel* kept_note() const { return kept_; }

 private:
  void build(const ScalingPage& page);
  engine::ScalingStudy study_;
  std::optional<engine::LmScalingStudy> lm_study_;
  int note_column_ = kNoteColumn;
  std::vector<QCustomPlot*> plots_;
  QTableWidget* table_ = nullptr;
  QLabel* caption_ = nullptr;
  QLabel* kept_ = nullptr;
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

/// A sharding type whose figures are within 0.5 % of an earlier type's (step time, throughput,
/// efficiency, comm shares and memory per GPU) at some of the study's cluster sizes.
struct CoincidingType {
  engine::ShardingType type;     ///< the later type in the study's order: its line is drawn dashed
  engine::ShardingType earlier;  ///< the type it covers
  std::vector<int> gpus;         ///< the sizes where both ran and coincide, ascending
  bool every_size = false;       ///< true when they coincide at every size where both ran
};
/// The types whose line covers an earlier type's at every size where both ran, or at two sizes or
/// more (the lines of every type meet at 1 GPU: one point is no hidden line), at most one entry per type
/// (its first earlier type with the most coinciding sizes), in the study's type order: on one
/// node row_wise and table_row_wise are the same plan, and the later line was drawn over the
/// earlier with nothing saying so (tester45 F3; at the sizes of one node only: tester63a F8, equal
/// at 4 and 8 GPUs, apart at 16). Empty when no two coincide anywhere.
std::vector<CoincidingType> coinciding_types(const engine::ScalingStudy& study);

/// True when the file at `path` is a scaling study (the JSON `embedscope scaling --json` writes:
/// an object whose first key is "batch_size_per_gpu"), by its first bytes.
bool is_scaling_study_file(const QString& path);
/// Reads a scaling study file: an lm_embedding study ("model": "lm_embedding",
/// engine::lm_scaling_study_from_json) or a DLRM one (engine::scaling_study_from_json). Throws
/// engine::SpecError naming the file (and the JSON pointer, or the line of a syntax error).
ScalingStudyFile load_scaling_study_file(const QString& path);

}  // namespace embedscope::ui
