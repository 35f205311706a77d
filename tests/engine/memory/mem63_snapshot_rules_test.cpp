// Snapshots replayed as PyTorch's caching allocator would (tester63c): an expandable segment whose
// first pages were unmapped and that then grew is walked back without a problem (F2); a pending
// free (record_stream) is waited for before an OOM, as release_cached_blocks does (F3); an OOM
// row's advice weighs replay-memory's default rows whichever rows are shown (F1).
// Fixtures: tests/data/memory_snapshots/tester63_*.pickle, written by the tester's scripts
// (entries listed in each test; hand figures in the comments).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "embedscope/engine/memory/snapshot_replay.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "support/cli_run.h"

#include <nlohmann/json.hpp>

using namespace embedscope::engine;
namespace ts = embedscope::sessions::torch_snapshot;

namespace {
constexpr int64_t kM63MiB = int64_t{1} << 20;
std::string m63_fixture(const std::string& name) {
  return std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/" + name;
}
}  // namespace

// tester63_exp_head3.pickle (expandable_segments:True): 0 segment_map [0, 40 MiB); 1 alloc a
// [0, 20); 2 alloc b [20, 40); 3-4 free a; 5 segment_unmap [0, 20) (the head page); 6 segment_map
// [40, 80); 7 alloc c of 30 MiB at 40. The dump: one segment [20, 80) (PyTorch reports one
// segment per contiguous mapped range): b, c, 10 MiB free. Walking back, the unmapped head page
// is mapped again before the range that starts right after it: no problem, the trace starts at
// the process start.
TEST(Mem63SnapshotRules, ExpandableRangeWhoseHeadWasUnmappedThenGrew) {
  const auto snap = ts::load_snapshot(m63_fixture("tester63_exp_head3.pickle"));
  const ts::TimelineWalk w = ts::walk_timeline(snap, 0, 0);
  EXPECT_TRUE(w.problems.empty()) << w.problems.front();
  EXPECT_TRUE(w.starts_empty);
  ASSERT_EQ(w.points.size(), 8u);
  const std::vector<int64_t> reserved_mib{40, 40, 40, 40, 40, 20, 60, 60};
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(w.points[i].reserved, reserved_mib[i] * kM63MiB) << "entry " << i;
  EXPECT_EQ(w.points[7].allocated, 50 * kM63MiB);
  EXPECT_EQ(w.points[7].largest_free_block, 10 * kM63MiB);
  EXPECT_NEAR(w.points[7].memviz_fragmentation, 100.0 / 3600.0, 1e-9);  // 10^2 / 60^2
  // replayed under the recorded settings at the recorded peak: the dump's one 60 MiB segment
  const SnapshotReplay rep = replay_snapshot(snap, 0, {recorded_config(snap, 60 * kM63MiB)}, "exp_head3");
  EXPECT_TRUE(rep.starts_at_process_start);
  EXPECT_TRUE(rep.problems.empty());
  EXPECT_EQ(rep.snapshot_segments, 1);
  EXPECT_EQ(rep.results[0].peak_reserved, 60 * kM63MiB);
  EXPECT_EQ(rep.results[0].final_reserved, 60 * kM63MiB);
  EXPECT_EQ(rep.results[0].final_segments, 1);
}

