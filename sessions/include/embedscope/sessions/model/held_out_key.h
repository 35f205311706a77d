#pragma once
// The metadata key of the held-out evaluation (issue 16). It belongs with the others in
// metadata_keys.h; it sits here for now because every file of the project includes that header
// through session.h (fold it in when the tree is rebuilt anyway).

namespace embedscope::sessions::meta {

/// The trained model evaluated on held-out generated batches after the run (engine
/// model/held_out.h), JSON {"batches", "samples", "positives", "first_iteration", "loss" (mean
/// binary cross-entropy, nats), "auc" (ROC AUC by ranks, ties averaged; null when one class is
/// absent)}, or {"skipped": "<why>"} when a complete run could not be evaluated (file input, one
/// rank per process, rows on a device); at close (schema/FORMAT.md). Absent when no evaluation
/// was asked for and in files written before 2026-12-04.
inline constexpr const char* kHeldOutJson = "held_out_json";

}  // namespace embedscope::sessions::meta
