#include "embedscope/engine/model/dense.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

#include "embedscope/engine/input/input.h"
#include "embedscope/engine/kernels/dense_core.h"
#include "embedscope/engine/quant/dense_precision.h"

// OpenBLAS's own thread pool would fight the rank threads for cores: ranks are the
// parallelism. Weak, so another BLAS links too.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace embedscope::engine {

namespace {
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb),
              beta, c, static_cast<int>(ldc));
}

// A copy of the n floats at p rounded to `precision` (quant/dense_precision.h).
std::vector<float> dense_rounded_copy(const float* p, int64_t n, DensePrecision precision) {
  std::vector<float> r(static_cast<size_t>(std::max<int64_t>(n, 0)));
  round_dense_values(p, n, precision, r.data());
  return r;
}

// gemm at dense.precision: fp32 is gemm itself on the operands as given; otherwise A (row-major,
// (ta ? k : m) rows of lda) and B ((tb ? n : k) rows of ldb) are rounded copies (autocast's casts
// of a matmul's inputs), the accumulation and C fp32.
void precision_gemm(DensePrecision precision, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                    int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (precision == DensePrecision::fp32 || m == 0 || n == 0) {
    gemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // the floats an operand of rows x cols (leading dimension ld) spans: (rows - 1) ld + cols
  const auto span = [](int64_t rows, int64_t cols, int64_t ld) { return rows > 0 && cols > 0 ? (rows - 1) * ld + cols : 0; };
  const std::vector<float> ra = dense_rounded_copy(a, ta ? span(k, m, lda) : span(m, k, lda), precision);
  const std::vector<float> rb = dense_rounded_copy(b, tb ? span(n, k, ldb) : span(k, n, ldb), precision);
  gemm(ta, tb, m, n, k, ra.data(), lda, rb.data(), ldb, beta, c, ldc);
}
}  // namespace

DenseModel::DenseModel(const WorkloadSpec& spec, std::vector<int64_t> feature_dims, bool layout_only)
    : spec_(spec), dims_(std::move(feature_dims)) {
  static const bool once = [] {
    if (openblas_set_num_threads) openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
  std::mt19937_64 rng(mix64(spec.seed ^ 0xde115eedULL));
  size_t n = 0;
  auto alloc = [&](size_t count) { size_t at = n; n += count; return at; };
  int64_t sum_dims = 0;
  for (auto d : dims_) sum_dims += d;
  const auto F = static_cast<int64_t>(dims_.size());
  if (spec.dense) {
    const DenseSpec& d = *spec.dense;
    int in = d.num_dense_features;
    for (int w : d.bottom_mlp) {
      bottom_.push_back({in, w, 0, 0, true});
      bottom_.back().w = alloc(static_cast<size_t>(in * w));
      bottom_.back().b = alloc(static_cast<size_t>(w));
      in = w;
    }
    inter_in_ = in + sum_dims;
    switch (d.interaction) {
      case Interaction::dot: inter_out_ = in + (F + 1) * F / 2; break;
      case Interaction::cat: inter_out_ = inter_in_; break;
      case Interaction::dcn:
        inter_out_ = inter_in_;
        for (int l = 0; l < d.dcn_num_layers; ++l) {
          Cross c{};
          c.u = alloc(static_cast<size_t>(inter_in_ * d.dcn_low_rank_dim));
          c.v = alloc(static_cast<size_t>(inter_in_ * d.dcn_low_rank_dim));
          c.b = alloc(static_cast<size_t>(inter_in_));
          cross_.push_back(c);
        }
        break;
    }
    in = static_cast<int>(inter_out_);
    for (size_t i = 0; i < d.top_mlp.size(); ++i) {
      const int w = d.top_mlp[i];
      top_.push_back({in, w, 0, 0, i + 1 < d.top_mlp.size()});
      top_.back().w = alloc(static_cast<size_t>(in * w));
      top_.back().b = alloc(static_cast<size_t>(w));
      in = w;
    }
  }
  num_params_ = static_cast<int64_t>(n);
  if (layout_only) return;
  params_.assign(n, 0.0f);
  grads_.assign(n, 0.0f);
  auto xavier = [&](size_t at, int64_t fan_in, int64_t fan_out, size_t count) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const float bound = std::sqrt(6.0f / static_cast<float>(fan_in + fan_out));
    for (size_t i = 0; i < count; ++i) params_[at + i] = bound * u(rng);
  };
  for (const auto& l : bottom_) xavier(l.w, l.in, l.out, static_cast<size_t>(l.in * l.out));
  if (spec.dense)
    for (const auto& c : cross_) {
      const int r = spec.dense->dcn_low_rank_dim;
      xavier(c.u, inter_in_, r, static_cast<size_t>(inter_in_ * r));
      xavier(c.v, inter_in_, r, static_cast<size_t>(inter_in_ * r));
    }
  for (const auto& l : top_) xavier(l.w, l.in, l.out, static_cast<size_t>(l.in * l.out));
  if (!spec.dense) {
    // Fixed head: logit = sum_f <proj_f, pooled_f>, entries +-1/sqrt(F).
    fixed_projection_.resize(static_cast<size_t>(sum_dims));
    for (auto& p : fixed_projection_)
      p = ((rng() & 1) ? 1.0f : -1.0f) / std::sqrt(static_cast<float>(std::max<int64_t>(F, 1)));
  }
}

