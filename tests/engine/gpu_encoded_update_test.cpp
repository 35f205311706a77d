// The cuda executor's kernels for reduced-precision shards against the CPU kernels, bit for bit:
//  - apply_row_optimizer_encoded_cuda (cuda_encoded_update.h) vs apply_row_optimizer_encoded
//    (kernels.h): every data type (fp16, bf16, int8, int4, and fp32 rows with fp16 / bf16
//    state) x optimizer x optimizer_state_type x rounding (nearest, stochastic), three
//    iterations on one shard: the stored rows, the stored state and the per-row errors;
//  - the fp16 / bf16 lookup of the device path (tbe_forward with a one-table plan of that
//    precision, as CudaRankDevice::lookup_encoded builds it) vs pooled_lookup_encoded.
// The device tests skip without a GPU (label gpu); the argument checks run everywhere. The same
// update code is checked on the host without a GPU by EncodedUpdateMath
// (tests/engine/quant/encoded_update_math_test.cpp).

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "embedscope/engine/kernels/cuda_encoded_update.h"
#include "embedscope/engine/kernels/cuda_kernels.h"
#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/quant/row_codec.h"
#include "engine/gpu_test_support.h"

namespace {

namespace es = embedscope::engine;

void geu_check(es::TableDataType type, es::OptimizerType opt_type, es::OptimizerStateType st, bool sr, int64_t dim) {
  SCOPED_TRACE(std::string(es::enum_name(type)) + " " + es::to_string(opt_type) + " state " + es::enum_name(st) +
               (sr ? " stochastic" : " nearest") + " dim " + std::to_string(dim));
  constexpr int64_t kRows = 40;
  es::OptimizerSpec opt;
  opt.type = opt_type;
  opt.learning_rate = opt_type == es::OptimizerType::sgd ? 0.5 : 0.05;
  const int64_t rb = es::row_bytes(type, dim);
  std::mt19937_64 rng(5 + dim);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  std::vector<uint8_t> rows(static_cast<size_t>(kRows * rb));
  std::vector<float> x(static_cast<size_t>(dim));
  for (int64_t r = 0; r < kRows; ++r) {
    for (auto& v : x) v = r == 2 ? 0.125f : r == 3 ? 40.0f * val(rng) : 0.1f * val(rng);
    es::encode_row(type, x.data(), dim, rows.data() + r * rb);
  }
  es::OptimizerStateBuffers cpu_state = es::make_optimizer_state(opt_type, kRows, dim, st);
  const bool fp32_state = st == es::OptimizerStateType::fp32;
  const size_t s1_bytes = fp32_state ? cpu_state.momentum1.size() * 4 : cpu_state.packed1.size();
  const size_t s2_bytes = fp32_state ? cpu_state.momentum2.size() * 4 : cpu_state.packed2.size();
  es::cuda::DeviceArray<uint8_t> d_rows(rows);
  es::cuda::DeviceArray<uint8_t> d_s1(s1_bytes + 1), d_s2(s2_bytes + 1);  // + 1: never empty
  d_s1.zero();
  d_s2.zero();
  const es::StochasticRoundingKey key{7, 2, 100, 6};
  for (int64_t it = 1; it <= 3; ++it) {
    es::SparseGrad g;
    g.dim = dim;
    for (int64_t r = 0; r < kRows; ++r)
      if ((r + it) % 3 != 0 || r == 3) g.rows.push_back(r);
    for (size_t u = 0; u < g.rows.size() * static_cast<size_t>(dim); ++u) g.values.push_back(val(rng) * (u % 7 == 0 ? 3.0f : 0.3f));
    es::QuantError cpu_err;
    es::apply_row_optimizer_encoded(opt, it, type, rows.data(), dim, cpu_state, g, &cpu_err, sr ? &key : nullptr);
    const auto n = static_cast<int64_t>(g.rows.size());
    es::cuda::DeviceArray<int64_t> d_ids(g.rows);
    es::cuda::DeviceArray<float> d_vals(g.values), scratch(static_cast<size_t>(n * dim)), errs(static_cast<size_t>(2 * n));
    es::cuda::apply_row_optimizer_encoded_cuda(opt, it, type, d_rows.data(), kRows, dim, st,
                                               opt_type == es::OptimizerType::sgd ? nullptr : d_s1.data(),
                                               opt_type == es::OptimizerType::adam ? d_s2.data() : nullptr, d_ids.data(),
                                               n, d_vals.data(), sr ? &key : nullptr, scratch.data(), errs.data());
    es::cuda::synchronize();
    ASSERT_EQ(d_rows.download(), rows) << "rows after iteration " << it;
    std::vector<uint8_t> s1 = d_s1.download(), s2 = d_s2.download();
    s1.resize(s1_bytes);
    s2.resize(s2_bytes);
    std::vector<uint8_t> w1(s1_bytes), w2(s2_bytes);
    if (s1_bytes) std::memcpy(w1.data(), fp32_state ? static_cast<void*>(cpu_state.momentum1.data()) : cpu_state.packed1.data(), s1_bytes);
    if (s2_bytes) std::memcpy(w2.data(), fp32_state ? static_cast<void*>(cpu_state.momentum2.data()) : cpu_state.packed2.data(), s2_bytes);
    EXPECT_EQ(s1, w1) << "momentum1 after iteration " << it;
    EXPECT_EQ(s2, w2) << "momentum2 after iteration " << it;
    if (type != es::TableDataType::fp32) {
      es::QuantError dev_err;
      const std::vector<float> e = errs.download();
      for (int64_t u = 0; u < n; ++u) dev_err.merge({e[static_cast<size_t>(2 * u)], e[static_cast<size_t>(2 * u + 1)]});
      EXPECT_EQ(dev_err.max_abs_error, cpu_err.max_abs_error) << "iteration " << it;
      EXPECT_EQ(dev_err.max_abs_value, cpu_err.max_abs_value) << "iteration " << it;
    }
  }
}

TEST(GpuEncodedUpdate, EveryTypeOptimizerStateAndRoundingEqualsTheCpuKernelBitForBit) {
  REQUIRE_CUDA_DEVICE();
  for (auto type : {es::TableDataType::fp16, es::TableDataType::bf16, es::TableDataType::int8, es::TableDataType::int4,
                    es::TableDataType::fp32})
    for (auto opt : {es::OptimizerType::sgd, es::OptimizerType::rowwise_adagrad, es::OptimizerType::adam})
      for (auto st : {es::OptimizerStateType::fp32, es::OptimizerStateType::fp16, es::OptimizerStateType::bf16}) {
        if (opt == es::OptimizerType::sgd && st != es::OptimizerStateType::fp32) continue;
        if (type == es::TableDataType::fp32 && st == es::OptimizerStateType::fp32) continue;  // tbe_backward_update's
        for (bool sr : {false, true}) {
          if (type == es::TableDataType::fp32 && sr) continue;
          for (int64_t dim : {6, 130}) geu_check(type, opt, st, sr, dim);
        }
      }
}

TEST(GpuEncodedUpdate, HalfLookupsOfTheDevicePathEqualTheCpuReferenceBitForBit) {
  REQUIRE_CUDA_DEVICE();
  for (auto type : {es::TableDataType::fp16, es::TableDataType::bf16}) {
    constexpr int64_t kRows = 30, kDim = 20, kBags = 11;
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<float> val(-1.0f, 1.0f);
    std::vector<uint8_t> rows(static_cast<size_t>(kRows * es::row_bytes(type, kDim)));
    std::vector<float> x(kDim);
    for (int64_t r = 0; r < kRows; ++r) {
      for (auto& v : x) v = val(rng);
      es::encode_row(type, x.data(), kDim, rows.data() + r * es::row_bytes(type, kDim));
    }
    std::vector<int64_t> offsets{0}, ids;
    std::vector<float> scale;
    for (int64_t b = 0; b < kBags; ++b) {
      const int64_t n = b % 4;
      for (int64_t i = 0; i < n; ++i) ids.push_back((b * 7 + i * 3) % kRows);
      offsets.push_back(static_cast<int64_t>(ids.size()));
      scale.push_back(n > 0 ? 1.0f / static_cast<float>(n) : 0.0f);
    }
    std::vector<float> want(kBags * kDim);
    es::pooled_lookup_encoded(type, rows.data(), kRows, kDim, ids.data(), offsets.data(), kBags, scale.data(), want.data(),
                              kDim);
    es::cuda::TbeTable t;
    t.num_rows = kRows;
    t.dim = kDim;
    t.out_stride = kDim;
    const es::cuda::TbePlan plan({t}, 0,
                                 type == es::TableDataType::fp16 ? es::cuda::WeightsPrecision::fp16
                                                                 : es::cuda::WeightsPrecision::bf16);
    es::cuda::DeviceArray<uint8_t> d_rows(rows);
    es::cuda::DeviceArray<int64_t> d_ids(ids), d_off(offsets);
    es::cuda::DeviceArray<float> d_scale(scale), d_out(want.size());
    es::cuda::tbe_forward(plan, d_rows.data(), d_ids.data(), d_off.data(), d_scale.data(), d_out.data(), nullptr, kBags);
    EXPECT_EQ(d_out.download(), want) << es::enum_name(type);
  }
}

TEST(GpuEncodedUpdate, BadArgumentsAreRefusedNamingThem) {
  es::OptimizerSpec opt;
  opt.type = es::OptimizerType::adam;
  auto call = [&](es::TableDataType t, int64_t dim, void* s1, int64_t it) {
    es::cuda::apply_row_optimizer_encoded_cuda(opt, it, t, nullptr, 1, dim, es::OptimizerStateType::fp32, s1, s1,
                                               nullptr, 0, nullptr, nullptr, nullptr, nullptr);
  };
  int dummy = 0;
  EXPECT_THROW(call(es::TableDataType::int4, 5, &dummy, 1), std::invalid_argument);  // odd int4 dim
  EXPECT_THROW(call(es::TableDataType::int8, 0, &dummy, 1), std::invalid_argument);  // dim 0
  EXPECT_THROW(call(es::TableDataType::int8, 4, nullptr, 1), std::invalid_argument);  // adam without state
  EXPECT_THROW(call(es::TableDataType::int8, 4, &dummy, 0), std::invalid_argument);  // adam iteration 0
  try {
    call(es::TableDataType::int4, 5, &dummy, 1);
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "apply_row_optimizer_encoded_cuda: int4 rows need an even dim, not 5");
  }
  EXPECT_NO_THROW(call(es::TableDataType::int8, 4, &dummy, 1));  // n = 0: nothing launched
}

}  // namespace