// tester63_exp.pickle: small page 2 MiB; [0, 300 MiB) mapped; 200 MiB logits at 0, 50 MiB kv at
// 200; logits freed; 11 segment_unmap [0, 200), 12 segment_unmap [260, 300) (the release before
// the retry), 13 segment_map [260, 520), 14 alloc 260 MiB at 250 MiB. Reserved after 11: 102 MiB,
// after 12: 62, after 13: 322 (the range [200, 520) and the small page: the dump's 2 segments).
TEST(Mem63SnapshotRules, UnmapsAtTheHeadAndTailThenAMapThatJoinsThem) {
  const auto snap = ts::load_snapshot(m63_fixture("tester63_exp.pickle"));
  const ts::TimelineWalk w = ts::walk_timeline(snap, 0, 0);
  EXPECT_TRUE(w.problems.empty()) << w.problems.front();
  EXPECT_TRUE(w.starts_empty);
  ASSERT_EQ(w.points.size(), 15u);
  EXPECT_EQ(w.points[10].reserved, 302 * kM63MiB);
  EXPECT_EQ(w.points[11].reserved, 102 * kM63MiB);
  EXPECT_EQ(w.points[12].reserved, 62 * kM63MiB);
  EXPECT_EQ(w.points[13].reserved, 322 * kM63MiB);
  EXPECT_EQ(w.points[14].allocated, 310 * kM63MiB + 1024 + 614400);
}

// tester63_pending2.pickle: 40 MiB segment A ("comm"), 12 MiB segment B; A's free requested
// (used on another stream); a 30 MiB request (new segment C); A's free completed. At 64 MiB the
// 30 MiB segment does not fit (52 + 30 > 64): PyTorch's release_cached_blocks waits for A's event
// (synchronize_and_free_events), releases the whole free A (reserved 12) and the new 30 MiB
// segment fits: reserved 42 MiB, no OOM (peak 52 MiB, before the release).
TEST(Mem63SnapshotRules, APendingFreeIsWaitedForNotAnOom) {
  const auto snap = ts::load_snapshot(m63_fixture("tester63_pending2.pickle"));
  const AllocatorConfig caching{AllocatorKind::caching, 64 * kM63MiB, 0, false};
  const SnapshotReplay rep = replay_snapshot(snap, 0, {caching}, "pending2");
  const ReplayResult& r = rep.results[0];
  EXPECT_FALSE(r.oom) << r.oom_message;
  EXPECT_EQ(r.synchronized_waits, 1);
  EXPECT_EQ(r.peak_reserved, 52 * kM63MiB);
  EXPECT_EQ(r.final_reserved, 42 * kM63MiB);
  EXPECT_EQ(r.final_segments, 2);
  EXPECT_EQ(r.skipped_frees, 0);  // A's later free_completed: already freed by the wait
}

// The same trace at 40 MiB: B's 12 MiB does not fit beside the live A (40 + 12 > 40): the live
// data itself does not fit. A PyTorch program's advice names no Embedscope workload remedy
// (tables, batch_size, rowwise_adagrad), and the rows not shown (expandable, direct) are weighed:
// none completes at 40 MiB.
TEST(Mem63SnapshotRules, APytorchProgramIsNotToldToShardTables) {
  const auto snap = ts::load_snapshot(m63_fixture("tester63_pending2.pickle"));
  const AllocatorConfig caching{AllocatorKind::caching, 40 * kM63MiB, 0, false};
  SnapshotReplay rep = replay_snapshot(snap, 0, {caching}, "pending2");
  ASSERT_TRUE(rep.results[0].oom);
  EXPECT_EQ(rep.results[0].oom_action, 3);  // B's alloc
  advise_snapshot_rows(rep.results, nullptr, [&](const AllocatorConfig& c) {
    return replay_snapshot(snap, 0, {c}, "pending2").results.front();
  });
  const std::string& m = rep.results[0].oom_message;
  EXPECT_EQ(m.find("rowwise_adagrad"), std::string::npos) << m;
  EXPECT_EQ(m.find("batch_size"), std::string::npos) << m;
  EXPECT_NE(m.find(kPytorchLiveDataAdvice), std::string::npos) << m;
  // the candidates not shown are weighed: expandable and direct ran out too
  EXPECT_NE(m.find("expandable_segments and direct (one segment per allocation, no cache: "
                   "PYTORCH_NO_CUDA_MEMORY_CACHING=1) do not either"),
            std::string::npos)
      << m;
  // a capacity that serves the trace unlimited: 40 + 12 + 30 = 82 MiB (caching; nothing waited for)
  EXPECT_NE(m.find("a capacity of 82.0 MiB would have sufficed"), std::string::npos) << m;
}

