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
};

/// The page of a DLRM study (scaling_view.cpp): samples/s, its table's columns those of
/// ScalingView::table().
ScalingPage dlrm_scaling_page(const engine::ScalingStudy& study);
/// The page of an lm_embedding study (scaling_lm_page.cpp): tokens/s, its table's columns
/// `embedscope scaling`'s for an LM workload (B/token among them).
ScalingPage lm_scaling_page(const engine::LmScalingStudy& study);

/// The device memory of the profile a study names (its "hardware"), when that is a built-in
/// profile's name (engine::hardware_profile_names); {0, ""} for a profile file's name, which the
/// study does not locate.
std::pair<int64_t, QString> study_device_memory(const std::string& hardware);

}  // namespace embedscope::ui
