// tbe_forward_quantized (cuda_kernels.h) against the CPU reference pooled_lookup_encoded
// (kernels.h) on rows encoded by encode_row (quant/row_codec.h): int8 and int4 rows, bit for
// bit. The device tests skip without a GPU (label gpu); the argument checks run everywhere.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "embedscope/engine/kernels/cuda_kernels.h"
#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/quant/row_codec.h"
#include "engine/gpu_test_support.h"

namespace {

namespace es = embedscope::engine;

// One table of `rows` encoded rows and `bags` bags of 0..6 ids (repeats and empty bags), the
// output padded by 3 columns that must stay untouched.
void check_quantized_lookup(es::TableDataType type, int64_t dim, bool with_scale, uint64_t seed) {
  SCOPED_TRACE(std::string(es::enum_name(type)) + " dim " + std::to_string(dim) + (with_scale ? " bag_scale" : ""));
  constexpr int64_t kRows = 50, kBags = 37;
  const int64_t stride_bytes = es::row_bytes(type, dim), out_stride = dim + 3;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  std::vector<uint8_t> rows(static_cast<size_t>(kRows * stride_bytes));
  std::vector<float> x(static_cast<size_t>(dim));
  for (int64_t r = 0; r < kRows; ++r) {
    for (auto& v : x) v = r == 3 ? 0.25f : r == 4 ? 300.0f * val(rng) : val(rng);  // a constant row, a wide one
    es::encode_row(type, x.data(), dim, rows.data() + r * stride_bytes);
  }
  std::vector<int64_t> offsets{0}, ids;
  std::uniform_int_distribution<int64_t> len(0, 6), id(0, kRows - 1);
  for (int64_t b = 0; b < kBags; ++b) {
    const int64_t n = b % 9 == 0 ? 0 : len(rng);
    for (int64_t i = 0; i < n; ++i) ids.push_back(i == 1 ? ids.back() : id(rng));  // repeats
    offsets.push_back(static_cast<int64_t>(ids.size()));
  }
  std::vector<float> scale(static_cast<size_t>(kBags));
  for (int64_t b = 0; b < kBags; ++b) {
    const int64_t n = offsets[static_cast<size_t>(b) + 1] - offsets[static_cast<size_t>(b)];
    scale[static_cast<size_t>(b)] = n > 0 ? 1.0f / static_cast<float>(n) : 0.0f;  // mean
  }
  const float poison = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> expected(static_cast<size_t>(kBags * out_stride), poison);
  es::pooled_lookup_encoded(type, rows.data(), kRows, dim, ids.data(), offsets.data(), kBags,
                            with_scale ? scale.data() : nullptr, expected.data(), out_stride);

  es::cuda::DeviceArray<uint8_t> d_rows(rows);
  es::cuda::DeviceArray<int64_t> d_ids(ids), d_off(offsets);
  es::cuda::DeviceArray<float> d_scale(scale), d_out(expected.size());
  d_out.upload(std::vector<float>(expected.size(), poison));
  es::cuda::tbe_forward_quantized(type, d_rows.data(), kRows, dim, d_ids.data(), d_off.data(), kBags,
                                  with_scale ? d_scale.data() : nullptr, d_out.data(), out_stride);
  es::cuda::synchronize();
  const std::vector<float> got = d_out.download();
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool pad = static_cast<int64_t>(i) % out_stride >= dim;
    const bool same = pad ? std::isnan(got[i]) : std::memcmp(&got[i], &expected[i], sizeof(float)) == 0;
    if (!same && bad++ < 5)
      ADD_FAILURE() << "bag " << static_cast<int64_t>(i) / out_stride << " column " << static_cast<int64_t>(i) % out_stride
                    << ": got " << got[i] << ", expected " << (pad ? "untouched padding" : std::to_string(expected[i]));
  }
  EXPECT_EQ(bad, 0);
}

}  // namespace

TEST(GpuTbeQuantized, Int8AndInt4LookupsEqualTheCpuReferenceBitForBit) {
  REQUIRE_CUDA_DEVICE();
  uint64_t seed = 11;
  for (const bool with_scale : {false, true}) {
    for (const int64_t dim : {2, 6, 64, 130}) {
      check_quantized_lookup(es::TableDataType::int8, dim, with_scale, seed++);
      check_quantized_lookup(es::TableDataType::int4, dim, with_scale, seed++);
    }
    check_quantized_lookup(es::TableDataType::int8, 7, with_scale, seed++);  // an odd dim: unaligned scales
  }
}

TEST(GpuTbeQuantized, BadArgumentsAreRefusedNamingThem) {
  auto message = [](es::TableDataType t, int64_t dim, int64_t bags) {
    try {
      es::cuda::tbe_forward_quantized(t, nullptr, 10, dim, nullptr, nullptr, bags, nullptr, nullptr, dim);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  EXPECT_NE(message(es::TableDataType::fp16, 4, 1).find("data_type fp16 (int8 or int4"), std::string::npos);
  EXPECT_NE(message(es::TableDataType::int4, 5, 1).find("int4 rows need an even dim, not 5"), std::string::npos);
  EXPECT_NE(message(es::TableDataType::int8, 0, 1).find("dim 0"), std::string::npos);
  EXPECT_NE(message(es::TableDataType::int8, 4, -1).find("num_bags -1"), std::string::npos);
}
