// snap54 (tester54 F4, F9): the one verdict on a replay of the recorded settings that
// replay-memory and the workbench's Replay panel both print (recorded_replay_verdict); an alloc
// larger than its block replayed at the block's size, the figure stats uses; an OOM request of
// 2^63 - 1 replayed without overflow; an action the allocator model cannot apply named by its
// origin and entry (SpecError, exit 2) instead of "address 0x100000000 is in no segment".
#include <gtest/gtest.h>

#include <climits>
#include <string>
#include <vector>

#include "embedscope/engine/memory/snapshot_replay.h"

using namespace embedscope::engine;
namespace ts = embedscope::sessions::torch_snapshot;

namespace {
constexpr int64_t kSnap54MiB = int64_t{1} << 20;

// what the replay of fragmented_oom_p4 under caching gives: peak reserved 40 MiB at 0.0 %, the
// OOM at entry 5, one 40 MiB segment at the end
ReplayResult snap54_own() {
  ReplayResult r;
  r.config = {AllocatorKind::caching, 60 * kSnap54MiB, 0, false};
  r.label = "caching";
  r.peak_reserved = 40 * kSnap54MiB;
  r.fragmentation_at_peak = 0.0;
  r.oom = true;
  r.oom_action = 5;
  r.final_segments = 1;
  r.final_reserved = 40 * kSnap54MiB;
  return r;
}

RecordedMemory snap54_recorded() {
  RecordedMemory rec;
  rec.peak_reserved = 40 * kSnap54MiB;
  rec.fragmentation_at_peak_reserved = 0.0;
  rec.first_oom_entry = 5;
  rec.dump_segments = 1;
  rec.dump_reserved = 40 * kSnap54MiB;
  return rec;
}

// fragmented_oom_p4 (make_fixtures.py) with entry 1 asking `first_alloc` bytes and its OOM
// asking `oom_request`: a 40 MiB segment holding a 2 MiB block and 38 MiB free at the dump
ts::MemorySnapshotFile snap54_snapshot(int64_t first_alloc, int64_t oom_request) {
  ts::MemorySnapshotFile s;
  s.stacks.push_back({});
  const uint64_t a = 0x7F3A00000000ull;
  ts::Segment seg;
  seg.address = a;
  seg.total_size = 40 * kSnap54MiB;
  seg.blocks = {{a, 2 * kSnap54MiB, 2 * kSnap54MiB, ts::BlockState::active_allocated, 0, {}},
                {a + 2 * kSnap54MiB, 38 * kSnap54MiB, 0, ts::BlockState::inactive, 0, {}}};
  s.segments.push_back(seg);
  const auto e = [](ts::TraceAction act, uint64_t addr, int64_t size) {
    ts::TraceEntry t;
    t.action = act;
    t.addr = addr;
    t.size = size;
    return t;
  };
  s.device_traces = {{e(ts::TraceAction::segment_alloc, a, 40 * kSnap54MiB), e(ts::TraceAction::alloc, a, first_alloc),
                      e(ts::TraceAction::free_requested, a, 40 * kSnap54MiB),
                      e(ts::TraceAction::free_completed, a, 40 * kSnap54MiB), e(ts::TraceAction::alloc, a, 2 * kSnap54MiB),
                      e(ts::TraceAction::oom, 20 * kSnap54MiB, oom_request)}};
  return s;
}
}  // namespace

TEST(Snap54ReplayVerdict, ReproducesWhenEveryKnownFigureAgrees) {
  const ReplayVerdict v = recorded_replay_verdict(snap54_own(), "caching", snap54_recorded());
  EXPECT_TRUE(v.reproduces);
  EXPECT_TRUE(v.differences.empty());
  EXPECT_EQ(v.text,
            "The replay of the recorded settings (caching) reproduces the recording: peak reserved 40.0 MiB, 0.0% at "
            "peak reserved, the OOM at entry 5, the dump's 1 segment (40.0 MiB reserved).");
  // an engine run: no dump, no OOM; only the peak and its fragmentation are compared
  ReplayResult own = snap54_own();
  own.oom = false;
  RecordedMemory rec = snap54_recorded();
  rec.first_oom_entry = rec.dump_segments = rec.dump_reserved = -1;
  EXPECT_EQ(recorded_replay_verdict(own, "caching", rec).text,
            "The replay of the recorded settings (caching) reproduces the recording: peak reserved 40.0 MiB, 0.0% at "
            "peak reserved.");
  // nothing known: nothing said
  EXPECT_TRUE(recorded_replay_verdict(own, "caching", RecordedMemory{}).text.empty());
}

