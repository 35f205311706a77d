#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/memory_analysis.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "fixtures.h"

using namespace embedscope::sessions;
using namespace embedscope::sessions::torch_snapshot;
using embedscope::test::snapshot_expected;
using embedscope::test::snapshot_fixture;

namespace {
std::string scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_import_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}
std::string import_to_session(const std::string& fixture) {
  const std::string path = scratch(fixture + ".db");
  SessionWriter w(path, true);
  import_torch_memory_snapshot(snapshot_fixture(fixture), w);
  w.close("complete");
  return path;
}
}  // namespace

// The done-when of issue 13: the imported segment map matches the file's segments exactly.
TEST(TorchSnapshotImport, SegmentMapOfEveryFixtureMatchesTheFile) {
  for (const char* name : {"training_p2.pickle", "training_p4.pickle", "training_p5.pickle", "training_p4.pickle.gz",
                           "high_address_p4.pickle", "midway_p4.pickle", "oom_p5.pickle"}) {
    SCOPED_TRACE(name);
    const auto& e = snapshot_expected()[name];
    SessionReader r(import_to_session(name));
    EXPECT_EQ(r.meta(meta::kImportFormat), "torch_memory_snapshot");
    EXPECT_EQ(r.meta(meta::kImported), "1");
    EXPECT_EQ(r.ranks().size(), e["devices"].get<size_t>());
    const auto shots = r.memory_snapshots();
    ASSERT_EQ(shots.size(), e["devices"].get<size_t>());
    // segments in file order: device by device, each device's in the order of its blocks' addresses
    struct Seg {
      int64_t total = 0, allocated = 0, active = 0;
      size_t blocks = 0;
    };
    std::map<std::pair<int32_t, uint64_t>, Seg> got;
    size_t pending = 0;
    for (const auto& s : shots) {
      EXPECT_EQ(s.reason, "dump");
      for (const auto& b : r.memory_blocks(s.id)) {
        Seg& g = got[{s.rank, static_cast<uint64_t>(b.segment_address)}];
        g.total = b.segment_size;
        if (b.allocated && !b.pending_free) g.allocated += b.size;
        if (b.allocated) g.active += b.size;
        pending += b.pending_free;
        ++g.blocks;
      }
    }
    ASSERT_EQ(got.size(), e["segments"].size());
    for (const auto& x : e["segments"]) {
      const auto key = std::make_pair(x["device"].get<int32_t>(), std::stoull(x["address"].get<std::string>()));
      ASSERT_TRUE(got.count(key)) << x["address"];
      EXPECT_EQ(got[key].total, x["total_size"].get<int64_t>());
      EXPECT_EQ(got[key].allocated, x["allocated_size"].get<int64_t>());
      EXPECT_EQ(got[key].active, x["active_size"].get<int64_t>());
      EXPECT_EQ(got[key].blocks, x["blocks"].get<size_t>());
    }
    EXPECT_EQ(pending, e["pending_free_blocks"].get<size_t>());
    // events, frames, stacks
    const auto events = r.memory_events();
    size_t total_entries = 0;
    for (const auto& n : e["trace_entries"]) total_entries += n.get<size_t>();
    EXPECT_EQ(events.size(), total_entries);
    std::map<std::string, int64_t> actions;
    for (const auto& m : events) ++actions[m.action];
    for (const auto& [k, v] : e["actions"].items()) EXPECT_EQ(actions[k], v.get<int64_t>()) << k;
    EXPECT_EQ(r.memory_frames().size(), e["distinct_frames"].get<size_t>());
    // the counters over time end where the dump is; their peak is the trace's
    const auto timeline = r.memory_timeline();
    EXPECT_EQ(timeline.size(), total_entries);
    for (size_t d = 0; d < e["devices"].get<size_t>(); ++d) {
      int64_t last_reserved = -1, last_allocated = -1, peak = 0;
      for (const auto& p : timeline)
        if (p.rank == static_cast<int32_t>(d)) {
          last_reserved = p.reserved;
          last_allocated = p.allocated;
          peak = std::max(peak, p.reserved);
        }
      EXPECT_EQ(last_reserved, e["reserved_at_dump"][d].get<int64_t>());
      EXPECT_EQ(last_allocated, e["allocated_at_dump"][d].get<int64_t>());
      if (std::string(name) != "midway_p4.pickle") { EXPECT_EQ(peak, e["peak_reserved"][d].get<int64_t>()); }
    }
    const auto counters = r.memory_counters();
    ASSERT_EQ(counters.size(), e["devices"].get<size_t>());
    EXPECT_EQ(counters[0].reserved, e["reserved_at_dump"][0].get<int64_t>());
  }
}

