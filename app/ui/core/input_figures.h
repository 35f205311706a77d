#pragma once
// The input figures of `embedscope inspect-input` for a session, without Qt: the load view's
// "input per feature" table (ids per bag, distinct ids, the share of the hottest 1% / 10% of
// the rows, out-of-range ids). The session keeps its workload (workload_json), so the batches
// its run trained on are counted again from the same source: the seeded generator regenerates
// them exactly; a file source is re-read from the path the run used.

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/engine/input/input_stats.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::ui {

/// The figures of one session's input, or why there are none.
struct InputFigures {
  /// Why there are no figures ("" when there are): no workload in the session (an imported
  /// trace), a model other than DLRM's pooled bags, a workload that no longer parses, or a file
  /// source that can no longer be read (the message names the file and line).
  std::string unavailable;
  /// Where the figures come from, for the view's caption, e.g. "synthetic input (seed 1),
  /// regenerated: the 80 batches of the 20 measured steps (the 2 warm-up steps' left out, as
  /// above), 40960 samples" or "criteo_tsv /data/day_0.gz, re-read: ...". The measured steps
  /// only: the window of the session's load counters and row histogram (tester41 #24). A run that
  /// did not end complete (killed, crashed, cancelled, write_failed, still running) counts the
  /// batches of the measured steps its session holds, not its planned steps': "... the 692
  /// batches of the 346 measured steps the session holds (the run ended crashed; 3000 were
  /// planned) ..." (retest49 R6). A pipeline's drain steps are left out as stats and the Load
  /// page's charts leave them out: "the 72 batches of the 18 counted steps 0-17 (the drain steps
  /// 18-19 left out, as stats)". The batches are those of the session's world size (metadata
  /// world_size), whatever device count its stored workload says or defaults to.
  std::string source;
  engine::InputInspection inspection;
};

/// Ids input_figures counts at most (whole batches, at least one): a large run's first batches
/// stand for its input, so that a simulated 512-rank session's load view (and its report) does
/// not regenerate its whole input (tester33 D2). Capped by ids, not by (sample, feature) pairs:
/// the cost is per id drawn and counted, and a multi-hot workload holds many per pair
/// (mlperf_dlrm_dcnv2: 214 a sample; a cap of 5,000,000 pairs counted 23 of its batches, 40.3M
/// ids, 131 s of a report: tester46 F16).
inline constexpr int64_t kInputFigureIds = 5'000'000;

/// The ids one batch of `spec` is expected to hold: batch_size x the sum of the features'
/// mean ids per bag (PoolingFactor::mean; a criteo_tsv source holds at most one id per bag,
/// counted as one). At least 1.
int64_t expected_ids_per_batch(const engine::WorkloadSpec& spec);

/// The batches input_figures counts of a run of `spec`: kInputFigureIds / expected_ids_per_batch,
/// at least one (the run's measured batches may be fewer: inspect_input stops there).
int64_t input_figure_batches(const engine::WorkloadSpec& spec);

/// The input figures of `session` (see the top of this file). Never throws for a session whose
/// workload is missing, unreadable or whose files are gone, or that holds no measured step of a
/// run that did not end complete: `unavailable` says why. Costs what
/// `inspect-input` costs for the input_figure_batches(spec) first measured batches: they are
/// generated or read again.
InputFigures input_figures(const sessions::SessionReader& session);

}  // namespace embedscope::ui
