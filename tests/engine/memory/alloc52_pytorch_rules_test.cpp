// The allocator simulator against PyTorch's rules (c10/cuda/CUDACachingAllocator.cpp), tester
// F10 and F9, with hand-computed addresses and sizes:
//  - should_split (large pool, caching): `size < max_split_size && remaining > kSmallSize`, the
//    REQUEST decides, not the block (before: `block_size >= max_split_size` kept blocks whole);
//  - get_free_block's two max_split_size rules;
//  - expandable segments: should_split is `remaining >= kMinBlockSize` in both pools; pages are
//    2 MiB (small pool) and 20 MiB (large pool); releasing the cache unmaps the whole pages in
//    free blocks anywhere (unmap_block), and find_expandable_block maps the lowest hole again.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "embedscope/engine/memory/allocator.h"
#include "embedscope/sessions/analysis/memory_history.h"
#include "embedscope/sessions/analysis/segment_timeline.h"

using namespace embedscope::engine;

namespace {
constexpr int64_t kA52MiB = int64_t{1} << 20;
constexpr int64_t kA52KiB = int64_t{1} << 10;
std::unique_ptr<DeviceAllocator> a52_make(AllocatorKind kind, int64_t capacity, int64_t max_split, bool memory = false) {
  return DeviceAllocator::create({kind, capacity, max_split, memory});
}
}  // namespace

// F10: a 20.5 MiB request (>= 10 MiB: its segment is the request rounded up to 2 MiB, 22 MiB)
// under max_split_size 21 MiB. The block (22 MiB) is above max_split_size but the request is
// below it, and 1.5 MiB > 1 MiB remains: PyTorch splits (should_split looks at the request).
// The old rule (block >= max_split_size: never split) handed the request all 22 MiB and sent the
// next 1.5 MiB request to a new 20 MiB segment (reserved 42 MiB, not 22).
TEST(Alloc52MaxSplit, TheRequestDecidesTheSplitNotTheBlock) {
  auto a = a52_make(AllocatorKind::caching, 200 * kA52MiB, 21 * kA52MiB);
  const Allocation x = a->allocate(20 * kA52MiB + 512 * kA52KiB, "weights");
  EXPECT_EQ(x.size, 20 * kA52MiB + 512 * kA52KiB);
  EXPECT_EQ(a->stats().reserved, 22 * kA52MiB);
  auto snap = a->snapshot();
  ASSERT_EQ(snap.size(), 1u);
  ASSERT_EQ(snap[0].blocks.size(), 2u);
  EXPECT_EQ(snap[0].blocks[1].address, x.address + 20 * kA52MiB + 512 * kA52KiB);
  EXPECT_EQ(snap[0].blocks[1].size, 1536 * kA52KiB);
  EXPECT_FALSE(snap[0].blocks[1].allocated);
  // the 1.5 MiB rest serves a 1.5 MiB request (large pool; both below max_split_size)
  const Allocation y = a->allocate(1536 * kA52KiB, "kjt");
  EXPECT_EQ(y.address, x.address + 20 * kA52MiB + 512 * kA52KiB);
  EXPECT_EQ(y.size, 1536 * kA52KiB);
  EXPECT_EQ(a->stats().reserved, 22 * kA52MiB);
  EXPECT_EQ(a->stats().segments, 1);
  a->free(x);
  a->free(y);
}