TEST(TorchSnapshotImport, StreamsStacksAndTheTraceStart) {
  {
    SessionReader r(import_to_session("training_p4.pickle"));
    EXPECT_EQ(r.meta(meta::kMemoryTraceStart), "process_start");
    EXPECT_EQ(r.meta(meta::kWorldSize), "2");
    EXPECT_NE(r.meta(meta::kAllocatorSettingsJson).find("\"expandable_segments\":false"), std::string::npos);
    EXPECT_NE(r.meta(meta::kAllocatorSettingsJson).find("\"pinned_num_register_threads\":1"), std::string::npos);
    const auto events = r.memory_events();
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events[0].action, "segment_alloc");
    EXPECT_EQ(events[0].time_ns, 0);     // the earliest entry
    EXPECT_EQ(events[1].time_ns, 7000);  // 7 us later (the generator's step)
    EXPECT_EQ(events[0].tag, "init_weights");
    const auto stacks = r.memory_stacks();
    const auto frames = r.memory_frames();
    int depth = 0;
    for (const auto& s : stacks)
      if (s.stack_id == events[0].stack_id) {
        EXPECT_EQ(s.depth, depth++);
        if (s.depth == 0) { EXPECT_EQ(frames[static_cast<size_t>(s.frame_id)].name, "init_weights"); }
        if (s.depth == 1) { EXPECT_EQ(frames[static_cast<size_t>(s.frame_id)].filename, "torch/nn/modules/module.py"); }
      }
    EXPECT_EQ(depth, 2);
    int on_comm_stream = 0;
    for (const auto& m : events) on_comm_stream += m.stream == 7;
    EXPECT_GT(on_comm_stream, 0);
  }
  {
    SessionReader r(import_to_session("midway_p4.pickle"));
    EXPECT_EQ(r.meta(meta::kMemoryTraceStart), "mid_way");
  }
}

