#pragma once
// Held-out evaluation of a trained DLRM (issue 16): the model run forward (no update) on batches
// its workload's generator (input.h, whose teacher labels them) makes from iterations training
// never reaches, scored by mean BCE and ROC AUC: the same samples for every compression technique
// as long as each feature keeps its table (the teacher scores an id by the table serving it, so
// shared_with changes the labels). What is evaluated: the tables as stored after the last step
// (rows decoded as a lookup reads them: LocalShard::row, low-rank rows as A_r B, hashed ids through
// hashed_row, invalid ids under the workload's policy), pooled in double (sum / mean), rounded to
// fp32, and the dense part's trained parameters through DenseModel::forward_backward (gradients
// discarded). The pooled embeddings are not rounded to the qcomms wire precision: the model is
// evaluated, not the wire.
//
// Sources of the AUC by ranks: see roc_auc below; the run's wiring: exec/run.h
// (TrainerOptions::held_out_batches, RunResult::held_out).

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// ROC AUC of `scores` (higher = more likely positive) against `labels` (1 positive, 0
/// negative), computed exactly by ranks (the Mann-Whitney U statistic):
///   AUC = (R+ - n+ (n+ + 1) / 2) / (n+ n-)
/// where R+ is the sum of the 1-based ranks of the positives among all n scores sorted
/// ascending, tied scores sharing the mean of the ranks they span (F. Wilcoxon 1945; H. B. Mann,
/// D. R. Whitney 1947, Ann. Math. Statist. 18(1); J. A. Hanley, B. J. McNeil 1982, "The meaning
/// and use of the area under a receiver operating characteristic (ROC) curve", Radiology
/// 143(1)). Equals the probability that a random positive scores above a random negative, a tie
/// counting one half, and the trapezoidal area under the ROC curve (sklearn's roc_auc_score).
/// Example (tested): scores {0.1, 0.4, 0.35, 0.8}, labels {0, 0, 1, 1}: 0.75; with a tie,
/// scores {0.5, 0.5, 0.2, 0.9}, labels {1, 0, 0, 1}: 0.875.
/// Returns nullopt when either class is empty (the AUC is undefined). Throws
/// std::invalid_argument when the sizes differ, a label is neither 0 nor 1, or a score is NaN.
/// Cost O(n log n).
std::optional<double> roc_auc(std::span<const double> scores, std::span<const float> labels);

/// The first generator iteration of the held-out batches: held-out batch k is, for every rank r
/// of devices.count, BatchGenerator::make(kHeldOutFirstIteration + k, r). Training uses
/// iterations 0 .. warmup_steps + steps - 1, far below it, so the held-out samples are drawn
/// from streams (input.h: seeded by seed, iteration, rank, feature) training never drew from.
constexpr int64_t kHeldOutFirstIteration = int64_t{1} << 40;

/// The held-out batches evaluated by default (TrainerOptions::held_out_batches): 4 global
/// batches, 4 x devices.count x batch_size samples (criteo_kaggle: 8,192).
constexpr int64_t kDefaultHeldOutBatches = 4;

/// A held-out evaluation's result.
struct HeldOutEval {
  int64_t batches = 0;          ///< global batches (each devices.count local batches)
  int64_t samples = 0;          ///< batches x devices.count x batch_size
  int64_t positives = 0;        ///< samples labelled 1
  int64_t first_iteration = kHeldOutFirstIteration;
  double loss = 0;              ///< mean BCE-with-logits over the samples (nats)
  std::optional<double> auc;    ///< roc_auc of the logits; nullopt when one class is absent
  std::vector<float> logits;    ///< per sample, batch by batch, rank by rank, sample order
  std::vector<float> labels;    ///< the same order, 0 or 1
};

/// Reads row `row` (after hashing: in [0, TableSpec::rows())) of table `table` (spec order) as
/// the model stores it, decoded to fp32, into out[0, embedding_dim).
using TableRowReader = std::function<void(int table, int64_t row, float* out)>;

/// Why evaluate_held_out cannot evaluate `spec` ("" when it can): file input (the teacher that
/// labels generated batches does not label a file's samples) or an lm_embedding workload.
std::string held_out_unsupported(const WorkloadSpec& spec);

/// Evaluates the model given by `row_of` (its tables) and `dense_params` (DenseModel::params()
/// of the trained dense part; the fixed projection when spec.dense is null) on `batches` global
/// held-out batches (see kHeldOutFirstIteration). Throws std::invalid_argument when batches < 1,
/// dense_params has the wrong size, or held_out_unsupported(spec) is not empty; InvalidIdsError
/// as training would under invalid_ids error. Cost: batches x devices.count dense forward and
/// backward passes of batch_size samples, plus one row read per id.
/// `cancel` (the run's Ctrl-C / SIGTERM flag; may be null) is read before every global batch:
/// set, the evaluation stops and throws HeldOutCancelled (tester46 F14: a SIGTERM during a 2-minute
/// evaluation was acknowledged and then ignored until it ended). `progress` (may be empty) is
/// called after every global batch with (batches done, batches).
HeldOutEval evaluate_held_out(const WorkloadSpec& spec, std::span<const float> dense_params, const TableRowReader& row_of,
                              int64_t batches, const std::atomic<bool>* cancel = nullptr,
                              const std::function<void(int64_t, int64_t)>& progress = {});

/// Thrown by evaluate_held_out when its `cancel` flag is set; what() says after how many batches.
class HeldOutCancelled : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace embedscope::engine
