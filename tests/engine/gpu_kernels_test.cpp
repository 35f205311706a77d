// CUDA kernels (cuda_kernels.h) against their CPU references (kernels.h, bucketize.h).
// Every test that needs a device skips, with what cudaGetDeviceCount said, where none is visible.
//
// Tolerances (|got - expected| <= abs + rel * |expected|):
//  - forward, every precision: abs 1e-6, rel 1e-6. The kernel adds the same fp32 values in the
//    same (id) order as pooled_lookup, so results are expected to be bit-identical; the margin
//    only covers a compiler reassociating the CPU loop. fp16 / bf16 weights are compared against
//    the CPU reference run on the same weights rounded to fp32.
//  - backward, fp32 weights and all optimizer state: abs 1e-6, rel 1e-5 (rowwise_adagrad sums
//    g^2 of a row by a warp reduction, in another order than the CPU loop).
//  - backward, fp16 / bf16 weights: the CPU reference updates the rounded weights in fp32 and
//    rounds the result to the storage format as the kernel does; allowed difference one unit in
//    the last place of the storage format (rel 2^-10 fp16, 2^-7 bf16) plus abs 1e-6, since an
//    fp32 difference of one ulp may round to the neighbouring 16-bit value.

#include <gtest/gtest.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "embedscope/engine/input/bucketize.h"
#include "embedscope/engine/kernels/cuda_kernels.h"
#include "embedscope/engine/model/dense.h"
#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/kernels/launch_config.h"
#include "engine/gpu_test_support.h"

using namespace embedscope::engine;
using namespace embedscope::engine::cuda;

namespace {

template <class T>
DeviceArray<T> to_device(const std::vector<T>& v) {
  return DeviceArray<T>(std::span<const T>(v));
}

// Rounds to the storage precision and back (the values the device holds).
float round_to(WeightsPrecision p, float f) {
  switch (p) {
    case WeightsPrecision::fp32: return f;
    case WeightsPrecision::fp16: return fp16_bits_to_float(float_to_fp16_bits(f));
    case WeightsPrecision::bf16: return bf16_bits_to_float(float_to_bf16_bits(f));
  }
  return f;
}

// Weights on the device in precision p, from fp32 values that are already rounded to p.
struct DeviceWeights {
  WeightsPrecision p;
  DeviceArray<float> f32;
  DeviceArray<uint16_t> f16;
  DeviceWeights(WeightsPrecision prec, const std::vector<float>& w) : p(prec) {
    if (p == WeightsPrecision::fp32) {
      f32 = to_device(w);
    } else {
      std::vector<uint16_t> bits(w.size());
      for (size_t i = 0; i < w.size(); ++i)
        bits[i] = p == WeightsPrecision::fp16 ? float_to_fp16_bits(w[i]) : float_to_bf16_bits(w[i]);
      f16 = to_device(bits);
    }
  }
  void* data() { return p == WeightsPrecision::fp32 ? static_cast<void*>(f32.data()) : f16.data(); }
  std::vector<float> download() const {
    if (p == WeightsPrecision::fp32) return f32.download();
    const auto bits = f16.download();
    std::vector<float> w(bits.size());
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = p == WeightsPrecision::fp16 ? fp16_bits_to_float(bits[i]) : bf16_bits_to_float(bits[i]);
    return w;
  }
};

// A random table-batched problem: tables with the given dims, FBGEMM's output layout
// (batch x sum(dims), table columns side by side), a KJT with empty bags and duplicate ids.
struct Problem {
  int64_t B = 0;
  std::vector<TbeTable> tables;
  std::vector<float> weights;  // rounded to the precision
  std::vector<int64_t> ids, offsets;
  int64_t out_cols = 0;
  int64_t state1 = 0, state2 = 0;  // floats of momentum1 / momentum2