// tester63_mss.pickle (max_split_size_mb:100 recorded): small 2 MiB segment; A 300 MiB alloc'd and
// freed; logits 200 MiB in a new segment (>= max_split_size: refuses A, 300 >= 200 + 20); 9
// segment_free A, 10 segment_alloc kv 50 MiB, both with kv's stack: the allocator's release before
// its retry (the recording's device had 512 MiB), not an empty_cache of the program's; logits
// freed; attn 260 MiB in a new segment. At 2 GiB nothing has to be released: 2 + 300 + 200 + 50 +
// 260 = 812 MiB; at 512 MiB the model releases A itself: 512 MiB, the recording's peak.
TEST(Mem63SnapshotRules, TheAllocatorsReleaseBeforeARetryIsNotAnEmptyCache) {
  const auto snap = ts::load_snapshot(m63_fixture("tester63_mss.pickle"));
  const auto actions = snapshot_actions(snap, 0);
  for (const auto& a : actions) EXPECT_NE(a.kind, MemoryAction::Kind::empty_cache) << "entry " << a.entry;
  const SnapshotReplay big = replay_snapshot(snap, 0, {recorded_config(snap, 2048 * kM63MiB)}, "mss");
  EXPECT_EQ(big.results[0].config.max_split_size, 100 * kM63MiB);
  EXPECT_FALSE(big.results[0].oom);
  EXPECT_EQ(big.results[0].peak_reserved, 812 * kM63MiB);
  const SnapshotReplay own = replay_snapshot(snap, 0, {recorded_config(snap, 512 * kM63MiB)}, "mss");
  EXPECT_FALSE(own.results[0].oom);
  EXPECT_EQ(own.results[0].peak_reserved, 512 * kM63MiB);
  EXPECT_EQ(own.results[0].final_reserved, own.snapshot_reserved);
  EXPECT_EQ(own.results[0].final_segments, own.snapshot_segments);
}

// tester63_exp.pickle (above) under expandable: at 600 MiB the 260 MiB request maps 11 pages after
// the tail (302 + 220 = 522 <= 600): nothing is unmapped, peak 522 MiB; at 400 and 322 MiB the
// mapping fails first, the free whole pages [0, 200) and [260, 300) are unmapped, and [260, 520)
// mapped: 322 MiB.
TEST(Mem63SnapshotRules, TheUnmapsBeforeARetryHappenOnlyWhereTheMappingFails) {
  const auto snap = ts::load_snapshot(m63_fixture("tester63_exp.pickle"));
  for (const auto& a : snapshot_actions(snap, 0)) EXPECT_NE(a.kind, MemoryAction::Kind::empty_cache) << a.entry;
  for (const auto& [cap, peak] : std::vector<std::pair<int64_t, int64_t>>{{600, 522}, {400, 322}, {322, 322}}) {
    const SnapshotReplay rep = replay_snapshot(snap, 0, {recorded_config(snap, cap * kM63MiB)}, "exp");
    EXPECT_FALSE(rep.results[0].oom) << cap;
    EXPECT_EQ(rep.results[0].peak_reserved, peak * kM63MiB) << cap;
  }
}

// PyTorch's round_size with roundup_power2_divisions (CUDACachingAllocator.cpp: above 512 x d
// bytes, roundup_power2_next_division): 4 divisions in [4, 8) MiB round 5 MiB + 1 up to 6 MiB, a
// power of two stays, [8, 16) MiB without divisions rounds to 512 B.
TEST(Mem63SnapshotRules, RoundupPower2Divisions) {
  std::vector<int64_t> d(16, 0);
  d[2] = 4;
  EXPECT_EQ(round_size(5 * kM63MiB + 1, d), 6 * kM63MiB);
  EXPECT_EQ(round_size(4 * kM63MiB, d), 4 * kM63MiB);
  EXPECT_EQ(round_size(6 * kM63MiB + 1, d), 7 * kM63MiB);
  EXPECT_EQ(round_size(29 * kM63MiB / 2, d), 29 * kM63MiB / 2);
  EXPECT_EQ(round_size(5 * kM63MiB + 1, {}), 5 * kM63MiB + 512);
}

