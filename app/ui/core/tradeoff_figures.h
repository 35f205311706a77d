#pragma once
// The storage trade-offs of a scenario's runs, without Qt: per run what its tables cost
// (memory) and what that saving cost (loss, lookup error, step time), beside a reference run
// (fp32). The scenario view's "Trade-offs" page (views/tradeoffs_view.h) draws these figures;
// issue 16's compression study (resources/scenarios/compression.json) is the case
// it was made for.
//
// Per run (one session each; units in the field comments):
//   table bytes      weights + optimizer state of every table on every rank, as the run
//                    measured them from its buffers (metadata table_storage_json, FORMAT.md);
//                    a table shared_with another is stored once, so it counts once
//   peak allocated   the busiest rank's peak allocated device memory over the whole run,
//                    warm-up included (memory_counters), and that rank
//   step time        mean over the measured steps of the slowest rank's step time (steps table;
//                    sessions::analyze's definition)
//   loss after N     the loss of measured step N - 1 (the same on every rank), N the measured
//                    steps of the run with the fewest (among runs that measured any), so every
//                    run is read after the same number of steps; and its difference to the
//                    reference run's loss at that step
//   lookup error     the largest over the tables of max_abs_error and relative_error (the stored
//                    rows against their fp32 values; 0 for fp32 rows, hashed and low-rank tables)
//   collisions       hash collisions summed over tables, per measured step
//   held-out AUC     the ROC AUC (and mean BCE) of the trained model on the held-out batches
//                    (metadata held_out_json, engine model/held_out.h: the same samples for
//                    every run whose features keep their tables; shared_with changes the
//                    labels), and the AUC's difference to the reference's
// The reference is the run labelled "fp32" (case-insensitive) when there is one, else the first.
//
// Example (tests/ui/core/tradeoff_figures_test.cpp): an fp32 run with 16 MB of rows + 32 MB of
// Adam state and loss 0.60 after 2 steps, an fp16 run with 8 + 32 MB and loss 0.61: the fp16
// run's table bytes are 40 MB, 0.833 of the reference's, and its loss is +0.01 (+1.67 %) over it.

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/engine/workload/scenario.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::ui {

/// The storage and cost of one run (see the top of this file for the definitions).
struct TradeoffRun {
  std::string label;      ///< the scenario run's label ("fp16 rows")
  /// How its tables are stored, from the session itself: "fp32", "fp16 rows", "int8 rows, bf16
  /// state", "hash 10,000 rows", "low rank 8", "4 tables shared", with "(k of n tables)" where only
  /// some tables use a setting; "no table storage recorded" for sessions without it.
  std::string technique;
  std::string ended;               ///< the session's `ended`
  bool has_storage = false;        ///< the session has table_storage_json
  /// false when its error and collision figures are null (a simulated session: nothing was
  /// stored or hashed); max_abs_error, relative_error and hash_collisions then stay 0
  bool errors_measured = true;
  int64_t tables = 0;              ///< stored tables (table_storage_json entries)
  int64_t weight_bytes = 0;        ///< bytes, all tables and ranks
  int64_t optimizer_state_bytes = 0;  ///< bytes, all tables and ranks
  int64_t table_bytes() const { return weight_bytes + optimizer_state_bytes; }
  int64_t peak_allocated_bytes = 0;  ///< bytes, the busiest rank's peak (whole run)
  int32_t peak_rank = -1;            ///< that rank (-1 without memory counters)
  int64_t steps = 0;                 ///< measured steps
  double step_mean_ns = 0;           ///< ns; 0 without measured steps
  std::vector<double> losses;        ///< per measured step, in step order
  double loss = 0;                   ///< loss after N steps (valid when has_loss)
  bool has_loss = false;             ///< the run measured at least N steps (N >= 1)
  double loss_delta = 0;             ///< loss - the reference's loss after N steps
  double loss_relative = 0;          ///< loss_delta / the reference's loss (0 when that is 0)
  double max_abs_error = 0;          ///< lookup error, max over tables (value units of the rows)
  double relative_error = 0;         ///< lookup error / max |fp32 row|, max over tables
  int64_t hash_collisions = 0;       ///< summed over tables, ranks and measured steps
  bool has_held_out = false;         ///< the session has an evaluated held_out_json with an AUC
  double held_out_auc = 0;           ///< ROC AUC on the held-out batches (valid when has_held_out)
  double held_out_loss = 0;          ///< mean BCE on them, nats (valid when has_held_out)
  int64_t held_out_samples = 0;      ///< the held-out samples
  double held_out_auc_delta = 0;     ///< held_out_auc - the reference's (0 unless both have one)
  /// Standard error of held_out_auc from the held-out set's positives and negatives (Hanley &
  /// McNeil 1982, sessions/analysis/noise.h); 0 when unknown (no counts recorded)
  double held_out_auc_se = 0;
  /// held_out_auc_delta within 2 standard errors of the difference (sessions::auc_difference;
  /// tester42 F5: +0.06 read as "low rank improves accuracy"); false when either SE is unknown
  bool held_out_auc_delta_within_noise = false;
  double held_out_auc_delta_se = 0;  ///< sqrt(se^2 + the reference's se^2); 0 when either is unknown
  double collisions_per_step() const { return steps > 0 ? static_cast<double>(hash_collisions) / static_cast<double>(steps) : 0; }
};

/// The trade-offs of a scenario's runs.
struct TradeoffComparison {
  std::vector<TradeoffRun> runs;  ///< in the order given
  size_t reference = 0;           ///< index of the reference run in `runs`
  int64_t loss_steps = 0;         ///< N: the loss is read after N measured steps (0: no run has steps)
  /// A run's figure over the reference's (table bytes, peak, step time): 0 when the reference's is 0.
  double table_bytes_ratio(size_t run) const;
  double peak_ratio(size_t run) const;
  double step_time_ratio(size_t run) const;
};

/// The figures of one session (everything but the loss comparison, which needs every run:
/// loss, has_loss, loss_delta, loss_relative stay 0/false). Costs a read of the steps and memory
/// counters tables. Throws sessions::SessionError on an unreadable file; a table_storage_json
/// that does not parse counts as absent.
TradeoffRun tradeoff_run(const std::string& label, const sessions::SessionReader& session);

/// Compares runs made by tradeoff_run: picks the reference, N, and each run's loss after N
/// steps against the reference's. A reference without N steps leaves every delta 0.
TradeoffComparison compare_tradeoffs(std::vector<TradeoffRun> runs);

/// True when the DLRM runs of `scenario` store their tables differently: some table's
/// data_type (with its stochastic rounding), optimizer_state_type, hash_size, low_rank_dim or
/// shared_with differs between two runs (the scenarios whose trade-offs are worth a page).
/// False for fewer than two DLRM runs.
bool runs_differ_in_table_storage(const engine::Scenario& scenario);

}  // namespace embedscope::ui
