// Held-out evaluation of a trained model (model/held_out.h): ROC AUC by ranks, and the forward
// pass of the trained tables and dense part on generated batches training never saw.
#include "embedscope/engine/model/held_out.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "embedscope/engine/input/hashing.h"
#include "embedscope/engine/input/input.h"
#include "embedscope/engine/model/dense.h"

namespace embedscope::engine {

std::optional<double> roc_auc(std::span<const double> scores, std::span<const float> labels) {
  if (scores.size() != labels.size())
    throw std::invalid_argument(fmt::format("roc_auc: {} scores but {} labels", scores.size(), labels.size()));
  const size_t n = scores.size();
  double n_pos = 0;
  for (size_t i = 0; i < n; ++i) {
    if (labels[i] != 0.0f && labels[i] != 1.0f)
      throw std::invalid_argument(fmt::format("roc_auc: label {} is {}, not 0 or 1", i, labels[i]));
    if (std::isnan(scores[i])) throw std::invalid_argument(fmt::format("roc_auc: score {} is NaN", i));
    n_pos += labels[i];
  }
  const double n_neg = static_cast<double>(n) - n_pos;
  if (n_pos == 0 || n_neg == 0) return std::nullopt;
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // R+: the positives' ranks, a run of tied scores at 0-based positions [i, j) sharing the mean
  // 1-based rank (i + 1 + j) / 2
  double rank_sum = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    const double mean_rank = static_cast<double>(i + 1 + j) / 2.0;
    for (size_t k = i; k < j; ++k) rank_sum += labels[order[k]] * mean_rank;
    i = j;
  }
  return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg);
}

std::string held_out_unsupported(const WorkloadSpec& spec) {
  if (spec.input.kind != InputKind::synthetic)
    return fmt::format("the input is a file ({}): the generator's teacher labels only generated batches",
                       enum_name(spec.input.kind));
  return {};
}

HeldOutEval evaluate_held_out(const WorkloadSpec& spec, std::span<const float> dense_params, const TableRowReader& row_of,
                              int64_t batches, const std::atomic<bool>* cancel,
                              const std::function<void(int64_t, int64_t)>& progress) {
  if (batches < 1) throw std::invalid_argument(fmt::format("evaluate_held_out: batches must be >= 1, got {}", batches));
  if (const std::string why = held_out_unsupported(spec); !why.empty())
    throw std::invalid_argument("evaluate_held_out: " + why);
  const int F = static_cast<int>(spec.features.size());
  std::vector<int64_t> dims(static_cast<size_t>(F));
  for (int f = 0; f < F; ++f)
    dims[static_cast<size_t>(f)] = spec.tables[static_cast<size_t>(spec.table_of_feature(static_cast<size_t>(f)))].embedding_dim;
  DenseModel dense(spec, dims);
  if (dense_params.size() != dense.params().size())
    throw std::invalid_argument(fmt::format("evaluate_held_out: {} dense parameters given, the model has {}",
                                            dense_params.size(), dense.params().size()));
  std::copy(dense_params.begin(), dense_params.end(), dense.params().begin());
  // the logits of each forward pass, taken where the model computes its loss (the loss and its
  // gradient as the host computes them; nothing is updated)
  HeldOutEval ev;
  ev.batches = batches;
  const float* logits_seen = nullptr;
  DenseModel::LinearOps ops;
  ops.loss = [&](int64_t B, const float* logits, const float* labels, float* dlogits) {
    logits_seen = logits;
    const double loss = bce_with_logits(B, logits, labels, dlogits);
    ev.logits.insert(ev.logits.end(), logits, logits + B);
    return loss;
  };
  dense.set_linear_ops(std::move(ops));
  const BatchGenerator gen(spec);
  const int64_t B = spec.batch_size;
  const int W = spec.devices.count;
  double loss_sum = 0;
  std::vector<std::vector<float>> pooled(static_cast<size_t>(F)), dpooled(static_cast<size_t>(F));
  int64_t max_dim = 0;
  for (int64_t d : dims) max_dim = std::max(max_dim, d);
  std::vector<float> row(static_cast<size_t>(max_dim));
  std::vector<double> acc(static_cast<size_t>(max_dim));
  for (int64_t k = 0; k < batches; ++k) {
    if (progress && k > 0) progress(k, batches);
    if (cancel && cancel->load())
      throw HeldOutCancelled(fmt::format("cancelled after {} of its {} batches", k, batches));
    for (int r = 0; r < W; ++r) {
      Batch batch = gen.make(ev.first_iteration + k, r);
      apply_invalid_id_policy(spec, batch.kjt, r, batch.origin);
      apply_hashing(spec, batch.kjt);  // hashed tables: ids become their rows
      const auto off = batch.kjt.offsets();
      for (int f = 0; f < F; ++f) {
        const int t = spec.table_of_feature(static_cast<size_t>(f));
        const int64_t D = dims[static_cast<size_t>(f)];
        const bool mean = spec.tables[static_cast<size_t>(t)].pooling == Pooling::mean;
        auto& out = pooled[static_cast<size_t>(f)];
        out.assign(static_cast<size_t>(B * D), 0.0f);
        dpooled[static_cast<size_t>(f)].assign(static_cast<size_t>(B * D), 0.0f);
        for (int64_t b = 0; b < B; ++b) {
          const int64_t begin = off[static_cast<size_t>(f * B + b)], end = off[static_cast<size_t>(f * B + b + 1)];
          std::fill(acc.begin(), acc.begin() + D, 0.0);
          for (int64_t i = begin; i < end; ++i) {
            row_of(t, batch.kjt.values[static_cast<size_t>(i)], row.data());
            for (int64_t c = 0; c < D; ++c) acc[static_cast<size_t>(c)] += row[static_cast<size_t>(c)];
          }
          const double scale = mean && end > begin ? 1.0 / static_cast<double>(end - begin) : 1.0;
          for (int64_t c = 0; c < D; ++c) out[static_cast<size_t>(b * D + c)] = static_cast<float>(acc[static_cast<size_t>(c)] * scale);
        }
      }
      std::vector<const float*> pp;
      std::vector<float*> dp;
      for (int f = 0; f < F; ++f) {
        pp.push_back(pooled[static_cast<size_t>(f)].data());
        dp.push_back(dpooled[static_cast<size_t>(f)].data());
      }
      logits_seen = nullptr;
      loss_sum += dense.forward_backward(B, batch.dense.data(), pp, batch.labels.data(), dp);
      if (!logits_seen) throw std::logic_error("evaluate_held_out: the dense model computed no loss");
      ev.labels.insert(ev.labels.end(), batch.labels.begin(), batch.labels.end());
    }
  }
  if (progress) progress(batches, batches);
  ev.samples = static_cast<int64_t>(ev.labels.size());
  for (float y : ev.labels) ev.positives += y == 1.0f ? 1 : 0;
  // every local batch has B samples: the mean of the batch means is the mean over the samples
  ev.loss = loss_sum / static_cast<double>(batches * W);
  const std::vector<double> scores(ev.logits.begin(), ev.logits.end());
  ev.auc = roc_auc(scores, ev.labels);
  return ev;
}

}  // namespace embedscope::engine
