// The host stand-in (detail::host_rank_device) counts the host<->device copies a GPU makes in
// the same calls (RankDevice::copies), so that the copy figures of runs on the stand-in are the
// GPU path's: bucketize's slot list (copied by the call unless the caller keeps it on the
// device) and the encoded update's errors (read back when asked for). Hand-computed values; the
// GPU side is CudaRankDevice (cuda_rank_device.cpp), whose calls these mirror.
#include <gtest/gtest.h>

#include <vector>

#include "embedscope/engine/quant/row_codec.h"
#include "exec/device/rank_device.h"

namespace es = embedscope::engine;
using es::detail::CopyTotals;

namespace {

CopyTotals minus(const CopyTotals& a, const CopyTotals& b) {
  return {a.host_to_device - b.host_to_device, a.device_to_host - b.device_to_host,
          a.host_to_device_bytes - b.host_to_device_bytes, a.device_to_host_bytes - b.device_to_host_bytes};
}

}  // namespace

// 2 features x 2 bags: f0 [1 7] [4], f1 [] [2 9]; slots f1 whole and f0 rows [3, 8) (24 B each:
// int, bool, two int64). Each call reads its 8-byte count back; the slot list crosses only when
// the call is not given the list on the device (2 x 24 = 48 B); a list on the device that is not
// the host's (another plan's) is refused.
TEST(StandInCopies, BucketizeCopiesItsSlotListOnlyWhenNotKeptOnTheDevice) {
  auto dev = es::detail::host_rank_device(0);
  dev->bind_thread();
  const std::vector<int64_t> values{1, 7, 4, 2, 9}, offsets{0, 2, 3, 3, 5};
  const std::vector<es::BucketSlot> slots{{1, false, 0, 0}, {0, true, 3, 5}};
  ASSERT_EQ(sizeof(es::BucketSlot), 24u);
  std::vector<int64_t> lengths(4, -1), ids(5, -1), splits(2, -1);
  CopyTotals before = dev->copies();
  EXPECT_EQ(dev->bucketize(values.data(), offsets.data(), 2, 2, slots, lengths.data(), ids.data(), 5, splits.data()), 4);
  CopyTotals d = minus(dev->copies(), before);
  EXPECT_EQ(d.host_to_device, 1);
  EXPECT_EQ(d.host_to_device_bytes, 48);
  EXPECT_EQ(d.device_to_host, 1);
  EXPECT_EQ(d.device_to_host_bytes, 8);

  // the list on the "device" (the stand-in's device memory is host memory): nothing crosses in
  const std::vector<es::BucketSlot> on_device = slots;
  before = dev->copies();
  std::vector<int64_t> lengths2(4, -1), ids2(5, -1), splits2(2, -1);
  EXPECT_EQ(dev->bucketize(values.data(), offsets.data(), 2, 2, slots, lengths2.data(), ids2.data(), 5, splits2.data(),
                           on_device.data()),
            4);
  d = minus(dev->copies(), before);
  EXPECT_EQ(d.host_to_device, 0);
  EXPECT_EQ(d.host_to_device_bytes, 0);
  EXPECT_EQ(d.device_to_host, 1);
  EXPECT_EQ(d.device_to_host_bytes, 8);
  EXPECT_EQ(lengths2, lengths);
  EXPECT_EQ(ids2, ids);
  EXPECT_EQ(splits2, splits);

  std::vector<es::BucketSlot> stale = slots;
  stale[1].row_begin = 4;
  EXPECT_THROW(dev->bucketize(values.data(), offsets.data(), 2, 2, slots, lengths.data(), ids.data(), 5, splits.data(),
                              stale.data()),
               std::logic_error);
}

// update_encoded of 2 rows of an fp16 table (3 rows x 4 columns, sgd): asked for the encoding
// error, the GPU reads 2 floats a row back in one copy (2 x 2 x 4 = 16 B) and waits for it; not
// asked for (warm-up steps), or for fp32 rows (not measured), nothing comes back.
TEST(StandInCopies, EncodedUpdateCountsItsErrorsCopyBack) {
  auto dev = es::detail::host_rank_device(0);
  dev->bind_thread();
  const int64_t rows = 3, cols = 4;
  dev->prepare_encoded_shard(rows, cols, es::TableDataType::fp16);
  std::vector<uint8_t> packed(static_cast<size_t>(rows * es::row_bytes(es::TableDataType::fp16, cols)), 0);
  es::detail::EncodedShardView v;
  v.data_type = es::TableDataType::fp16;
  v.rows = packed.data();
  v.num_rows = rows;
  v.cols = cols;
  es::OptimizerSpec opt;  // sgd: no state
  const std::vector<int64_t> row_ids{0, 2};
  const std::vector<float> grad(static_cast<size_t>(2 * cols), 0.5f);
  es::QuantError err;
  CopyTotals before = dev->copies();
  int64_t waits = dev->sync_calls().waits;
  dev->update_encoded(opt, 1, v, row_ids.data(), 2, grad.data(), &err);
  CopyTotals d = minus(dev->copies(), before);
  EXPECT_EQ(d.device_to_host, 1);
  EXPECT_EQ(d.device_to_host_bytes, 16);
  EXPECT_EQ(d.host_to_device, 0);
  EXPECT_EQ(dev->sync_calls().waits - waits, 1);

  before = dev->copies();
  waits = dev->sync_calls().waits;
  dev->update_encoded(opt, 2, v, row_ids.data(), 2, grad.data(), nullptr);
  d = minus(dev->copies(), before);
  EXPECT_EQ(d.device_to_host, 0);
  EXPECT_EQ(dev->sync_calls().waits - waits, 0);

  std::vector<float> fp32_rows(static_cast<size_t>(rows * cols), 0.0f);
  es::detail::EncodedShardView f = v;
  f.data_type = es::TableDataType::fp32;
  f.rows = reinterpret_cast<uint8_t*>(fp32_rows.data());
  dev->prepare_encoded_shard(rows, cols, es::TableDataType::fp32);
  before = dev->copies();
  dev->update_encoded(opt, 3, f, row_ids.data(), 2, grad.data(), &err);
  d = minus(dev->copies(), before);
  EXPECT_EQ(d.device_to_host, 0);
}
