// Google Benchmark of the CUDA table-batched embedding kernels (engine/cuda_kernels.h) against
// the device's own copy bandwidth and PyTorch's nn.EmbeddingBag on cuda, all in the same run.
// Shapes, ids and byte counts are those of bench/kernels_bench.cpp (torch_peer.h):
//   forward  bytes = n_ids * dim * 4                  (rows gathered; output writes not counted)
//   backward bytes = (n_ids + 2 * n_unique) * dim * 4 (grad_out rows per id + each distinct
//                    row read and written by rowwise_adagrad; its 1 float/row state not counted)
// Per benchmark:
//   GBps            bytes / median kernel time (CUDA events around each iteration)
//   copy_GBps       the device's cudaMemcpy device-to-device bandwidth, measured once in this
//                   run on a 1 GiB buffer, counted as read + write (2 x bytes, as CUDA's
//                   bandwidthTest), median of 20 copies
//   ratio_vs_copy   GBps / copy_GBps (the goal for forward: >= 0.6)
//   torch_GBps      PyTorch nn.EmbeddingBag(mode="sum", sparse=True) on cuda, same shape and ids
//                   (bench/torch_embedding_bag.py --device cuda)
//   ratio_vs_torch  GBps / torch_GBps (the goal for forward: >= 1.5)
// gpu_forward_sum_int8 / _int4 (tbe_forward_quantized, the first shape's rows encoded):
//   GBps            encoded row bytes read (n_ids * row_bytes) / median kernel time
//   time_vs_fp32    the fp32 tbe_forward's median on the same ids / this median
// gpu_update_rowwise_adagrad_<type> (apply_row_optimizer_encoded_cuda, the cuda executor's update
// of reduced-precision shards: one thread a row; the first shape's distinct ids as the reduced
// gradient's rows; int4 with stochastic rounding, the others to nearest):
//   GBps              (encoded rows read + written + fp32 gradient rows read) / median kernel time
//   time_vs_fp32_rows the same kernel on fp32 rows (type fp32, fp32 state): its median / this median
// gpu_host_rows_gather/<rows>x<dim> (copy_rows_cuda, the host / host_cached tables' batched
// fetch: kernels/cuda_row_copy.h; issue 16 / 14): `rows` distinct random rows of a 262,144 x dim
// fp32 table in mapped pinned host memory gathered into a device buffer by ONE kernel through
// the host pointer (FBGEMM's UVM path), against the path it replaced, one cudaMemcpyAsync a row
// from pageable host memory, both measured in this run (wall time, each ended by a stream sync):
//   rows_per_s          the gather's rows / median time
//   per_row_rows_per_s  the per-row copies' rows / their median time
//   ratio_vs_per_row    rows_per_s / per_row_rows_per_s
//   GBps                the gather's row bytes (rows x dim x 4) / median time (PCIe-bound)
// Without a CUDA device the program prints "no CUDA device: <what cudaGetDeviceCount said>"
// and exits 0.

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <span>
#include <random>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "embedscope/engine/kernels/cuda_encoded_update.h"
#include "embedscope/engine/kernels/cuda_kernels.h"
#include "embedscope/engine/kernels/cuda_row_copy.h"
#include "embedscope/engine/quant/row_codec.h"
#include "torch_peer.h"

