#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>

#include "embedscope/engine/memory/allocator.h"

using namespace embedscope::engine;

namespace {
constexpr int64_t MiB = int64_t{1} << 20;
std::unique_ptr<DeviceAllocator> make(AllocatorKind kind, int64_t capacity, int64_t max_split = 0) {
  return DeviceAllocator::create({kind, capacity, max_split, true});
}
}  // namespace

TEST(Allocator, RoundingAndSegmentSizesFollowPyTorch) {
  EXPECT_EQ(round_size(1), 512);
  EXPECT_EQ(round_size(512), 512);
  EXPECT_EQ(round_size(513), 1024);
  EXPECT_EQ(segment_size_for(512), 2 * MiB);          // small pool
  EXPECT_EQ(segment_size_for(MiB), 2 * MiB);
  EXPECT_EQ(segment_size_for(MiB + 512), 20 * MiB);  // large, < 10 MiB
  EXPECT_EQ(segment_size_for(11 * MiB), 12 * MiB);    // rounded to 2 MiB
  auto a = make(AllocatorKind::caching, 64 * MiB);
  Allocation x = a->allocate(1, "kjt");
  EXPECT_EQ(x.size, 512);
  MemoryStats st = a->stats();
  EXPECT_EQ(st.allocated, 512);
  EXPECT_EQ(st.rounding_loss, 511);
  EXPECT_EQ(st.reserved, 2 * MiB);
  std::memset(x.ptr, 0xab, 512);  // the memory is real
}

TEST(Allocator, SplitsBestFitAndCoalesces) {
  auto a = make(AllocatorKind::caching, 64 * MiB);
  Allocation p = a->allocate(3 * MiB, "a");  // large pool, 20 MiB segment, split
  Allocation q = a->allocate(4 * MiB, "b");
  Allocation r = a->allocate(5 * MiB, "c");
  auto snap = a->snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].size, 20 * MiB);
  ASSERT_EQ(snap[0].blocks.size(), 4u);  // a, b, c, and the 8 MiB rest
  EXPECT_EQ(q.address, p.address + 3 * MiB);
  EXPECT_EQ(snap[0].blocks[3].size, 8 * MiB);
  a->free(q);
  a->free(p);  // coalesces with q's block
  snap = a->snapshot();
  ASSERT_EQ(snap[0].blocks.size(), 3u);
  EXPECT_FALSE(snap[0].blocks[0].allocated);
  EXPECT_EQ(snap[0].blocks[0].size, 7 * MiB);
  // best fit: 6 MiB goes into the 7 MiB hole (not the 8 MiB rest); the remaining 1 MiB is not
  // worth splitting in the large pool (<= 1 MiB), so the block stays 7 MiB
  Allocation s6 = a->allocate(6 * MiB, "d");
  EXPECT_EQ(s6.address, p.address);
  EXPECT_EQ(s6.size, 7 * MiB);
  a->free(r);
  a->free(s6);
  a->empty_cache();
  EXPECT_EQ(a->stats().reserved, 0);
}

TEST(Allocator, MaxSplitSizeKeepsLargeBlocksWhole) {
  auto a = make(AllocatorKind::caching, 200 * MiB, 32 * MiB);
  Allocation big = a->allocate(40 * MiB, "weights");
  a->free(big);
  // a 2 MiB request may not split the cached 40 MiB block: it gets its own 20 MiB segment
  Allocation small = a->allocate(2 * MiB, "kjt");
  EXPECT_NE(small.address, big.address);
  EXPECT_EQ(a->stats().reserved, 60 * MiB);
  // a 40 MiB request reuses the whole cached block
  Allocation again = a->allocate(40 * MiB, "weights");
  EXPECT_EQ(again.address, big.address);
}

TEST(Fragmentation, MeasuresOnAHandBuiltLayout) {
  // one 100-byte segment: [10 free][20 used][30 free][40 used]
  std::vector<SegmentInfo> segs{{0, 100, false, {{0, 10, 0, false, ""}, {10, 20, 20, true, "a"},
                                                  {30, 30, 0, false, ""}, {60, 40, 40, true, "b"}}}};
  MemoryStats st;
  fragmentation_of(segs, st);
  EXPECT_EQ(st.free_in_segments, 40);
  EXPECT_EQ(st.largest_free_block, 30);
  EXPECT_DOUBLE_EQ(st.external_fragmentation, 1.0 - 30.0 / 40.0);
  EXPECT_DOUBLE_EQ(st.memviz_fragmentation, (100.0 + 900.0) / 10000.0);
}

