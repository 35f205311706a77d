// MemoryHistory (the allocator state at any memory event) and the memory analysis of `stats`
// and the memory view, on hand-built histories and on the snapshot fixtures, whose numbers the
// fixture generator counted (tests/data/memory_snapshots/expected.json "at_peak", "at_ooms").
#include "embedscope/sessions/analysis/memory_analysis.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "sessions/importers/torch_memory_snapshot/fixtures.h"

using namespace embedscope::sessions;
using embedscope::test::snapshot_expected;
using embedscope::test::snapshot_fixture;

namespace {

MemoryEvent ev(const char* action, int64_t address, int64_t size, int64_t requested = 0, const char* tag = "") {
  MemoryEvent e;
  e.action = action;
  e.address = address;
  e.size = size;
  e.requested = requested;
  e.tag = tag;
  return e;
}

std::string imported(const std::string& fixture) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_memhist_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / (fixture + ".db")).string();
  SessionWriter w(path, true);
  torch_snapshot::import_torch_memory_snapshot(snapshot_fixture(fixture), w);
  w.close("complete");
  return path;
}

// Bytes held per innermost function (the generator's held_by_frame groups by function name).
std::map<std::string, int64_t> held_by_function(const std::vector<MemoryStackHeld>& s) {
  std::map<std::string, int64_t> out;
  for (const auto& h : s) out[h.name.substr(0, h.name.find(" ("))] += h.bytes;
  return out;
}

}  // namespace

// An engine run's history: a 4096 B segment, two blocks, a free, an OOM, then the expandable
// allocator's growth (segment_alloc at the segment's end) and tail shrink (segment_free of it).
TEST(MemoryHistory, StateAtEveryEntryOfAnEngineHistory) {
  std::vector<MemoryEvent> events{
      ev("segment_alloc", 0x10000, 4096),             // 0
      ev("alloc", 0x10000, 512, 500, "kjt"),          // 1: [kjt 512][free 3584]
      ev("alloc", 0x10200, 1024, 1000, "weights"),    // 2: [kjt 512][weights 1024][free 2560]
      ev("free", 0x10000, 512, 500, "kjt"),           // 3: [free 512][weights 1024][free 2560]
      ev("oom", 0, 4096, 4000, "dense"),              // 4
      ev("segment_alloc", 0x11000, 2048),             // 5: the segment grows to 6144
      ev("segment_free", 0x11000, 2048),              // 6: and back to 4096
      ev("free", 0x10200, 1024, 1000, "weights"),     // 7: all free
      ev("segment_free", 0x10000, 4096)};             // 8: released
  const MemoryHistory h = MemoryHistory::build(events, nullptr, 2);
  EXPECT_TRUE(h.problems().empty());
  EXPECT_TRUE(h.starts_empty());
  ASSERT_EQ(h.allocations().size(), 2u);
  EXPECT_EQ(h.allocations()[0].alloc_entry, 1);
  EXPECT_EQ(h.allocations()[0].free_entry, 3);
  EXPECT_EQ(h.allocations()[1].free_entry, 7);
  const int64_t reserved[] = {4096, 4096, 4096, 4096, 4096, 6144, 4096, 4096, 0};
  const int64_t allocated[] = {0, 512, 1536, 1024, 1024, 1024, 1024, 0, 0};
  for (int64_t i = 0; i < h.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(h.reserved_after(i), reserved[i]);
    EXPECT_EQ(h.allocated_after(i), allocated[i]);
    const MemoryState st = h.state_at(i);
    EXPECT_EQ(st.entry, i);
    EXPECT_EQ(st.reserved, reserved[i]);
    EXPECT_EQ(st.allocated, allocated[i]);
  }
  const MemoryState at3 = h.state_at(3);
  const auto blocks = h.blocks_of(at3);
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_FALSE(blocks[0].allocated);
  EXPECT_EQ(blocks[0].size, 512);
  EXPECT_TRUE(blocks[1].allocated);
  EXPECT_EQ(blocks[1].size, 1024);
  EXPECT_EQ(blocks[1].requested, 1000);
  EXPECT_EQ(blocks[1].tag, "weights");
  EXPECT_EQ(blocks[2].address, 0x10600);
  EXPECT_EQ(blocks[2].size, 2560);
  const MemoryStateFigures f = h.figures(at3);
  EXPECT_EQ(f.free_in_segments, 3072);
  EXPECT_EQ(f.largest_free_block, 2560);
  EXPECT_DOUBLE_EQ(f.external_fragmentation, 1.0 - 2560.0 / 3072.0);
  EXPECT_DOUBLE_EQ(f.memviz_fragmentation, (512.0 * 512 + 2560.0 * 2560) / (4096.0 * 4096));
  EXPECT_EQ(h.allocation_at(at3, 0x10300), 1);
  EXPECT_EQ(h.allocation_at(at3, 0x10100), -1);  // free
  EXPECT_EQ(h.blocks_of(h.state_at(5)).back().size, 2560 + 2048);  // the grown tail
  EXPECT_THROW(h.state_at(9), std::out_of_range);
  EXPECT_EQ(h.state_at(-1).segments.size(), 0u);

  const RankMemoryAnalysis r = analyze_memory_history(h, 0, 5, {}, {});
  EXPECT_EQ(r.peak_entry, 2);
  EXPECT_EQ(r.peak_allocated, 1536);
  EXPECT_EQ(r.peak_reserved, 6144);
  EXPECT_EQ(r.rounding_loss_at_peak, 36);        // 1536 - 1500
  EXPECT_EQ(r.reserved_overhead_at_peak, 2596);  // 4096 - 1500
  EXPECT_EQ(r.at_peak.largest_free_block, 2560);
  ASSERT_EQ(r.top_stacks_at_peak.size(), 2u);
  EXPECT_EQ(r.top_stacks_at_peak[0].name, "weights");
  EXPECT_EQ(r.top_stacks_at_peak[0].bytes, 1024);
  ASSERT_EQ(r.ooms.size(), 1u);
  EXPECT_EQ(r.ooms[0].entry, 4);
  EXPECT_EQ(r.ooms[0].requested, 4000);
  EXPECT_EQ(r.ooms[0].largest_free_block, 2560);
  EXPECT_EQ(r.ooms[0].device_free, -1);
  EXPECT_FALSE(r.ooms[0].fragmentation);  // 3072 free < 4000
}

