#include "embedscope/engine/reference/reference.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <string>

#include "embedscope/engine/comm/gloo_process_group.h"
#include "embedscope/engine/input/hashing.h"
#include "embedscope/engine/model/dense.h"
#include "embedscope/engine/quant/row_codec.h"
#include "low_rank_reference.h"

namespace embedscope::engine {

namespace {
// The values a row segment x[0, n) holds once stored as `t` (TableSpec::data_type), computed
// here in double from the layouts' definitions (quant/row_codec.h), not by the codec the kernels
// use: fp16 / bf16 round each value to nearest even; int8 is FBGEMM's fused 8-bit row-wise code,
// scale = (max - min) / 255 and bias = min kept as fp32, q = round((x - min) * 255 / (max - min +
// 1e-8)), value q * scale + bias; int4 its fused 4-bit code, bias = fp16(min), scale =
// fp16((max - bias) / 15) (1 if that is 0), q = round((x - bias) / scale) in [0, 15], value
// scale q + bias. The kernels compute q in fp32, so a value exactly between two codes may land
// one code apart (the parity tests allow one unit).
// With `sr` (TableSpec::stochastic_rounding, an update's rounding): fp16 / bf16 values go to
// the neighbour away from zero with probability f, the fraction of the grid step past the one
// toward zero (grid step 2^(e - 10) fp16, 2^(e - 7) bf16 for |x| in [2^e, 2^(e+1)), e clamped
// below at -14 / -126), and int8 / int4 codes to floor(t) + 1 with probability t - floor(t):
// "with probability p" is u < p, u the value's number from quant/row_codec.h
// (stochastic_rounding_uniform of the row's hash and the global column), the one shared
// definition of the random numbers.
struct StoreRounding {
  uint64_t row_hash = 0;  // stochastic_rounding_row_hash(seed, table, row, iteration)
  int64_t col0 = 0;       // global column of x[0]
  double u(int64_t c) const { return stochastic_rounding_uniform(row_hash, col0 + c); }
};

double stochastic_float(double x, int mantissa_bits, int min_exponent, double u) {
  if (x == 0) return x;
  int e = 0;
  std::frexp(std::abs(x), &e);  // |x| in [2^(e-1), 2^e)
  const double step = std::ldexp(1.0, std::max(e - 1, min_exponent) - mantissa_bits);
  const double k = std::floor(std::abs(x) / step), f = std::abs(x) / step - k;
  return std::copysign((u < f ? k + 1 : k) * step, x);
}

void store_as(TableDataType t, float* x, int64_t n, const StoreRounding* sr = nullptr) {
  // a code from t >= 0: nearest (ties to even), or stochastic
  auto code = [sr](double v, int64_t c, double qmax) {
    const double q = sr ? std::floor(v) + (sr->u(c) < v - std::floor(v) ? 1.0 : 0.0) : std::nearbyint(v);
    return std::clamp(q, 0.0, qmax);
  };
  switch (t) {
    case TableDataType::fp32: return;
    case TableDataType::fp16:
    case TableDataType::bf16: {
      const bool half = t == TableDataType::fp16;
      const CommPrecision p = half ? CommPrecision::fp16 : CommPrecision::bf16;
      for (int64_t c = 0; c < n; ++c)
        x[c] = sr ? static_cast<float>(stochastic_float(x[c], half ? 10 : 7, half ? -14 : -126, sr->u(c)))
                  : round_to_precision(x[c], p);
      return;
    }
    case TableDataType::int8: {
      double lo = n > 0 ? x[0] : 0.0, hi = lo;
      for (int64_t c = 1; c < n; ++c) {
        lo = std::min(lo, static_cast<double>(x[c]));
        hi = std::max(hi, static_cast<double>(x[c]));
      }
      const double scale = static_cast<float>((hi - lo) / 255.0), bias = static_cast<float>(lo);
      for (int64_t c = 0; c < n; ++c)
        x[c] = static_cast<float>(code((x[c] - lo) * 255.0 / (hi - lo + 1e-8), c, 255.0) * scale + bias);
      return;
    }
    case TableDataType::int4: {
      double lo = n > 0 ? x[0] : 0.0, hi = lo;
      for (int64_t c = 1; c < n; ++c) {
        lo = std::min(lo, static_cast<double>(x[c]));
        hi = std::max(hi, static_cast<double>(x[c]));
      }
      const double bias = round_to_precision(static_cast<float>(lo), CommPrecision::fp16);
      double scale = hi == bias ? 1.0 : round_to_precision(static_cast<float>((hi - bias) / 15.0), CommPrecision::fp16);
      if (scale == 0) scale = 1.0;
      for (int64_t c = 0; c < n; ++c) x[c] = static_cast<float>(scale * code((x[c] - bias) / scale, c, 15.0) + bias);
      return;
    }
  }
}

// The value an optimizer state entry holds once stored as `t` (TableSpec::optimizer_state_type),
// after the step has used it: fp32 keeps the double (the reference's own precision); fp16 /
// bf16 round it to nearest even. The weight step of the same update used the unrounded value,
// as the kernels do (kernels.h, apply_row_optimizer).
double stored_state(OptimizerStateType t, double v) {
  switch (t) {
    case OptimizerStateType::fp32: return v;
    case OptimizerStateType::fp16: return round_to_precision(static_cast<float>(v), CommPrecision::fp16);
    case OptimizerStateType::bf16: return round_to_precision(static_cast<float>(v), CommPrecision::bf16);
  }
  return v;
}
}  // namespace

ReferenceResult run_reference(const WorkloadSpec& spec, int64_t iterations, const ShardingPlan* plan,
                              const std::function<std::optional<Batch>(int64_t, int)>& batch_source,
                              const std::vector<ColumnGroupChange>& column_groups) {
  const int W = spec.devices.count;
  const int64_t B = spec.batch_size;
  const int F = static_cast<int>(spec.features.size());
  const size_t T = spec.tables.size();
  std::vector<int64_t> dims;
  for (int f = 0; f < F; ++f) dims.push_back(spec.tables[static_cast<size_t>(spec.table_of_feature(static_cast<size_t>(f)))].embedding_dim);
  const std::unique_ptr<BatchSource> source = make_batch_source(spec);
  DenseModel dense(spec, dims);
  ReferenceResult res;
  // tables, optimizer state
  std::vector<std::vector<std::pair<int64_t, int64_t>>> groups(T);  // column groups (offset, width)
  for (size_t t = 0; t < T; ++t) {
    const auto& ts = spec.tables[t];
    std::vector<float> w(static_cast<size_t>(ts.rows() * ts.embedding_dim));
    for (int64_t r = 0; r < ts.rows(); ++r)
      for (int64_t c = 0; c < ts.embedding_dim; ++c)
        w[static_cast<size_t>(r * ts.embedding_dim + c)] = initial_weight(spec.seed, static_cast<int>(t), r, c, ts.rows());
    res.tables.push_back(std::move(w));
    // the plan's distinct column ranges (column_wise, table_column_wise shards, grid_shard
    // blocks; one full-width range for the other types)
    if (plan) {
      for (const auto& s : plan->tables[t].shards) groups[t].push_back({s.col_offset, s.num_cols});
      std::sort(groups[t].begin(), groups[t].end());
      groups[t].erase(std::unique(groups[t].begin(), groups[t].end()), groups[t].end());
    } else {
      groups[t].push_back({0, ts.embedding_dim});
    }
    // reduced-precision tables start from the stored form of the fp32 initial rows, one
    // encoded segment per column shard (each shard's rows carry their own int8 scale and bias)
    auto& tw = res.tables.back();
    for (int64_t r = 0; r < ts.rows(); ++r)
      for (const auto& [c0, width] : groups[t]) store_as(ts.data_type, tw.data() + r * ts.embedding_dim + c0, width);
  }
  // low-rank tables: the factors in double; res.tables[t] always holds A B (low_rank_reference.h)
  std::vector<std::optional<reference_detail::LowRankTable>> low_rank(T);
  for (size_t t = 0; t < T; ++t)
    if (spec.tables[t].low_rank_dim > 0) {
      low_rank[t] = reference_detail::make_low_rank_table(spec, static_cast<int>(t));
      reference_detail::materialize(*low_rank[t], res.tables[t]);
    }
  std::vector<std::vector<double>> m1(T), m2(T);
  for (size_t t = 0; t < T; ++t) {
    const auto& ts = spec.tables[t];
    const size_t n = static_cast<size_t>(ts.rows() * ts.embedding_dim);
    m1[t].assign(spec.optimizer.type == OptimizerType::adam ? n : static_cast<size_t>(ts.rows()) * groups[t].size(), 0.0);
    m2[t].assign(spec.optimizer.type == OptimizerType::adam ? n : 0, 0.0);
  }

  // semi_sync: batch it >= 1 is looked up in the tables as they were before batch it-1's update
  const bool semi_sync = spec.pipeline == PipelineKind::semi_sync;
  std::vector<std::vector<float>> before_last_update;
  // qcomms: sharded tables' pooled outputs and pooled gradients are rounded as the output dist
  // and the gradient dist round them; data-parallel tables communicate neither.
  auto communicated = [&](int t) { return !plan || plan->tables[static_cast<size_t>(t)].type != ShardingType::data_parallel; };
  const CommPrecision fwd = spec.qcomms.forward_precision, bwd = spec.qcomms.backward_precision;
  for (const ColumnGroupChange& c : column_groups) {
    if (c.table < 0 || static_cast<size_t>(c.table) >= T)
      throw std::invalid_argument("run_reference: column group change of table " + std::to_string(c.table));
    int64_t cols = 0;
    for (const auto& [c0, width] : c.groups) {
      if (c0 != cols || width <= 0) throw std::invalid_argument("run_reference: column groups do not tile the columns");
      cols += width;
    }
    if (cols != spec.tables[static_cast<size_t>(c.table)].embedding_dim)
      throw std::invalid_argument("run_reference: column groups do not cover the columns");
  }
  for (int64_t it = 0; it < iterations; ++it) {
    for (const ColumnGroupChange& c : column_groups) {  // per-row state regrouped: weighted means
      if (c.iteration != it) continue;
      const size_t t = static_cast<size_t>(c.table);
      if (spec.optimizer.type == OptimizerType::rowwise_adagrad) {
        const size_t G = groups[t].size(), H = c.groups.size();
        const int64_t rows = spec.tables[t].rows();
        std::vector<double> next(static_cast<size_t>(rows) * H, 0.0);
        for (int64_t r = 0; r < rows; ++r)
          for (size_t h = 0; h < H; ++h) {
            const auto [n0, nw] = c.groups[h];
            double v = 0;
            for (size_t g = 0; g < G; ++g) {
              const auto [o0, ow] = groups[t][g];
              const int64_t overlap = std::min(n0 + nw, o0 + ow) - std::max(n0, o0);
              if (overlap > 0) v += m1[t][static_cast<size_t>(r) * G + g] * static_cast<double>(overlap) / static_cast<double>(nw);
            }
            next[static_cast<size_t>(r) * H + h] = v;
          }
        m1[t] = std::move(next);
      }
      groups[t] = c.groups;
    }
    const auto& lookup_tables = semi_sync && it > 0 ? before_last_update : res.tables;
    std::vector<std::vector<double>> grad(T);
    std::vector<std::set<int64_t>> touched(T);
    for (size_t t = 0; t < T; ++t) grad[t].assign(res.tables[t].size(), 0.0);
    std::vector<double> dense_grad(static_cast<size_t>(dense.num_params()), 0.0);
    double loss = 0;
    res.pooled.emplace_back();
    for (int r = 0; r < W; ++r) {
      std::optional<Batch> given = batch_source ? batch_source(it, r) : std::nullopt;
      Batch batch = given ? std::move(*given) : source->make(it, r);
      apply_invalid_id_policy(spec, batch.kjt, r, batch.origin);
      apply_hashing(spec, batch.kjt);  // hashed tables: ids become their rows (input/hashing.h)
      const auto off = batch.kjt.offsets();
      std::vector<std::vector<float>> pooled(static_cast<size_t>(F)), dpooled(static_cast<size_t>(F));
      for (int f = 0; f < F; ++f) {
        const int t = spec.table_of_feature(static_cast<size_t>(f));
        const auto& ts = spec.tables[static_cast<size_t>(t)];
        const int64_t D = ts.embedding_dim;
        pooled[static_cast<size_t>(f)].assign(static_cast<size_t>(B * D), 0.0f);
        dpooled[static_cast<size_t>(f)].assign(static_cast<size_t>(B * D), 0.0f);
        for (int64_t b = 0; b < B; ++b) {
          const int64_t begin = off[static_cast<size_t>(f * B + b)], end = off[static_cast<size_t>(f * B + b + 1)];
          for (int64_t c = 0; c < D; ++c) {
            double acc = 0;
            for (int64_t i = begin; i < end; ++i)
              acc += lookup_tables[static_cast<size_t>(t)][static_cast<size_t>(batch.kjt.values[static_cast<size_t>(i)] * D + c)];
            if (ts.pooling == Pooling::mean && end > begin) acc /= static_cast<double>(end - begin);
            float v = static_cast<float>(acc);
            if (communicated(t)) v = round_to_precision(v, fwd);
            pooled[static_cast<size_t>(f)][static_cast<size_t>(b * D + c)] = v;
          }
        }
      }
      std::vector<const float*> pp;
      std::vector<float*> dp;
      for (int f = 0; f < F; ++f) {
        pp.push_back(pooled[static_cast<size_t>(f)].data());
        dp.push_back(dpooled[static_cast<size_t>(f)].data());
      }
      loss += dense.forward_backward(B, batch.dense.data(), pp, batch.labels.data(), dp);
      for (size_t i = 0; i < dense_grad.size(); ++i) dense_grad[i] += dense.grads()[i];
      // d loss_global / d row: (1/W) d loss_rank / d pooled, spread over the bag (1/len for mean)
      for (int f = 0; f < F; ++f) {
        const int t = spec.table_of_feature(static_cast<size_t>(f));
        const auto& ts = spec.tables[static_cast<size_t>(t)];
        const int64_t D = ts.embedding_dim;
        for (int64_t b = 0; b < B; ++b) {
          const int64_t begin = off[static_cast<size_t>(f * B + b)], end = off[static_cast<size_t>(f * B + b + 1)];
          const double mean = ts.pooling == Pooling::mean && end > begin ? 1.0 / static_cast<double>(end - begin) : 1.0;
          const double scale = mean / W;
          const bool rounded = communicated(t) && bwd != CommPrecision::fp32;
          for (int64_t i = begin; i < end; ++i) {
            const int64_t id = batch.kjt.values[static_cast<size_t>(i)];
            touched[static_cast<size_t>(t)].insert(id);
            for (int64_t c = 0; c < D; ++c) {
              const float g = dpooled[static_cast<size_t>(f)][static_cast<size_t>(b * D + c)];
              // rounded: the gradient of the global mean, g / W, as the gradient dist sends it
              grad[static_cast<size_t>(t)][static_cast<size_t>(id * D + c)] +=
                  rounded ? mean * round_to_precision(g * (1.0f / static_cast<float>(W)), bwd) : scale * g;
            }
          }
        }
      }
      res.pooled.back().push_back(std::move(pooled));
    }
    if (semi_sync) before_last_update = res.tables;
    // fused optimizer on the rows the global batch touched
    const double lr = spec.optimizer.learning_rate, eps = spec.optimizer.eps;
    const double b1 = spec.optimizer.beta1, b2 = spec.optimizer.beta2;
    for (size_t t = 0; t < T; ++t) {
      const int64_t D = spec.tables[t].embedding_dim;
      auto& w = res.tables[t];
      if (low_rank[t]) {
        reference_detail::low_rank_step(spec.optimizer, it + 1, *low_rank[t], grad[t], touched[t]);
        reference_detail::materialize(*low_rank[t], w);
        continue;
      }
      for (int64_t row : touched[t]) {
        const size_t at = static_cast<size_t>(row * D);
        switch (spec.optimizer.type) {
          case OptimizerType::sgd:
            for (int64_t c = 0; c < D; ++c) w[at + static_cast<size_t>(c)] -= static_cast<float>(lr * grad[t][at + static_cast<size_t>(c)]);
            break;
          case OptimizerType::rowwise_adagrad:
            for (size_t g = 0; g < groups[t].size(); ++g) {
              const auto [c0, width] = groups[t][g];
              double sq = 0;
              for (int64_t c = c0; c < c0 + width; ++c) sq += grad[t][at + static_cast<size_t>(c)] * grad[t][at + static_cast<size_t>(c)];
              double& m = m1[t][static_cast<size_t>(row) * groups[t].size() + g];
              m += sq / static_cast<double>(width);
              for (int64_t c = c0; c < c0 + width; ++c)
                w[at + static_cast<size_t>(c)] -= static_cast<float>(lr * grad[t][at + static_cast<size_t>(c)] / (std::sqrt(m) + eps));
              m = stored_state(spec.tables[t].optimizer_state_type, m);
            }
            break;
          case OptimizerType::adam: {
            const double c1 = 1 - std::pow(b1, static_cast<double>(it + 1)), c2 = 1 - std::pow(b2, static_cast<double>(it + 1));
            for (int64_t c = 0; c < D; ++c) {
              const size_t q = at + static_cast<size_t>(c);
              const double g = grad[t][q];
              m1[t][q] = b1 * m1[t][q] + (1 - b1) * g;
              m2[t][q] = b2 * m2[t][q] + (1 - b2) * g * g;
              w[q] -= static_cast<float>(lr * (m1[t][q] / c1) / (std::sqrt(m2[t][q] / c2) + eps));
              m1[t][q] = stored_state(spec.tables[t].optimizer_state_type, m1[t][q]);
              m2[t][q] = stored_state(spec.tables[t].optimizer_state_type, m2[t][q]);
            }
            break;
          }
        }
        // the updated row stored again in the table's precision (no fp32 master copy), rounded
        // to nearest or stochastically (TableSpec::stochastic_rounding)
        const TableSpec& ts = spec.tables[t];
        const bool stochastic = ts.uses_stochastic_rounding() && ts.data_type != TableDataType::fp32;
        for (const auto& [c0, width] : groups[t]) {
          const StoreRounding sr{stochastic_rounding_row_hash(spec.seed, static_cast<int>(t), row, it + 1), c0};
          store_as(ts.data_type, w.data() + at + static_cast<size_t>(c0), width, stochastic ? &sr : nullptr);
        }
      }
    }
    std::vector<float> avg(dense_grad.size());
    for (size_t i = 0; i < avg.size(); ++i) avg[i] = static_cast<float>(dense_grad[i] / W);
    const double dlr = spec.optimizer.dense_learning_rate > 0 ? spec.optimizer.dense_learning_rate : spec.optimizer.learning_rate;
    dense.sgd_step(static_cast<float>(dlr), avg.data());
    res.loss.push_back(loss / W);
  }
  res.dense_params = dense.params();
  return res;
}

}  // namespace embedscope::engine
