// A step's critical path covers its window: untraced time before the step's first op or after
// its last one (a time.sleep at the end of the step) is a "(gap: untraced)" segment, as a gap
// between ops is, and a step without an op is one gap. Hand-made sessions, figures by hand.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::sessions;

namespace {
std::string window_session_path(const char* tag) {
  const auto path = std::filesystem::temp_directory_path() /
                    (std::string("es_path_window_") + tag + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  return path.string();
}
}  // namespace

TEST(PathCoversWindow, UntracedStartAndEndOfAStepAreGapsOnItsPath) {
  // step 0 [0, 1000): aten::mm [100, 300), aten::tanh [300, 400), then a sleep to 1000;
  // step 1 [1000, 1500): no op at all
  const std::string path = window_session_path("one");
  {
    SessionWriter w(path);
    w.set_metadata(meta::kWorldSize, "1");
    w.set_metadata(meta::kImported, "1");
    w.add_lane({0, 0, "thread 1", "thread"});
    w.add_ops({OpEvent{0, Lane::compute, OpCategory::other, "aten::mm", 0, 100, 300, 0, 0},
               OpEvent{0, Lane::compute, OpCategory::other, "aten::tanh", 0, 300, 400, 0, 0}});
    w.add_step({0, 0, 0, 1000, 0, 0, 0});
    w.add_step({1, 0, 1000, 1500, 0, 0, 0});
    w.close("complete");
  }
  {
    SessionReader r(path);
    const RunStats st = analyze(r);
    ASSERT_EQ(st.critical_paths.size(), 2u);
    const auto& s0 = st.critical_paths[0].segments;
    ASSERT_EQ(s0.size(), 4u);  // gap [0, 100), mm, tanh, gap [400, 1000)
    EXPECT_EQ(s0[0].kind, PathSegment::Kind::gap);
    EXPECT_EQ(s0[0].start_ns, 0);
    EXPECT_EQ(s0[0].end_ns, 100);
    EXPECT_EQ(r.name(s0[1].name_id), "aten::mm");
    EXPECT_EQ(r.name(s0[2].name_id), "aten::tanh");
    EXPECT_EQ(s0[3].kind, PathSegment::Kind::gap);
    EXPECT_EQ(s0[3].start_ns, 400);
    EXPECT_EQ(s0[3].end_ns, 1000);
    const auto& s1 = st.critical_paths[1].segments;
    ASSERT_EQ(s1.size(), 1u);
    EXPECT_EQ(s1[0].kind, PathSegment::Kind::gap);
    EXPECT_EQ(s1[0].start_ns, 1000);
    EXPECT_EQ(s1[0].end_ns, 1500);
    // the paths are as long as the windows: 1000 + 500 (before: 300 and no path for step 1)
    EXPECT_EQ(st.critical_path_ns, 1500);
    ASSERT_FALSE(st.critical_path.empty());
    EXPECT_EQ(st.critical_path[0].name_id, -1);  // the gaps: 100 + 600 + 500
    EXPECT_EQ(st.critical_path[0].ns, 1200);
    EXPECT_EQ(st.critical_path[0].steps_bounded, 2);
  }
  std::filesystem::remove(path);
}

TEST(PathCoversWindow, GapsAreOnThePathsOwnRanksWindow) {
  // rank 0's window [0, 1000) with aten::mm [100, 900); rank 1's [50, 1200) with aten::add
  // [60, 1100), which ends last: the path is rank 1's, gap [50, 60), add, gap [1100, 1200) =
  // 1150, rank 1's window (rank 0's earlier start is not on it)
  const std::string path = window_session_path("two");
  {
    SessionWriter w(path);
    w.set_metadata(meta::kWorldSize, "2");
    w.set_metadata(meta::kImported, "1");
    w.add_lane({0, 0, "thread 1", "thread"});
    w.add_lane({1, 0, "thread 1", "thread"});
    w.add_ops({OpEvent{0, Lane::compute, OpCategory::other, "aten::mm", 0, 100, 900, 0, 0},
               OpEvent{1, Lane::compute, OpCategory::other, "aten::add", 0, 60, 1100, 0, 0}});
    w.add_step({0, 0, 0, 1000, 0, 0, 0});
    w.add_step({0, 1, 50, 1200, 0, 0, 0});
    w.close("complete");
  }
  {
    SessionReader r(path);
    const RunStats st = analyze(r);
    ASSERT_EQ(st.critical_paths.size(), 1u);
    const auto& s = st.critical_paths[0].segments;
    ASSERT_EQ(s.size(), 3u);
    EXPECT_EQ(s[0].kind, PathSegment::Kind::gap);
    EXPECT_EQ(s[0].rank, 1);
    EXPECT_EQ(s[0].start_ns, 50);
    EXPECT_EQ(r.name(s[1].name_id), "aten::add");
    EXPECT_EQ(s[2].kind, PathSegment::Kind::gap);
    EXPECT_EQ(s[2].rank, 1);
    EXPECT_EQ(s[2].end_ns, 1200);
    EXPECT_EQ(st.critical_path_ns, 1150);
  }
  std::filesystem::remove(path);
}