// Fragmentation over time on a hand-built trace: one 10 MiB segment, blocks of 2 and 3 MiB.
TEST(TorchSnapshotImport, TimelineFiguresOnAHandBuiltTrace) {
  constexpr int64_t MiB = 1 << 20;
  MemorySnapshotFile s;
  s.stacks.push_back({});
  const uint64_t base = 0x10000000;
  Segment seg;
  seg.address = base;
  seg.total_size = 10 * MiB;
  seg.blocks = {{base, 2 * MiB, 2 * MiB, BlockState::inactive, 0, {}},
                {base + 2 * MiB, 3 * MiB, 3 * MiB, BlockState::active_allocated, 0, {}},
                {base + 5 * MiB, 5 * MiB, 0, BlockState::inactive, 0, {}}};
  s.segments.push_back(seg);
  auto entry = [](TraceAction a, uint64_t addr, int64_t size, int64_t t) { return TraceEntry{a, addr, size, 0, t, 0, {}}; };
  s.device_traces = {{entry(TraceAction::segment_alloc, base, 10 * MiB, 100), entry(TraceAction::alloc, base, 2 * MiB, 101),
                      entry(TraceAction::alloc, base + 2 * MiB, 3 * MiB, 102),
                      entry(TraceAction::free_requested, base, 2 * MiB, 103),
                      entry(TraceAction::free_completed, base, 2 * MiB, 104)}};
  const TimelineWalk w = walk_timeline(s, 0, 100);
  EXPECT_TRUE(w.starts_empty);
  EXPECT_TRUE(w.problems.empty());
  ASSERT_EQ(w.points.size(), 5u);
  EXPECT_EQ(w.points[0].reserved, 10 * MiB);
  EXPECT_EQ(w.points[0].largest_free_block, 10 * MiB);
  EXPECT_DOUBLE_EQ(w.points[0].memviz_fragmentation, 1.0);
  EXPECT_EQ(w.points[2].allocated, 5 * MiB);
  EXPECT_EQ(w.points[3].allocated, 3 * MiB);  // free requested: not allocated, still active
  EXPECT_EQ(w.points[3].active, 5 * MiB);
  EXPECT_EQ(w.points[3].largest_free_block, 5 * MiB);
  EXPECT_EQ(w.points[4].largest_free_block, 5 * MiB);  // gaps 2 and 5 MiB
  EXPECT_DOUBLE_EQ(w.points[4].external_fragmentation, 1.0 - 5.0 / 7.0);
  EXPECT_DOUBLE_EQ(w.points[4].memviz_fragmentation, (4.0 + 25.0) / 100.0);
  EXPECT_EQ(w.points[4].time_ns, 4000);
  // a free of a block that was never allocated is a problem, not a crash
  s.device_traces[0].push_back(entry(TraceAction::alloc, base + 9 * MiB, 512, 105));
  const TimelineWalk bad = walk_timeline(s, 0, 100);
  ASSERT_EQ(bad.problems.size(), 1u);
  EXPECT_EQ(bad.problems[0], "device 0 entry 5 (alloc): block 0x10900000 is not live after it");
}

// A block freed before the dump whose request left at most 1 MiB of its gap: PyTorch does not
// split the gap (should_split), so the block was the whole 20 MiB segment. The counters over time
// stored 19.5 MiB allocated and a 0.5 MiB free block for it (round-up-to-512 only), so their
// fragmentation differed from the analysis' (MemoryHistory sizes it as the whole gap).
TEST(TorchSnapshotImport, TimelineSizesAnUnsplitBlockAsItsWholeGap) {
  constexpr int64_t MiB = 1 << 20;
  MemorySnapshotFile s;
  s.stacks.push_back({});
  const uint64_t base = 0x20000000;
  Segment seg;
  seg.address = base;
  seg.total_size = 20 * MiB;
  seg.blocks = {{base, 8 * MiB, 8 * MiB, BlockState::active_allocated, 0, {}},
                {base + 8 * MiB, 12 * MiB, 0, BlockState::inactive, 0, {}}};
  s.segments.push_back(seg);
  auto entry = [](TraceAction a, uint64_t addr, int64_t size, int64_t t) { return TraceEntry{a, addr, size, 0, t, 0, {}}; };
  s.device_traces = {{entry(TraceAction::segment_alloc, base, 20 * MiB, 100),
                      entry(TraceAction::alloc, base, 19 * MiB + MiB / 2, 101),  // rest 0.5 MiB: not split
                      entry(TraceAction::free_requested, base, 19 * MiB + MiB / 2, 102),
                      entry(TraceAction::free_completed, base, 19 * MiB + MiB / 2, 103),
                      entry(TraceAction::alloc, base, 8 * MiB, 104)}};  // rest 12 MiB: split
  const TimelineWalk w = walk_timeline(s, 0, 100);
  ASSERT_TRUE(w.problems.empty());
  ASSERT_EQ(w.points.size(), 5u);
  EXPECT_EQ(w.points[1].allocated, 20 * MiB);
  EXPECT_EQ(w.points[1].largest_free_block, 0);
  EXPECT_DOUBLE_EQ(w.points[1].memviz_fragmentation, 0.0);
  EXPECT_EQ(w.points[3].allocated, 0);
  EXPECT_EQ(w.points[4].allocated, 8 * MiB);
  EXPECT_EQ(w.points[4].largest_free_block, 12 * MiB);
  EXPECT_DOUBLE_EQ(w.points[4].memviz_fragmentation, 144.0 / 400.0);
}

