// SessionReader on what the fuzz target tests/fuzz/session_reader_fuzz.cpp found: each input it
// crashed on is a fixture in tests/data/fuzz/session_reader/ (also a seed of the fuzz runs),
// read here the way the target reads it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <limits>

#include "embedscope/sessions/store/session.h"

using namespace embedscope::sessions;
namespace fs = std::filesystem;

namespace {
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

fs::path hostile_scratch() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_reader_hostile_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}
}  // namespace

// ops(rank, lane, INT64_MIN, INT64_MAX) computed INT64_MIN - (the lane's longest op), which
// wrapped around (signed overflow, UBSan) to a start near INT64_MAX: no op was found at all.
TEST(ReaderHostile, WholeRangeQueryFromTheSmallestTimeFindsEveryOp) {
  const std::string path = (hostile_scratch() / "whole.db").string();
  {
    SessionWriter w(path);
    w.add_lane({0, 0, "compute", "thread"});
    w.add_ops({OpEvent{0, Lane::compute, OpCategory::dense, "a", 0, 100, 1100, 0, 0},
               OpEvent{0, Lane::compute, OpCategory::dense, "b", 0, 2000, 2500, 0, 0}});
    w.close("complete");
  }
  const SessionReader r(path);
  const auto got = r.ops(0, 0, kMin, kMax);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].start_ns, 100);
  EXPECT_EQ(got[0].end_ns, 1100);
  EXPECT_EQ(got[1].start_ns, 2000);
  EXPECT_EQ(r.ops(0, 0, kMin, 150).size(), 1u);
}