// A small request cannot use the free space of the large pool (PyTorch's two pools): with the
// small pool's 2 MiB segment full and no room for another, it fails as fragmentation, and the
// explanation says which pool's free blocks count.
TEST(Allocator, SmallRequestsCannotUseTheLargePool) {
  auto a = make(AllocatorKind::caching, 22 * MiB + MiB / 2);
  Allocation big = a->allocate(5 * MiB, "weights");  // a 20 MiB large-pool segment, 15 MiB free in it
  Allocation s1 = a->allocate(MiB, "kjt"), s2 = a->allocate(MiB, "kjt");  // fill one 2 MiB small segment
  std::vector<AllocatorEvent> seen_oom;
  a->set_listener([&](const AllocatorEvent& ev) {
    if (ev.kind == AllocatorEvent::Kind::oom) seen_oom.push_back(ev);
  });
  try {
    a->allocate(512 * 1024, "comm_buffer");
    FAIL() << "expected DeviceOutOfMemory";
  } catch (const DeviceOutOfMemory& e) {
    EXPECT_TRUE(e.fragmentation);
    EXPECT_EQ(e.free_bytes, 15 * MiB + MiB / 2);
    const std::string m = e.what();
    EXPECT_NE(m.find("fragmentation: 15.5 MiB are free, but requests up to 1 MiB come from the small pool, whose largest "
                     "free block is 0 B (the largest free block of the other pool, 15.0 MiB, cannot serve them), and the "
                     "512.0 KiB of capacity not reserved cannot hold a new 2.0 MiB segment"),
              std::string::npos)
        << m;
    // more capacity is advice too: the 22 MiB of segments kept plus one new small segment
    EXPECT_NE(m.find("or give the device at least 24.0 MiB (a new 2.0 MiB segment beside the 22.0 MiB reserved)"),
              std::string::npos)
        << m;
  }
  ASSERT_EQ(seen_oom.size(), 1u);
  EXPECT_EQ(seen_oom[0].address, MiB / 2) << "the oom event carries the device's free bytes (capacity - reserved)";
  EXPECT_EQ(seen_oom[0].size, 512 * 1024);
  a->free(big);
  a->free(s1);
  a->free(s2);
}