// Found by fuzz_memory_snapshot (tests/fuzz): fragmented_oom_p4.pickle with one byte of an
// allocator setting's string changed to 0xb4, not UTF-8 (Python's pickle refuses it; this reader
// keeps the bytes). Writing allocator_settings_json threw nlohmann's type_error 316 out of the
// import (`embedscope import` exit 1); the bad byte is written as U+FFFD now.
TEST(TorchSnapshotImport, SettingsThatAreNotUtf8AreStoredWithReplacementCharacters) {
  const std::string fixture = std::string(EMBEDSCOPE_TEST_DATA) + "/fuzz/memory_snapshot/invalid_utf8_setting.pickle";
  const std::string path = scratch("invalid_utf8_setting.db");
  {
    SessionWriter w(path, true);
    import_torch_memory_snapshot(fixture, w);
    w.close("complete");
  }
  const SessionReader r(path);
  const std::string settings = r.meta(meta::kAllocatorSettingsJson);
  const auto j = nlohmann::json::parse(settings);  // valid JSON
  ASSERT_TRUE(j.is_object()) << settings;
  EXPECT_NE(settings.find("\xef\xbf\xbd"), std::string::npos) << settings;  // U+FFFD in UTF-8
  EXPECT_EQ(r.memory_snapshots().size(), 1u);
}

// tester34 D11/D12: the entries that contradict the layout are stored in import_stats (name,
// severity error, count, the file and the first example in entry order), as the trace importers'
// problems are; an alloc whose size is larger than its block in the dump (2^62 B for an 8 MiB
// block) is named by its path in the file and its request is stored as the block's size, so the
// bytes lost to rounding are 0, never negative (they were -4 EiB).
TEST(TorchSnapshotImport, ContradictionsAreStoredAsImportProblems) {
  constexpr int64_t MiB = 1 << 20;
  MemorySnapshotFile s;
  s.stacks.push_back({});
  const uint64_t base = 0x7f0000000000;
  Segment seg;
  seg.address = base;
  seg.total_size = 20 * MiB;
  seg.blocks = {{base, 4 * MiB, 4 * MiB, BlockState::active_allocated, 0, {}},
                {base + 4 * MiB, 8 * MiB, 8 * MiB, BlockState::active_allocated, 0, {}},
                {base + 12 * MiB, 8 * MiB, 0, BlockState::inactive, 0, {}}};
  s.segments.push_back(seg);
  auto entry = [](TraceAction a, uint64_t addr, int64_t size, int64_t t) { return TraceEntry{a, addr, size, 0, t, 0, {}}; };
  s.device_traces = {{entry(TraceAction::segment_alloc, base, 20 * MiB, 100), entry(TraceAction::alloc, base, 4 * MiB, 101),
                      entry(TraceAction::alloc, base + 4 * MiB, int64_t{1} << 62, 102),  // the dump's block is 8 MiB
                      entry(TraceAction::alloc, base + 16 * MiB, 2 * MiB, 103),          // never live after it
                      entry(TraceAction::alloc, base + 18 * MiB, 2 * MiB, 104)}};        // nor this one
  const std::string path = scratch("contradictions.db");
  {
    SessionWriter w(path, true);
    const ImportSummary sum = import_torch_memory_snapshot(s, "contradictions.pickle", w);
    w.close("complete");
    EXPECT_EQ(sum.problems.size(), 3u);
    EXPECT_EQ(sum.import_stats.size(), 2u);
  }
  const SessionReader r(path);
  const auto stats = r.import_stats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].name, "alloc_block_not_live");
  EXPECT_EQ(stats[0].severity, "error");
  EXPECT_EQ(stats[0].count, 2);
  EXPECT_EQ(stats[0].source, "contradictions.pickle");
  EXPECT_EQ(stats[0].example, "device 0 entry 3 (alloc): block 0x7f0001000000 is not live after it");
  EXPECT_EQ(stats[1].name, "trace_size_disagrees_with_dump");
  EXPECT_EQ(stats[1].severity, "error");
  EXPECT_EQ(stats[1].count, 1);
  EXPECT_EQ(stats[1].example,
            "device_traces[0][2].size = 4611686018427387904 disagrees with the block at 0x7f0000400000 in the dump "
            "(8388608 bytes); its request is taken as the block's size");
  const auto events = r.memory_events();
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[2].size, int64_t{1} << 62);  // the entry as the file has it
  EXPECT_EQ(events[2].requested, 8 * MiB);      // its request: the block's size
  const auto mem = analyze_memory(r);
  ASSERT_EQ(mem.size(), 1u);
  EXPECT_EQ(mem[0].peak_allocated, 12 * MiB);
  EXPECT_EQ(mem[0].rounding_loss_at_peak, 0);
  EXPECT_EQ(mem[0].reserved_overhead_at_peak, 8 * MiB);  // 20 reserved - 12 requested
}

