#pragma once
// What the scaling page draws, whichever model its study is of (views/scaling_view.h): the
// DLRM study (engine::ScalingStudy, samples) and the lm_embedding one (engine::LmScalingStudy,
// tokens) are each turned into one ScalingPage, and one piece of code draws its plots and table.

#include <QString>
#include <QStringList>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "embedscope/engine/exec/lm_scaling_study.h"
#include "embedscope/engine/exec/scaling_study.h"

namespace embedscope::ui {

struct ScalingPage {
  QString caption;          ///< rich text: the study, its scaling mode and the efficiency baseline
  QString notes;            ///< plain text under the caption ("" hides it)
  QString throughput_unit;  ///< the throughput plot's y unit: "samples/s" or "tokens/s"
  QString efficiency_title;  ///< the efficiency plot's title
  /// One line per sharding type (its label, e.g. "row_wise" or "vocab_parallel+sp"), in the
  /// study's order; a dashed one is drawn over an earlier line it coincides with.
  struct Line {
    QString name;
    bool dashed = false;
  };
  std::vector<Line> lines;
  /// The index of the line named `name`, added (drawn dashed when `dashed`) if there is none yet.
  size_t line_of(const QString& name, bool dashed = false);
  /// Every point, in the study's order: the index of its line, its GPUs, and either its
  /// figures (throughput per s, efficiency and embedding comm share in [0, 1], memory per GPU in
  /// bytes) or the reason it has none (`refusal` not empty).
  struct Point {
    size_t line = 0;
    int gpus = 0;
    std::string refusal;
    double throughput = 0, efficiency = 0, embedding_comm_share = 0;
    int64_t memory_bytes = 0;
  };
  std::vector<Point> points;
  /// The device's memory (bytes) and name, for the memory plot's capacity line; 0 when unknown.
  int64_t device_memory_bytes = 0;
  QString device_name;
  /// The table: its headers, and one row per point (in `points` order) of one cell per header;
  /// a cell of empty text is left without an item. `note_column` holds the refusal (red, the
  /// whole reason on one line, the reason as written in its tooltip).
  struct Cell {
    QString text, tooltip;
  };
  QStringList headers;
  int note_column = 0;
  std::vector<std::vector<Cell>> rows;

  /// Adds `point` to the line named `line` (line_of) and its row: sharding, GPUs, nodes, and for
  /// a refused point its reason (refusal_cell) in note_column. Returns the row, for the figures
  /// of a point that ran. Call after headers and note_column are set.
  std::vector<Cell>& add_point(const QString& line, bool dashed, Point point, int nodes);
};

/// The caption's sentence on the efficiency baseline, as `embedscope scaling` names it: "Efficiency:
/// UNIT per GPU over the baseline, the best at the smallest size any type ran: TYPE at N GPU(s),
/// RATE UNIT per GPU (...)", or "Efficiency: no point ran, so no baseline" when gpus is 0.
QString efficiency_caption(const QString& unit, const QString& type, int gpus, double per_gpu);

/// Columns 4 to 8 of a point that ran, as both studies' tables have them: the rate (samples/s or
/// tokens/s) and the rate per GPU, whole; scaling efficiency, embedding comm share and comm share
/// (fractions) as percent with one decimal, e.g. "49.5 %".
void fill_rate_cells(std::vector<ScalingPage::Cell>& row, double per_s, int gpus, double efficiency,
                     double embedding_comm_share, double comm_share);
/// A refused point's note cell: its reason on one line, and as written in the tooltip.
ScalingPage::Cell refusal_cell(const std::string& error);

/// The page of a DLRM study (scaling_view.cpp): samples/s, its table's columns those of
/// ScalingView::table().
ScalingPage dlrm_scaling_page(const engine::ScalingStudy& study);
/// The page of an lm_embedding study (scaling_lm_page.cpp): tokens/s, its table's columns
/// `embedscope scaling`'s for an LM workload (B/token among them). The device memory line is the
/// study's recorded device (LmScalingStudy::device_memory_bytes / device_name, else a point's
/// device_memory_bytes), whatever its profile is called; only a file written before they were
/// recorded falls back to study_device_memory. A point refused for memory shows what it would
/// need in memory/GPU.
ScalingPage lm_scaling_page(const engine::LmScalingStudy& study);

/// The device memory of the profile a study names (its "hardware"), when that is a built-in
/// profile's name (engine::hardware_profile_names); {0, ""} for a profile file's name, which the
/// study does not locate. The DLRM study's page uses it; the LM one only for old files.
std::pair<int64_t, QString> study_device_memory(const std::string& hardware);

}  // namespace embedscope::ui