TEST(MemoryHistory, ContradictionsAreNamedAndSkipped) {
  const MemoryHistory h =
      MemoryHistory::build({ev("segment_alloc", 0, 2048), ev("free", 0x500, 512), ev("alloc", 0, 512, 512)}, nullptr);
  ASSERT_EQ(h.problems().size(), 1u);
  EXPECT_EQ(h.problems()[0], "entry 1 (free): block 0x500 is not live");
  EXPECT_EQ(h.entries()[1].kind, MemoryEntryKind::other);
  EXPECT_EQ(h.allocated_after(2), 512);
  EXPECT_THROW(MemoryHistory::build({}, nullptr, 0), std::invalid_argument);
}

// The import's counters over time (memory_timeline, walk_timeline) and the analysis' state at
// every entry give one answer on every fixture: the same block sizes, so the same free bytes,
// largest free block and both fragmentation measures.
TEST(MemoryHistory, ImportedCountersOverTimeAgreeWithTheStateAtEveryEntry) {
  for (const char* name : {"training_p4.pickle", "high_address_p4.pickle", "midway_p4.pickle", "oom_p5.pickle",
                           "fragmented_oom_p4.pickle"}) {
    SCOPED_TRACE(name);
    SessionReader r(imported(name));
    const auto timeline = r.memory_timeline();
    for (int32_t rank : MemoryHistory::ranks_with_history(r)) {
      const MemoryHistory h = MemoryHistory::load(r, rank);
      int64_t i = 0;
      for (const auto& p : timeline) {
        if (p.rank != rank) continue;
        SCOPED_TRACE(i);
        ASSERT_EQ(p.entry, i);
        const MemoryStateFigures f = h.figures(h.state_at(i));
        EXPECT_EQ(p.allocated, f.allocated);
        EXPECT_EQ(p.active, f.active);
        EXPECT_EQ(p.reserved, f.reserved);
        EXPECT_EQ(p.largest_free_block, f.largest_free_block);
        EXPECT_NEAR(p.external_fragmentation, f.external_fragmentation, 1e-12);
        EXPECT_NEAR(p.memviz_fragmentation, f.memviz_fragmentation, 1e-12);
        ++i;
      }
      EXPECT_EQ(i, h.size());
    }
  }
}