// tester34 D24: per-rank snapshots (each process dumps its own GPU as device 0) as one session:
// ranks in the order given, one per device holding anything (small_oom_p4's empty device 1 is
// no rank), events, timelines and dumps per rank, each event's stack resolving to its own
// file's frames (stack ids offset per file), one clock (both files start at time_us 1010).
TEST(TorchSnapshotImport, SeveralSnapshotsBecomeRanksInOrder) {
  const MemorySnapshotFile a = load_snapshot(snapshot_fixture("shrunk_oom_p4.pickle"));
  const MemorySnapshotFile b = load_snapshot(snapshot_fixture("small_oom_p4.pickle"));
  const std::string path = scratch("two_ranks.db");
  {
    SessionWriter w(path, true);
    const ImportSummary sum = import_torch_memory_snapshots({{&a, "shrunk_oom_p4.pickle"}, {&b, "small_oom_p4.pickle"}}, w);
    w.close("complete");
    EXPECT_EQ(sum.devices, 2);
    EXPECT_EQ(sum.trace_entries, 9 + 7);
    EXPECT_EQ(sum.segments, 2);
  }
  const SessionReader r(path);
  const auto ranks = r.ranks();
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0].device, "cuda:0 of shrunk_oom_p4.pickle (PyTorch memory snapshot)");
  EXPECT_EQ(ranks[1].device, "cuda:0 of small_oom_p4.pickle (PyTorch memory snapshot)");
  EXPECT_EQ(r.meta(meta::kWorldSize), "2");
  std::map<int32_t, int> events;
  std::map<int32_t, std::string> frame_name;
  for (const auto& f : r.memory_frames()) frame_name[f.id] = f.name;
  std::map<int32_t, int32_t> innermost;  // stack -> its depth-0 frame
  for (const auto& s : r.memory_stacks())
    if (s.depth == 0) innermost[s.stack_id] = s.frame_id;
  for (const auto& e : r.memory_events()) {
    ++events[e.rank];
    if (e.stack_id > 0) { EXPECT_EQ(frame_name[innermost[e.stack_id]], e.tag) << "rank " << e.rank << " " << e.action; }
  }
  EXPECT_EQ(events[0], 9);
  EXPECT_EQ(events[1], 7);
  const auto mem = analyze_memory(r);
  ASSERT_EQ(mem.size(), 2u);
  EXPECT_EQ(mem[0].peak_reserved, 40 << 20);  // shrunk: two 20 MiB segments
  EXPECT_EQ(mem[0].peak_allocated, 27 << 20);
  EXPECT_EQ(mem[1].peak_allocated, 12 << 20);  // small: 4 + 8 MiB
  ASSERT_EQ(mem[1].top_stacks_at_peak.size(), 2u);
  EXPECT_EQ(mem[1].top_stacks_at_peak[0].name, "emb_b (train.py:11)");
  EXPECT_EQ(mem[1].ooms.size(), 1u);
  EXPECT_EQ(r.memory_snapshots().size(), 2u);
}
