// The critical path and per-collective times against hand-built steps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/critical_path.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::sessions;

namespace {
constexpr int32_t kLookup = 0, kA2a = 1, kDense = 2;
using K = PathSegment::Kind;

OpRecord rec(int32_t rank, int32_t lane, OpCategory cat, int32_t name, int64_t s, int64_t e, uint64_t seq = 0) {
  return OpRecord{rank, lane, cat, name, 0, s, e, seq ? 64 : 0, seq};
}

// Rank 1 is a straggler: its lookup ends at 300, so the all-to-all (sequence 5) that rank 0
// joined at 100 only completes at 400 on rank 0, which then runs its dense part until 500.
std::vector<OpRecord> straggler_step() {
  return {rec(0, 0, OpCategory::lookup, kLookup, 0, 100), rec(0, 1, OpCategory::comm, kA2a, 100, 400, 5),
          rec(0, 0, OpCategory::dense, kDense, 400, 500), rec(1, 0, OpCategory::lookup, kLookup, 0, 300),
          rec(1, 1, OpCategory::comm, kA2a, 300, 380, 5), rec(1, 0, OpCategory::dense, kDense, 380, 450)};
}
}  // namespace

TEST(CriticalPath, FollowsTheLateRankIntoTheCollective) {
  const StepCriticalPath p = critical_path(straggler_step(), {}, 7);
  EXPECT_EQ(p.step, 7);
  ASSERT_EQ(p.segments.size(), 3u);
  // rank 1's lookup bounds the collective; the collective's last 100 ns; rank 0's dense part
  EXPECT_EQ(p.segments[0], (PathSegment{K::op, 1, 0, kLookup, OpCategory::lookup, 0, 300}));
  EXPECT_EQ(p.segments[1], (PathSegment{K::op, 0, 1, kA2a, OpCategory::comm, 300, 400}));
  EXPECT_EQ(p.segments[2], (PathSegment{K::op, 0, 0, kDense, OpCategory::dense, 400, 500}));
  EXPECT_EQ(p.start_ns, 0);
  EXPECT_EQ(p.end_ns, 500);
}

TEST(CriticalPath, UncoveredTimeIsAGapAndZeroLengthOpsAreIgnored) {
  std::vector<OpRecord> ops{rec(0, 0, OpCategory::input, kLookup, 0, 100), rec(0, 0, OpCategory::dense, kDense, 150, 200),
                            rec(0, 0, OpCategory::other, kA2a, 120, 120),  // zero length
                            rec(1, 0, OpCategory::dense, kDense, 10, 60)};
  const StepCriticalPath p = critical_path(ops, {});
  ASSERT_EQ(p.segments.size(), 3u);
  EXPECT_EQ(p.segments[0], (PathSegment{K::op, 0, 0, kLookup, OpCategory::input, 0, 100}));
  EXPECT_EQ(p.segments[1], (PathSegment{K::gap, 0, 0, 0, OpCategory::other, 100, 150}));
  EXPECT_EQ(p.segments[2], (PathSegment{K::op, 0, 0, kDense, OpCategory::dense, 150, 200}));
  EXPECT_TRUE(critical_path({}, {}).segments.empty());
}

TEST(CriticalPath, CrossLaneDependencyIsTheLastOpToFinish) {
  // rank 0: compute [0,50), comm [50,250) (not a collective), compute [260,300) waits for comm
  std::vector<OpRecord> ops{rec(0, 0, OpCategory::lookup, kLookup, 0, 50), rec(0, 1, OpCategory::comm, kA2a, 50, 250),
                            rec(0, 0, OpCategory::dense, kDense, 260, 300)};
  const StepCriticalPath p = critical_path(ops, {});
  ASSERT_EQ(p.segments.size(), 4u);
  EXPECT_EQ(p.segments[1], (PathSegment{K::op, 0, 1, kA2a, OpCategory::comm, 50, 250}));
  EXPECT_EQ(p.segments[2], (PathSegment{K::gap, 0, 0, 0, OpCategory::other, 250, 260}));
}