// One small live block pinned in a freed large block makes a later large request fail as
// fragmentation while free bytes are enough; expandable segments fit it.
TEST(Allocator, PinnedBlockCausesFragmentationOom) {
  auto a = make(AllocatorKind::caching, 48 * MiB);
  Allocation x = a->allocate(40 * MiB, "activations");
  a->free(x);
  Allocation pin = a->allocate(2 * MiB, "kjt");  // splits the cached 40 MiB block
  EXPECT_EQ(pin.address, x.address);
  try {
    a->allocate(40 * MiB, "pooled_output");
    FAIL() << "expected DeviceOutOfMemory";
  } catch (const DeviceOutOfMemory& e) {
    EXPECT_TRUE(e.fragmentation);
    EXPECT_EQ(e.free_bytes, 46 * MiB);
    EXPECT_EQ(e.largest_free_block, 38 * MiB);
    const std::string m = e.what();
    EXPECT_NE(m.find("fragmentation: 46.0 MiB are free, but the largest free block is 38.0 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("most memory held by kjt 2.0 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("expandable allocator"), std::string::npos) << m;
    EXPECT_NE(m.find("max_split_size"), std::string::npos) << m;
    EXPECT_NE(m.find("give the device at least 80.0 MiB (a new 40.0 MiB segment beside the 40.0 MiB reserved)"),
              std::string::npos)
        << m;
  }
  EXPECT_EQ(a->stats().ooms, 1);
  EXPECT_EQ(a->stats().alloc_retries, 1);
  EXPECT_EQ(a->stats().allocated, 2 * MiB);  // nothing lost

  // expandable segments map 20 MiB pages in the large pool (PyTorch's kLargeBuffer pages): the
  // 40 MiB take two, the pin splits the freed block (2 MiB + 38 MiB free), and the second 40 MiB
  // request takes the free 38 MiB and one more page at the end: 60 MiB reserved, so a 60 MiB
  // device holds what the caching allocator cannot on 48 MiB (nor on 60: it needs a new 40 MiB
  // segment beside the pinned one, 80 MiB)
  auto e = make(AllocatorKind::expandable, 60 * MiB);
  Allocation ex = e->allocate(40 * MiB, "activations");
  e->free(ex);
  Allocation epin = e->allocate(2 * MiB, "kjt");
  Allocation y = e->allocate(40 * MiB, "pooled_output");  // the free 38 MiB and one more 20 MiB page
  EXPECT_EQ(y.address, epin.address + 2 * MiB);
  EXPECT_EQ(e->stats().reserved, 60 * MiB);
  std::memset(y.ptr, 1, static_cast<size_t>(40 * MiB));  // committed pages are usable
  // advice never repeats a setting already on
  try {
    e->allocate(30 * MiB, "x");
    FAIL();
  } catch (const DeviceOutOfMemory& err) {
    EXPECT_FALSE(err.fragmentation);  // 60 - 42 = 18 MiB free < 30 MiB: capacity
    EXPECT_EQ(std::string(err.what()).find("expandable allocator (expandable"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("capacity: only 18.0 MiB of the device are free"), std::string::npos) << err.what();
  }
}

TEST(Allocator, DirectReleasesOnFreeAndExpandableShrinks) {
  auto d = make(AllocatorKind::direct, 64 * MiB);
  Allocation a = d->allocate(1000, "x");
  EXPECT_EQ(d->stats().reserved, 1024);  // exactly the rounded request
  d->free(a);
  EXPECT_EQ(d->stats().reserved, 0);
  EXPECT_EQ(d->stats().segments, 0);

  auto e = make(AllocatorKind::expandable, 64 * MiB);
  Allocation b = e->allocate(15 * MiB, "x");  // one 20 MiB page; the 5 MiB rest split off
  Allocation c = e->allocate(20 * MiB, "y");  // the free 5 MiB and one more page: [15, 35 MiB)
  EXPECT_EQ(e->stats().reserved, 40 * MiB);
  EXPECT_EQ(c.address, b.address + 15 * MiB);
  e->free(c);
  e->empty_cache();  // free [15, 40 MiB): its whole page [20, 40 MiB) goes back
  EXPECT_EQ(e->stats().reserved, 20 * MiB);
  e->free(b);
  e->empty_cache();
  EXPECT_EQ(e->stats().reserved, 0);
  EXPECT_THROW(e->allocate(0, "zero"), std::invalid_argument);
}

#include <filesystem>
#include <fstream>

#include "embedscope/engine/memory/replay.h"

namespace {
std::string write_trace(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / ("es_trace_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p) << text;
  return p.string();
}
}  // namespace

TEST(ReplayMemory, SettingsSideBySideOnThePinnedBlockTrace) {
  const std::string path = std::string(EMBEDSCOPE_TEST_DATA) + "/memory/pinned_block.json";
  MemoryTrace t = load_memory_trace(path);
  ASSERT_EQ(t.actions.size(), 6u);
  EXPECT_EQ(t.capacity_bytes, 60 * MiB);  // caching needs 80 MiB (a new 40 MiB segment), expandable 60
  ReplayResult caching = replay(t, {AllocatorKind::caching, t.capacity_bytes, 0, false}, path);
  EXPECT_TRUE(caching.oom);
  EXPECT_EQ(caching.oom_action, 3);
  EXPECT_NE(caching.oom_message.find("fragmentation"), std::string::npos);
  // expandable: 40 MiB in two 20 MiB pages, the 2 MiB pin split off the freed block, then the
  // free 38 MiB and one more page hold the second 40 MiB (PinnedBlockCausesFragmentationOom)
  ReplayResult expandable = replay(t, {AllocatorKind::expandable, t.capacity_bytes, 0, false}, path);
  EXPECT_FALSE(expandable.oom);
  EXPECT_EQ(expandable.peak_reserved, 60 * MiB);
  EXPECT_EQ(expandable.peak_allocated, 42 * MiB);
  ReplayResult direct = replay(t, {AllocatorKind::direct, t.capacity_bytes, 0, false}, path);
  EXPECT_FALSE(direct.oom);
  EXPECT_EQ(direct.final_reserved, 0);
}

TEST(ReplayMemory, BadTracesNameTheAction) {
  auto error = [](const std::string& path) {
    try {
      MemoryTrace t = load_memory_trace(path);
      replay(t, {AllocatorKind::caching, 1 << 30, 0, false}, path);
    } catch (const SpecError& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_NE(error(write_trace("a.json", R"({"actions": [{"action": "alloc", "id": 1, "size": 0}]})"))
                .find("/actions/0/size: must be an integer in [1, "),
            std::string::npos);
  EXPECT_NE(error(write_trace("b.json", R"({"actions": [{"action": "grab", "id": 1}]})")).find("/actions/0/action"),
            std::string::npos);
  EXPECT_NE(error(write_trace("c.json", R"({"actions": [{"action": "free", "id": 7}]})"))
                .find("/actions/0/id: free of id 7, which is not allocated"),
            std::string::npos);
  EXPECT_NE(error(write_trace("d.json", R"({"actions": [], "extra": 1})")).find("/extra: unknown key"), std::string::npos);
  EXPECT_NE(error(write_trace("e.json", "[1,")).find("not a JSON trace"), std::string::npos);
  // An action that is not a string escaped as nlohmann's type_error (exit 1, no file or pointer).
  EXPECT_NE(error(write_trace("f.json", R"({"actions": [{"action": 5, "id": 1}]})"))
                .find("f.json: /actions/0/action: must be \"alloc\", \"free\""),
            std::string::npos);
}