  Problem(const std::vector<int64_t>& dims, int64_t batch, Pooling pooling, WeightsPrecision p, OptimizerType opt,
          uint64_t seed, int64_t ids_base = 0) {
    B = batch;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> val(-1.0f, 1.0f);
    int64_t woff = 0;
    for (size_t t = 0; t < dims.size(); ++t) {
      TbeTable tab;
      // a small table (many duplicates) every other table, a larger one otherwise
      tab.num_rows = t % 2 == 0 ? 7 : 50 + static_cast<int64_t>(rng() % 200);
      tab.dim = dims[t];
      // FBGEMM-style: each table's rows start at a multiple of 8 elements (16-byte loads); the
      // padding in between holds NaN, so a read past a row shows up in the results
      tab.weights_offset = (woff + 7) / 8 * 8;
      woff = tab.weights_offset + tab.num_rows * tab.dim;
      tab.out_offset = out_cols;
      out_cols += tab.dim;
      tab.pooling = pooling == Pooling::mean ? 1 : 0;
      const auto [m1, m2] = optimizer_state_floats(opt, tab.num_rows, tab.dim);
      tab.momentum1_offset = state1;
      tab.momentum2_offset = state2;
      state1 += m1;
      state2 += m2;
      tables.push_back(tab);
    }
    for (auto& tab : tables) tab.out_stride = out_cols;
    weights.assign(static_cast<size_t>(woff), std::nanf(""));
    for (const auto& tab : tables)
      for (int64_t i = 0; i < tab.num_rows * tab.dim; ++i)
        weights[static_cast<size_t>(tab.weights_offset + i)] = round_to(p, val(rng));
    // ids_base leading ids that no bag uses: offsets[0] > 0 as in a slice of a larger KJT
    ids.assign(static_cast<size_t>(ids_base), 123456789);
    offsets.push_back(ids_base);
    for (const auto& tab : tables)
      for (int64_t b = 0; b < B; ++b) {
        const int64_t len = b % 5 == 1 ? 0 : static_cast<int64_t>(rng() % 9);  // every 5th bag empty
        for (int64_t i = 0; i < len; ++i) ids.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(tab.num_rows)));
        offsets.push_back(static_cast<int64_t>(ids.size()));
      }
  }
  int64_t num_ids() const { return offsets.back() - offsets.front(); }
  // per-bag scale as the trainer computes it for mean pooling (1/len, 0 for an empty bag)
  std::vector<float> mean_scale(size_t t) const {
    std::vector<float> s(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = offsets[t * B + b + 1] - offsets[t * B + b];
      s[static_cast<size_t>(b)] = len > 0 ? 1.0f / static_cast<float>(len) : 0.0f;
    }
    return s;
  }
  std::string describe() const {
    std::ostringstream s;
    s << "B=" << B << " ids=" << num_ids() << " tables:";
    for (const auto& t : tables) s << " " << t.num_rows << "x" << t.dim << (t.pooling ? "/mean" : "/sum");
    return s.str();
  }
};

// Compares got with expected elementwise (NaN expected: NaN required); prints up to 10 mismatches with `where(i)`.
template <class Where>
void expect_close(const std::vector<float>& got, const std::vector<float>& expected, double abs_tol, double rel_tol,
                  const std::string& what, Where where) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  int64_t bad = 0;
  std::ostringstream msg;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], e = expected[i];
    const bool ok = std::isnan(e) ? std::isnan(g) : std::abs(g - e) <= abs_tol + rel_tol * std::abs(e);
    if (!ok && bad++ < 10) {
      char buf[160];
      std::snprintf(buf, sizeof buf, ": got %.9g expected %.9g (diff %.3g)\n", g, e, g - e);
      msg << "  " << where(i) << buf;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " values differ beyond abs " << abs_tol
                    << " + rel " << rel_tol << ", first ones:\n"
                    << msg.str();
}

