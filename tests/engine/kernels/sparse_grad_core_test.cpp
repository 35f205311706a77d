// The sparse-gradient accumulation's shared arithmetic (kernels/sparse_grad_core.h: what
// accumulate_sparse_grad_cuda runs per (row, column) and the host stand-in runs whole) against
// hand-computed values, against an independent naive accumulation (a std::map per part, in the
// order of the bags) and against the CPU kernels it replaces (accumulate_sparse_grad per part +
// merge_sparse_grads), bit for bit.

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <stdexcept>
#include <vector>

#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/kernels/sparse_grad_core.h"

namespace es = embedscope::engine;
namespace sgc = embedscope::engine::sparse_grad_core;

namespace {

// Bit patterns of floats (so that -0.0f and NaN compare as stored).
std::vector<uint32_t> sgc_bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  if (!v.empty()) std::memcpy(b.data(), v.data(), v.size() * 4);
  return b;
}

// Two parts of two bags, dim 2, a row of 4: hand-computed.
TEST(SparseGradCore, TwoPartsByHand) {
  // part 0: bag 0 {3, 1}, bag 1 {1}; part 1: bag 2 {1, 1}, bag 3 {7 (outside the table), -1}
  const std::vector<int64_t> ids = {3, 1, 1, 1, 1, 7, -1};
  const std::vector<int64_t> off = {0, 2, 3, 5, 7};
  const std::vector<float> scale = {0.5f, 1.0f, 2.0f, 1.0f};
  const std::vector<float> grad = {1, 2, 3, 4, 10, 20, 100, 100};
  const sgc::Accumulated a = sgc::accumulate_sorted(4, 2, ids.data(), off.data(), 4, 2, scale.data(), grad.data(), 2);
  // row 1: part 0 0.5 (1, 2) + (3, 4) = (3.5, 5); part 1 2 (10, 20) twice = (40, 80); sum (43.5, 85)
  // row 3: part 0 0.5 (1, 2) = (0.5, 1); ids 7 and -1 are outside [0, 4): no row
  EXPECT_EQ(a.rows, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(a.values, (std::vector<float>{43.5f, 85.0f, 0.5f, 1.0f}));
  // no scales: 1 per bag; row 1 = (1 + 3) + (10 + 10) per column 0 = 24
  const sgc::Accumulated b = sgc::accumulate_sorted(4, 2, ids.data(), off.data(), 4, 2, nullptr, grad.data(), 2);
  EXPECT_EQ(b.values, (std::vector<float>{24.0f, 46.0f, 1.0f, 2.0f}));
}

// fp32 addition is not associative: the parts' sums are added, not one running sum. Row 0:
// part 0 adds 1e8 + 1 = 1e8 (the 1 is lost: ulp(1e8) = 8), part 1 -1e8 + 1 = -1e8; their sum is 0.
// One running sum over all four would give ((1e8 + 1) - 1e8) + 1 = 1.
TEST(SparseGradCore, PartsAreSummedApartThenMergedInPartOrder) {
  const std::vector<int64_t> ids = {0, 0, 0, 0};
  const std::vector<int64_t> off = {0, 1, 2, 3, 4};
  const std::vector<float> grad = {1e8f, 1.0f, -1e8f, 1.0f};
  const sgc::Accumulated a = sgc::accumulate_sorted(1, 1, ids.data(), off.data(), 4, 2, nullptr, grad.data(), 1);
  EXPECT_EQ(a.values, std::vector<float>{0.0f});
  const sgc::Accumulated one = sgc::accumulate_sorted(1, 1, ids.data(), off.data(), 4, 4, nullptr, grad.data(), 1);
  EXPECT_EQ(one.values, std::vector<float>{1.0f});
  // the CPU kernels agree on both
  std::vector<es::SparseGrad> parts = {es::accumulate_sparse_grad(1, ids.data(), off.data(), 2, nullptr, grad.data(), 1),
                                       es::accumulate_sparse_grad(1, ids.data(), off.data() + 2, 2, nullptr, grad.data() + 2, 1)};
  EXPECT_EQ(es::merge_sparse_grads(parts, 1).values, std::vector<float>{0.0f});
  EXPECT_EQ(es::accumulate_sparse_grad(1, ids.data(), off.data(), 4, nullptr, grad.data(), 1).values,
            std::vector<float>{1.0f});
}

// Random bags (repeated ids, empty bags, ids in a grad row of stride > dim) in 3 parts: equal bit
// for bit to a naive accumulation (a map per part walked in bag order, then the parts added in
// order to zero) and to accumulate_sparse_grad per part + merge_sparse_grads.
TEST(SparseGradCore, RandomPartsEqualANaiveMapAndTheCpuKernels) {
  std::mt19937_64 rng(11);
  constexpr int64_t kRows = 37, kDim = 5, kStride = 7, kParts = 3, kBagsPerPart = 20, kBags = kParts * kBagsPerPart;
  std::uniform_int_distribution<int64_t> len(0, 6), row(0, kRows - 1);
  std::uniform_real_distribution<float> val(-3.0f, 3.0f);
  std::vector<int64_t> ids, off = {0};
  for (int64_t b = 0; b < kBags; ++b) {
    for (int64_t n = len(rng); n > 0; --n) ids.push_back(row(rng) % (b % 4 == 0 ? 5 : kRows));  // collisions
    off.push_back(static_cast<int64_t>(ids.size()));
  }
  std::vector<float> grad(static_cast<size_t>(kBags * kStride)), scale(static_cast<size_t>(kBags));
  for (auto& g : grad) g = val(rng);
  for (auto& x : scale) x = 1.0f / static_cast<float>(1 + std::uniform_int_distribution<int>(0, 5)(rng));
  const sgc::Accumulated a =
      sgc::accumulate_sorted(kRows, kDim, ids.data(), off.data(), kBags, kBagsPerPart, scale.data(), grad.data(), kStride);

  // the naive reference
  std::map<int64_t, std::vector<float>> total;
  for (int64_t p = 0; p < kParts; ++p) {
    std::map<int64_t, std::vector<float>> part;
    for (int64_t b = p * kBagsPerPart; b < (p + 1) * kBagsPerPart; ++b)
      for (int64_t i = off[static_cast<size_t>(b)]; i < off[static_cast<size_t>(b + 1)]; ++i) {
        auto& acc = part.try_emplace(ids[static_cast<size_t>(i)], kDim, 0.0f).first->second;
        for (int64_t c = 0; c < kDim; ++c) {
          const float prod = scale[static_cast<size_t>(b)] * grad[static_cast<size_t>(b * kStride + c)];
          acc[static_cast<size_t>(c)] = acc[static_cast<size_t>(c)] + prod;
        }
      }
    for (const auto& [r, v] : part) {
      auto& t = total.try_emplace(r, kDim, 0.0f).first->second;
      for (int64_t c = 0; c < kDim; ++c) t[static_cast<size_t>(c)] = t[static_cast<size_t>(c)] + v[static_cast<size_t>(c)];
    }
  }
  std::vector<int64_t> want_rows;
  std::vector<float> want_values;
  for (const auto& [r, v] : total) {
    want_rows.push_back(r);
    want_values.insert(want_values.end(), v.begin(), v.end());
  }
  EXPECT_EQ(a.rows, want_rows);
  EXPECT_EQ(sgc_bits(a.values), sgc_bits(want_values));
  EXPECT_GT(want_rows.size(), 20u);

  // the CPU kernels of the cpu backend's backward
  std::vector<es::SparseGrad> parts;
  for (int64_t p = 0; p < kParts; ++p)
    parts.push_back(es::accumulate_sparse_grad(kDim, ids.data(), off.data() + p * kBagsPerPart, kBagsPerPart,
                                               scale.data() + p * kBagsPerPart,
                                               grad.data() + p * kBagsPerPart * kStride, kStride));
  const es::SparseGrad merged = es::merge_sparse_grads(parts, kDim);
  EXPECT_EQ(a.rows, merged.rows);
  EXPECT_EQ(sgc_bits(a.values), sgc_bits(merged.values));
}

TEST(SparseGradCore, BadArgumentsAreNamed) {
  const std::vector<int64_t> ids = {0}, off = {0, 1, 1}, off1 = {1, 1, 1};
  const std::vector<float> grad = {1, 2};
  auto run = [&](int64_t bags, int64_t per_part, int64_t stride, const std::vector<int64_t>& o) {
    sgc::accumulate_sorted(1, 1, ids.data(), o.data(), bags, per_part, nullptr, grad.data(), stride);
  };
  EXPECT_THROW(run(2, 3, 1, off), std::invalid_argument);  // 2 bags in parts of 3
  EXPECT_THROW(run(2, 0, 1, off), std::invalid_argument);
  EXPECT_THROW(run(2, 1, 0, off), std::invalid_argument);  // stride < dim
  EXPECT_THROW(run(2, 1, 1, off1), std::invalid_argument);  // offsets not from 0
  try {
    run(2, 3, 1, off);
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "accumulate_sorted: num_bags 2 is not a multiple of bags_per_part 3");
  }
  EXPECT_TRUE(sgc::accumulate_sorted(1, 1, ids.data(), off.data(), 0, 1, nullptr, grad.data(), 1).rows.empty());
}

}  // namespace