// tester63_roundup.pickle (make_rules.py roundup): allocator_settings roundup_power2_divisions
// {"1": 0, "2": 0, "4": 4, ...} ("roundup_power2_divisions:[4:4]"); segment_alloc 20 MiB, alloc
// 5 MiB + 1 (a 6 MiB block), segment_alloc 16 MiB, alloc 14.5 MiB (the 14 MiB rest cannot hold it:
// a new 16 MiB segment). The recorded settings' replay reserves 36 MiB, as the recording.
TEST(Mem63SnapshotRules, TheRecordedRoundupIsReplayed) {
  const auto snap = ts::load_snapshot(m63_fixture("tester63_roundup.pickle"));
  const AllocatorConfig rec = recorded_config(snap, 0);
  ASSERT_EQ(rec.roundup_power2_divisions.size(), 16u);
  EXPECT_EQ(rec.roundup_power2_divisions[2], 4);
  EXPECT_EQ(setting_label(rec), "caching, roundup_power2_divisions [4:4]");
  AllocatorConfig at = rec;
  at.capacity_bytes = kMaxMemoryBytes;
  const SnapshotReplay rep = replay_snapshot(snap, 0, {at, {AllocatorKind::caching, kMaxMemoryBytes, 0, false}}, "roundup");
  EXPECT_EQ(rep.results[0].peak_reserved, 36 * kM63MiB);
  EXPECT_EQ(rep.results[0].final_segments, 2);
  EXPECT_EQ(rep.results[0].peak_allocated, 6 * kM63MiB + 29 * kM63MiB / 2);
  EXPECT_EQ(rep.results[1].peak_reserved, 20 * kM63MiB);  // without it: 5 MiB + 512 and 14.5 MiB share the 20 MiB
}

// tester63_frag.pickle: at the 260 MiB OOM (capacity 210 + 302 = 512 MiB) the free blocks are
// 200 MiB, 50 MiB and the small segment's 1,481,728 B: fragmentation 1 - 200 MiB / 263,625,728 B
// = 20.45 %, MemoryViz (200^2 + 50^2 + 1.413^2) / 302^2 MiB^2 = 0.4660; replay-memory's table
// figures are those at peak reserved (0.0 %), so the OOM's own are kept with it.
TEST(Mem63SnapshotRules, TheFragmentationAtTheOom) {
  const auto snap = ts::load_snapshot(m63_fixture("tester63_frag.pickle"));
  const int64_t cap = snapshot_capacity(snap, 0);
  EXPECT_EQ(cap, 512 * kM63MiB);
  const SnapshotReplay rep = replay_snapshot(snap, 0, {recorded_config(snap, cap)}, "frag");
  const ReplayResult& r = rep.results[0];
  ASSERT_TRUE(r.oom);
  EXPECT_EQ(r.oom_action, 11);
  EXPECT_NEAR(r.fragmentation_at_oom, 0.2044965, 1e-6);
  EXPECT_NEAR(r.memviz_at_oom, 0.4660102, 1e-6);
  EXPECT_EQ(r.largest_free_at_oom, 200 * kM63MiB);
  EXPECT_DOUBLE_EQ(r.fragmentation_at_peak, 0.0);
}

