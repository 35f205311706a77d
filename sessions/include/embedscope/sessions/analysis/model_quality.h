#pragma once
// What a remedy for tables that do not fit costs the model and what it saves, read from one
// session for side-by-side views (compare, scenario, the workbench): the held-out evaluation
// (metadata held_out_json: loss, AUC and its standard error) and the tables' storage (metadata
// table_storage_json, sessions/analysis/table_storage.h: weight and optimizer-state bytes over
// all ranks, the stored rows' relative error, hash collisions a measured step). The held-out
// loss is the figure the compression study judges remedies by: a lower training loss or a higher
// AUC can hide a worse held-out loss (Adam with fp16 optimizer state).

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace embedscope::sessions {

class SessionReader;

/// One session's model-quality and compression figures; absent optionals are "not recorded".
struct ModelQuality {
  std::optional<double> held_out_loss;    ///< mean BCE on the held-out batches, nats
  std::optional<double> held_out_auc;     ///< ROC AUC on them (none: one class, not evaluated)
  std::optional<double> held_out_auc_se;  ///< its standard error (noise.h held_out_auc_se)
  int64_t held_out_samples = 0;           ///< held-out samples scored (0: not evaluated)
  bool has_storage = false;               ///< the session records table_storage_json
  int64_t table_weight_bytes = 0;         ///< every table's weights summed over ranks, bytes
  int64_t optimizer_state_bytes = 0;      ///< their optimizer state summed over ranks, bytes
  /// The largest relative error of a table's stored rows against their fp32 values (none: every
  /// table fp32, or not measured).
  std::optional<double> max_relative_error;
  /// Hash collisions a measured step summed over the hashed tables (none: no table hashed or
  /// not measured).
  std::optional<double> collisions_per_step;
};

/// The figures of `session` (its measured steps: distinct steps >= 0 of the steps table divide
/// the collisions). Never throws for missing or malformed metadata (older sessions): the figures
/// are then absent; SessionError only from reading the file.
ModelQuality model_quality(const SessionReader& session);

/// The same as JSON: {"held_out_loss", "held_out_auc", "held_out_auc_se", "held_out_samples",
/// "table_weight_bytes", "optimizer_state_bytes", "max_relative_error", "collisions_per_step"},
/// null where absent (the byte figures too, without table storage).
nlohmann::json model_quality_json(const ModelQuality& q);

/// Index of the lowest held-out loss among `q`, none when no session has one. Ties: the first.
std::optional<size_t> best_held_out_loss(const std::vector<ModelQuality>& q);

/// A text block for comparing sessions side by side: one row per figure (held-out loss, AUC, SE,
/// table weights, optimizer state, max relative error, collisions/step) and one column per
/// session named by `labels` (same size as `q`, else std::invalid_argument), the held-out loss's
/// change against the first session's ("+15.2 %") and "lowest" under the best. Example row:
///   "held-out loss            0.6268      0.7221 (+15.2 %)". Empty when no session has any figure.
std::string model_quality_text(const std::vector<std::string>& labels, const std::vector<ModelQuality>& q);

/// compare's block of these figures, both forms from one call: `text` is model_quality_text
/// under a heading line ("" when no session has a figure); `json` is an array, one
/// model_quality_json per session in order, each with "lowest_held_out_loss" (bool) and, after
/// the first, "held_out_loss_vs_first" (relative change, null without both losses). Throws
/// std::invalid_argument when the sizes differ, SessionError from reading a file.
struct ModelQualityBlock {
  std::vector<ModelQuality> figures;  ///< per session, in order
  std::string text;
  nlohmann::json json;
};
ModelQualityBlock model_quality_block(const std::vector<const SessionReader*>& sessions,
                                      const std::vector<std::string>& labels);

}  // namespace embedscope::sessions