TEST(CriticalPath, AnOpLaunchedFromInsideARunningOpContinuesIntoIt) {
  // rank 0: input [0, 100); dense [200 us, 1 ms) launches a bucket all-reduce at 900 us on the
  // comm lane (until 1.5 ms); the optimizer waits for it. The path runs through the part of the
  // dense op before the launch, not through a gap back to the input.
  std::vector<OpRecord> ops{rec(0, 0, OpCategory::input, kLookup, 0, 100),
                            rec(0, 0, OpCategory::dense, kDense, 200'000, 1'000'000),
                            rec(0, 1, OpCategory::comm, kA2a, 900'000, 1'500'000),
                            rec(0, 0, OpCategory::optimizer, 3, 1'500'000, 1'600'000)};
  const StepCriticalPath p = critical_path(ops, {});
  ASSERT_EQ(p.segments.size(), 5u);
  EXPECT_EQ(p.segments[0], (PathSegment{K::op, 0, 0, kLookup, OpCategory::input, 0, 100}));
  EXPECT_EQ(p.segments[1], (PathSegment{K::gap, 0, 0, 0, OpCategory::other, 100, 200'000}));
  EXPECT_EQ(p.segments[2], (PathSegment{K::op, 0, 0, kDense, OpCategory::dense, 200'000, 900'000}));
  EXPECT_EQ(p.segments[3], (PathSegment{K::op, 0, 1, kA2a, OpCategory::comm, 900'000, 1'500'000}));
  EXPECT_EQ(p.segments[4], (PathSegment{K::op, 0, 0, 3, OpCategory::optimizer, 1'500'000, 1'600'000}));
}

TEST(CriticalPath, AnOpRunningAtTheStartIsThePredecessorNotAGap) {
  // rank 0: the backward [0,100) launches a bucket's all-reduce at 50 (comm [50,120)); the
  // optimizer [120,130) waits for the all-reduce. [0,50) is the backward's, not untraced.
  std::vector<OpRecord> ops{rec(0, 0, OpCategory::dense, kDense, 0, 100), rec(0, 1, OpCategory::comm, kA2a, 50, 120),
                            rec(0, 0, OpCategory::optimizer, kLookup, 120, 130)};
  const StepCriticalPath p = critical_path(ops, {});
  ASSERT_EQ(p.segments.size(), 3u);
  EXPECT_EQ(p.segments[0], (PathSegment{K::op, 0, 0, kDense, OpCategory::dense, 0, 50}));
  EXPECT_EQ(p.segments[1], (PathSegment{K::op, 0, 1, kA2a, OpCategory::comm, 50, 120}));
  EXPECT_EQ(p.segments[2], (PathSegment{K::op, 0, 0, kLookup, OpCategory::optimizer, 120, 130}));
  // an op that ended exactly at the start wins over one running across it
  ops.push_back(rec(0, 2, OpCategory::input, kLookup, 20, 50));
  const StepCriticalPath q = critical_path(ops, {});
  ASSERT_EQ(q.segments.size(), 4u);
  EXPECT_EQ(q.segments[0], (PathSegment{K::op, 0, 0, kDense, OpCategory::dense, 0, 20}));
  EXPECT_EQ(q.segments[1], (PathSegment{K::op, 0, 2, kLookup, OpCategory::input, 20, 50}));
}

TEST(CriticalPath, WhatEachOpWaitedFor) {
  using W = OpWait::Kind;
  const auto ops = straggler_step();
  const StepDependencies deps(ops, {});
  // rank 0's all-to-all waited for rank 1 to join; rank 1's for nobody later, so for its lookup
  EXPECT_EQ(deps.wait_of(1).kind, W::collective_peer);
  EXPECT_EQ(deps.wait_of(1).op, 4u);
  EXPECT_EQ(deps.wait_of(4).kind, W::ended_before);
  EXPECT_EQ(deps.wait_of(4).op, 3u);
  EXPECT_EQ(deps.wait_of(2).kind, W::ended_before);  // rank 0's dense part: its all-to-all
  EXPECT_EQ(deps.wait_of(2).op, 1u);
  EXPECT_EQ(deps.wait_of(0).kind, W::nothing);       // the first op of rank 0
  // launched from inside a running op: the all-reduce started 900 us into nothing but the dense op
  const std::vector<OpRecord> launched{rec(0, 0, OpCategory::input, kLookup, 0, 100),
                                       rec(0, 0, OpCategory::dense, kDense, 200'000, 1'000'000),
                                       rec(0, 1, OpCategory::comm, kA2a, 900'000, 1'500'000)};
  const StepDependencies d2(launched, {});
  EXPECT_EQ(d2.wait_of(2).kind, W::launched_from);
  EXPECT_EQ(d2.wait_of(2).op, 1u);
  EXPECT_EQ(d2.wait_of(1).kind, W::ended_before);  // 200 us after the input, nothing running
}

TEST(CriticalPath, CollectiveRecordsSeparateGroupsWithEqualSequences) {
  // Two node groups run their own all-to-all, both with sequence 1 and the same name.
  std::vector<OpRecord> ops;
  std::vector<CollectiveRecord> colls;
  for (int r = 0; r < 4; ++r) {
    ops.push_back(rec(r, 1, OpCategory::comm, kA2a, 100 + r, 200, 1));
    CollectiveRecord c;
    c.rank = r;
    c.group = r < 2 ? "node0" : "node1";
    c.sequence = 1;
    c.start_ns = 100 + r;
    c.end_ns = 200;
    colls.push_back(c);
  }
  auto with = collective_instances(ops, colls);
  ASSERT_EQ(with.size(), 2u);
  EXPECT_EQ((with[{"node0", kA2a, 1}]), (std::vector<size_t>{0, 1}));
  EXPECT_EQ((with[{"node1", kA2a, 1}]), (std::vector<size_t>{2, 3}));
  EXPECT_EQ(collective_instances(ops, {}).size(), 1u);  // without records: joined by name and sequence
  // an op without a record joins the one group its name and sequence have, if only one
  const std::vector<OpRecord> pair(ops.begin(), ops.begin() + 2);
  EXPECT_EQ((collective_instances(pair, {colls[0]})[{"node0", kA2a, 1}]), (std::vector<size_t>{0, 1}));
  colls.pop_back();  // rank 3 has no record and two groups are named: it stays on its own
  auto ambiguous = collective_instances(ops, colls);
  EXPECT_EQ((ambiguous[{"node1", kA2a, 1}]), (std::vector<size_t>{2}));
  EXPECT_EQ((ambiguous[{"", kA2a, 1}]), (std::vector<size_t>{3}));
}

TEST(CriticalPath, CollectiveTimesByHand) {
  const auto ops = straggler_step();
  std::map<int32_t, CollectiveTimes> out;
  add_collective_times(ops, collective_instances(ops, {}), out);
  ASSERT_EQ(out.size(), 1u);
  const CollectiveTimes& t = out[kA2a];
  EXPECT_EQ(t.count, 2);
  EXPECT_EQ(t.bytes, 128);
  EXPECT_EQ(t.time_ns, 300 + 80);
  EXPECT_EQ(t.exposed_ns, 300 + 80);  // neither rank computed during its all-to-all
  EXPECT_EQ(t.wait_ns, 200);          // rank 0 joined at 100, rank 1 at 300
}

TEST(CriticalPath, AnalyzeSumsThePathsOfTheMeasuredSteps) {
  const auto path = std::filesystem::temp_directory_path() / ("es_cp_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    SessionWriter w(path.string());
    w.set_metadata("world_size", "2");
    const char* names[] = {"lookup", "a2a", "dense"};
    for (int step = 0; step < 2; ++step) {
      std::vector<OpEvent> evs;
      for (const auto& o : straggler_step())
        evs.push_back(OpEvent{o.rank, static_cast<Lane>(o.lane), o.category, names[o.name_id], step,
                              o.start_ns + step * 1000, o.end_ns + step * 1000, o.bytes, o.correlation + step});
      w.add_ops(evs);
      for (int r = 0; r < 2; ++r) w.add_step({step, r, step * 1000, step * 1000 + 500, 0.5, 0, 0});
    }
    w.close("complete");
  }
  SessionReader r(path.string());
  const RunStats st = analyze(r);
  ASSERT_EQ(st.critical_paths.size(), 2u);
  EXPECT_EQ(st.critical_path_ns, 1000);
  ASSERT_EQ(st.critical_path.size(), 3u);
  EXPECT_EQ(r.name(st.critical_path[0].name_id), "lookup");  // 300 per step, on rank 1
  EXPECT_EQ(st.critical_path[0].ns, 600);
  EXPECT_DOUBLE_EQ(st.critical_path[0].share, 0.6);
  EXPECT_EQ(st.critical_path[0].top_rank, 1);
  EXPECT_EQ(st.critical_path[0].steps_bounded, 2);
  EXPECT_EQ(st.critical_path[1].ns, 200);
  ASSERT_EQ(st.collectives.size(), 1u);
  EXPECT_EQ(r.name(st.collectives[0].name_id), "a2a");
  EXPECT_EQ(st.collectives[0].wait_ns, 400);
  EXPECT_EQ(st.collectives[0].exposed_ns, 760);
  std::filesystem::remove(path);
}