// get_free_block under max_split_size 21 MiB, a cached 44 MiB block: a request of max_split_size
// or more takes it only when it is less than kLargeBuffer (20 MiB) larger - 24 MiB no (44 >= 24
// + 20: a new 24 MiB segment), 25 MiB yes (44 < 45) - and then unsplit (25 >= max_split_size:
// should_split says no, though 19 MiB remain); a request below max_split_size never takes it (3
// MiB: a new 20 MiB segment, split as 3 < 21 and 17 MiB > 1 MiB remain).
TEST(Alloc52MaxSplit, GetFreeBlocksRulesAndTheUnsplitOversizeBlock) {
  auto a = a52_make(AllocatorKind::caching, 400 * kA52MiB, 21 * kA52MiB);
  const Allocation big = a->allocate(44 * kA52MiB, "weights");
  a->free(big);
  const Allocation r24 = a->allocate(24 * kA52MiB, "a");
  EXPECT_NE(r24.address, big.address);
  EXPECT_EQ(r24.size, 24 * kA52MiB);
  EXPECT_EQ(a->stats().reserved, 68 * kA52MiB);  // 44 + a new 24
  const Allocation r25 = a->allocate(25 * kA52MiB, "b");
  EXPECT_EQ(r25.address, big.address);
  EXPECT_EQ(r25.size, 44 * kA52MiB);  // the whole block: 19 MiB allocated but never asked for
  EXPECT_EQ(a->stats().allocated, 68 * kA52MiB);
  EXPECT_EQ(a->stats().requested, 49 * kA52MiB);
  a->free(r24);  // a cached 24 MiB block (>= max_split_size)
  const Allocation r3 = a->allocate(3 * kA52MiB, "c");
  EXPECT_NE(r3.address, r24.address);
  EXPECT_EQ(r3.size, 3 * kA52MiB);
  EXPECT_EQ(a->stats().reserved, 88 * kA52MiB);  // 44 + 24 + a new 20
  auto snap = a->snapshot();
  ASSERT_EQ(snap.size(), 3u);
  int split = 0;
  for (const auto& s : snap)
    if (s.address == r3.address) {
      ASSERT_EQ(s.blocks.size(), 2u);
      EXPECT_EQ(s.blocks[1].size, 17 * kA52MiB);
      ++split;
    }
  EXPECT_EQ(split, 1);
}

// F9 (a): with expandable segments a large-pool block splits when 512 B or more remain (PyTorch's
// should_split), where the caching allocator keeps anything up to 1 MiB in the block. And max_split_size
// does not keep an expandable block whole: a 3 MiB request on the first 20 MiB page is split.
TEST(Alloc52Expandable, LargePoolSplitsWhen512BytesRemain) {
  auto e = a52_make(AllocatorKind::expandable, 100 * kA52MiB, 21 * kA52MiB);
  const Allocation x = e->allocate(3 * kA52MiB, "a");  // maps one 20 MiB page, 17 MiB stay free
  EXPECT_EQ(x.size, 3 * kA52MiB);
  EXPECT_EQ(e->stats().reserved, 20 * kA52MiB);
  const Allocation y = e->allocate(17 * kA52MiB - 512, "b");  // 512 B remain: split off
  EXPECT_EQ(y.address, x.address + 3 * kA52MiB);
  EXPECT_EQ(y.size, 17 * kA52MiB - 512);
  auto snap = e->snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].size, 20 * kA52MiB);
  ASSERT_EQ(snap[0].blocks.size(), 3u);
  EXPECT_EQ(snap[0].blocks[2].size, 512);
  EXPECT_FALSE(snap[0].blocks[2].allocated);
  // the caching allocator: the same 17 MiB - 512 B request takes all 17 MiB (<= 1 MiB remains)
  auto c = a52_make(AllocatorKind::caching, 100 * kA52MiB, 0);
  const Allocation cx = c->allocate(3 * kA52MiB, "a");
  const Allocation cy = c->allocate(17 * kA52MiB - 512, "b");
  EXPECT_EQ(cy.address, cx.address + 3 * kA52MiB);
  EXPECT_EQ(cy.size, 17 * kA52MiB);
}

