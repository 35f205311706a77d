#include "low_rank_reference.h"

#include <cmath>

#include "embedscope/engine/input/input.h"
#include "embedscope/engine/model/low_rank.h"
#include "embedscope/engine/quant/quant.h"

namespace embedscope::engine::reference_detail {

namespace {
double stored(OptimizerStateType t, double v) {
  switch (t) {
    case OptimizerStateType::fp32: return v;
    case OptimizerStateType::fp16: return round_to_precision(static_cast<float>(v), CommPrecision::fp16);
    case OptimizerStateType::bf16: return round_to_precision(static_cast<float>(v), CommPrecision::bf16);
  }
  return v;
}

// The row update of w[0, n) by g[0, n) with state m1 / m2 at row index `row` (rowwise: one
// value a row; adam: n values a row).
void update_row(const OptimizerSpec& opt, int64_t iteration, OptimizerStateType st, double* w, const double* g,
                int64_t n, std::vector<double>& m1, std::vector<double>& m2, int64_t row) {
  const double lr = opt.learning_rate, eps = opt.eps;
  switch (opt.type) {
    case OptimizerType::sgd:
      for (int64_t c = 0; c < n; ++c) w[c] -= lr * g[c];
      return;
    case OptimizerType::rowwise_adagrad: {
      double sq = 0;
      for (int64_t c = 0; c < n; ++c) sq += g[c] * g[c];
      double& m = m1[static_cast<size_t>(row)];
      m += sq / static_cast<double>(n);
      for (int64_t c = 0; c < n; ++c) w[c] -= lr * g[c] / (std::sqrt(m) + eps);
      m = stored(st, m);
      return;
    }
    case OptimizerType::adam: {
      const double b1 = opt.beta1, b2 = opt.beta2;
      const double c1 = 1 - std::pow(b1, static_cast<double>(iteration));
      const double c2 = 1 - std::pow(b2, static_cast<double>(iteration));
      for (int64_t c = 0; c < n; ++c) {
        const size_t q = static_cast<size_t>(row * n + c);
        m1[q] = b1 * m1[q] + (1 - b1) * g[c];
        m2[q] = b2 * m2[q] + (1 - b2) * g[c] * g[c];
        w[c] -= lr * (m1[q] / c1) / (std::sqrt(m2[q] / c2) + eps);
        m1[q] = stored(st, m1[q]);
        m2[q] = stored(st, m2[q]);
      }
      return;
    }
  }
}
}  // namespace

LowRankTable make_low_rank_table(const WorkloadSpec& spec, int t) {
  const TableSpec& ts = spec.tables[static_cast<size_t>(t)];
  LowRankTable lr;
  lr.rows = ts.rows();
  lr.r = ts.low_rank_dim;
  lr.dim = ts.embedding_dim;
  lr.state_type = ts.optimizer_state_type;
  lr.a.resize(static_cast<size_t>(lr.rows * lr.r));
  for (int64_t i = 0; i < lr.rows; ++i)
    for (int64_t k = 0; k < lr.r; ++k)
      lr.a[static_cast<size_t>(i * lr.r + k)] = initial_weight(spec.seed, t, i, k, lr.rows);
  lr.b.resize(static_cast<size_t>(lr.r * lr.dim));
  for (int64_t k = 0; k < lr.r; ++k)
    for (int64_t c = 0; c < lr.dim; ++c)
      lr.b[static_cast<size_t>(k * lr.dim + c)] = low_rank_initial_b(spec.seed, t, k, c, lr.r);
  const bool adam = spec.optimizer.type == OptimizerType::adam;
  lr.a_m1.assign(adam ? lr.a.size() : static_cast<size_t>(lr.rows), 0.0);
  lr.a_m2.assign(adam ? lr.a.size() : 0, 0.0);
  lr.b_m1.assign(adam ? lr.b.size() : static_cast<size_t>(lr.r), 0.0);
  lr.b_m2.assign(adam ? lr.b.size() : 0, 0.0);
  return lr;
}

void materialize(const LowRankTable& lr, std::vector<float>& e) {
  e.assign(static_cast<size_t>(lr.rows * lr.dim), 0.0f);
  for (int64_t i = 0; i < lr.rows; ++i)
    for (int64_t c = 0; c < lr.dim; ++c) {
      double v = 0;
      for (int64_t k = 0; k < lr.r; ++k) v += lr.a[static_cast<size_t>(i * lr.r + k)] * lr.b[static_cast<size_t>(k * lr.dim + c)];
      e[static_cast<size_t>(i * lr.dim + c)] = static_cast<float>(v);
    }
}

void low_rank_step(const OptimizerSpec& opt, int64_t iteration, LowRankTable& lr, const std::vector<double>& grad,
                   const std::set<int64_t>& touched) {
  if (touched.empty()) return;
  const int64_t r = lr.r, D = lr.dim;
  // both gradients from the factors before the step
  std::vector<double> da(touched.size() * static_cast<size_t>(r), 0.0), db(lr.b.size(), 0.0);
  size_t u = 0;
  for (int64_t i : touched) {
    for (int64_t k = 0; k < r; ++k) {
      double s = 0;
      for (int64_t c = 0; c < D; ++c) {
        const double g = grad[static_cast<size_t>(i * D + c)];
        s += g * lr.b[static_cast<size_t>(k * D + c)];
        db[static_cast<size_t>(k * D + c)] += lr.a[static_cast<size_t>(i * r + k)] * g;
      }
      da[u * static_cast<size_t>(r) + static_cast<size_t>(k)] = s;
    }
    ++u;
  }
  u = 0;
  for (int64_t i : touched)
    update_row(opt, iteration, lr.state_type, lr.a.data() + i * r, da.data() + (u++) * static_cast<size_t>(r), r, lr.a_m1,
               lr.a_m2, i);
  for (int64_t k = 0; k < r; ++k)
    update_row(opt, iteration, lr.state_type, lr.b.data() + k * D, db.data() + k * D, D, lr.b_m1, lr.b_m2, k);
}

}  // namespace embedscope::engine::reference_detail