// Every fixture: the walk forward from the first entry ends in exactly the dump's layout, and a
// state from a checkpoint equals the state walked entry by entry.
TEST(MemoryHistory, FixturesEndInTheDumpAndCheckpointsAgree) {
  for (const char* name : {"training_p4.pickle", "high_address_p4.pickle", "midway_p4.pickle", "oom_p5.pickle",
                           "fragmented_oom_p4.pickle"}) {
    SCOPED_TRACE(name);
    SessionReader r(imported(name));
    for (int32_t rank : MemoryHistory::ranks_with_history(r)) {
      const MemoryHistory h = MemoryHistory::load(r, rank, 7);
      EXPECT_TRUE(h.problems().empty());
      EXPECT_EQ(h.starts_empty(), std::string(name) != "midway_p4.pickle");
      std::vector<MemoryBlockRecord> dump;
      for (const auto& s : r.memory_snapshots())
        if (s.rank == rank) dump = r.memory_blocks(s.id);
      auto last = h.blocks_of(h.state_at(h.size() - 1));
      std::sort(last.begin(), last.end(), [](const auto& a, const auto& b) { return a.address < b.address; });
      ASSERT_EQ(last.size(), dump.size());
      for (size_t i = 0; i < dump.size(); ++i) {
        EXPECT_EQ(last[i].address, dump[i].address);
        EXPECT_EQ(last[i].size, dump[i].size);
        EXPECT_EQ(last[i].allocated, dump[i].allocated);
        EXPECT_EQ(last[i].pending_free, dump[i].pending_free);
        EXPECT_EQ(last[i].stack_id, dump[i].stack_id);
      }
      MemoryState walked = h.initial();
      for (int64_t i = 0; i < h.size(); ++i) {
        h.step(walked);
        if (i % 5 != 0) continue;
        const MemoryState st = h.state_at(i);
        EXPECT_EQ(st.blocks, walked.blocks);
        EXPECT_EQ(st.segments, walked.segments);
        EXPECT_EQ(st.allocated, walked.allocated);
      }
    }
  }
}

// The generator's figures at the peak and at each OOM (counted from its allocator's blocks).
TEST(MemoryAnalysis, PeaksOomsAndStacksAsTheGeneratorCounted) {
  struct Case {
    const char* name;
    int64_t dropped;  // entries a ring buffer dropped before the trace
  };
  for (const Case c : {Case{"oom_p5.pickle", 0}, Case{"fragmented_oom_p4.pickle", 0}, Case{"midway_p4.pickle", 40},
                       Case{"training_p4.pickle", 0}}) {
    SCOPED_TRACE(c.name);
    const auto& e = snapshot_expected()[c.name];
    SessionReader r(imported(c.name));
    const auto ranks = analyze_memory(r, 100);
    ASSERT_EQ(ranks.size(), e["at_peak"].size());
    for (size_t d = 0; d < ranks.size(); ++d) {
      SCOPED_TRACE(d);
      const RankMemoryAnalysis& a = ranks[d];
      const auto& p = e["at_peak"][d];
      EXPECT_EQ(a.peak_entry, p["entry"].get<int64_t>() - c.dropped);
      EXPECT_EQ(a.peak_allocated, p["allocated"].get<int64_t>());
      if (c.dropped == 0) {  // the generator counts segment_alloc entries: those of the kept trace only
        EXPECT_EQ(a.peak_reserved, e["peak_reserved"][d].get<int64_t>());
      }
      EXPECT_EQ(a.at_peak.reserved, p["reserved"].get<int64_t>());
      EXPECT_EQ(a.rounding_loss_at_peak, p["allocated"].get<int64_t>() - p["requested"].get<int64_t>());
      EXPECT_EQ(a.reserved_overhead_at_peak, p["reserved"].get<int64_t>() - p["requested"].get<int64_t>());
      EXPECT_EQ(a.at_peak.free_in_segments, p["free_in_segments"].get<int64_t>());
      EXPECT_EQ(a.at_peak.largest_free_block, p["largest_free_block"].get<int64_t>());
      EXPECT_NEAR(a.at_peak.external_fragmentation, p["external_fragmentation"].get<double>(), 1e-12);
      EXPECT_NEAR(a.at_peak.memviz_fragmentation, p["memviz_fragmentation"].get<double>(), 1e-12);
      using Held = std::map<std::string, int64_t>;
      EXPECT_EQ(held_by_function(a.top_stacks_at_peak), p["held_by_frame"].get<Held>());
      const auto& ooms = e["at_ooms"][d];
      ASSERT_EQ(a.ooms.size(), ooms.size());
      for (size_t k = 0; k < ooms.size(); ++k) {
        EXPECT_EQ(a.ooms[k].entry, ooms[k]["entry"].get<int64_t>());
        EXPECT_EQ(a.ooms[k].requested, ooms[k]["request"].get<int64_t>());
        EXPECT_EQ(a.ooms[k].device_free, ooms[k]["device_free"].get<int64_t>());
        EXPECT_EQ(a.ooms[k].largest_free_block, ooms[k]["largest_free_block"].get<int64_t>());
        EXPECT_EQ(a.ooms[k].free_in_segments, ooms[k]["free_in_segments"].get<int64_t>());
        EXPECT_EQ(held_by_function(a.ooms[k].top_stacks), ooms[k]["held_by_frame"].get<Held>());
      }
    }
  }
  // by hand: the fragmented OOM asks 40 MiB; 38 MiB are free in the segment + 8 MiB on the
  // device, but the largest free block is the 38 MiB left beside the 2 MiB kjt block
  SessionReader r(imported("fragmented_oom_p4.pickle"));
  const auto a = analyze_memory(r)[0];
  ASSERT_EQ(a.ooms.size(), 1u);
  EXPECT_EQ(a.ooms[0].largest_free_block, 38 << 20);
  EXPECT_TRUE(a.ooms[0].fragmentation);
  EXPECT_EQ(a.peak_allocated, 40 << 20);
  EXPECT_EQ(a.top_stacks_at_peak.at(0).name, "activations (train.py:30)");
}

