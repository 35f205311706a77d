#pragma once
// One run of a teaching scenario (workload/scenario.h) headless, whichever kind it is (a DLRM
// workload through run_training with the greedy plan, as the workbench's Run button trains it;
// an lm_embedding one through run_lm), and the figures of its session that a scenario compares:
// what `embedscope scenario` prints and the workbench's scenario view shows per run.
//
// Figures (over the measured steps, sessions::analyze; "comm" is the ops of category comm,
// merged per rank as HTA does, thread-level on CPU ranks):
//   step time        mean and p50 of the slowest rank's step time per step (ns)
//   exposed comm     per rank, summed over the counted steps, mean over ranks (ns); and per
//                    counted step (that sum / counted steps: the figure `compare`, `stats` and
//                    the view's Compare give "per step"; tester52 F1: the sum of a semi_sync run
//                    holds 4 steps where a base run's holds 6)
//   counted steps    the measured steps the time figures cover: a pipeline's drain steps (its
//                    last 1-2, sessions/analysis/counted_steps.h) are left out, as in `stats`,
//                    unless every measured step drains it (all_drain: all counted, no steady state)
//   comm share       time in comm / step windows, summed over every rank and step (0..1)
//   embedding share  the same for the embedding's own collectives: DLRM every collective but
//                    dense_all_reduce; lm_embedding embedding/*, input/output/grad dist
//                    (program/lm_program.h, is_lm_embedding_collective)
//   bytes per sample every rank's bytes sent (collectives table) / samples of the measured
//                    steps; per token for lm_embedding: / (samples x sequence_length), its
//                    split checks left out (split_check_bytes; tester55 F4)
//   peak memory      the largest rank's peak allocated and reserved bytes (whole run)
// Example (tests/engine/exec/scenario_cli_test.cpp): vocab_parallel, bf16, V = 64, H = 8, S = 8,
// B = 2 on 4 ranks, 1 step: each rank sends 1,056 B (embedding/all_reduce and the projection's
// gradient all-reduce 384 B each in bf16, the cross-entropy's 288 B in fp32), so bytes per token
// = 4 x 1,056 / 16 = 264.

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/scenario.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::engine {

struct ScenarioRunOptions {
  std::string session_path;  ///< where the session goes (required)
  bool overwrite = false;    ///< replace a regular file at session_path (otherwise an error)
  /// Set (e.g. from a SIGINT handler) to stop after the current step; the run ends "cancelled".
  const std::atomic<bool>* cancel = nullptr;
  /// Called from rank 0's thread after every step (StepProgress; for lm_embedding runs
  /// samples_per_s counts sequences).
  std::function<void(const StepProgress&)> on_step;
  /// DLRM runs: global held-out batches the trained model is evaluated on after a complete run
  /// (TrainerOptions::held_out_batches; 0: none, and the figures have no held-out AUC or loss).
  int64_t held_out_batches = kDefaultHeldOutBatches;
};

struct ScenarioRunOutcome {
  RunEnd ended = RunEnd::complete;  ///< the session's `ended`
  std::string error;                ///< how a failed run failed ("" when complete or cancelled)
  bool bad_input = false;           ///< the run ended because of its input (RunResult::bad_input)
};

/// Runs `run` (validated by parse_scenario) into options.session_path. A run that fails (OOM,
/// hang, crash) is returned with its ending, not thrown: its session says how it ended. Throws
/// SpecError when the engine refuses the workload before running (e.g. it does not fit the
/// devices) and sessions::SessionError when the session cannot be created (exists, unwritable).
ScenarioRunOutcome run_scenario_run(const ScenarioRun& run, const ScenarioRunOptions& options);

/// The figures of one run's session (units in the field comments; see the header comment).
struct ScenarioFigures {
  std::string ended;                  ///< the session's `ended`
  bool simulated = false;
  int64_t steps = 0;                  ///< measured steps in the session
  /// The steps the time figures, exposed communication and bytes cover: steps - drain_steps
  /// (RunStats::counted_steps).
  int64_t counted_steps = 0;
  std::string pipeline;               ///< workload pipeline ("base", "sparse_dist", "semi_sync"; "" unknown)
  int64_t drain_steps = 0;            ///< the pipeline's drain steps left out (RunStats::drain_steps)
  bool all_drain = false;             ///< every measured step drains the pipeline (RunStats::all_drain)
  int64_t samples_per_step = 0;       ///< sequences for lm_embedding
  int64_t tokens_per_sample = 0;      ///< sequence_length for lm_embedding; 0 for DLRM
  double step_mean_ns = 0;
  int64_t step_p50_ns = 0;
  double samples_per_s = 0;
  int64_t exposed_comm_ns = 0;        ///< per rank summed over the counted steps, mean over ranks (ns)
  double exposed_comm_per_step_ns = 0;  ///< exposed_comm_ns / counted_steps (ns; 0 without steps)
  double overlap_pct = 0;
  double comm_share = 0;
  double embedding_comm_share = 0;
  int64_t bytes_sent = 0;             ///< every rank, measured steps (split checks included)
  /// Of bytes_sent, Embedscope's split checks ("<name>/split_check", which Megatron and TorchRec
  /// do not run), counted steps only; left out of an lm_embedding run's per-sample and per-token
  /// figures, kept in a DLRM run's (as stats counts them)
  int64_t split_check_bytes = 0;
  /// (bytes_sent - split_check_bytes) / samples for lm_embedding, bytes_sent / samples for DLRM
  double bytes_per_sample = 0;
  double bytes_per_token = 0;         ///< bytes_per_sample / sequence_length; 0 for DLRM
  double split_check_bytes_per_token = 0;  ///< split_check_bytes / tokens; 0 for DLRM
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  double final_loss = 0;              ///< the last measured step's loss (0 without steps)
  /// ROC AUC of the trained model on held-out generated batches (sessions RunStats::held_out_auc,
  /// engine model/held_out.h); none when the run was not evaluated (simulated, lm_embedding,
  /// cuda, not complete) or one class was absent.
  std::optional<double> held_out_auc;
  /// Its standard error from the held-out set's positives and negatives (Hanley & McNeil 1982,
  /// sessions/analysis/noise.h held_out_auc_se); none without held_out_auc.
  std::optional<double> held_out_auc_se;
  /// The mean BCE of the trained model on the same held-out batches (metadata held_out_json
  /// "loss", nats; sessions/analysis/model_quality.h); none when the run was not evaluated. The
  /// figure remedies are judged by: a lower training loss can hide a worse held-out one.
  std::optional<double> held_out_loss;
  /// Every table's weights and optimizer state summed over ranks (table_storage_json; none in
  /// sessions without it), bytes.
  std::optional<int64_t> table_weight_bytes, optimizer_state_bytes;
  /// The largest relative error of a reduced-precision table's stored rows; none for fp32 tables
  /// or a simulated run.
  std::optional<double> max_relative_error;
  /// Hash collisions a measured step summed over the hashed tables; none without hashing.
  std::optional<double> collisions_per_step;
};

/// The figures of `session`, a session of `run`. A session without measured steps has zero
/// step figures and its memory peaks. Throws sessions::SessionError on an unreadable file.
ScenarioFigures scenario_figures(const ScenarioRun& run, const sessions::SessionReader& session);

}  // namespace embedscope::engine