void linear_forward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* b, bool relu,
                    float* y, DensePrecision precision) {
  precision_gemm(precision, false, true, B, out, in, x, in, w, in, 0.0f, y, out);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t o = 0; o < out; ++o) {
      float& v = y[i * out + o];
      v += b[o];
      if (relu && v < 0) v = 0;
    }
}

void linear_backward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* y, bool relu,
                     float* dy, float* dw, float* db, float* dx, DensePrecision precision) {
  if (relu)
    for (int64_t i = 0; i < B * out; ++i)
      if (y[i] <= 0) dy[i] = 0;
  precision_gemm(precision, true, false, out, in, B, dy, out, x, in, 0.0f, dw, in);
  std::fill(db, db + out, 0.0f);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t o = 0; o < out; ++o) db[o] += dy[i * out + o];
  if (dx) precision_gemm(precision, false, false, B, in, out, dy, out, w, in, 0.0f, dx, in);
}

void DenseModel::linear_forward(const Linear& l, int64_t B, const float* x, float* y) const {
  const float *w = params_.data() + l.w, *b = params_.data() + l.b;
  if (ops_.forward)
    ops_.forward(B, l.in, l.out, x, w, b, l.relu, y);
  else
    engine::linear_forward(B, l.in, l.out, x, w, b, l.relu, y, precision());
}

void DenseModel::linear_backward(const Linear& l, int64_t B, const float* x, const float* y, float* dy, float* dx) {
  const float* w = params_.data() + l.w;
  float *dw = grads_.data() + l.w, *db = grads_.data() + l.b;
  if (ops_.backward)
    ops_.backward(B, l.in, l.out, x, w, y, l.relu, dy, dw, db, dx);
  else
    engine::linear_backward(B, l.in, l.out, x, w, y, l.relu, dy, dw, db, dx, precision());
}