// (table, bag, column) of element i of the FBGEMM output layout.
std::string out_where(const Problem& pr, size_t i) {
  const int64_t b = static_cast<int64_t>(i) / pr.out_cols, col = static_cast<int64_t>(i) % pr.out_cols;
  for (size_t t = 0; t < pr.tables.size(); ++t)
    if (col < pr.tables[t].out_offset + pr.tables[t].dim)
      return "table " + std::to_string(t) + " bag " + std::to_string(b) + " column " +
             std::to_string(col - pr.tables[t].out_offset);
  return "?";
}
enum class Layout { weights, momentum1_rowwise, momentum1, momentum2 };
// (table, row, column) of element i of the weights or an optimizer state array.
std::string row_where(const Problem& pr, size_t i, Layout layout = Layout::weights) {
  for (size_t t = 0; t < pr.tables.size(); ++t) {
    const auto& tab = pr.tables[t];
    const int64_t per_row = layout == Layout::momentum1_rowwise ? 1 : tab.dim;
    const int64_t base = layout == Layout::weights     ? tab.weights_offset
                         : layout == Layout::momentum2 ? tab.momentum2_offset
                                                       : tab.momentum1_offset;
    const auto k = static_cast<int64_t>(i) - base;
    if (k < 0) return "padding before table " + std::to_string(t);
    if (k < tab.num_rows * per_row)
      return "table " + std::to_string(t) + " row " + std::to_string(k / per_row) + " column " +
             std::to_string(k % per_row);
  }
  return "padding after the last table";
}

const WeightsPrecision kPrecisions[] = {WeightsPrecision::fp32, WeightsPrecision::fp16, WeightsPrecision::bf16};
const std::vector<int64_t> kDims{1, 3, 100, 1280, 64, 128, 8};

// CPU reference of tbe_forward.
std::vector<float> forward_reference(const Problem& pr, const float* bag_scale) {
  std::vector<float> out(static_cast<size_t>(pr.B * pr.out_cols), -99.0f);
  for (size_t t = 0; t < pr.tables.size(); ++t) {
    const auto& tab = pr.tables[t];
    std::vector<float> sc = pr.mean_scale(t);
    const float* s = bag_scale ? bag_scale + t * pr.B : tab.pooling ? sc.data() : nullptr;
    pooled_lookup(pr.weights.data() + tab.weights_offset, tab.num_rows, tab.dim, pr.ids.data(),
                  pr.offsets.data() + t * pr.B, pr.B, s, out.data() + tab.out_offset, tab.out_stride);
  }
  return out;
}

}  // namespace

TEST(GpuTbePlan, BadTablesAreRefusedNamingTheTable) {
  // validated before anything touches the device
  TbeTable ok;
  ok.num_rows = 4, ok.dim = 8, ok.out_stride = 8;
  TbeTable bad = ok;
  bad.dim = 0;
  try {
    TbePlan plan({ok, bad}, 2, WeightsPrecision::fp32);
    FAIL() << "dim 0 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "TbePlan: table 1: dim 0 < 1");
  }
  bad = ok;
  bad.out_stride = 7;
  EXPECT_THROW(TbePlan({bad}, 2, WeightsPrecision::fp32), std::invalid_argument);
}

TEST(GpuTbe, ForwardMatchesPooledLookupEveryPrecisionAndPooling) {
  REQUIRE_CUDA_DEVICE();
  uint64_t seed = 1;
  for (WeightsPrecision p : kPrecisions)
    for (Pooling pooling : {Pooling::sum, Pooling::mean})
      for (int64_t base : {0, 5}) {
        Problem pr(kDims, 37, pooling, p, OptimizerType::sgd, seed++, base);
        SCOPED_TRACE(std::string(to_string(p)) + " " + to_string(pooling) + " " + pr.describe());
        TbePlan plan(pr.tables, pr.B, p);
        DeviceWeights w(p, pr.weights);
        auto ids = to_device(pr.ids);
        auto off = to_device(pr.offsets);
        DeviceArray<float> out(static_cast<size_t>(pr.B * pr.out_cols));
        out.zero();
        tbe_forward(plan, w.data(), ids.data(), off.data(), nullptr, out.data());
        synchronize();
        expect_close(out.download(), forward_reference(pr, nullptr), 1e-6, 1e-6, "tbe_forward",
                     [&](size_t i) { return out_where(pr, i); });
      }
}

