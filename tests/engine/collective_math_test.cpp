#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "embedscope/engine/comm/collective_math.h"
#include "embedscope/sessions/model/ring_all_reduce.h"

using namespace embedscope::engine;

TEST(CollectiveMath, BytesPerRankLeaveOutTheOwnSlice) {
  // Rank 1 of 3 sends 2, 5, 7 elements of 4 bytes and receives 1, 3, 4.
  const std::vector<int64_t> send{2, 5, 7}, recv{1, 3, 4};
  auto a = all_to_all_bytes(send, recv, 1, 4);
  EXPECT_EQ(a.sent, (2 + 7) * 4);
  EXPECT_EQ(a.received, (1 + 4) * 4);
  // reduce-scatter blocks 3, 6, 9 floats: rank 2 sends blocks 0 and 1, receives 9 from 2 ranks.
  const std::vector<int64_t> blocks{3, 6, 9};
  auto r = reduce_scatter_bytes(blocks, 2, 4);
  EXPECT_EQ(r.sent, (3 + 6) * 4);
  EXPECT_EQ(r.received, 2 * 9 * 4);
  // all-gather: rank 0 contributes 3 int64 to 2 peers and receives 6 + 9.
  auto g = all_gather_bytes(blocks, 0, 8);
  EXPECT_EQ(g.sent, 2 * 3 * 8);
  EXPECT_EQ(g.received, 15 * 8);
  // all-reduce of 1000 floats on 4 ranks: 2 * 3/4 * 4000 = 6000 bytes each way.
  auto ar = all_reduce_bytes(1000, 4, 1, 4);
  EXPECT_EQ(ar.sent, 6000);
  EXPECT_EQ(ar.received, 6000);
  EXPECT_EQ(all_reduce_bytes(1000, 1, 0, 4).sent, 0);
  // 1,024 floats (4,096 B) on 3 ranks: ring chunks 342, 341, 341 elements; a rank passes on every
  // chunk but its own twice: rank 0 2 x 682 x 4 = 5,456 B, ranks 1 and 2 2 x 683 x 4 = 5,464 B,
  // 16,384 B in all = 2 (3 - 1) x 4,096 (the rule of before gave every rank floor(4/3 x 4,096) =
  // 5,461 B: 1,365.25 floats). 64 floats: 336, 344, 344 B (not 341).
  EXPECT_EQ(all_reduce_bytes(1024, 3, 0, 4).sent, 5456);
  EXPECT_EQ(all_reduce_bytes(1024, 3, 1, 4).sent, 5464);
  EXPECT_EQ(all_reduce_bytes(1024, 3, 2, 4).received, 5464);
  EXPECT_EQ(all_reduce_bytes(64, 3, 0, 4).sent, 336);
  EXPECT_EQ(all_reduce_bytes(64, 3, 2, 4).sent, 344);
  // fewer elements than ranks: 2 floats on 4 ranks, chunks 1, 1, 0, 0: 8, 8, 16, 16 B = 2 x 3 x 8
  EXPECT_EQ(all_reduce_bytes(2, 4, 1, 4).sent, 8);
  EXPECT_EQ(all_reduce_bytes(2, 4, 3, 4).sent, 16);
}

TEST(CollectiveMath, RingAllReduceCountInvertsTheBytes) {
  using embedscope::sessions::ring_all_reduce_count;
  EXPECT_EQ(ring_all_reduce_count(5464, 3, 1, 4), 1024);  // 1,024 or 1,025: the smaller
  EXPECT_EQ(ring_all_reduce_count(6000, 4, 0, 4), 1000);  // 1,000 or 1,001: the multiple of 4
  EXPECT_EQ(ring_all_reduce_count(5461, 3, 0, 4), -1);    // the old rule's bytes: no whole elements
  EXPECT_EQ(ring_all_reduce_count(0, 3, 0, 4), 0);
  // every count's bytes come back (the count found may be the other one of a pair)
  for (int n = 2; n <= 9; ++n)
    for (int r = 0; r < n; ++r)
      for (int64_t c = 0; c < 400; ++c) {
        const int64_t b = embedscope::sessions::ring_all_reduce_bytes(c, n, r, 2);
        const int64_t back = ring_all_reduce_count(b, n, r, 2);
        ASSERT_GE(back, 0) << c << " on " << n << " rank " << r;
        EXPECT_EQ(embedscope::sessions::ring_all_reduce_bytes(back, n, r, 2), b);
        EXPECT_LE(std::abs(back - c), 1);
      }
}

TEST(CollectiveMath, SplitMismatchNamesThePair) {
  // 2 ranks: rank 0 sends {1, 2}, receives {1, 3}; rank 1 sends {3, 4}, receives {2, 4}: agree.
  std::vector<int64_t> all{1, 2, 1, 3, 3, 4, 2, 4};
  EXPECT_FALSE(find_split_mismatch(all, 2).has_value());
  all[6] = 5;  // rank 1 now expects 5 from rank 0, which sends 2
  auto bad = find_split_mismatch(all, 2);
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->from, 0);
  EXPECT_EQ(bad->to, 1);
  EXPECT_EQ(bad->sent, 2);
  EXPECT_EQ(bad->expected, 5);
  EXPECT_THROW(find_split_mismatch(std::vector<int64_t>(7), 2), std::invalid_argument);
}

TEST(CollectiveMath, BusBandwidthFactorsOfNcclTests) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("all_reduce", 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("all_to_all", 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("all_gather", 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("reduce_scatter", 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("all_reduce", 1), 0.0);
  EXPECT_THROW(bus_bandwidth_factor("broadcast", 2), std::invalid_argument);
  EXPECT_THROW(bus_bandwidth_factor("all_reduce", 0), std::invalid_argument);
}

TEST(CollectiveMath, WaitStateMachine) {
  EXPECT_EQ(poll_wait(false, false, 10, 100), WaitState::pending);
  EXPECT_EQ(poll_wait(true, false, 500, 100), WaitState::done);    // done, even if seen late
  EXPECT_EQ(poll_wait(true, true, 10, 100), WaitState::done);      // completion wins
  EXPECT_EQ(poll_wait(false, true, 10, 100), WaitState::failed);
  EXPECT_EQ(poll_wait(false, false, 100, 100), WaitState::timed_out);
  EXPECT_EQ(poll_sleep_ns(0), 10'000);
  EXPECT_EQ(poll_sleep_ns(3), 80'000);
  EXPECT_EQ(poll_sleep_ns(6), 640'000);
  EXPECT_EQ(poll_sleep_ns(7), 1'000'000);
  EXPECT_EQ(poll_sleep_ns(1000), 1'000'000);
  EXPECT_EQ(collective_head("all_to_all", "input_dist/ids", "world", 7),
            "all_to_all 'input_dist/ids' (group world, sequence 7)");
}

TEST(CollectiveMath, RecordDtypeFromElementSize) {
  EXPECT_STREQ(dtype_name(4), "float32");
  EXPECT_STREQ(dtype_name(8), "int64");
  EXPECT_STREQ(dtype_name(2), "bytes");  // 2-byte floats carry their dtype (qcomms) explicitly
}
