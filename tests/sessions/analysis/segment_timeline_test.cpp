// The segment timeline (memory_viz's "Active Cached Segment Timeline") on a hand-built history
// whose bands are counted in the comments, and on the snapshot fixtures, whose segments' lives
// the fixture generator counted from its trace (expected.json "segment_lives").
#include "embedscope/sessions/analysis/segment_timeline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <tuple>

#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "sessions/importers/torch_memory_snapshot/fixtures.h"

using namespace embedscope::sessions;
using embedscope::test::snapshot_expected;
using embedscope::test::snapshot_fixture;

namespace {

MemoryEvent segtl_ev(const char* action, int64_t address, int64_t size, int64_t stream = 0) {
  MemoryEvent e;
  e.action = action;
  e.address = address;
  e.size = size;
  e.requested = size;
  e.stream = stream;
  return e;
}

std::string segtl_imported(const std::string& fixture) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_segtl_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / (fixture + ".db")).string();
  SessionWriter w(path, true);
  torch_snapshot::import_torch_memory_snapshot(snapshot_fixture(fixture), w);
  w.close("complete");
  return path;
}

}  // namespace

// An engine history: two segments, blocks in both, the first released; then the second grows at
// its end (the expandable allocator's segment_alloc) and shrinks back (segment_free of its tail).
TEST(SegmentTimeline, BandsOfAHandBuiltHistory) {
  const std::vector<MemoryEvent> events{
      segtl_ev("segment_alloc", 0x10000, 4096, 3),  // 0: A [0x10000, 4096) on stream 3
      segtl_ev("alloc", 0x10000, 512),              // 1: 512 active in A
      segtl_ev("segment_alloc", 0x20000, 2048),     // 2: B [0x20000, 2048)
      segtl_ev("alloc", 0x20000, 1024),             // 3: 1024 active in B; reserved 6144
      segtl_ev("free", 0x10000, 512),               // 4: A empty
      segtl_ev("segment_free", 0x10000, 4096),      // 5: A released: B alone, now at the bottom
      segtl_ev("segment_alloc", 0x20800, 2048),     // 6: B grows to 4096
      segtl_ev("segment_free", 0x20800, 2048)};     // 7: and shrinks back to 2048 (its tail pages)
  const MemoryHistory h = MemoryHistory::build(events, nullptr);
  ASSERT_TRUE(h.problems().empty()) << h.problems()[0];
  const SegmentTimeline t = segment_timeline(h, 8);  // one column per entry
  ASSERT_EQ(t.segments.size(), 2u);
  const SegmentLife& a = t.segments[0];
  EXPECT_EQ(a.address, 0x10000u);
  EXPECT_EQ(a.size, 4096);
  EXPECT_EQ(a.start_entry, 0);
  EXPECT_EQ(a.end_entry, 5);
  EXPECT_EQ(a.stream, 3);
  EXPECT_FALSE(a.resized);
  EXPECT_FALSE(a.small_pool);
  const SegmentLife& b = t.segments[1];
  EXPECT_EQ(b.address, 0x20000u);
  EXPECT_EQ(b.first_size, 2048);
  EXPECT_EQ(b.size, 4096);  // its largest
  EXPECT_EQ(b.start_entry, 2);
  EXPECT_EQ(b.end_entry, -1);
  EXPECT_TRUE(b.resized);
  EXPECT_TRUE(segment_live_at(a, 4));
  EXPECT_FALSE(segment_live_at(a, 5));
  EXPECT_FALSE(segment_live_at(b, 1));
  EXPECT_TRUE(segment_live_at(b, 7));

  ASSERT_EQ(t.columns.size(), 8u);
  const size_t bands[] = {1, 1, 2, 2, 2, 1, 1, 1};
  const int64_t reserved[] = {4096, 4096, 6144, 6144, 6144, 2048, 4096, 2048};
  const int64_t active[] = {0, 512, 512, 1536, 1024, 1024, 1024, 1024};
  for (size_t c = 0; c < 8; ++c) {
    SCOPED_TRACE(c);
    EXPECT_EQ(t.columns[c].entry, static_cast<int64_t>(c));
    EXPECT_EQ(t.columns[c].bands.size(), bands[c]);
    EXPECT_EQ(t.columns[c].reserved, reserved[c]);
    EXPECT_EQ(t.columns[c].active, active[c]);
  }
  const SegmentColumn& c3 = t.columns[3];
  EXPECT_EQ(c3.bands[0].segment, 0);
  EXPECT_EQ(c3.bands[0].offset, 0);
  EXPECT_EQ(c3.bands[0].active, 512);
  EXPECT_EQ(c3.bands[1].segment, 1);
  EXPECT_EQ(c3.bands[1].offset, 4096);
  EXPECT_EQ(c3.bands[1].size, 2048);
  EXPECT_EQ(c3.bands[1].active, 1024);
  EXPECT_EQ(segment_band_at(c3, 0), 0);
  EXPECT_EQ(segment_band_at(c3, 4095), 0);
  EXPECT_EQ(segment_band_at(c3, 4096), 1);
  EXPECT_EQ(segment_band_at(c3, 6143), 1);
  EXPECT_EQ(segment_band_at(c3, 6144), -1);
  EXPECT_EQ(segment_band_at(c3, -1), -1);
  EXPECT_EQ(t.columns[6].bands[0].offset, 0);  // B moved down when A went
  EXPECT_EQ(t.columns[6].bands[0].size, 4096);
  EXPECT_EQ(t.peak_reserved, 6144);

  // 3 columns over 8 entries: [0, 2), [2, 5), [5, 8); each draws its entry of most reserved bytes
  const SegmentTimeline t3 = segment_timeline(h, 3);
  ASSERT_EQ(t3.columns.size(), 3u);
  EXPECT_EQ(t3.columns[0].entry, 0);
  EXPECT_EQ(t3.columns[1].first_entry, 2);
  EXPECT_EQ(t3.columns[1].last_entry, 4);
  EXPECT_EQ(t3.columns[1].entry, 2);
  EXPECT_EQ(t3.columns[2].entry, 6);  // the grown segment, not the shrunk one
  EXPECT_TRUE(segment_timeline(MemoryHistory{}, 10).columns.empty());
  EXPECT_TRUE(segment_timeline(h, 0).columns.empty());
  EXPECT_EQ(segment_timeline(h, 0).segments.size(), 2u);
}