TEST(GpuTbe, ForwardBagScaleOverridesPooling) {
  REQUIRE_CUDA_DEVICE();
  Problem pr({3, 100, 1280}, 20, Pooling::mean, WeightsPrecision::fp32, OptimizerType::sgd, 77);
  std::vector<float> scale(static_cast<size_t>(pr.B * 3));
  for (size_t i = 0; i < scale.size(); ++i) scale[i] = 0.25f * static_cast<float>(i % 7);  // e.g. 1/full length
  TbePlan plan(pr.tables, pr.B, WeightsPrecision::fp32);
  DeviceWeights w(WeightsPrecision::fp32, pr.weights);
  auto ids = to_device(pr.ids);
  auto off = to_device(pr.offsets);
  auto sc = to_device(scale);
  DeviceArray<float> out(static_cast<size_t>(pr.B * pr.out_cols));
  tbe_forward(plan, w.data(), ids.data(), off.data(), sc.data(), out.data());
  synchronize();
  expect_close(out.download(), forward_reference(pr, scale.data()), 1e-6, 1e-6, "tbe_forward bag_scale",
               [&](size_t i) { return out_where(pr, i); });
}

TEST(GpuTbe, ZeroSizeWorkIsNotLaunched) {
  REQUIRE_CUDA_DEVICE();
  Problem pr({4}, 0, Pooling::sum, WeightsPrecision::fp32, OptimizerType::sgd, 3);
  TbePlan plan(pr.tables, 0, WeightsPrecision::fp32);
  DeviceWeights w(WeightsPrecision::fp32, pr.weights);
  auto off = to_device(pr.offsets);
  // no bags: nothing launched, nothing thrown, no pointer dereferenced
  EXPECT_NO_THROW(tbe_forward(plan, w.data(), nullptr, off.data(), nullptr, nullptr));
  OptimizerSpec opt;
  EXPECT_NO_THROW(tbe_backward_update(plan, w.data(), nullptr, nullptr, nullptr, off.data(), 0, nullptr, nullptr, opt, 1));
  synchronize();
}

