// LmReference (reference/lm_reference.h): the lm_embedding model in double precision.

#include "embedscope/engine/reference/lm_reference.h"

#include <cmath>
#include <map>
#include <string>

#include "embedscope/engine/model/lm_embedding.h"
#include "embedscope/engine/quant/quant.h"
#include "embedscope/engine/sharding/vocab_parallel.h"

namespace embedscope::engine {

LmReference::LmReference(const LmWorkloadSpec& spec, bool round_on_the_wire)
    : spec_(spec), V_(spec.padded_vocab_size()), H_(spec.hidden_size),
      seqs_(spec.sharding == LmSharding::vocab_parallel ? spec.micro_batch_size
                                                        : spec.micro_batch_size * spec.world_size),
      round_on_the_wire_(round_on_the_wire) {
  E_.resize(static_cast<size_t>(V_ * H_));
  if (!spec.tie_word_embeddings) O_.resize(E_.size());
  for (int64_t i = 0; i < V_ * H_; ++i) {
    const int64_t row = i / H_;
    E_[static_cast<size_t>(i)] = row == spec.padding_id ? 0.0 : lm_initial_weight(spec.seed, 0, i, H_);
    if (!O_.empty()) O_[static_cast<size_t>(i)] = lm_initial_weight(spec.seed, 1, i, H_);
  }
  for (int l = 0; l < spec.body_layers; ++l) {
    std::vector<double> w(static_cast<size_t>(H_ * H_));
    for (int64_t i = 0; i < H_ * H_; ++i) w[static_cast<size_t>(i)] = lm_initial_weight(spec.seed, 2 + l, i, H_);
    W_.push_back(std::move(w));
    b_.emplace_back(static_cast<size_t>(H_), 0.0);
  }
}

double LmReference::step(int64_t step) {
  const int64_t S = spec_.sequence_length, H = H_, V = V_;
  const int L = spec_.body_layers;
  const auto rd = [&](double v) { return static_cast<double>(lm_read_weight(static_cast<float>(v), spec_.data_type)); };
  const std::vector<double>& Om = spec_.tie_word_embeddings ? E_ : O_;
  // the rounding of the 2-byte collectives (the header comment)
  const CommPrecision wire = spec_.data_type == LmDataType::bf16   ? CommPrecision::bf16
                             : spec_.data_type == LmDataType::fp16 ? CommPrecision::fp16
                                                                   : CommPrecision::fp32;
  const bool rounds = round_on_the_wire_ && wire != CommPrecision::fp32;
  const bool vp = spec_.sharding == LmSharding::vocab_parallel, dp = spec_.sharding == LmSharding::data_parallel;
  const bool gathered = rounds && (spec_.sharding == LmSharding::row_wise || (vp && spec_.sequence_parallel));
  const auto wr = [&](double v) { return static_cast<double>(round_to_precision(static_cast<float>(v), wire)); };
  const int p_ranks = spec_.world_size;
  std::vector<int> owner(static_cast<size_t>(V));  // the rank whose vocabulary rows hold v
  for (int r = 0; r < p_ranks; ++r) {
    const VocabRange vr = vocab_range(V, p_ranks, r);
    for (int64_t v = vr.begin; v < vr.end; ++v) owner[static_cast<size_t>(v)] = r;
  }
  std::vector<double> part(static_cast<size_t>(p_ranks * H)), zr(static_cast<size_t>(H));
  std::vector<double> gE(E_.size(), 0.0), gO(O_.size(), 0.0);
  std::vector<std::vector<double>> gW(W_.size(), std::vector<double>(static_cast<size_t>(H * H), 0.0));
  std::vector<std::vector<double>> gb(b_.size(), std::vector<double>(static_cast<size_t>(H), 0.0));
  std::vector<std::vector<int64_t>> tok(static_cast<size_t>(seqs_));
  int64_t n = 0;
  for (int64_t g = 0; g < seqs_; ++g) {
    tok[static_cast<size_t>(g)] = lm_sequence_tokens(spec_, step, g);
    for (int64_t s = 1; s <= S; ++s) n += tok[static_cast<size_t>(g)][static_cast<size_t>(s)] != spec_.padding_id;
  }
  e_.assign(static_cast<size_t>(seqs_ * S * H), 0.0);
  double loss = 0;
  std::vector<std::vector<double>> h(static_cast<size_t>(L) + 1, std::vector<double>(static_cast<size_t>(H)));
  std::vector<std::vector<double>> th(static_cast<size_t>(L), std::vector<double>(static_cast<size_t>(H)));
  std::vector<double> p(static_cast<size_t>(V)), dh(static_cast<size_t>(H));
  for (int64_t g = 0; g < seqs_; ++g) {
    for (int64_t s = 0; s < S; ++s) {  // one token at a time: the model has no mixing across tokens
      const int64_t x = tok[static_cast<size_t>(g)][static_cast<size_t>(s)];
      const int64_t y = tok[static_cast<size_t>(g)][static_cast<size_t>(s + 1)];
      for (int64_t c = 0; c < H; ++c) {
        h[0][static_cast<size_t>(c)] = rd(E_[static_cast<size_t>(x * H + c)]);
        e_[static_cast<size_t>((g * S + s) * H + c)] = h[0][static_cast<size_t>(c)];
      }
      for (int l = 0; l < L; ++l) {
        const auto li = static_cast<size_t>(l);
        for (int64_t j = 0; j < H; ++j) {
          double a = b_[li][static_cast<size_t>(j)];
          for (int64_t i = 0; i < H; ++i) a += h[li][static_cast<size_t>(i)] * W_[li][static_cast<size_t>(i * H + j)];
          th[li][static_cast<size_t>(j)] = std::tanh(a);
          h[li + 1][static_cast<size_t>(j)] = h[li][static_cast<size_t>(j)] + th[li][static_cast<size_t>(j)];
        }
      }
      if (y == spec_.padding_id) continue;  // ignored target: no loss, no gradient
      // the projection reads the hidden states as their all-gather sent them
      for (int64_t c = 0; c < H; ++c) {
        const double v = h[static_cast<size_t>(L)][static_cast<size_t>(c)];
        zr[static_cast<size_t>(c)] = gathered ? wr(v) : v;
      }
      const std::vector<double>& z = zr;
      double mx = -INFINITY;
      for (int64_t v = 0; v < V; ++v) {
        double a = 0;
        for (int64_t c = 0; c < H; ++c) a += z[static_cast<size_t>(c)] * rd(Om[static_cast<size_t>(v * H + c)]);
        p[static_cast<size_t>(v)] = a;
        mx = std::max(mx, a);
      }
      double se = 0;
      for (int64_t v = 0; v < V; ++v) se += std::exp(p[static_cast<size_t>(v)] - mx);
      loss += std::log(se) + mx - p[static_cast<size_t>(y)];
      // dlogits_v = (softmax_v - [v == y]) / N
      std::fill(dh.begin(), dh.end(), 0.0);
      std::fill(part.begin(), part.end(), 0.0);
      std::vector<double>& gOut = spec_.tie_word_embeddings ? gE : gO;
      for (int64_t v = 0; v < V; ++v) {
        const double d = (std::exp(p[static_cast<size_t>(v)] - mx) / se - (v == y ? 1.0 : 0.0)) / static_cast<double>(n);
        for (int64_t c = 0; c < H; ++c) {
          gOut[static_cast<size_t>(v * H + c)] += d * z[static_cast<size_t>(c)];
          part[static_cast<size_t>(owner[static_cast<size_t>(v)] * H + c)] += d * rd(Om[static_cast<size_t>(v * H + c)]);
        }
      }
      // dh: the ranks' vocabulary slices' terms, rounded as the gradient's collective sends them
      for (int64_t c = 0; c < H; ++c) {
        for (int r = 0; r < p_ranks; ++r) {
          const double t = part[static_cast<size_t>(r * H + c)];
          dh[static_cast<size_t>(c)] += rounds && !dp ? wr(t) : t;
        }
        if (rounds && vp && !spec_.sequence_parallel) dh[static_cast<size_t>(c)] = wr(dh[static_cast<size_t>(c)]);
      }
      for (int l = L - 1; l >= 0; --l) {
        const auto li = static_cast<size_t>(l);
        std::vector<double> da(static_cast<size_t>(H)), dprev(dh);
        for (int64_t j = 0; j < H; ++j) {
          const double t = th[li][static_cast<size_t>(j)];
          da[static_cast<size_t>(j)] = dh[static_cast<size_t>(j)] * (1.0 - t * t);
          gb[li][static_cast<size_t>(j)] += da[static_cast<size_t>(j)];
        }
        for (int64_t i = 0; i < H; ++i)
          for (int64_t j = 0; j < H; ++j) {
            gW[li][static_cast<size_t>(i * H + j)] += h[li][static_cast<size_t>(i)] * da[static_cast<size_t>(j)];
            dprev[static_cast<size_t>(i)] += da[static_cast<size_t>(j)] * W_[li][static_cast<size_t>(i * H + j)];
          }
        dh = dprev;
      }
      if (x != spec_.padding_id)
        for (int64_t c = 0; c < H; ++c)
          gE[static_cast<size_t>(x * H + c)] += gathered ? wr(dh[static_cast<size_t>(c)]) : dh[static_cast<size_t>(c)];
    }
  }
  const double lr = spec_.learning_rate;
  if (spec_.optimizer == LmOptimizer::adam) {
    // Kingma & Ba 2015, Algorithm 1 with PyTorch's placement of eps (lm_spec.h LmOptimizer),
    // written here on its own, in double
    ++adam_t_;
    const double b1 = spec_.adam_beta1, b2 = spec_.adam_beta2, eps = spec_.adam_eps;
    const double c1 = 1 - std::pow(b1, static_cast<double>(adam_t_)), c2 = 1 - std::pow(b2, static_cast<double>(adam_t_));
    auto update = [&](std::vector<double>& param, const std::vector<double>& g, const std::string& key) {
      auto& [m, v] = moments_[key];
      m.resize(param.size(), 0.0);
      v.resize(param.size(), 0.0);
      for (size_t i = 0; i < param.size(); ++i) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        const double m_hat = m[i] / c1, v_hat = v[i] / c2;
        param[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
      }
    };
    update(E_, gE, "E");
    update(O_, gO, "O");
    for (size_t l = 0; l < W_.size(); ++l) {
      // std::string first: GCC 12 warns -Wrestrict on "literal" + std::string&& (a false positive)
      update(W_[l], gW[l], std::string("W").append(std::to_string(l)));
      update(b_[l], gb[l], std::string("b").append(std::to_string(l)));
    }
    return n == 0 ? 0.0 : loss / static_cast<double>(n);
  }
  for (size_t i = 0; i < E_.size(); ++i) E_[i] -= lr * gE[i];
  for (size_t i = 0; i < O_.size(); ++i) O_[i] -= lr * gO[i];
  for (size_t l = 0; l < W_.size(); ++l) {
    for (size_t i = 0; i < W_[l].size(); ++i) W_[l][i] -= lr * gW[l][i];
    for (size_t i = 0; i < b_[l].size(); ++i) b_[l][i] -= lr * gb[l][i];
  }
  return n == 0 ? 0.0 : loss / static_cast<double>(n);
}

}  // namespace embedscope::engine