// The fixtures' segments, lived as the generator counted them: one band per segment, from its
// segment_alloc entry (or -1: made before the trace, midway_p4) to its segment_free entry (or -1:
// live at the dump), with its bytes; those live at the dump with the dump's stream and pool.
TEST(SegmentTimeline, FixturesSegmentsAsTheGeneratorCounted) {
  for (const char* name : {"oom_p5.pickle", "midway_p4.pickle", "training_p4.pickle", "high_address_p4.pickle"}) {
    SCOPED_TRACE(name);
    const auto& x = snapshot_expected()[name];
    SessionReader r(segtl_imported(name));
    const auto ranks = MemoryHistory::ranks_with_history(r);
    ASSERT_EQ(ranks.size(), x["segment_lives"].size());
    for (size_t d = 0; d < ranks.size(); ++d) {
      SCOPED_TRACE(d);
      const MemoryHistory h = MemoryHistory::load(r, ranks[d]);
      ASSERT_EQ(h.size(), x["trace_entries"][d].get<int64_t>());
      const SegmentTimeline t = segment_timeline(h, h.size());
      using Life = std::tuple<uint64_t, int64_t, int64_t, int64_t>;  // address, size, start, end
      std::multiset<Life> want, got;
      for (const auto& l : x["segment_lives"][d])
        want.insert({std::stoull(l["address"].get<std::string>()), l["size"].get<int64_t>(),
                     l["start_entry"].get<int64_t>(), l["end_entry"].get<int64_t>()});
      for (const auto& s : t.segments) got.insert({s.address, s.size, s.start_entry, s.end_entry});
      EXPECT_EQ(got, want);
      for (const auto& seg : x["segments"]) {
        if (seg["device"].get<size_t>() != d) continue;
        const uint64_t address = std::stoull(seg["address"].get<std::string>());
        const auto it = std::find_if(t.segments.begin(), t.segments.end(),
                                     [&](const SegmentLife& s) { return s.address == address && s.end_entry < 0; });
        ASSERT_NE(it, t.segments.end());
        EXPECT_EQ(it->small_pool, seg["segment_type"] == "small");
        if (it->start_entry >= 0 || seg["allocated_size"].get<int64_t>() > 0) {
          EXPECT_EQ(it->stream, seg["stream"].get<int64_t>());
        }
        // the last column (after the last entry) holds it with the dump's active bytes
        const auto& last = t.columns.back().bands;
        const auto b = std::find_if(last.begin(), last.end(), [&](const auto& band) { return band.segment == it - t.segments.begin(); });
        ASSERT_NE(b, last.end());
        EXPECT_EQ(b->size, seg["total_size"].get<int64_t>());
        EXPECT_EQ(b->active, seg["active_size"].get<int64_t>());
      }
      if (h.starts_empty()) {
        EXPECT_EQ(t.peak_reserved, x["peak_reserved"][d].get<int64_t>());
      }
      EXPECT_EQ(t.columns.back().reserved, x["reserved_at_dump"][d].get<int64_t>());
    }
  }
}