// F9 (b): the small pool maps 2 MiB pages, the large pool 20 MiB pages (ExpandableSegment's
// segment_size, kSmallBuffer / kLargeBuffer); each pool has its own range.
TEST(Alloc52Expandable, PagesAre2MiBSmallAnd20MiBLarge) {
  auto e = a52_make(AllocatorKind::expandable, 100 * kA52MiB, 0, true);
  const Allocation s = e->allocate(1000, "kjt");
  EXPECT_EQ(e->stats().reserved, 2 * kA52MiB);
  const Allocation l = e->allocate(2 * kA52MiB, "weights");
  EXPECT_EQ(e->stats().reserved, 22 * kA52MiB);
  std::memset(l.ptr, 1, static_cast<size_t>(2 * kA52MiB));  // mapped pages are usable
  std::memset(s.ptr, 1, 1000);
  const auto snap = e->snapshot();
  ASSERT_EQ(snap.size(), 2u);
  int64_t small = 0, large = 0;
  for (const auto& seg : snap) (seg.small_pool ? small : large) = seg.size;
  EXPECT_EQ(small, 2 * kA52MiB);
  EXPECT_EQ(large, 20 * kA52MiB);
  // the small pool grows by 2 MiB pages: 1000 B took 1024 B of the first page, a 1 MiB request
  // fits the rest of it, a second one (1 MiB - 1024 B left) maps a second 2 MiB page
  const Allocation s2 = e->allocate(kA52MiB, "kjt");
  const Allocation s3 = e->allocate(kA52MiB, "kjt");
  EXPECT_EQ(s2.address, s.address + 1024);
  EXPECT_EQ(s3.address, s.address + 1024 + kA52MiB);
  EXPECT_EQ(e->stats().reserved, 24 * kA52MiB);
  e->free(s);
  e->free(s2);
  e->free(s3);
  e->free(l);
  e->empty_cache();
  EXPECT_EQ(e->stats().reserved, 0);
  EXPECT_EQ(e->stats().segments, 0);
}

// F9 (c): releasing the cache unmaps the whole 20 MiB pages inside free blocks anywhere in the
// range (unmap_block), not only a free end; the hole splits the snapshot's segment in two (one
// per run of mapped pages, as PyTorch's snapshot) and is mapped again by the next request that
// needs it (find_expandable_block: the lowest unmapped range that, with the free block before it,
// holds the request). Layout in MiB from the range's start:
//   a [0,10)  b [10,40)  c [40,50)  free [50,60)  -> 3 pages mapped, 60 MiB
//   b freed: free [10,40); empty_cache unmaps page [20,40) -> a, free [10,20) | hole | c, free [50,60): 40 MiB
//   d (25 MiB): free [10,20) + hole [20,40) hold it: page [20,40) mapped again, d at 10, free [35,40)
TEST(Alloc52Expandable, ReleaseUnmapsPagesInsideFreeBlocksAndHolesAreMappedAgain) {
  auto e = a52_make(AllocatorKind::expandable, 200 * kA52MiB, 0, true);
  std::vector<AllocatorEvent> events;
  e->set_listener([&](const AllocatorEvent& ev) { events.push_back(ev); });
  const Allocation a = e->allocate(10 * kA52MiB, "a");
  const Allocation b = e->allocate(30 * kA52MiB, "b");
  const Allocation c = e->allocate(10 * kA52MiB, "c");
  const int64_t base = a.address;
  EXPECT_EQ(b.address, base + 10 * kA52MiB);
  EXPECT_EQ(c.address, base + 40 * kA52MiB);
  EXPECT_EQ(e->stats().reserved, 60 * kA52MiB);
  e->free(b);
  events.clear();
  e->empty_cache();
  EXPECT_EQ(e->stats().reserved, 40 * kA52MiB);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, AllocatorEvent::Kind::segment_free);
  EXPECT_EQ(events[0].address, base + 20 * kA52MiB);
  EXPECT_EQ(events[0].size, 20 * kA52MiB);
  auto snap = e->snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].address, base);
  EXPECT_EQ(snap[0].size, 20 * kA52MiB);
  ASSERT_EQ(snap[0].blocks.size(), 2u);
  EXPECT_EQ(snap[0].blocks[1].size, 10 * kA52MiB);  // free [10,20): no whole page in it
  EXPECT_EQ(snap[1].address, base + 40 * kA52MiB);
  EXPECT_EQ(snap[1].size, 20 * kA52MiB);
  EXPECT_EQ(e->stats().segments, 2);
  EXPECT_EQ(e->stats().free_in_segments, 20 * kA52MiB);
  std::memset(c.ptr, 2, static_cast<size_t>(10 * kA52MiB));  // pages after the hole still mapped
  events.clear();
  const Allocation d = e->allocate(25 * kA52MiB, "d");
  EXPECT_EQ(d.address, base + 10 * kA52MiB);
  EXPECT_EQ(d.size, 25 * kA52MiB);
  EXPECT_EQ(e->stats().reserved, 60 * kA52MiB);
  ASSERT_GE(events.size(), 1u);
  EXPECT_EQ(events[0].kind, AllocatorEvent::Kind::segment_alloc);
  EXPECT_EQ(events[0].address, base + 20 * kA52MiB);
  EXPECT_EQ(events[0].size, 20 * kA52MiB);
  std::memset(d.ptr, 3, static_cast<size_t>(25 * kA52MiB));  // the hole's page is usable again
  snap = e->snapshot();
  ASSERT_EQ(snap.size(), 1u);  // one run again
  EXPECT_EQ(snap[0].size, 60 * kA52MiB);
  ASSERT_EQ(snap[0].blocks.size(), 5u);  // a, d, free [35,40), c, free [50,60)
  EXPECT_EQ(snap[0].blocks[2].size, 5 * kA52MiB);
  e->free(a);
  e->free(c);
  e->free(d);
  e->empty_cache();
  EXPECT_EQ(e->stats().reserved, 0);
}

