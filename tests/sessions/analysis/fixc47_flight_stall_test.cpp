// tester47 F10: a rank frozen (SIGSTOP) inside a collective for longer than the timeout was not
// the one the flight recorder blamed: its healthy peer, which timed out in that collective and
// left, read "did not reach" the next one. Hand-built dumps of that run (2 ranks, group world).
#include <gtest/gtest.h>

#include <algorithm>

#include "embedscope/sessions/analysis/flight_recorder.h"

namespace {
namespace fixc47_fr = embedscope::sessions;

// Rank `rank`'s entry `id`: world#seq in `state`, entered at `created_ns`, completed
// `took_ns` later where completed; timeout 30000 ms.
fixc47_fr::FlightRecord fixc47_entry(int32_t rank, int64_t id, uint64_t seq, const char* op, const char* name,
                                     const char* state, int64_t created_ns, int64_t took_ns) {
  fixc47_fr::FlightRecord e;
  e.rank = rank;
  e.reason = rank == 0 ? "collective timeout" : "run ended crashed";
  e.dump_time_ns = 50'000'000'000;
  e.record_id = id;
  e.group = "world";
  e.members = "0,1";
  e.sequence = seq;
  e.op = op;
  e.name = name;
  e.dtype = "int64";
  e.input_elements = 2;
  e.output_elements = 2;
  e.state = state;
  e.time_created_ns = created_ns;
  e.time_started_ns = created_ns + 1000;
  e.time_completed_ns = std::string(state) == "completed" ? created_ns + took_ns : -1;
  e.timeout_ms = 30000;
  return e;
}

// Rank 0 timed out in world#1739 (all_gather); rank 1, stopped inside it, completed it `took_ns`
// after entering, then entered world#1740 (all_to_all) and failed there.
std::vector<fixc47_fr::FlightRecord> fixc47_stopped_rank1(int64_t took_ns) {
  return {fixc47_entry(0, 0, 1738, "all_to_all", "fwd", "completed", 4'800'000'000, 1'000'000),
          fixc47_entry(0, 1, 1739, "all_gather", "split_check", "started", 4'860'000'000, 0),
          fixc47_entry(1, 0, 1738, "all_to_all", "fwd", "completed", 4'800'000'000, 1'000'000),
          fixc47_entry(1, 1, 1739, "all_gather", "split_check", "completed", 4'859'000'000, took_ns),
          fixc47_entry(1, 2, 1740, "all_to_all", "splits", "started", 4'859'000'000 + took_ns, 0)};
}

}  // namespace

TEST(Fixc47FlightStall, TheRankThatSpentLongerThanTheTimeoutInTheCollectiveIsBlamed) {
  // 45.007 s inside all_gather#1739 > the 30 s timeout rank 0 gave up after
  const fixc47_fr::FlightAnalysis a = fixc47_fr::analyze_flight_records(fixc47_stopped_rank1(45'007'000'000), 2);
  ASSERT_EQ(a.findings.size(), 1u);
  const fixc47_fr::FlightFinding& f = a.findings[0];
  EXPECT_EQ(f.kind, fixc47_fr::FlightFinding::Kind::stalled);
  EXPECT_STREQ(fixc47_fr::to_string(f.kind), "stalled");
  EXPECT_EQ(f.ranks, std::vector<int32_t>{1});
  EXPECT_EQ(f.sequences, std::vector<uint64_t>{1739});
  EXPECT_EQ(f.text,
            "rank 1 stalled in all_gather 'split_check' (group world, sequence 1739): it spent 45.0 s in it, longer "
            "than the 30000 ms timeout after which rank 0 gave up (a stopped or stalled process: SIGSTOP, swapping, a "
            "debugger); rank 0 then left it and did not reach all_to_all 'splits' (group world, sequence 1740), which "
            "rank 1 waits in");
}

TEST(Fixc47FlightStall, APeerWithinTheTimeoutLeavesTheOldFinding) {
  // rank 1 took 29.9 s (< 30 s): nothing says it stalled; rank 0 did not reach #1740, as before
  const fixc47_fr::FlightAnalysis a = fixc47_fr::analyze_flight_records(fixc47_stopped_rank1(29'900'000'000), 2);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].kind, fixc47_fr::FlightFinding::Kind::not_reached);
  EXPECT_EQ(a.findings[0].ranks, std::vector<int32_t>{0});
  EXPECT_EQ(a.findings[0].text.rfind("rank 0 did not reach all_to_all 'splits' (group world, sequence 1740), which rank "
                                     "1 waits in; it waits in all_gather 'split_check'", 0),
            0u)
      << a.findings[0].text;
}
