// Thread-level overlap of an imported CPU (Gloo) trace: a blocking collective's caller waits in
// it, so the spans enclosing it on its thread do not compute meanwhile; record_function ranges
// and Work::wait spans are no compute; an op that runs on into the next step's window counts
// there for the time it ran there. Hand-made sessions, figures computed by hand in the comments.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/wait_span.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::sessions;

namespace {
std::string overlap_session_path(const char* tag) {
  const auto path = std::filesystem::temp_directory_path() / (std::string("es_thread_overlap_") + tag + "_" +
                                                              std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  return path.string();
}

void overlap_session_metadata(SessionWriter& w, const char* annotations) {
  w.set_metadata(meta::kWorldSize, "1");
  w.set_metadata(meta::kImported, "1");
  w.set_metadata(meta::kImportFormat, "kineto_json");
  if (annotations) w.set_metadata(meta::kImportAnnotationNames, annotations);
  w.add_lane({0, 0, "thread 1 (pid 1000)", "thread"});
  w.add_lane({0, 1, "thread 2 (pid 1000)", "thread"});
  w.add_lane({0, 2, "thread 3 (pid 1000)", "thread"});
  w.add_lane({0, 3, "thread 4 (pid 1000)", "thread"});
}

// One step [0, 10000) of rank 0, the layout of a torch 1.13 DDP step with Gloo:
//   main thread (lane 0): AccumulateGrad [1000, 5000) around c10d::allreduce_ [2000, 4000) (the
//     caller blocked in it); record_function "pooled_a2a" [6000, 9000) around aten::empty
//     [6000, 6500), then waiting out the all-to-all
//   Gloo worker threads: gloo:all_reduce [2500, 3500) (lane 1), gloo:all_to_all [6500, 8500) (lane 2)
//   another thread (lane 3): aten::mm [3000, 3500)
void write_ddp_step(const std::string& path, const char* annotations) {
  SessionWriter w(path);
  overlap_session_metadata(w, annotations);
  const auto main = static_cast<Lane>(0), worker1 = static_cast<Lane>(1), worker2 = static_cast<Lane>(2),
             other = static_cast<Lane>(3);
  w.add_ops({OpEvent{0, main, OpCategory::other, "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 0,
                     1000, 5000, 0, 0},
             OpEvent{0, main, OpCategory::comm, "c10d::allreduce_", 0, 2000, 4000, 0, 0},
             OpEvent{0, main, OpCategory::other, "pooled_a2a", 0, 6000, 9000, 0, 0},
             OpEvent{0, main, OpCategory::other, "aten::empty", 0, 6000, 6500, 0, 0},
             OpEvent{0, worker1, OpCategory::comm, "gloo:all_reduce", 0, 2500, 3500, 0, 0},
             OpEvent{0, worker2, OpCategory::comm, "gloo:all_to_all", 0, 6500, 8500, 0, 0},
             OpEvent{0, other, OpCategory::other, "aten::mm", 0, 3000, 3500, 0, 0}});
  w.add_step({0, 0, 0, 10000, 0, 0, 0});
  w.close("complete");
}

const CollectiveTimes& named_collective(const SessionReader& r, const RunStats& st, const std::string& name) {
  for (const auto& c : st.collectives)
    if (r.name(c.name_id) == name) return c;
  throw std::runtime_error("no collective " + name);
}
}  // namespace

TEST(ThreadOverlap, BlockingCollectiveIsNotHiddenByTheSpansAroundItNorAnnotationsCompute) {
  const std::string path = overlap_session_path("ddp");
  write_ddp_step(path, R"(["pooled_a2a"])");
  {
    SessionReader r(path);
    const RunStats st = analyze(r);
    ASSERT_EQ(st.ranks.size(), 1u);
    const RankStats& rk = st.ranks[0];
    // comm: [2000, 4000) u [6500, 8500) = 4000 (gloo:all_reduce lies inside the caller's span)
    EXPECT_EQ(rk.comm_ns, 4000);
    // compute: AccumulateGrad outside its allreduce [1000, 2000) + [4000, 5000), aten::empty 500,
    // aten::mm 500 (another thread: it did compute meanwhile); pooled_a2a none of it = 3000
    // (before: [1000, 5000) u [6000, 9000) = 7000, every collective 100 % hidden)
    EXPECT_EQ(rk.compute_ns, 3000);
    // overlap: only aten::mm under the comm, [3000, 3500) = 500 -> 12.5 %; exposed 3500
    EXPECT_EQ(rk.overlap_ns, 500);
    EXPECT_DOUBLE_EQ(rk.overlap_pct, 12.5);
    EXPECT_EQ(rk.exposed_comm_ns, 3500);
    EXPECT_DOUBLE_EQ(st.overlap_pct, 12.5);
    // busy: [1000, 5000) u [6000, 8500) = 6500 -> idle 3500 (the wait in pooled_a2a after the
    // all-to-all, [8500, 9000), is idle, as are [0, 1000), [5000, 6000), [9000, 10000))
    EXPECT_EQ(rk.idle_ns, 3500);
    // the annotation is in no category; "other" = the compute above
    EXPECT_EQ(rk.by_category_ns[static_cast<size_t>(OpCategory::other)], 3000);
    // per collective, exposed = its time with no compute of its rank under it
    EXPECT_EQ(named_collective(r, st, "c10d::allreduce_").exposed_ns, 1500);  // aten::mm hides [3000, 3500)
    EXPECT_EQ(named_collective(r, st, "gloo:all_reduce").exposed_ns, 500);    // [2500, 3000)
    EXPECT_EQ(named_collective(r, st, "gloo:all_to_all").exposed_ns, 2000);   // (before: 0, under pooled_a2a)
  }
  std::filesystem::remove(path);
}

TEST(ThreadOverlap, WithoutAnAnnotationMarkerTheRangeCountsAsCompute) {
  // a legacy (non-Kineto) trace has no cat: its record_function ranges are ops like any other,
  // so pooled_a2a [6000, 9000) computes; the same-thread rule still takes the allreduce out of
  // AccumulateGrad: compute [1000, 2000) u [3000, 3500) u [4000, 5000) u [6000, 9000) = 5500,
  // overlap [3000, 3500) + [6500, 8500) = 2500 of 4000 = 62.5 %
  const std::string path = overlap_session_path("legacy");
  write_ddp_step(path, nullptr);
  {
    SessionReader r(path);
    const RunStats st = analyze(r);
    ASSERT_EQ(st.ranks.size(), 1u);
    EXPECT_EQ(st.ranks[0].compute_ns, 5500);
    EXPECT_EQ(st.ranks[0].overlap_ns, 2500);
    EXPECT_DOUBLE_EQ(st.ranks[0].overlap_pct, 62.5);
  }
  std::filesystem::remove(path);
}

TEST(ThreadOverlap, WaitInsideASpanIsNoComputeOfItsThread) {
  // main thread: aten::add_ [0, 1000) around a Work::wait [200, 700); a gloo:all_reduce
  // [100, 800) on a worker thread. Compute: [0, 200) u [700, 1000) = 500; the wait is no comm:
  // comm 700, overlap [100, 200) u [700, 800) = 200 -> exposed 500; busy [0, 1000): idle 0
  const std::string path = overlap_session_path("wait");
  {
    SessionWriter w(path);
    overlap_session_metadata(w, nullptr);
    w.add_ops({OpEvent{0, static_cast<Lane>(0), OpCategory::other, "aten::add_", 0, 0, 1000, 0, 0},
               OpEvent{0, static_cast<Lane>(0), OpCategory::comm, kImportedWaitSpanName, 0, 200, 700, 0, 0},
               OpEvent{0, static_cast<Lane>(1), OpCategory::comm, "gloo:all_reduce", 0, 100, 800, 0, 0}});
    w.add_step({0, 0, 0, 1000, 0, 0, 0});
    w.close("complete");
  }
  {
    SessionReader r(path);
    const RunStats st = analyze(r);
    ASSERT_EQ(st.ranks.size(), 1u);
    EXPECT_EQ(st.ranks[0].compute_ns, 500);
    EXPECT_EQ(st.ranks[0].comm_ns, 700);
    EXPECT_EQ(st.ranks[0].overlap_ns, 200);
    EXPECT_EQ(st.ranks[0].exposed_comm_ns, 500);
    EXPECT_EQ(st.ranks[0].idle_ns, 0);
    EXPECT_EQ(named_collective(r, st, "gloo:all_reduce").exposed_ns, 500);
  }
  std::filesystem::remove(path);
}

TEST(ThreadOverlap, AnOpRunningIntoTheNextStepsWindowCountsThere) {
  // steps [0, 1000) and [1100, 2000); a worker thread's gloo:all_reduce of step 0 runs
  // [600, 1400): 400 in step 0's window, 300 in step 1's (before: clipped to step 0's window
  // only, 400, and step 1's [1100, 1400) read as idle). aten::mm of step 1 [1200, 1300) on the
  // main thread hides 100 of it.
  const std::string path = overlap_session_path("spill");
  {
    SessionWriter w(path);
    overlap_session_metadata(w, nullptr);
    w.add_ops({OpEvent{0, static_cast<Lane>(1), OpCategory::comm, "gloo:all_reduce", 0, 600, 1400, 0, 0},
               OpEvent{0, static_cast<Lane>(0), OpCategory::other, "aten::mm", 1, 1200, 1300, 0, 0}});
    w.add_step({0, 0, 0, 1000, 0, 0, 0});
    w.add_step({1, 0, 1100, 2000, 0, 0, 0});
    w.close("complete");
  }
  {
    SessionReader r(path);
    const RunStats st = analyze(r);
    ASSERT_EQ(st.ranks.size(), 1u);
    EXPECT_EQ(st.ranks[0].comm_ns, 700);
    EXPECT_EQ(st.ranks[0].overlap_ns, 100);
    EXPECT_EQ(st.ranks[0].exposed_comm_ns, 600);
    ASSERT_EQ(st.per_step.size(), 2u);
    EXPECT_EQ(st.per_step[1].comm_ns, 300);
    EXPECT_EQ(st.per_step[1].idle_ns, 900 - 300);  // window 900, busy [1100, 1400)
  }
  std::filesystem::remove(path);
}

TEST(ThreadOverlap, ComputeIntervalsTakeOutOnlyTheOwnLanesComm) {
  // lane 0: a span [0, 100) around comm [20, 40); lane 1: a span [30, 60) beside comm [50, 90)
  // of lane 0's rank but on lane 2: lane 1 keeps all of [30, 60)
  const std::vector<OpRecord> ops{{0, 0, OpCategory::dense, 1, 0, 0, 100, 0, 0},
                                  {0, 0, OpCategory::comm, 2, 0, 20, 40, 0, 0},
                                  {0, 1, OpCategory::dense, 3, 0, 30, 60, 0, 0},
                                  {0, 2, OpCategory::comm, 4, 0, 50, 90, 0, 0}};
  const auto c = compute_intervals(ops);
  ASSERT_EQ(c.count(0), 1u);
  EXPECT_EQ(c.at(0), (std::vector<Interval>{{0, 20}, {30, 100}}));
  const RankStepTimes t = rank_step_times(ops, 0, 100);
  EXPECT_EQ(t.compute_ns, 90);
  EXPECT_EQ(t.comm_ns, 20 + 40);
  EXPECT_EQ(t.overlap_ns, 10 + 40);  // [30, 40) and [50, 90)
}
