// The dense op's rates measured on the engine's own dense code (cost/dense_microbench.h).
#include "embedscope/engine/cost/dense_microbench.h"

#include <cblas.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "embedscope/engine/model/dense.h"
#include "embedscope/engine/workload/spec_error.h"

extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace embedscope::engine {

namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Each timing runs f at least this long (thread CPU seconds), repeating a short f.
constexpr double kMinTimingS = 0.01;

// The best (least) thread CPU time of one call of f over `reps` timings, after one warm-up call
// that also sets how many calls a timing makes (>= kMinTimingS of them, at most 10,000).
double best_of(int reps, const std::function<void()>& f) {
  const double w0 = thread_cpu_seconds();
  f();
  const double first = std::max(thread_cpu_seconds() - w0, 1e-7);
  const int calls = static_cast<int>(std::clamp(std::ceil(kMinTimingS / first), 1.0, 1e4));
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < reps; ++r) {
    const double t0 = thread_cpu_seconds();
    for (int c = 0; c < calls; ++c) f();
    best = std::min(best, (thread_cpu_seconds() - t0) / calls);
  }
  return best;
}

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

}  // namespace

DenseMicrobench measure_dense_rates(const WorkloadSpec& spec, int repetitions) {
  if (!spec.dense)
    throw SpecError(fmt::format("dense microbenchmark: workload {} has no dense part (\"dense\": null): nothing to time",
                                spec.name));
  const auto start = std::chrono::steady_clock::now();
  if (openblas_set_num_threads) openblas_set_num_threads(1);
  std::map<std::string, int64_t> dim_of_feature;
  for (const auto& t : spec.tables)
    for (const auto& f : t.feature_names) dim_of_feature[f] = t.embedding_dim;
  std::vector<int64_t> dims;
  for (const auto& f : spec.features) dims.push_back(dim_of_feature.at(f.name));
  const int64_t B = spec.batch_size;
  const int reps = std::max(1, repetitions);
  DenseModel model(spec, dims);
  DenseMicrobench out;
  out.model = fmt::format("{} dense part, B {}", spec.name, B);
  out.batch = B;
  out.repetitions = reps;
  out.work = model.work(B);

  // T: the engine's forward_backward
  std::mt19937 rng(7);
  const std::vector<float> dense_x = random_floats(static_cast<size_t>(B * spec.dense->num_dense_features), rng);
  std::vector<std::vector<float>> pooled, d_pooled;
  for (int64_t d : dims) {
    pooled.push_back(random_floats(static_cast<size_t>(B * d), rng));
    d_pooled.emplace_back(static_cast<size_t>(B * d));
  }
  std::vector<const float*> pooled_p;
  std::vector<float*> d_pooled_p;
  for (size_t f = 0; f < dims.size(); ++f) pooled_p.push_back(pooled[f].data()), d_pooled_p.push_back(d_pooled[f].data());
  std::vector<float> labels(static_cast<size_t>(B));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<float>(i % 2);
  out.forward_backward_s =
      best_of(reps, [&] { model.forward_backward(B, dense_x.data(), pooled_p, labels.data(), d_pooled_p); });

  // Tg: its GEMMs alone
  const std::vector<GemmShape> gemms = model.gemms(B);
  std::vector<std::vector<float>> a, b, c;
  for (const GemmShape& g : gemms) {
    a.push_back(random_floats(static_cast<size_t>(g.m * g.k), rng));
    b.push_back(random_floats(static_cast<size_t>(g.k * g.n), rng));
    c.emplace_back(static_cast<size_t>(g.m * g.n));
  }
  out.gemm_s = best_of(reps, [&] {
    for (size_t i = 0; i < gemms.size(); ++i) {
      const GemmShape& g = gemms[i];
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(g.m), static_cast<int>(g.n),
                  static_cast<int>(g.k), 1.0f, a[i].data(), static_cast<int>(g.k), b[i].data(), static_cast<int>(g.n),
                  0.0f, c[i].data(), static_cast<int>(g.n));
    }
  });

  // Ti: the dot interaction's kernels
  const bool dot = spec.dense->interaction == Interaction::dot;
  const auto F = static_cast<int64_t>(dims.size());
  const int64_t d0 = dot ? spec.dense->bottom_mlp.back() : 16;
  const int64_t out_w = d0 + (F + 1) * F / 2;
  const std::vector<float> x0 = random_floats(static_cast<size_t>(B * (F + 1) * d0), rng);
  const std::vector<float> dr = random_floats(static_cast<size_t>(B * out_w), rng);
  std::vector<float> r(static_cast<size_t>(B * out_w)), dx0(x0.size());
  out.interaction_s = best_of(reps, [&] {
    dot_interaction_forward(B, F, d0, x0.data(), r.data());
    dot_interaction_backward(B, F, d0, x0.data(), dr.data(), dx0.data());
  });
  out.interaction_ops_timed = B * d0 * (F + 1) * F / 2 + B * (F + 1) * d0 * F;

  // Te: the rest of forward_backward
  out.elementwise_s = out.forward_backward_s - out.gemm_s - (dot ? out.interaction_s : 0.0);
  if (!(out.elementwise_s > 0) || !(out.gemm_s > 0) || !(out.interaction_s > 0))
    throw SpecError(fmt::format(
        "dense microbenchmark of {}: forward_backward took {:.3f} ms of CPU time, its GEMMs alone {:.3f} ms and the dot "
        "interaction {:.3f} ms, which leaves no time for its element-wise work; rerun on a quieter machine",
        out.model, 1e3 * out.forward_backward_s, 1e3 * out.gemm_s, 1e3 * out.interaction_s));
  out.gemm_flops_per_s = static_cast<double>(out.work.gemm_flops) / out.gemm_s;
  out.interaction_ops_per_s = static_cast<double>(out.interaction_ops_timed) / out.interaction_s;
  out.elementwise_ops_per_s = static_cast<double>(out.work.elementwise_ops) / out.elementwise_s;
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace embedscope::engine