namespace {
// Runs `steps` backward+update iterations on the device and on the CPU reference (each table:
// accumulate_sparse_grad + apply_row_optimizer, 16-bit weights rounded after each update) and
// compares weights and optimizer state.
void check_backward(WeightsPrecision p, Pooling pooling, OptimizerType type, uint64_t seed, int steps) {
  Problem pr(kDims, 29, pooling, p, type, seed, seed % 2 == 0 ? 0 : 3);
  SCOPED_TRACE(std::string(to_string(p)) + " " + to_string(pooling) + " " + to_string(type) + " " + pr.describe());
  OptimizerSpec opt;
  opt.type = type;
  opt.learning_rate = 0.05;
  opt.eps = 1e-6;
  std::mt19937_64 rng(seed * 31 + 7);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  std::vector<float> grad(static_cast<size_t>(pr.B * pr.out_cols));
  for (float& g : grad) g = val(rng);

  TbePlan plan(pr.tables, pr.B, p);
  DeviceWeights w(p, pr.weights);
  auto ids = to_device(pr.ids);
  auto off = to_device(pr.offsets);
  auto g = to_device(grad);
  DeviceArray<float> m1(static_cast<size_t>(pr.state1)), m2(static_cast<size_t>(pr.state2));
  m1.zero();
  m2.zero();
  std::vector<float> ref = pr.weights, rm1(static_cast<size_t>(pr.state1), 0.0f), rm2(static_cast<size_t>(pr.state2), 0.0f);
  for (int it = 1; it <= steps; ++it) {
    tbe_backward_update(plan, w.data(), m1.data(), m2.data(), ids.data(), off.data(), pr.num_ids(), nullptr, g.data(),
                        opt, it);
    for (size_t t = 0; t < pr.tables.size(); ++t) {
      const auto& tab = pr.tables[t];
      std::vector<float> sc = pr.mean_scale(t);
      SparseGrad sg = accumulate_sparse_grad(tab.dim, pr.ids.data(), pr.offsets.data() + t * pr.B, pr.B,
                                             tab.pooling ? sc.data() : nullptr, grad.data() + tab.out_offset,
                                             tab.out_stride);
      const auto [n1, n2] = optimizer_state_floats(type, tab.num_rows, tab.dim);
      RowOptimizerState st;
      st.momentum1 = std::span<float>(rm1.data() + tab.momentum1_offset, static_cast<size_t>(n1));
      st.momentum2 = std::span<float>(rm2.data() + tab.momentum2_offset, static_cast<size_t>(n2));
      apply_row_optimizer(opt, it, ref.data() + tab.weights_offset, tab.dim, st, sg);
    }
    for (float& x : ref) x = round_to(p, x);
  }
  synchronize();
  // 16-bit weights: each step rounds once, and the device's fp32 sums (a warp's tree for
  // rowwise_adagrad's row mean) differ from the reference's sequential ones in the last bits, so a
  // value near a rounding boundary can land one ulp apart per step (seen on an H200: 2 ulps of fp16
  // after 2 rowwise_adagrad steps, 1 of 148,528 values)
  const double ulp_rel = p == WeightsPrecision::fp16 ? 1.0 / 1024 : 1.0 / 128;
  const double rel = p == WeightsPrecision::fp32 ? 1e-5 : ulp_rel * steps;
  expect_close(w.download(), ref, 1e-6, rel, "weights", [&](size_t i) { return row_where(pr, i); });
  if (type == OptimizerType::rowwise_adagrad)
    expect_close(m1.download(), rm1, 1e-6, 1e-5, "momentum1", [&](size_t i) { return row_where(pr, i, Layout::momentum1_rowwise); });
  if (type == OptimizerType::adam) {
    expect_close(m1.download(), rm1, 1e-6, 1e-5, "momentum1", [&](size_t i) { return row_where(pr, i, Layout::momentum1); });
    expect_close(m2.download(), rm2, 1e-6, 1e-5, "momentum2", [&](size_t i) { return row_where(pr, i, Layout::momentum2); });
  }
}
}  // namespace

TEST(GpuTbe, BackwardSgdMatchesReference) {
  REQUIRE_CUDA_DEVICE();
  uint64_t seed = 100;
  for (WeightsPrecision p : kPrecisions)
    for (Pooling pooling : {Pooling::sum, Pooling::mean}) check_backward(p, pooling, OptimizerType::sgd, seed++, 2);
}

TEST(GpuTbe, BackwardRowwiseAdagradMatchesReference) {
  REQUIRE_CUDA_DEVICE();
  uint64_t seed = 200;
  for (WeightsPrecision p : kPrecisions)
    for (Pooling pooling : {Pooling::sum, Pooling::mean})
      check_backward(p, pooling, OptimizerType::rowwise_adagrad, seed++, 2);
}

TEST(GpuTbe, BackwardAdamMatchesReference) {
  REQUIRE_CUDA_DEVICE();
  uint64_t seed = 300;
  for (WeightsPrecision p : kPrecisions)
    for (Pooling pooling : {Pooling::sum, Pooling::mean}) check_backward(p, pooling, OptimizerType::adam, seed++, 3);
}

