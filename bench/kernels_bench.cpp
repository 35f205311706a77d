// Google Benchmark of the CPU pooled-lookup kernels (engine/kernels.h) against PyTorch.
//
// Every benchmark is single-threaded and measured in wall time. Per shape it reports:
//   GBps            our bandwidth: bytes below / median wall time of one iteration
//   torch_GBps      the same bytes / PyTorch's median time of one repetition, measured in this
//                   run by the peer script bench/torch_embedding_bag.py (set_num_threads(1))
//   ratio_vs_torch  GBps / torch_GBps (> 1: we are faster)
//
// Bytes (identical definitions in the peer script; n_ids = batch * bag, fp32 = 4 bytes):
//   forward  = n_ids * dim * 4
//       the embedding rows gathered by the pooled lookup (output writes not counted).
//   backward = (n_ids + 2 * n_unique) * dim * 4
//       one grad_out row gathered per id occurrence (the sparse-gradient segment reduce),
//       plus each of the n_unique distinct weight rows read and written by the optimizer
//       (rowwise_adagrad's one-float-per-row state is not counted).
//
// Both sides use the same ids: splitmix64(seed) % num_rows, every bag exactly `bag` long.
// Forward is EmbeddingBag(mode="sum"); backward is our accumulate_sparse_grad +
// apply_row_optimizer(rowwise_adagrad) vs. EmbeddingBag's sparse backward + coalesce + a
// row-wise Adagrad update in torch ops. Both sides use medians, since this machine may be
// shared and the two are measured seconds apart (the Time column is Google Benchmark's mean).
//
// The peer runs once per shape (lazily, before our first timed loop of that shape). If it
// cannot run (no /usr/bin/python3, torch not importable), our benchmarks still run and report
// GBps only, with a note on stderr and in the label.
// Environment overrides: see torch_peer.h.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "embedscope/engine/kernels/kernels.h"
#include "torch_peer.h"

namespace {

using namespace embedscope::engine;
using namespace embedscope::bench;

// A 64-byte aligned fp32 array (as PyTorch's CPU allocator and our device arena align), so a
// row of 64 or 128 floats spans exactly 4 or 8 cache lines. (A large std::vector is only
// 16-byte aligned, which costs one extra cache line per gathered row.)
class AlignedFloats {
 public:
  explicit AlignedFloats(size_t n)
      : n_(n), p_(static_cast<float*>(std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64))) {
    if (p_ == nullptr) throw std::bad_alloc();
  }
  float* data() { return p_.get(); }
  float* begin() { return p_.get(); }
  float* end() { return p_.get() + n_; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  size_t n_;
  std::unique_ptr<float[], Free> p_;
};

// Inputs and state of one shape, built once and shared by its forward and backward benchmarks.
struct Workload {
  Shape shape;
  AlignedFloats weights, grad_out, out;
  std::vector<int64_t> ids, offsets;
  OptimizerStateBuffers state;  // owns the arrays (a RowOptimizerState view of a temporary dangled: heap corruption in the 4th benchmark)
  int64_t n_unique = 0;

  explicit Workload(const Shape& s)
      : shape(s),
        weights(static_cast<size_t>(s.rows * s.dim)),
        grad_out(static_cast<size_t>(s.batch * s.dim)),
        out(static_cast<size_t>(s.batch * s.dim)) {
    SplitMix64 id_rng{kSeed};
    ids.resize(static_cast<size_t>(s.n_ids()));
    for (auto& id : ids) id = static_cast<int64_t>(id_rng.next() % static_cast<uint64_t>(s.rows));
    offsets.resize(static_cast<size_t>(s.batch + 1));
    for (int64_t b = 0; b <= s.batch; ++b) offsets[static_cast<size_t>(b)] = b * s.bag;

    SplitMix64 value_rng{kSeed + 1};
    for (float& w : weights) w = value_rng.uniform(-0.1f, 0.1f);
    for (float& g : grad_out) g = value_rng.uniform(-0.5f, 0.5f);
    std::fill(out.begin(), out.end(), 0.0f);
    state = make_optimizer_state(OptimizerType::rowwise_adagrad, s.rows, s.dim);

    std::vector<int64_t> sorted = ids;
    std::sort(sorted.begin(), sorted.end());
    n_unique = std::unique(sorted.begin(), sorted.end()) - sorted.begin();
  }