double DenseModel::forward_backward(int64_t B, const float* dense_x, std::span<const float* const> pooled,
                                    const float* labels, std::span<float* const> d_pooled,
                                    const std::function<void(int64_t)>& on_grads_ready) {
  auto ready = [&](size_t from) {
    if (on_grads_ready) on_grads_ready(static_cast<int64_t>(from));
  };
  const auto F = static_cast<int64_t>(dims_.size());
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  std::vector<float> logit(static_cast<size_t>(B), 0.0f), dlogit(static_cast<size_t>(B));
  auto loss_and_grad = [&] {
    if (ops_.loss) return ops_.loss(B, logit.data(), labels, dlogit.data());
    return bce_with_logits(B, logit.data(), labels, dlogit.data());
  };

  if (!spec_.dense) {
    size_t off = 0;
    for (int64_t f = 0; f < F; ++f) {
      const int64_t d = dims_[static_cast<size_t>(f)];
      for (int64_t i = 0; i < B; ++i)
        for (int64_t c = 0; c < d; ++c) logit[static_cast<size_t>(i)] += pooled[static_cast<size_t>(f)][i * d + c] * fixed_projection_[off + static_cast<size_t>(c)];
      off += static_cast<size_t>(d);
    }
    const double loss = loss_and_grad();
    off = 0;
    for (int64_t f = 0; f < F; ++f) {
      const int64_t d = dims_[static_cast<size_t>(f)];
      for (int64_t i = 0; i < B; ++i)
        for (int64_t c = 0; c < d; ++c)
          d_pooled[static_cast<size_t>(f)][i * d + c] = dlogit[static_cast<size_t>(i)] * fixed_projection_[off + static_cast<size_t>(c)];
      off += static_cast<size_t>(d);
    }
    return loss;
  }

  const DenseSpec& ds = *spec_.dense;
  // ---- forward
  std::vector<std::vector<float>> bot(bottom_.size() + 1);
  bot[0].assign(dense_x, dense_x + B * ds.num_dense_features);
  for (size_t i = 0; i < bottom_.size(); ++i) {
    bot[i + 1].resize(static_cast<size_t>(B * bottom_[i].out));
    linear_forward(bottom_[i], B, bot[i].data(), bot[i + 1].data());
  }
  const int64_t d0 = bottom_.back().out;
  const std::vector<float>& z = bot.back();
  // interaction input: x0 = [z, pooled_0, ..., pooled_{F-1}] (B x inter_in_)
  std::vector<float> x0(static_cast<size_t>(B * inter_in_));
  for (int64_t i = 0; i < B; ++i) {
    float* row = x0.data() + i * inter_in_;
    std::copy_n(z.data() + i * d0, d0, row);
    int64_t off = d0;
    for (int64_t f = 0; f < F; ++f) {
      const int64_t d = dims_[static_cast<size_t>(f)];
      std::copy_n(pooled[static_cast<size_t>(f)] + i * d, d, row + off);
      off += d;
    }
  }
  std::vector<float> r(static_cast<size_t>(B * inter_out_));
  const int rank = ds.dcn_low_rank_dim;
  const DensePrecision prec = ds.precision;
  std::vector<std::vector<float>> xs, ss, cs;  // dcn: x_l, s_l, c_l per layer
  if (ds.interaction == Interaction::cat) {
    r = x0;
  } else if (ds.interaction == Interaction::dot) {
    // entities e_0 = z, e_{f+1} = pooled_f (all d0 wide); r = [z, <e_i, e_j> for i > j]
    if (ops_.dot_forward)
      ops_.dot_forward(B, F, d0, x0.data(), r.data());
    else if (precision() == DensePrecision::fp32)
      dot_interaction_forward(B, F, d0, x0.data(), r.data());
    else  // DLRM's torch.bmm under autocast: its input rounded (r's copy of z is then rounded too)
      dot_interaction_forward(B, F, d0, dense_rounded_copy(x0.data(), B * inter_in_, precision()).data(), r.data());
  } else {
    std::vector<float> x = x0;
    for (const Cross& cr : cross_) {
      std::vector<float> s(static_cast<size_t>(B * rank)), c(static_cast<size_t>(B * inter_in_));
      precision_gemm(prec, false, false, B, rank, inter_in_, x.data(), inter_in_, params_.data() + cr.v, rank, 0.0f, s.data(), rank);
      precision_gemm(prec, false, true, B, inter_in_, rank, s.data(), rank, params_.data() + cr.u, rank, 0.0f, c.data(), inter_in_);
      std::vector<float> y(x.size());
      for (int64_t i = 0; i < B; ++i)
        for (int64_t j = 0; j < inter_in_; ++j) {
          const size_t q = static_cast<size_t>(i * inter_in_ + j);
          c[q] += params_[cr.b + static_cast<size_t>(j)];
          y[q] = x0[q] * c[q] + x[q];
        }
      xs.push_back(std::move(x));
      ss.push_back(std::move(s));
      cs.push_back(std::move(c));
      x = std::move(y);
    }
    r = std::move(x);
  }
  std::vector<std::vector<float>> top(top_.size() + 1);
  top[0] = std::move(r);
  for (size_t i = 0; i < top_.size(); ++i) {
    top[i + 1].resize(static_cast<size_t>(B * top_[i].out));
    linear_forward(top_[i], B, top[i].data(), top[i + 1].data());
  }
  std::copy_n(top.back().data(), B, logit.data());
  const double loss = loss_and_grad();

  // ---- backward
  std::vector<float> dy = dlogit;
  for (size_t i = top_.size(); i-- > 0;) {
    std::vector<float> dx(static_cast<size_t>(B * top_[i].in));
    linear_backward(top_[i], B, top[i].data(), top[i + 1].data(), dy.data(), dx.data());
    ready(top_[i].w);
    dy = std::move(dx);
  }
  // dy = d r; turn it into d x0
  std::vector<float> dx0(static_cast<size_t>(B * inter_in_), 0.0f);
  if (ds.interaction == Interaction::cat) {
    dx0 = dy;
  } else if (ds.interaction == Interaction::dot) {
    if (ops_.dot_backward)
      ops_.dot_backward(B, F, d0, x0.data(), dy.data(), dx0.data());
    else if (precision() == DensePrecision::fp32)
      dot_interaction_backward(B, F, d0, x0.data(), dy.data(), dx0.data());
    else
      dot_interaction_backward(B, F, d0, dense_rounded_copy(x0.data(), B * inter_in_, precision()).data(),
                               dense_rounded_copy(dy.data(), B * inter_out_, precision()).data(), dx0.data());
  } else {
    std::vector<float> dx = dy;  // d x_L
    for (size_t l = cross_.size(); l-- > 0;) {
      const Cross& cr = cross_[l];
      const std::vector<float>& xl = xs[l];
      const std::vector<float>& s = ss[l];
      const std::vector<float>& c = cs[l];
      std::vector<float> dc(dx.size());
      float* db = grads_.data() + cr.b;
      for (int64_t i = 0; i < B; ++i)
        for (int64_t j = 0; j < inter_in_; ++j) {
          const size_t q = static_cast<size_t>(i * inter_in_ + j);
          dc[q] = dx[q] * x0[q];
          dx0[q] += dx[q] * c[q];
          db[j] += dc[q];
        }
      std::vector<float> dsv(static_cast<size_t>(B * rank));
      precision_gemm(prec, true, false, inter_in_, rank, B, dc.data(), inter_in_, s.data(), rank, 0.0f, grads_.data() + cr.u, rank);
      precision_gemm(prec, false, false, B, rank, inter_in_, dc.data(), inter_in_, params_.data() + cr.u, rank, 0.0f, dsv.data(), rank);
      precision_gemm(prec, true, false, inter_in_, rank, B, xl.data(), inter_in_, dsv.data(), rank, 0.0f, grads_.data() + cr.v, rank);
      // d x_l = d x_{l+1} (identity path) + ds V^T
      precision_gemm(prec, false, true, B, inter_in_, rank, dsv.data(), rank, params_.data() + cr.v, rank, 1.0f, dx.data(), inter_in_);
      ready(cr.u);
    }
    for (size_t q = 0; q < dx0.size(); ++q) dx0[q] += dx[q];
  }
  // split d x0 into d z and d pooled
  std::vector<float> dz(static_cast<size_t>(B * d0));
  for (int64_t i = 0; i < B; ++i) {
    const float* row = dx0.data() + i * inter_in_;
    std::copy_n(row, d0, dz.data() + i * d0);
    int64_t off = d0;
    for (int64_t f = 0; f < F; ++f) {
      const int64_t d = dims_[static_cast<size_t>(f)];
      std::copy_n(row + off, d, d_pooled[static_cast<size_t>(f)] + i * d);
      off += d;
    }
  }
  for (size_t i = bottom_.size(); i-- > 0;) {
    std::vector<float> dx(i > 0 ? static_cast<size_t>(B * bottom_[i].in) : 0);
    linear_backward(bottom_[i], B, bot[i].data(), bot[i + 1].data(), dz.data(), i > 0 ? dx.data() : nullptr);
    ready(bottom_[i].w);
    dz = std::move(dx);
  }
  return loss;
}