TEST(GpuTbe, BackwardIsDeterministicWithDuplicates) {
  REQUIRE_CUDA_DEVICE();
  // one 3-row table, 4096 ids: every row occurs ~1365 times; two runs must agree bit for bit
  Problem pr({100}, 512, Pooling::sum, WeightsPrecision::fp32, OptimizerType::rowwise_adagrad, 9);
  pr.tables[0].num_rows = 3;
  pr.weights.resize(300);  // table 0 starts at 0: its first 3 rows
  std::mt19937_64 rng(5);
  pr.ids.clear();
  pr.offsets = {0};
  for (int64_t b = 0; b < pr.B; ++b) {
    for (int i = 0; i < 8; ++i) pr.ids.push_back(static_cast<int64_t>(rng() % 3));
    pr.offsets.push_back(static_cast<int64_t>(pr.ids.size()));
  }
  std::vector<float> grad(static_cast<size_t>(pr.B * 100));
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f;
  OptimizerSpec opt;
  opt.type = OptimizerType::rowwise_adagrad;
  std::vector<std::vector<float>> results;
  for (int run = 0; run < 2; ++run) {
    TbePlan plan(pr.tables, pr.B, WeightsPrecision::fp32);
    DeviceWeights w(WeightsPrecision::fp32, pr.weights);
    auto ids = to_device(pr.ids);
    auto off = to_device(pr.offsets);
    auto g = to_device(grad);
    DeviceArray<float> m1(3);
    m1.zero();
    tbe_backward_update(plan, w.data(), m1.data(), nullptr, ids.data(), off.data(), pr.num_ids(), nullptr, g.data(),
                        opt, 1);
    results.push_back(w.download());
  }
  EXPECT_EQ(results[0], results[1]);
  // and the rows moved: the update was applied
  EXPECT_NE(results[0], pr.weights);
}

// Issue 14: one plan built at setup (batch size 0) serves every step's bag count, passed per
// call; the backward's scratch from a grow-only workspace gives the stream-ordered pool's result
// bit for bit, and a second call of the same size allocates nothing.
TEST(GpuTbe, OnePlanServesEveryBatchSizeAndTheWorkspaceMatchesThePool) {
  REQUIRE_CUDA_DEVICE();
  Problem pr({3, 100, 64}, 20, Pooling::sum, WeightsPrecision::fp32, OptimizerType::rowwise_adagrad, 41);
  const TbePlan plan(pr.tables, 0, WeightsPrecision::fp32);  // no batch size of its own
  DeviceWeights w(WeightsPrecision::fp32, pr.weights);
  auto ids = to_device(pr.ids);
  auto off = to_device(pr.offsets);
  DeviceArray<float> out(static_cast<size_t>(pr.B * pr.out_cols));
  tbe_forward(plan, w.data(), ids.data(), off.data(), nullptr, out.data(), nullptr, pr.B);
  synchronize();
  expect_close(out.download(), forward_reference(pr, nullptr), 1e-6, 1e-6, "tbe_forward, batch size per call",
               [&](size_t i) { return out_where(pr, i); });
  EXPECT_THROW(tbe_forward(plan, w.data(), ids.data(), off.data(), nullptr, out.data(), nullptr, -2),
               std::invalid_argument);
  std::vector<float> grad(static_cast<size_t>(pr.B * pr.out_cols));
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = static_cast<float>((i * 613) % 997) * 1e-3f - 0.5f;
  auto g = to_device(grad);
  OptimizerSpec opt;
  opt.type = OptimizerType::rowwise_adagrad;
  GrowOnlyWorkspace ws([](size_t b) { return device_malloc(b); }, [](void* p) { device_free(p); });
  std::vector<std::vector<float>> results;
  for (int run = 0; run < 3; ++run) {  // 0: the pool; 1, 2: the workspace
    DeviceWeights wr(WeightsPrecision::fp32, pr.weights);
    DeviceArray<float> m1(static_cast<size_t>(plan.total_rows()));
    m1.zero();
    tbe_backward_update(plan, wr.data(), m1.data(), nullptr, ids.data(), off.data(), pr.num_ids(), nullptr, g.data(),
                        opt, 1, nullptr, run == 0 ? nullptr : &ws, pr.B);
    synchronize();
    results.push_back(wr.download());
  }
  // bit for bit (memcmp: the padding between tables holds NaN, which == would call unequal)
  const size_t bytes = pr.weights.size() * sizeof(float);
  EXPECT_EQ(std::memcmp(results[1].data(), results[0].data(), bytes), 0);
  EXPECT_EQ(std::memcmp(results[2].data(), results[0].data(), bytes), 0);
  EXPECT_NE(std::memcmp(results[0].data(), pr.weights.data(), bytes), 0);  // the update was applied
  EXPECT_EQ(ws.allocs(), 1);  // the second call of the same size reused the block
}