// The advice's last clause names a setting of its own once: "with caching and max_split_size
// 20.0 MiB itself", not "with caching with max_split_size 20.0 MiB itself" (tester63c F10).
TEST(Mem63SnapshotRules, TheAdviceNamesTheFailedSettingReadably) {
  const AllocatorConfig mss{AllocatorKind::caching, 64 * kM63MiB, 20 * kM63MiB, false};
  const std::string a = advice_from_replays(mss, {}, "the trace's actions", 0, "", "give the device at least 80.0 MiB");
  EXPECT_EQ(a, "no other setting was replayed on the trace's actions; with caching and max_split_size 20.0 MiB itself: "
               "give the device at least 80.0 MiB");
  const AllocatorConfig plain{AllocatorKind::caching, 64 * kM63MiB, 0, false};
  EXPECT_NE(advice_from_replays(plain, {}, "x", 0, "", "y").find("; with caching itself: y"), std::string::npos);
}

// mem61_gc.pickle (make_mem61.py: recorded with garbage_collection_threshold 0.5 on a 100 MiB device,
// no OOM, peak reserved 74 MiB). No entry records the device's memory: replay-memory replays at the
// trace's peak reserved, 74 MiB, as the workbench's Replay panel offers it (it replayed at unlimited,
// where a threshold never collects: 116 MiB beside the panel's 60). Hand, threshold 37 MiB: X 18 MiB
// finds reserved 44 > 37: A (12) released, X reserved (50); Y 24: B (14) released (60); Z 30: C and
// Y released (20), Z reserved (50): peak 60 MiB. The verdict names the assumed capacity as the
// reason, not the allocator model.
TEST(Mem63SnapshotRules, NoOomMeansTheTracesPeakReservedAndTheThresholdIsSaidToDependOnIt) {
  const auto dir = embedscope::test_support::fresh_scratch("mem63_gc_capacity");
  const auto r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "replay-memory " + m63_fixture("mem61_gc.pickle") + " --json", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto dev = nlohmann::json::parse(r.out)["devices"][0];
  EXPECT_EQ(dev["capacity_source"], "trace_peak_reserved");
  EXPECT_EQ(dev["capacity_bytes"], 74 * kM63MiB);
  const auto& rows = dev["results"];
  EXPECT_DOUBLE_EQ(rows[0]["garbage_collection_threshold"].get<double>(), 0.5);
  EXPECT_EQ(rows[0]["peak_reserved_bytes"], 60 * kM63MiB);
  EXPECT_EQ(rows[0]["result"], "ok");
  const std::string verdict = dev["recorded_settings_verdict"].get<std::string>();
  EXPECT_NE(verdict.find("the recorded garbage_collection_threshold 0.5 collects once reserved bytes pass 0.5 x the "
                         "device's capacity, which the snapshot does not record (no OOM): the replay assumed 74.0 MiB"),
            std::string::npos)
      << verdict;
  EXPECT_EQ(verdict.find("placed the blocks differently"), std::string::npos) << verdict;
}

// tester63_rules.pickle (make_rules.py rules): 32 MiB reserved in 3 segments, no free large block,
// the OOM asks 3 MiB with 8 MiB free on the device. A 3 MiB request is large-pool and below 10 MiB:
// PyTorch's get_allocation_size gives it a new 20 MiB segment, which 8 MiB cannot hold; `stats`
// says so instead of leaving "enough bytes were free" unexplained (tester63c F9).
TEST(Mem63SnapshotRules, StatsNamesTheSegmentTheRequestNeeded) {
  const auto dir = embedscope::test_support::fresh_scratch("mem63_rules_stats");
  const std::string db = (dir / "rules.db").string();
  const auto imp = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "import " + m63_fixture("tester63_rules.pickle") + " -o " + db, dir);
  ASSERT_EQ(imp.code, 0) << imp.out << imp.err;
  const auto st = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + db, dir);
  ASSERT_EQ(st.code, 0) << st.out << st.err;
  EXPECT_NE(st.out.find("OOM at entry 11: asked 3.0 MiB"), std::string::npos) << st.out;
  EXPECT_NE(st.out.find("; the 8.0 MiB free on the device cannot hold the new 20.0 MiB segment it needs (PyTorch "
                        "reserves 20.0 MiB for a request of 1 to 10 MiB: get_allocation_size)"),
            std::string::npos)
      << st.out;
}