std::vector<GemmShape> DenseModel::gemms(int64_t B) const {
  std::vector<GemmShape> g;
  if (!spec_.dense) return g;
  auto forward = [&](const Linear& l) { g.push_back({B, l.out, l.in}); };
  auto backward = [&](const Linear& l, bool dx) {
    g.push_back({l.out, l.in, B});
    if (dx) g.push_back({B, l.in, l.out});
  };
  const int64_t D = inter_in_, r = spec_.dense->dcn_low_rank_dim;
  for (const auto& l : bottom_) forward(l);
  for (size_t i = 0; i < cross_.size(); ++i) {
    g.push_back({B, r, D});
    g.push_back({B, D, r});
  }
  for (const auto& l : top_) forward(l);
  for (size_t i = top_.size(); i-- > 0;) backward(top_[i], true);
  for (size_t i = cross_.size(); i-- > 0;) {
    g.push_back({D, r, B});
    g.push_back({B, r, D});
    g.push_back({D, r, B});
    g.push_back({B, D, r});
  }
  for (size_t i = bottom_.size(); i-- > 0;) backward(bottom_[i], i > 0);
  return g;
}

DenseWork DenseModel::work(int64_t B) const {
  DenseWork w;
  if (!spec_.dense) return w;
  const DenseSpec& ds = *spec_.dense;
  double flops = 0;
  for (const GemmShape& g : gemms(B)) flops += g.flops();
  w.gemm_flops = static_cast<int64_t>(flops);
  const auto F = static_cast<int64_t>(dims_.size());
  const int64_t W = inter_in_, Wout = inter_out_, d0 = bottom_.empty() ? 0 : bottom_.back().out;
  int64_t e = num_params_ + 2 * B + B * ds.num_dense_features;
  auto linear = [&](const Linear& l, bool has_dx) {
    e += 2 * B * l.out;                          // output allocated; bias + ReLU
    e += (has_dx ? B * l.in : 0) + l.out + B * l.out;  // dx allocated; db zeroed and summed
    if (l.relu) e += B * l.out;                  // the ReLU mask on dy
  };
  for (size_t i = 0; i < bottom_.size(); ++i) linear(bottom_[i], i > 0);
  for (const Linear& l : top_) linear(l, true);
  e += 2 * B * W + B * Wout + B * W + B * W + B * d0 + 3 * B;
  switch (ds.interaction) {
    case Interaction::dot:
      w.interaction_ops = B * d0 * (F + 1) * F / 2 + B * (F + 1) * d0 * F;
      e += B * Wout + B * W;
      break;
    case Interaction::cat: e += 2 * B * W; break;
    case Interaction::dcn: {
      const int64_t L = static_cast<int64_t>(cross_.size()), r = ds.dcn_low_rank_dim;
      e += 3 * B * W + L * (8 * B * W + 2 * B * r);
      break;
    }
  }
  if (ds.precision != DensePrecision::fp32) {  // the inputs each product rounds (precision_gemm, the dot's copies)
    for (const GemmShape& g : gemms(B)) e += g.m * g.k + g.k * g.n;
    if (ds.interaction == Interaction::dot) e += 2 * B * W + B * Wout;
  }
  w.elementwise_ops = e;
  return w;
}