TEST(GpuBucketize, MatchesCpuReference) {
  REQUIRE_CUDA_DEVICE();
  std::mt19937_64 rng(11);
  for (int64_t B : {1, 7, 300}) {
    const int64_t F = 3, rows = 1000;
    std::vector<int64_t> values, offsets{0};
    for (int64_t bag = 0; bag < F * B; ++bag) {
      const int64_t len = bag % 4 == 2 ? 0 : static_cast<int64_t>(rng() % 70);  // some bags > 32 ids
      for (int64_t i = 0; i < len; ++i) values.push_back(static_cast<int64_t>(rng() % rows));
      offsets.push_back(static_cast<int64_t>(values.size()));
    }
    // 4 row-wise shards of feature 0 and 2 (uneven), feature 1 whole
    std::vector<BucketSlot> slots;
    for (int f : {0, 2})
      for (int64_t r0 : {0, 250, 600, 999}) slots.push_back({f, true, r0, r0 == 999 ? 1 : r0 == 600 ? 399 : r0 == 0 ? 250 : 350});
    slots.push_back({1, false, 0, 0});
    const BucketizedKjt ref = bucketize_kjt(values, offsets, B, slots);
    SCOPED_TRACE("B=" + std::to_string(B) + " ids=" + std::to_string(values.size()));
    auto dv = to_device(values);
    auto doff = to_device(offsets);
    const size_t cap = values.size() * 2 + 1;
    DeviceArray<int64_t> lengths(slots.size() * static_cast<size_t>(B)), ids(cap), splits(slots.size());
    const int64_t n = bucketize_kjt_cuda(dv.data(), doff.data(), F, B, slots, lengths.data(), ids.data(),
                                         static_cast<int64_t>(cap), splits.data());
    ASSERT_EQ(n, static_cast<int64_t>(ref.ids.size()));
    EXPECT_EQ(lengths.download(), ref.lengths);
    EXPECT_EQ(splits.download(), ref.splits);
    auto got = ids.download();
    got.resize(static_cast<size_t>(n));
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != ref.ids[i]) {
        ADD_FAILURE() << "id " << i << ": got " << got[i] << " expected " << ref.ids[i];
        break;
      }
    // too small an output is an error, not an overflow
    EXPECT_THROW(bucketize_kjt_cuda(dv.data(), doff.data(), F, B, slots, lengths.data(), ids.data(), n - 1,
                                    splits.data()),
                 std::length_error);
  }
}

// The bucketizing's scratch from a grow-only workspace (RankDevice::bucketize passes the rank's):
// the same results as from the stream-ordered pool, one growth for the largest batch, then no
// allocation at all - the pool's high-water mark of memory in use stays 0 (reset before each
// call), where a call without the workspace takes its scratch from the pool (its mark > 0).
TEST(GpuBucketize, ScratchFromTheWorkspaceAllocatesNothingOnceWarm) {
  REQUIRE_CUDA_DEVICE();
  std::mt19937_64 rng(57);
  const int64_t F = 2, B = 200, rows = 100;
  std::vector<int64_t> values, offsets{0};
  for (int64_t bag = 0; bag < F * B; ++bag) {
    for (int64_t i = 0; i < 1 + bag % 9; ++i) values.push_back(static_cast<int64_t>(rng() % rows));
    offsets.push_back(static_cast<int64_t>(values.size()));
  }
  const std::vector<BucketSlot> slots{{0, true, 0, 50}, {0, true, 50, 50}, {1, false, 0, 0}};
  const BucketizedKjt ref = bucketize_kjt(values, offsets, B, slots);
  auto dv = to_device(values);
  auto doff = to_device(offsets);
  DeviceArray<int64_t> lengths(slots.size() * static_cast<size_t>(B)), ids(values.size()), splits(slots.size());
  int device = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, device), cudaSuccess);
  auto pool_high_after = [&](GrowOnlyWorkspace* ws) {
    uint64_t zero = 0, high = 0;
    EXPECT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero), cudaSuccess);
    const int64_t n = bucketize_kjt_cuda(dv.data(), doff.data(), F, B, slots, lengths.data(), ids.data(),
                                         static_cast<int64_t>(values.size()), splits.data(), nullptr, ws);
    EXPECT_EQ(n, static_cast<int64_t>(ref.ids.size()));
    EXPECT_EQ(lengths.download(), ref.lengths);
    EXPECT_EQ(splits.download(), ref.splits);
    EXPECT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high), cudaSuccess);
    return high;
  };
  EXPECT_GT(pool_high_after(nullptr), 0u);  // the pool's scratch, one allocation a call
  GrowOnlyWorkspace ws([](size_t b) { return device_malloc(b); }, [](void* p) { device_free(p); });
  pool_high_after(&ws);  // warm-up: the workspace grows once
  EXPECT_EQ(ws.allocs(), 1);
  for (int call = 0; call < 3; ++call) EXPECT_EQ(pool_high_after(&ws), 0u) << "call " << call;
  EXPECT_EQ(ws.allocs(), 1);
}