// The memory history (sessions) of an engine run follows the hole: pages unmapped in the middle
// of a run split its segment, pages mapped into the hole join the two again (reserved bytes at
// each entry as the allocator's).
TEST(Alloc52Expandable, MemoryHistorySplitsAndJoinsSegmentsAtAHole) {
  auto e = a52_make(AllocatorKind::expandable, 200 * kA52MiB, 0);
  std::vector<embedscope::sessions::MemoryEvent> events;
  std::vector<int64_t> reserved;
  e->set_listener([&](const AllocatorEvent& ev) {
    embedscope::sessions::MemoryEvent m;
    m.action = to_string(ev.kind);
    m.address = ev.address;
    m.size = ev.size;
    m.requested = ev.requested;
    m.tag = ev.tag;
    events.push_back(m);
  });
  const Allocation a = e->allocate(10 * kA52MiB, "a");
  const Allocation b = e->allocate(30 * kA52MiB, "b");
  const Allocation c = e->allocate(10 * kA52MiB, "c");
  e->free(b);
  e->empty_cache();
  const size_t after_release = events.size();
  const Allocation d = e->allocate(25 * kA52MiB, "d");
  const auto h = embedscope::sessions::MemoryHistory::build(events, nullptr, 4);
  EXPECT_TRUE(h.problems().empty());
  const auto released = h.state_at(static_cast<int64_t>(after_release) - 1);
  EXPECT_EQ(released.reserved, 40 * kA52MiB);
  ASSERT_EQ(released.segments.size(), 2u);
  EXPECT_EQ(released.segments.begin()->first, static_cast<uint64_t>(a.address));
  EXPECT_EQ(released.segments.begin()->second, 20 * kA52MiB);
  EXPECT_EQ(std::next(released.segments.begin())->first, static_cast<uint64_t>(a.address + 40 * kA52MiB));
  const auto last = h.state_at(h.size() - 1);
  EXPECT_EQ(last.reserved, 60 * kA52MiB);
  ASSERT_EQ(last.segments.size(), 1u);
  EXPECT_EQ(last.segments.begin()->second, 60 * kA52MiB);
  // the segment timeline (a column per entry): two bands while the hole is there, one after
  const auto t = embedscope::sessions::segment_timeline(h, h.size());
  ASSERT_EQ(t.columns.size(), static_cast<size_t>(h.size()));
  const auto& hole = t.columns[after_release - 1];
  ASSERT_EQ(hole.bands.size(), 2u);
  EXPECT_EQ(hole.reserved, 40 * kA52MiB);
  EXPECT_EQ(hole.bands[0].size, 20 * kA52MiB);
  EXPECT_EQ(hole.bands[1].size, 20 * kA52MiB);
  ASSERT_EQ(t.columns.back().bands.size(), 1u);
  EXPECT_EQ(t.columns.back().reserved, 60 * kA52MiB);
  // the run after the hole lived from the unmapping to the mapping that joined it to the first
  ASSERT_EQ(t.segments.size(), 2u);
  EXPECT_EQ(t.segments[1].address, static_cast<uint64_t>(a.address + 40 * kA52MiB));
  EXPECT_EQ(t.segments[1].start_entry, static_cast<int64_t>(after_release) - 1);
  EXPECT_GE(t.segments[1].end_entry, static_cast<int64_t>(after_release));
  e->free(a);
  e->free(c);
  e->free(d);
}