std::vector<std::pair<int64_t, int64_t>> DenseModel::param_tensors() const {
  std::vector<std::pair<int64_t, int64_t>> t;
  auto add = [&](size_t at, int64_t count) { t.emplace_back(static_cast<int64_t>(at), count); };
  for (const Linear& l : bottom_) {
    add(l.w, int64_t{l.in} * l.out);
    add(l.b, l.out);
  }
  const int64_t rank = spec_.dense ? spec_.dense->dcn_low_rank_dim : 0;
  for (const Cross& c : cross_) {
    add(c.u, inter_in_ * rank);
    add(c.v, inter_in_ * rank);
    add(c.b, inter_in_);
  }
  for (const Linear& l : top_) {
    add(l.w, int64_t{l.in} * l.out);
    add(l.b, l.out);
  }
  return t;
}

std::vector<std::pair<int64_t, int64_t>> dense_buckets(const std::vector<std::pair<int64_t, int64_t>>& tensors,
                                                       int64_t bucket_cap_bytes) {
  std::vector<std::pair<int64_t, int64_t>> buckets;
  int64_t end = -1, begin = 0;
  for (auto it = tensors.rbegin(); it != tensors.rend(); ++it) {
    if (end < 0) end = it->first + it->second;
    begin = it->first;
    if ((end - begin) * 4 >= bucket_cap_bytes) {
      buckets.emplace_back(begin, end);
      end = -1;
    }
  }
  if (end >= 0) buckets.emplace_back(begin, end);
  return buckets;
}

