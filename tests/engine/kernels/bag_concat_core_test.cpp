// bag_concat_core (kernels/bag_concat_core.h): the bags of several parts made one - the host
// reference that the host stand-in runs for RankDevice::concat_bags, and the per-element
// functions the CUDA kernel computes each output with - by hand, and through the stand-in.

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>
#include <vector>

#include "embedscope/engine/kernels/bag_concat_core.h"
#include "exec/device/rank_device.h"

namespace bc = embedscope::engine::bag_concat_core;

// Three parts of B = 2 bags: p0 [10] [11 12], p1 (no ids: both bags empty), p2 [] [20 21].
// Output ids 10 11 12 20 21; offsets 0 1 | 3 3 | 3 3 | 5: p0's 0 1 (3), p1's 3 + (0 0) (3),
// p2's 3 + (0 0 2) - the last one the end, 5.
TEST(BagConcatCore, ConcatenatesThePartsIdsAndRebasesTheirOffsetsByHand) {
  const std::vector<int64_t> i0{10, 11, 12}, o0{0, 1, 3}, o1{0, 0, 0}, i2{20, 21}, o2{0, 0, 2};
  const std::vector<bc::Part> parts{{i0.data(), o0.data(), 3}, {nullptr, o1.data(), 0}, {i2.data(), o2.data(), 2}};
  std::vector<int64_t> ids(5, -1), off(7, -1);
  bc::concat(parts, 2, ids.data(), off.data());
  EXPECT_EQ(ids, (std::vector<int64_t>{10, 11, 12, 20, 21}));
  EXPECT_EQ(off, (std::vector<int64_t>{0, 1, 3, 3, 3, 3, 5}));
  // the kernel's per-element functions give the same: bases 0 3 3 5
  const int64_t bases[] = {0, 3, 3, 5};
  const int64_t* offsets[] = {o0.data(), o1.data(), o2.data()};
  const int64_t want_part[] = {0, 0, 0, 2, 2};  // the empty part 1 holds no id
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(bc::part_of_id(bases, 3, i), want_part[i]) << i;
  for (int64_t j = 0; j <= 6; ++j) EXPECT_EQ(bc::offset_at(offsets, bases, 3, 2, j), off[static_cast<size_t>(j)]) << j;
  // one part: itself
  std::vector<int64_t> one_ids(3, -1), one_off(3, -1);
  bc::concat(std::span(parts).first(1), 2, one_ids.data(), one_off.data());
  EXPECT_EQ(one_ids, i0);
  EXPECT_EQ(one_off, o0);
  // no parts, or no bags: one offset, 0
  std::vector<int64_t> none(1, -1);
  bc::concat({}, 2, nullptr, none.data());
  EXPECT_EQ(none[0], 0);
  const std::vector<bc::Part> empty{{nullptr, nullptr, 0}, {nullptr, nullptr, 0}};
  none[0] = -1;
  bc::concat(empty, 0, nullptr, none.data());
  EXPECT_EQ(none[0], 0);
}

TEST(BagConcatCore, RefusesShapesAndOffsetsThatDoNotAddUp) {
  const std::vector<int64_t> i0{10, 11, 12}, o0{0, 1, 3}, bad_end{0, 1, 2}, bad_start{1, 1, 3}, down{0, 2, 1};
  std::vector<int64_t> ids(3, -1), off(3, -1);
  auto refused = [&](const std::vector<bc::Part>& parts, int64_t B, const char* what) {
    try {
      bc::concat(parts, B, ids.data(), off.data());
      ADD_FAILURE() << "accepted: " << what;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("concat_bags"), std::string::npos) << e.what();
    }
  };
  refused({{i0.data(), bad_end.data(), 3}}, 2, "offsets ending short of num_ids");
  refused({{i0.data(), bad_start.data(), 3}}, 2, "offsets not from 0");
  refused({{i0.data(), down.data(), 3}}, 2, "offsets going down");
  refused({{i0.data(), o0.data(), -1}}, 2, "a negative num_ids");
  refused({{i0.data(), o0.data(), 3}}, -1, "negative bags");
  refused({{i0.data(), o0.data(), 3}}, 0, "ids without bags");
  EXPECT_EQ(ids, (std::vector<int64_t>(3, -1)));  // nothing written
}

// The host stand-in runs the reference (and refuses what it refuses, and a thread not bound to it).
TEST(BagConcatCore, TheStandInRunsTheReference) {
  auto dev = embedscope::engine::detail::host_rank_device(0);
  dev->bind_thread();
  const std::vector<int64_t> i0{4}, o0{0, 1}, i1{5, 6}, o1{0, 2};
  const std::vector<embedscope::engine::detail::BagPart> parts{{i0.data(), o0.data(), 1}, {i1.data(), o1.data(), 2}};
  std::vector<int64_t> ids(3, -1), off(3, -1);
  dev->concat_bags(parts, 1, ids.data(), off.data());
  EXPECT_EQ(ids, (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(off, (std::vector<int64_t>{0, 1, 3}));
  const std::vector<embedscope::engine::detail::BagPart> short_part{{i1.data(), o1.data(), 1}};
  EXPECT_THROW(dev->concat_bags(short_part, 1, ids.data(), off.data()), std::invalid_argument);
  std::thread([&] { EXPECT_THROW(dev->concat_bags(parts, 1, ids.data(), off.data()), std::logic_error); }).join();
}