// Random programs (allocations of 512 B - 48 MiB on two streams, frees, empty_cache) against
// every block allocator kind with and without max_split_size: the layout stays consistent at
// every step - each snapshot segment's blocks tile it, reserved = the snapshot's bytes (mapped
// pages only), allocated = its live blocks' bytes, reserved <= capacity - and every failure is a
// DeviceOutOfMemory that leaves the live blocks as they were.
TEST(Alloc52Expandable, RandomProgramsKeepTheLayoutConsistent) {
  uint64_t state = 52;
  const auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  for (const AllocatorKind kind : {AllocatorKind::expandable, AllocatorKind::caching}) {
    for (const int64_t max_split : {int64_t{0}, 20 * kA52MiB}) {
      SCOPED_TRACE(std::string(to_string(kind)) + " max_split " + std::to_string(max_split));
      auto a = a52_make(kind, 256 * kA52MiB, max_split);
      std::vector<Allocation> live;
      int64_t live_bytes = 0, ooms = 0;
      for (int i = 0; i < 4000; ++i) {
        const uint64_t op = next(10);
        if (op < 5 || live.empty()) {
          const int64_t bytes = next(4) == 0 ? 1 + static_cast<int64_t>(next(kA52MiB))
                                             : 512 + static_cast<int64_t>(next(48 * kA52MiB));
          try {
            const Allocation x = a->allocate_on(bytes, "t", static_cast<int64_t>(next(2)));
            live.push_back(x);
            live_bytes += x.size;
          } catch (const DeviceOutOfMemory&) {
            ++ooms;
          }
        } else if (op < 9) {
          const size_t k = next(live.size());
          live_bytes -= live[k].size;
          a->free(live[k]);
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        } else {
          a->empty_cache();
        }
        const MemoryStats st = a->stats();
        int64_t snap_bytes = 0, snap_live = 0;
        for (const auto& s : a->snapshot()) {
          int64_t at = s.address;
          for (const auto& b : s.blocks) {
            ASSERT_EQ(b.address, at) << "step " << i;
            at += b.size;
            if (b.allocated) snap_live += b.size;
          }
          ASSERT_EQ(at, s.address + s.size) << "step " << i;
          snap_bytes += s.size;
        }
        ASSERT_EQ(st.reserved, snap_bytes) << "step " << i;
        ASSERT_EQ(st.allocated, live_bytes) << "step " << i;
        ASSERT_EQ(snap_live, live_bytes) << "step " << i;
        ASSERT_LE(st.reserved, 256 * kA52MiB) << "step " << i;
      }
      EXPECT_GT(ooms, 0);  // the capacity was reached: the release-and-retry paths ran
      for (const auto& x : live) a->free(x);
      a->empty_cache();
      EXPECT_EQ(a->stats().reserved, 0);
    }
  }
}