TEST(GpuDense, LinearForwardBackwardMatchCpuBlas) {
  REQUIRE_CUDA_DEVICE();
  // Tolerance abs 1e-4 + rel 1e-4: cuBLAS sums the k products in another order than OpenBLAS
  // (fp32, no TF32); values are O(1) and k <= 300. The bias gradient sums in the CPU's order.
  std::mt19937_64 rng(21);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  Blas blas;
  for (const auto& [B, in, out] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {37, 13, 64}, {256, 300, 1}, {5, 64, 129}})
    for (bool relu : {false, true}) {
      SCOPED_TRACE("B=" + std::to_string(B) + " in=" + std::to_string(in) + " out=" + std::to_string(out) +
                   (relu ? " relu" : ""));
      auto rnd = [&](int64_t n) {
        std::vector<float> v(static_cast<size_t>(n));
        for (float& f : v) f = val(rng);
        return v;
      };
      const auto x = rnd(B * in), w = rnd(out * in), b = rnd(out), dy0 = rnd(B * out);
      std::vector<float> y(static_cast<size_t>(B * out)), dy = dy0, dw(static_cast<size_t>(out * in)),
          db(static_cast<size_t>(out)), dx(static_cast<size_t>(B * in));
      linear_forward(B, in, out, x.data(), w.data(), b.data(), relu, y.data());
      linear_backward(B, in, out, x.data(), w.data(), y.data(), relu, dy.data(), dw.data(), db.data(), dx.data());

      auto d_x = to_device(x), d_w = to_device(w), d_b = to_device(b), d_dy = to_device(dy0);
      DeviceArray<float> d_y(y.size()), d_dw(dw.size()), d_db(db.size()), d_dx(dx.size());
      linear_forward_cuda(blas, B, in, out, d_x.data(), d_w.data(), d_b.data(), relu, d_y.data());
      const auto got_y = d_y.download();
      // backward from the CPU's y, so that the ReLU mask is the same even where y is ~0
      auto d_yref = to_device(y);
      linear_backward_cuda(blas, B, in, out, d_x.data(), d_w.data(), d_yref.data(), relu, d_dy.data(), d_dw.data(),
                           d_db.data(), d_dx.data());
      synchronize();
      auto at2 = [](int64_t cols) {
        return [cols](size_t i) {
          return "row " + std::to_string(static_cast<int64_t>(i) / cols) + " column " +
                 std::to_string(static_cast<int64_t>(i) % cols);
        };
      };
      expect_close(got_y, y, 1e-4, 1e-4, "y", at2(out));
      expect_close(d_dy.download(), dy, 0, 0, "dy (ReLU mask)", at2(out));
      expect_close(d_dw.download(), dw, 1e-4, 1e-4, "dw", at2(in));
      expect_close(d_db.download(), db, 1e-6, 1e-6, "db", at2(out));
      expect_close(d_dx.download(), dx, 1e-4, 1e-4, "dx", at2(in));
    }
}