// real.pickle (make_fixtures.py --realistic): the recorded OOM did not recur at the capacity of
// the trace's peak, and the OOM's request stays cached: the workbench said "reproduces".
TEST(Snap54ReplayVerdict, AnOomThatDidNotRecurAndAnotherEndAreDifferences) {
  ReplayResult own = snap54_own();
  own.oom = false;
  own.oom_action = -1;
  own.final_segments = 2;
  own.final_reserved = 74 * kSnap54MiB;
  const ReplayVerdict v = recorded_replay_verdict(own, "caching", snap54_recorded());
  EXPECT_FALSE(v.reproduces);
  ASSERT_EQ(v.differences.size(), 2u);
  EXPECT_EQ(v.text,
            "The replay of the recorded settings (caching) does not reproduce the recording: the recorded OOM (entry 5) "
            "did not recur: at the capacity offered, 60.0 MiB, the replay served that request; the replay ends with 2 "
            "segments, 74.0 MiB reserved; the dump has 1 segment, 40.0 MiB reserved.");
  // an OOM elsewhere; the end is not compared (the replay stopped there)
  own = snap54_own();
  own.oom_action = 3;
  own.final_segments = 9;
  EXPECT_EQ(recorded_replay_verdict(own, "caching", snap54_recorded()).differences,
            std::vector<std::string>{"the replay ran out of memory at entry 3, the recorded run at entry 5"});
  // a different fragmentation at the same peak
  own = snap54_own();
  own.fragmentation_at_peak = 0.25;
  const ReplayVerdict f = recorded_replay_verdict(own, "caching", snap54_recorded());
  ASSERT_EQ(f.differences.size(), 1u);
  EXPECT_EQ(f.differences[0].rfind("it gives 25.0% at peak reserved, the recording 0.0%: the same peak", 0), 0u)
      << f.differences[0];
}

// F4: entry 1 asks 50 MiB; its block (its free's 40 MiB in the 40 MiB segment) holds 40 MiB:
// replayed at 40 MiB, as the import stores it, so the recorded OOM recurs at entry 5.
TEST(Snap54ReplayVerdict, AnAllocLargerThanItsBlockIsReplayedAtTheBlocksSize) {
  const ts::MemorySnapshotFile s = snap54_snapshot(50 * kSnap54MiB, 40 * kSnap54MiB);
  const std::vector<MemoryAction> actions = snapshot_actions(s, 0);
  ASSERT_GE(actions.size(), 1u);
  EXPECT_EQ(actions[0].entry, 1);
  EXPECT_EQ(actions[0].size, 40 * kSnap54MiB);
  const SnapshotReplay rep = replay_snapshot(s, 0, {recorded_config(s, snapshot_capacity(s, 0))}, "x.pickle");
  EXPECT_EQ(snapshot_capacity(s, 0), 60 * kSnap54MiB);
  ASSERT_EQ(rep.results.size(), 1u);
  EXPECT_EQ(rep.results[0].peak_allocated, 40 * kSnap54MiB);
  EXPECT_TRUE(rep.results[0].oom);
  EXPECT_EQ(rep.results[0].oom_action, 5);
  ASSERT_EQ(rep.problems.size(), 1u);
  EXPECT_EQ(rep.problems[0].rfind("device 0 entry 1 (alloc): asks 52428800 B", 0), 0u) << rep.problems[0];
}

// PyTorch records an OOM's request as asked: 2^63 - 1 is replayed as a request no device serves.
TEST(Snap54ReplayVerdict, AnOomRequestOfInt64MaxIsReplayedWithoutOverflow) {
  EXPECT_EQ(replayable_request(INT64_MAX), kMaxMemoryBytes + 512);
  EXPECT_EQ(replayable_request(40 * kSnap54MiB), 40 * kSnap54MiB);
  const ts::MemorySnapshotFile s = snap54_snapshot(40 * kSnap54MiB, INT64_MAX);
  const SnapshotReplay rep = replay_snapshot(s, 0, {recorded_config(s, 60 * kSnap54MiB)}, "x.pickle");
  ASSERT_EQ(rep.results.size(), 1u);
  EXPECT_TRUE(rep.results[0].oom);
  EXPECT_EQ(rep.results[0].oom_action, 5);
  EXPECT_TRUE(rep.problems.empty());
}

TEST(Snap54ReplayVerdict, AnActionTheModelCannotApplyNamesItsOriginAndEntry) {
  MemoryAction bad;
  bad.kind = MemoryAction::Kind::alloc;
  bad.id = 1;
  bad.size = -5;
  bad.entry = 7;
  try {
    replay_actions({bad}, {}, {AllocatorKind::caching, 60 * kSnap54MiB, 0, false}, "x.pickle: device 0", true);
    FAIL() << "replayed";
  } catch (const SpecError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("x.pickle: device 0: entry 7 (alloc of -5 B): the allocator model cannot replay "
                                          "it (",
                                          0),
              0u)
        << e.what();
  }
}