namespace {

using namespace embedscope::engine;
using namespace embedscope::engine::cuda;
using namespace embedscope::bench;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Times `fn` on the device with a pair of CUDA events; returns seconds.
class EventTimer {
 public:
  EventTimer() {
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  template <class F>
  double seconds(F&& fn) {
    check(cudaEventRecord(start_), "cudaEventRecord");
    fn();
    check(cudaEventRecord(stop_), "cudaEventRecord");
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms * 1e-3;
  }

 private:
  cudaEvent_t start_{}, stop_{};
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// cudaMemcpy device-to-device bandwidth in GB/s (read + write), measured once.
double copy_GBps() {
  static const double gbps = [] {
    const size_t bytes = size_t{1} << 30;
    DeviceArray<char> a(bytes), b(bytes);
    a.zero();
    EventTimer timer;
    std::vector<double> s;
    for (int i = 0; i < 23; ++i) {
      const double t = timer.seconds(
          [&] { check(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync"); });
      if (i >= 3) s.push_back(t);  // 3 warm-up copies
    }
    return 2.0 * static_cast<double>(bytes) / median(s) / 1e9;
  }();
  return gbps;
}

// Inputs and state of one shape on the device, built once.
struct Workload {
  Shape shape;
  int64_t n_unique = 0;
  std::unique_ptr<TbePlan> plan;
  DeviceArray<float> weights, grad_out, out, momentum1;
  DeviceArray<int64_t> ids, offsets;

  explicit Workload(const Shape& s) : shape(s) {
    SplitMix64 id_rng{kSeed};
    std::vector<int64_t> h_ids(static_cast<size_t>(s.n_ids())), h_off(static_cast<size_t>(s.batch + 1));
    for (auto& id : h_ids) id = static_cast<int64_t>(id_rng.next() % static_cast<uint64_t>(s.rows));
    for (int64_t b = 0; b <= s.batch; ++b) h_off[static_cast<size_t>(b)] = b * s.bag;
    SplitMix64 value_rng{kSeed + 1};
    std::vector<float> h_w(static_cast<size_t>(s.rows * s.dim)), h_g(static_cast<size_t>(s.batch * s.dim));
    for (float& w : h_w) w = value_rng.uniform(-0.1f, 0.1f);
    for (float& g : h_g) g = value_rng.uniform(-0.5f, 0.5f);
    std::vector<int64_t> sorted = h_ids;
    std::sort(sorted.begin(), sorted.end());
    n_unique = std::unique(sorted.begin(), sorted.end()) - sorted.begin();

    TbeTable t;
    t.num_rows = s.rows;
    t.dim = s.dim;
    t.out_stride = s.dim;
    plan = std::make_unique<TbePlan>(std::vector<TbeTable>{t}, s.batch, WeightsPrecision::fp32);
    weights = DeviceArray<float>(std::span<const float>(h_w));
    grad_out = DeviceArray<float>(std::span<const float>(h_g));
    out = DeviceArray<float>(static_cast<size_t>(s.batch * s.dim));
    momentum1 = DeviceArray<float>(static_cast<size_t>(s.rows));
    momentum1.zero();
    ids = DeviceArray<int64_t>(std::span<const int64_t>(h_ids));
    offsets = DeviceArray<int64_t>(std::span<const int64_t>(h_off));
  }
  double forward_bytes() const { return 4.0 * static_cast<double>(shape.n_ids() * shape.dim); }
  double backward_bytes() const { return 4.0 * static_cast<double>((shape.n_ids() + 2 * n_unique) * shape.dim); }
};

Workload& workload(int i) {
  static std::map<int, std::unique_ptr<Workload>> cache;
  auto& w = cache[i];
  if (!w) w = std::make_unique<Workload>(kShapes[i]);
  return *w;
}

const PeerResult& torch_peer(int i) { return torch_peer_once(i, workload(i).n_unique, "cuda"); }

void report(benchmark::State& state, double bytes, double seconds, std::optional<double> torch_GBps,
            const std::string& note) {
  if (seconds <= 0) return;
  const double ours = bytes / seconds / 1e9;
  state.counters["GBps"] = ours;
  state.counters["copy_GBps"] = copy_GBps();
  state.counters["ratio_vs_copy"] = ours / copy_GBps();
  report_vs_torch(state, ours, torch_GBps, note);
}

void BM_HostRowsGather(benchmark::State& state, int64_t n, int64_t dim) {
  constexpr int64_t kTableRows = 262144;
  const auto table_bytes = static_cast<size_t>(kTableRows * dim * 4);
  float* pinned = nullptr;
  if (cudaHostAlloc(reinterpret_cast<void**>(&pinned), table_bytes, cudaHostAllocMapped | cudaHostAllocPortable) !=
      cudaSuccess) {
    state.SkipWithError("cudaHostAlloc of the pinned table failed");
    return;
  }
  std::vector<float> pageable(static_cast<size_t>(kTableRows * dim));
  for (size_t i = 0; i < pageable.size(); ++i) pinned[i] = pageable[i] = static_cast<float>(i % 1000);
  std::vector<int64_t> rows(static_cast<size_t>(kTableRows));
  std::iota(rows.begin(), rows.end(), int64_t{0});
  std::shuffle(rows.begin(), rows.end(), std::mt19937(7));
  rows.resize(static_cast<size_t>(n));
  DeviceArray<int64_t> d_rows{std::span<const int64_t>(rows)};
  DeviceArray<float> out{static_cast<size_t>(n * dim)};
  float* dev_alias = nullptr;
  cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev_alias), pinned, 0);
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  using clock = std::chrono::steady_clock;
  std::vector<double> gather_s, per_row_s;
  for (auto _ : state) {
    auto t0 = clock::now();
    copy_rows_cuda(n, dim, dev_alias, nullptr, d_rows.data(), out.data(), nullptr, nullptr, stream);
    cudaStreamSynchronize(stream);
    const double g = std::chrono::duration<double>(clock::now() - t0).count();
    t0 = clock::now();
    for (int64_t i = 0; i < n; ++i)
      cudaMemcpyAsync(out.data() + i * dim, pageable.data() + rows[static_cast<size_t>(i)] * dim,
                      static_cast<size_t>(dim * 4), cudaMemcpyHostToDevice, stream);
    cudaStreamSynchronize(stream);
    per_row_s.push_back(std::chrono::duration<double>(clock::now() - t0).count());
    gather_s.push_back(g);
    state.SetIterationTime(g);
  }
  cudaStreamDestroy(stream);
  cudaFreeHost(pinned);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  const double g = median(gather_s), p = median(per_row_s);
  if (g <= 0 || p <= 0) return;
  state.counters["rows_per_s"] = static_cast<double>(n) / g;
  state.counters["per_row_rows_per_s"] = static_cast<double>(n) / p;
  state.counters["ratio_vs_per_row"] = p / g;
  state.counters["GBps"] = static_cast<double>(n * dim * 4) / g / 1e9;
}

void BM_DeviceCopy(benchmark::State& state) {
  for (auto _ : state) state.SetIterationTime(2.0 * (1 << 30) / (copy_GBps() * 1e9));
  state.counters["copy_GBps"] = copy_GBps();
}

void BM_Forward(benchmark::State& state, int i) {
  Workload& w = workload(i);
  const PeerResult& peer = torch_peer(i);
  EventTimer timer;
  std::vector<double> s;
  for (auto _ : state) {
    const double t = timer.seconds(
        [&] { tbe_forward(*w.plan, w.weights.data(), w.ids.data(), w.offsets.data(), nullptr, w.out.data()); });
    state.SetIterationTime(t);
    s.push_back(t);
  }
  report(state, w.forward_bytes(), median(s), peer.forward_GBps, peer.note);
}

void BM_BackwardRowwiseAdagrad(benchmark::State& state, int i) {
  Workload& w = workload(i);
  const PeerResult& peer = torch_peer(i);
  OptimizerSpec opt;
  opt.type = OptimizerType::rowwise_adagrad;
  opt.learning_rate = kLearningRate;
  opt.eps = kEps;
  int64_t iteration = 0;
  EventTimer timer;
  std::vector<double> s;
  for (auto _ : state) {
    const double t = timer.seconds([&] {
      tbe_backward_update(*w.plan, w.weights.data(), w.momentum1.data(), nullptr, w.ids.data(), w.offsets.data(),
                          w.shape.n_ids(), nullptr, w.grad_out.data(), opt, ++iteration);
    });
    state.SetIterationTime(t);
    s.push_back(t);
  }
  report(state, w.backward_bytes(), median(s), peer.backward_GBps, peer.note);
}

// tbe_forward_quantized on the same ids over the same rows encoded as int8 or int4
// (encode_row): GBps of encoded row bytes read, and the lookups' speed against the fp32 kernel
// timed beside it (time_vs_fp32 = fp32 median / this median: > 1 is faster than fp32).
void BM_ForwardQuantized(benchmark::State& state, int i, TableDataType type) {
  Workload& w = workload(i);
  const int64_t rows = w.shape.rows, dim = w.shape.dim, stride = row_bytes(type, dim);
  std::vector<float> h_w = w.weights.download();
  std::vector<uint8_t> encoded(static_cast<size_t>(rows * stride));
  for (int64_t r = 0; r < rows; ++r) encode_row(type, h_w.data() + r * dim, dim, encoded.data() + r * stride);
  DeviceArray<uint8_t> d_rows{std::span<const uint8_t>(encoded)};
  EventTimer timer;
  std::vector<double> s, fp32;
  for (auto _ : state) {
    const double t = timer.seconds([&] {
      tbe_forward_quantized(type, d_rows.data(), rows, dim, w.ids.data(), w.offsets.data(), w.shape.batch, nullptr,
                            w.out.data(), dim);
    });
    state.SetIterationTime(t);
    s.push_back(t);
    fp32.push_back(timer.seconds(
        [&] { tbe_forward(*w.plan, w.weights.data(), w.ids.data(), w.offsets.data(), nullptr, w.out.data()); }));
  }
  const double bytes = static_cast<double>(w.shape.n_ids() * stride);
  state.counters["GBps"] = bytes / median(s) / 1e9;
  state.counters["copy_GBps"] = copy_GBps();
  state.counters["ratio_vs_copy"] = bytes / median(s) / 1e9 / copy_GBps();
  state.counters["time_vs_fp32"] = median(fp32) / median(s);
}

// apply_row_optimizer_encoded_cuda (rowwise_adagrad) on the first shape's rows encoded as `type`,
// the distinct ids of its batch as the gradient's rows, beside the same kernel on fp32 rows.
void BM_UpdateEncoded(benchmark::State& state, int i, TableDataType type) {
  Workload& w = workload(i);
  const int64_t rows = w.shape.rows, dim = w.shape.dim, stride = row_bytes(type, dim);
  std::vector<float> h_w = w.weights.download();
  std::vector<uint8_t> encoded(static_cast<size_t>(rows * stride));
  for (int64_t r = 0; r < rows; ++r) encode_row(type, h_w.data() + r * dim, dim, encoded.data() + r * stride);
  DeviceArray<uint8_t> d_rows{std::span<const uint8_t>(encoded)};
  std::vector<int64_t> h_ids = w.ids.download();
  std::sort(h_ids.begin(), h_ids.end());
  h_ids.erase(std::unique(h_ids.begin(), h_ids.end()), h_ids.end());
  const auto n = static_cast<int64_t>(h_ids.size());
  SplitMix64 value_rng{kSeed + 2};
  std::vector<float> h_g(static_cast<size_t>(n * dim));
  for (float& g : h_g) g = value_rng.uniform(-0.5f, 0.5f);
  DeviceArray<int64_t> d_ids{std::span<const int64_t>(h_ids)};
  DeviceArray<float> d_g{std::span<const float>(h_g)}, scratch(static_cast<size_t>(n * dim)), state1(static_cast<size_t>(rows));
  DeviceArray<float> fp32_rows{std::span<const float>(h_w)}, fp32_state(static_cast<size_t>(rows));
  state1.zero();
  fp32_state.zero();
  OptimizerSpec opt;
  opt.type = OptimizerType::rowwise_adagrad;
  opt.learning_rate = kLearningRate;
  opt.eps = kEps;
  const StochasticRoundingKey key{kSeed, 0, 0, 0};
  const StochasticRoundingKey* sr = type == TableDataType::int4 ? &key : nullptr;
  int64_t iteration = 0;
  EventTimer timer;
  std::vector<double> s, fp32;
  for (auto _ : state) {
    ++iteration;
    const double t = timer.seconds([&] {
      apply_row_optimizer_encoded_cuda(opt, iteration, type, d_rows.data(), rows, dim, OptimizerStateType::fp32,
                                       state1.data(), nullptr, d_ids.data(), n, d_g.data(), sr, scratch.data(), nullptr);
    });
    state.SetIterationTime(t);
    s.push_back(t);
    fp32.push_back(timer.seconds([&] {
      apply_row_optimizer_encoded_cuda(opt, iteration, TableDataType::fp32, fp32_rows.data(), rows, dim,
                                       OptimizerStateType::fp32, fp32_state.data(), nullptr, d_ids.data(), n,
                                       d_g.data(), nullptr, scratch.data(), nullptr);
    }));
  }
  const double bytes = static_cast<double>(n * (2 * stride + 4 * dim));
  state.counters["GBps"] = bytes / median(s) / 1e9;
  state.counters["time_vs_fp32_rows"] = median(fp32) / median(s);
}

void register_all() {
  benchmark::RegisterBenchmark("device_copy_d2d/1GiB", BM_DeviceCopy)->UseManualTime()->Iterations(1);
  for (int i = 0; i < static_cast<int>(std::size(kShapes)); ++i) {
    const std::string shape = kShapes[i].name();
    benchmark::RegisterBenchmark(("gpu_forward_sum/" + shape).c_str(), BM_Forward, i)
        ->Unit(benchmark::kMicrosecond)
        ->UseManualTime()
        ->MinWarmUpTime(0.1)
        ->MinTime(0.5);
    benchmark::RegisterBenchmark(("gpu_backward_rowwise_adagrad/" + shape).c_str(), BM_BackwardRowwiseAdagrad, i)
        ->Unit(benchmark::kMicrosecond)
        ->UseManualTime()
        ->MinWarmUpTime(0.1)
        ->MinTime(0.5);
  }
  for (const TableDataType t : {TableDataType::int8, TableDataType::int4})
    benchmark::RegisterBenchmark(("gpu_forward_sum_" + std::string(enum_name(t)) + "/" + kShapes[0].name()).c_str(),
                                 BM_ForwardQuantized, 0, t)
        ->Unit(benchmark::kMicrosecond)
        ->UseManualTime()
        ->MinWarmUpTime(0.1)
        ->MinTime(0.3);
  for (const int64_t n : {int64_t{1024}, int64_t{16384}})
    benchmark::RegisterBenchmark(("gpu_host_rows_gather/" + std::to_string(n) + "x128").c_str(), BM_HostRowsGather, n,
                                 int64_t{128})
        ->Unit(benchmark::kMicrosecond)
        ->UseManualTime()
        // a fixed count: each iteration also runs the per-row loop (~100x the gather's time),
        // which a time-driven count of the gather's 30 us ran for minutes on an H200 (session 40)
        ->Iterations(20);
  for (const TableDataType t : {TableDataType::fp16, TableDataType::bf16, TableDataType::int8, TableDataType::int4})
    benchmark::RegisterBenchmark(
        ("gpu_update_rowwise_adagrad_" + std::string(enum_name(t)) + "/" + kShapes[0].name()).c_str(),
        BM_UpdateEncoded, 0, t)
        ->Unit(benchmark::kMicrosecond)
        ->UseManualTime()
        // a fixed count: each iteration runs the encoded and the fp32 update, and a time-driven
        // count ran bench_gpu_kernels past the device checks' 60 s on an H200 (session 40)
        ->Iterations(200);
}

}  // namespace

int main(int argc, char** argv) {
  const DeviceCount dc = device_count();
  if (dc.count == 0) {
    std::printf("no CUDA device: cudaGetDeviceCount returned %s with count 0; nothing measured\n", dc.status.c_str());
    return 0;
  }
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
