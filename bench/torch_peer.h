#pragma once
// Shared by the pooled-lookup benchmarks (kernels_bench.cpp on the CPU, gpu_kernels_bench.cpp
// on CUDA): their shapes, the id stream shared with the PyTorch peer script
// bench/torch_embedding_bag.py, and running that peer once per shape.
// Environment overrides: EMBEDSCOPE_TORCH_PYTHON (interpreter), EMBEDSCOPE_TORCH_PEER (script).

#include <cstdint>
#include <optional>
#include <string>

#include <benchmark/benchmark.h>

namespace embedscope::bench {

constexpr uint64_t kSeed = 42;
constexpr float kLearningRate = 0.01f;
constexpr float kEps = 1e-8f;

struct Shape {
  int64_t rows, dim, bag, batch;
  int64_t n_ids() const { return bag * batch; }
  std::string name() const {
    return std::to_string(rows) + "x" + std::to_string(dim) + "/bag" + std::to_string(bag) + "/batch" +
           std::to_string(batch);
  }
};

inline constexpr Shape kShapes[] = {
    {1'000'000, 128, 32, 4096},  // (a) 512 MB table: rows come from DRAM
    {100'000, 64, 16, 4096},     // (b) 25.6 MB table: rows mostly from cache
};

// The id stream shared with the peer script (it implements the same function).
struct SplitMix64 {
  uint64_t x;
  uint64_t next() {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) {  // 24 random bits -> [lo, hi)
    return lo + (hi - lo) * static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);
  }
};

struct PeerResult {
  std::optional<double> forward_GBps, backward_GBps;
  std::string note;  // why there is no number, or a warning
};

/// Runs bench/torch_embedding_bag.py for shape `s` on `device` ("cpu" or "cuda") and reads its
/// JSON line. Never throws: a peer that cannot run gives a PeerResult with only `note` set.
/// `n_unique` (distinct ids of our stream) is compared with the peer's as a sanity check.
PeerResult run_torch_peer(const Shape& s, int64_t n_unique, const std::string& device);

/// run_torch_peer for kShapes[shape_index], run once per shape in this process (later calls
/// return the first result); its note, if any, goes to stderr prefixed with the shape's name.
const PeerResult& torch_peer_once(int shape_index, int64_t n_unique, const std::string& device);

/// Sets the counters torch_GBps and ratio_vs_torch (`ours_GBps` / torch_GBps, both GB/s) when the
/// peer gave a positive `torch_GBps`; otherwise labels the benchmark "no torch peer" (plus
/// "(see stderr)" when `note` says why).
void report_vs_torch(benchmark::State& state, double ours_GBps, std::optional<double> torch_GBps,
                     const std::string& note);

}  // namespace embedscope::bench