  double forward_bytes() const { return 4.0 * static_cast<double>(shape.n_ids() * shape.dim); }
  double backward_bytes() const {
    return 4.0 * static_cast<double>((shape.n_ids() + 2 * n_unique) * shape.dim);
  }
};

Workload& workload(int shape_index) {
  static std::map<int, std::unique_ptr<Workload>> cache;
  auto& w = cache[shape_index];
  if (!w) w = std::make_unique<Workload>(kShapes[shape_index]);
  return *w;
}

const PeerResult& torch_peer(int shape_index) {
  return torch_peer_once(shape_index, workload(shape_index).n_unique, "cpu");
}

// Wall time of each iteration of a benchmark loop.
class IterationTimes {
 public:
  void start() { t0_ = std::chrono::steady_clock::now(); }
  void stop() { seconds_.push_back(std::chrono::duration<double>(Clock::now() - t0_).count()); }
  double median() {
    if (seconds_.empty()) return 0.0;
    auto mid = seconds_.begin() + static_cast<std::ptrdiff_t>(seconds_.size() / 2);
    std::nth_element(seconds_.begin(), mid, seconds_.end());
    return *mid;
  }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point t0_;
  std::vector<double> seconds_;
};

void report(benchmark::State& state, double bytes, double median_seconds,
            std::optional<double> torch_GBps, const std::string& note) {
  if (median_seconds <= 0) return;
  const double ours = bytes / median_seconds / 1e9;
  state.counters["GBps"] = ours;
  report_vs_torch(state, ours, torch_GBps, note);
}

// ---- benchmarks ------------------------------------------------------------------------------

void BM_ForwardSum(benchmark::State& state, int shape_index) {
  Workload& w = workload(shape_index);
  const PeerResult& peer = torch_peer(shape_index);
  const Shape& s = w.shape;
  IterationTimes times;
  for (auto _ : state) {
    times.start();
    pooled_lookup(w.weights.data(), s.rows, s.dim, w.ids.data(), w.offsets.data(), s.batch,
                  /*bag_scale=*/nullptr, w.out.data(), s.dim);
    benchmark::DoNotOptimize(w.out.data());
    benchmark::ClobberMemory();
    times.stop();
  }
  report(state, w.forward_bytes(), times.median(), peer.forward_GBps, peer.note);
}

void BM_BackwardRowwiseAdagrad(benchmark::State& state, int shape_index) {
  Workload& w = workload(shape_index);
  const PeerResult& peer = torch_peer(shape_index);
  const Shape& s = w.shape;
  OptimizerSpec opt;
  opt.type = OptimizerType::rowwise_adagrad;
  opt.learning_rate = kLearningRate;
  opt.eps = kEps;
  int64_t iteration = 0;
  IterationTimes times;
  for (auto _ : state) {
    times.start();
    {
      SparseGrad g = accumulate_sparse_grad(s.dim, w.ids.data(), w.offsets.data(), s.batch,
                                            /*bag_scale=*/nullptr, w.grad_out.data(), s.dim);
      apply_row_optimizer(opt, ++iteration, w.weights.data(), s.dim, w.state, g);
      benchmark::DoNotOptimize(g.values.data());
    }  // g is freed inside the timed part, as the peer's tensors are
    benchmark::ClobberMemory();
    times.stop();
  }
  report(state, w.backward_bytes(), times.median(), peer.backward_GBps, peer.note);
}

void register_all() {
  for (int i = 0; i < static_cast<int>(std::size(kShapes)); ++i) {
    const std::string shape = kShapes[i].name();
    benchmark::RegisterBenchmark(("forward_sum/" + shape).c_str(), BM_ForwardSum, i)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinWarmUpTime(0.1)
        ->MinTime(1.0);
    benchmark::RegisterBenchmark(("backward_rowwise_adagrad/" + shape).c_str(),
                                 BM_BackwardRowwiseAdagrad, i)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinWarmUpTime(0.1)
        ->MinTime(1.0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