void DenseModel::sgd_step(float lr, const float* grad) {
  if (device_) {
    sgd_step_resident(lr, grad);
    return;
  }
  if (ops_.sgd) {
    ops_.sgd(num_params_, lr, grad, params_.data());
    return;
  }
  engine::sgd_step(static_cast<int64_t>(params_.size()), lr, grad, params_.data());
}

double bce_with_logits(int64_t B, const float* logits, const float* labels, float* dlogits) {
  double loss = 0;
  for (int64_t i = 0; i < B; ++i) {
    const dense_core::BceTerm t = dense_core::bce_with_logits_term(logits[i], labels[i], B);
    loss += t.loss;
    dlogits[i] = t.dlogit;
  }
  return B > 0 ? loss / static_cast<double>(B) : 0.0;
}

void dot_interaction_forward(int64_t B, int64_t F, int64_t d0, const float* x0, float* r) {
  const int64_t in_w = (F + 1) * d0, out_w = dense_core::dot_out_width(F, d0);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t k = 0; k < out_w; ++k) r[i * out_w + k] = dense_core::dot_forward_element(x0 + i * in_w, F, d0, k);
}

void dot_interaction_backward(int64_t B, int64_t F, int64_t d0, const float* x0, const float* dr, float* dx0) {
  const int64_t in_w = (F + 1) * d0, out_w = dense_core::dot_out_width(F, d0);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < in_w; ++j)
      dx0[i * in_w + j] = dense_core::dot_backward_element(x0 + i * in_w, dr + i * out_w, F, d0, j);
}

void sgd_step(int64_t n, float lr, const float* grad, float* params) {
  for (int64_t i = 0; i < n; ++i) params[i] = dense_core::sgd_update(params[i], grad[i], lr);
}

int64_t DenseModel::activation_bytes(int64_t B) const { return dense_activation_bytes(spec_, dense_sizes(spec_, dims_), B); }

int64_t dense_activation_bytes(const WorkloadSpec& spec, const DenseSizes& sizes, int64_t B) {
  if (!spec.dense) return 0;
  const DensePrecision p = spec.dense->precision;
  const int64_t w = dense_activation_value_bytes(p);
  return B * sizes.activation_floats_per_sample * w + (w == 2 ? 2 * sizes.num_params : 0);
}

void DenseModel::set_linear_ops(LinearOps ops) {
  if (precision() != DensePrecision::fp32 && (ops.forward || ops.backward || ops.dot_forward || ops.dot_backward))
    throw std::logic_error(std::string("DenseModel::set_linear_ops: dense.precision ") + to_string(precision()) +
                           ": the device's linear layers and dot interaction compute in fp32 only");
  ops_ = std::move(ops);
}

DenseSizes dense_sizes(const WorkloadSpec& spec, const std::vector<int64_t>& feature_dims) {
  DenseSizes z;
  if (!spec.dense) return z;
  const DenseSpec& d = *spec.dense;
  const auto F = static_cast<int64_t>(feature_dims.size());
  int64_t sum_dims = 0;
  for (auto x : feature_dims) sum_dims += x;
  int64_t in = d.num_dense_features, widths = 0;
  for (int w : d.bottom_mlp) {
    z.num_params += in * w + w;
    widths += w;
    in = w;
  }
  const int64_t inter_in = in + sum_dims;
  int64_t inter_out = inter_in;
  int64_t cross = 0;
  if (d.interaction == Interaction::dot) inter_out = in + (F + 1) * F / 2;
  if (d.interaction == Interaction::dcn) {
    z.num_params += static_cast<int64_t>(d.dcn_num_layers) * (2 * inter_in * d.dcn_low_rank_dim + inter_in);
    cross = static_cast<int64_t>(d.dcn_num_layers) * (2 * inter_in + d.dcn_low_rank_dim);
  }
  in = inter_out;
  for (int w : d.top_mlp) {
    z.num_params += in * w + w;
    widths += w;
    in = w;
  }
  // inputs and outputs of every layer, forward and backward
  z.activation_floats_per_sample = 2 * (2 * inter_in + inter_out + widths + cross);
  return z;
}

}  // namespace embedscope::engine