// The active memory timeline of the fragmented fixture, one column per entry: the 40 MiB block
// alone, then nothing, then the 2 MiB kjt block at offset 0.
TEST(MemoryAnalysis, ActiveTimelineBands) {
  SessionReader r(imported("fragmented_oom_p4.pickle"));
  const MemoryHistory h = MemoryHistory::load(r, 0);
  const auto cols = active_timeline(h, 100);
  ASSERT_EQ(cols.size(), 6u);  // no more columns than entries
  EXPECT_TRUE(cols[0].bands.empty());  // segment_alloc
  ASSERT_EQ(cols[1].bands.size(), 1u);
  EXPECT_EQ(h.allocations()[static_cast<size_t>(cols[1].bands[0].allocation)].size, 40 << 20);
  EXPECT_EQ(cols[1].active, 40 << 20);
  EXPECT_EQ(cols[2].active, 40 << 20);  // free requested: still active until it completes
  EXPECT_TRUE(cols[3].bands.empty());
  ASSERT_EQ(cols[4].bands.size(), 1u);
  EXPECT_EQ(cols[4].bands[0].offset, 0);
  EXPECT_EQ(band_at(h, cols[4], 1 << 20), cols[4].bands[0].allocation);
  EXPECT_EQ(band_at(h, cols[4], 3 << 20), -1);
  EXPECT_EQ(cols[5].figures.largest_free_block, 38 << 20);
  // two columns over six entries: each drawn at its peak of active bytes
  const auto two = active_timeline(h, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].first_entry, 0);
  EXPECT_EQ(two[0].last_entry, 2);
  EXPECT_EQ(two[0].entry, 1);
  EXPECT_EQ(two[1].entry, 4);
}

TEST(MemoryHistory, SnapshotLabelsNameWarmUp) {
  MemorySnapshot s;
  s.rank = 0;
  s.step = -2;
  s.reason = "step";
  EXPECT_EQ(snapshot_label(s, 2, false), "rank 0, warm-up step 1 of 2, end of step");
  s.step = 3;
  s.reason = "oom";
  EXPECT_EQ(snapshot_label(s, 2, false), "rank 0, step 3, at the OOM");
  s.reason = "dump";
  EXPECT_EQ(snapshot_label(s, 0, true), "rank 0, at the dump");
}
