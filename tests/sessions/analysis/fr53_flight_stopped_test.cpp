// tester53 F4: a rank SIGSTOPped inside a collective and continued after its peers' timeout was
// named by nobody: every dump shows every rank inside the collective, and the recorder said "their
// transfers did not finish (a slow link, ...)". Each record of a collective that threw now carries
// the time it failed (time_completed_ns with a state other than completed); a member that failed
// long after every peer had failed out of the collective did not run meanwhile. Hand-built dumps
// of that run (3 ranks, group world, 300 ms timeout).
#include <gtest/gtest.h>

#include "embedscope/sessions/analysis/flight_recorder.h"

namespace {
namespace fr53 = embedscope::sessions;

// Rank `rank`'s entries: world#1188 completed, world#1189 (all_gather) entered at `created_ns` and
// failed at `failed_ns` (-1: no failure time, as files written before it was recorded).
std::vector<fr53::FlightRecord> fr53_rank(int32_t rank, int64_t created_ns, int64_t failed_ns, int64_t timeout_ms = 300) {
  fr53::FlightRecord done;
  done.rank = rank;
  done.reason = "collective timeout";
  done.dump_time_ns = failed_ns > 0 ? failed_ns + 5'000'000 : 9'000'000'000;
  done.record_id = 0;
  done.group = "world";
  done.members = "0,1,2";
  done.sequence = 1188;
  done.op = "all_to_all";
  done.name = "input_dist/splits";
  done.dtype = "int64";
  done.input_elements = 3;
  done.output_elements = 3;
  done.state = "completed";
  done.time_created_ns = created_ns - 2'000'000;
  done.time_started_ns = created_ns - 1'990'000;
  done.time_completed_ns = created_ns - 100'000;
  done.timeout_ms = timeout_ms;
  fr53::FlightRecord in = done;
  in.record_id = 1;
  in.sequence = 1189;
  in.op = "all_gather";
  in.name = "input_dist/splits/split_check";
  in.state = "started";
  in.time_created_ns = created_ns;
  in.time_started_ns = created_ns + 20'000;
  in.time_completed_ns = failed_ns;
  return {done, in};
}

// Ranks 0 and 1 entered at 5.0 s and timed out 300 ms later; rank 2 entered at 4.9996 s and failed
// at `rank2_failed_ns` (rank 2 entered at `rank2_created_ns`).
std::vector<fr53::FlightRecord> fr53_run(int64_t rank2_failed_ns, int64_t rank2_created_ns = 4'999'600'000,
                                         int64_t timeout_ms = 300) {
  std::vector<fr53::FlightRecord> all;
  for (auto& v : {fr53_rank(0, 5'000'000'000, 5'300'000'000, timeout_ms), fr53_rank(1, 5'000'300'000, 5'301'000'000, timeout_ms),
                  fr53_rank(2, rank2_created_ns, rank2_failed_ns, timeout_ms)})
    all.insert(all.end(), v.begin(), v.end());
  return all;
}

}  // namespace

TEST(Fr53FlightStopped, TheRankThatFailedLongAfterItsPeersIsNamed) {
  // rank 2 failed at 9.0 s: 3.699 s after rank 1 (the last peer), 4.0004 s after it entered
  const fr53::FlightAnalysis a = fr53::analyze_flight_records(fr53_run(9'000'000'000), 3);
  ASSERT_EQ(a.findings.size(), 1u);
  const fr53::FlightFinding& f = a.findings[0];
  EXPECT_EQ(f.kind, fr53::FlightFinding::Kind::stalled);
  EXPECT_EQ(f.ranks, std::vector<int32_t>{2});
  EXPECT_EQ(f.groups, std::vector<std::string>{"world"});
  EXPECT_EQ(f.sequences, std::vector<uint64_t>{1189});
  EXPECT_EQ(f.text,
            "rank 2 stalled in all_gather 'input_dist/splits/split_check' (group world, sequence 1189): it had "
            "entered it before ranks 0, 1 failed (300 ms timeout), and failed there only 3.7 s after the last of them, "
            "4.0 s after it entered; a running rank leaves a collective at its timeout or as soon as its peers close "
            "their connections, so rank 2's process did not run meanwhile (a stopped or stalled process: SIGSTOP, "
            "swapping, a debugger; not a slow link)");
  EXPECT_EQ(a.in_flight_note, "");  // no "a slow link" guess beside the finding
}

TEST(Fr53FlightStopped, TheMarginIsTheTimeoutOrOneSecond) {
  // 300 ms timeout: the margin is 1 s. 1.000 s after rank 1 is within it, 1.001 s is not.
  const fr53::FlightAnalysis within = fr53::analyze_flight_records(fr53_run(6'301'000'000), 3);
  EXPECT_TRUE(within.findings.empty()) << within.findings[0].text;
  EXPECT_NE(within.in_flight_note.find("their transfers did not finish"), std::string::npos) << within.in_flight_note;
  const fr53::FlightAnalysis over = fr53::analyze_flight_records(fr53_run(6'302'000'000), 3);
  ASSERT_EQ(over.findings.size(), 1u);
  EXPECT_EQ(over.findings[0].ranks, std::vector<int32_t>{2});
  EXPECT_NE(over.findings[0].text.find("failed there only 1.0 s after the last of them, 1.3 s after it entered"),
            std::string::npos) << over.findings[0].text;
  // a 2000 ms timeout: the margin is the timeout; rank 2 failing 1.5 s after rank 1 is within it
  const fr53::FlightAnalysis long_timeout = fr53::analyze_flight_records(fr53_run(6'801'000'000, 4'999'600'000, 2000), 3);
  EXPECT_TRUE(long_timeout.findings.empty()) << long_timeout.findings[0].text;
}

TEST(Fr53FlightStopped, ARankThatEnteredAfterItsPeersFailedIsNotSaidToHaveStalledInside) {
  // rank 2 entered at 5.3005 s, after rank 0 had failed at 5.300 s: it was not inside the
  // collective when its peers gave up (it came late; it did not stall inside)
  const fr53::FlightAnalysis a = fr53::analyze_flight_records(fr53_run(9'000'000'000, 5'300'500'000), 3);
  EXPECT_TRUE(a.findings.empty()) << a.findings[0].text;
}

TEST(Fr53FlightStopped, DumpsWithoutFailureTimesKeepTheOldNote) {
  // files written before failure times were recorded: every time_completed_ns of #1189 is -1
  std::vector<fr53::FlightRecord> all;
  for (int32_t r = 0; r < 3; ++r) {
    auto v = fr53_rank(r, 5'000'000'000, -1);
    all.insert(all.end(), v.begin(), v.end());
  }
  const fr53::FlightAnalysis a = fr53::analyze_flight_records(all, 3);
  EXPECT_TRUE(a.findings.empty());
  EXPECT_EQ(a.in_flight_note,
            "every rank reached the collectives its peers wait in: their transfers did not finish (a slow link, or a "
            "peer that failed inside the collective)");
}

TEST(Fr53FlightStopped, OnlyPeersThatFailedCount) {
  // rank 1 completed #1189 at 5.301 s (no failure); rank 0 failed there at 5.300 s: rank 2 is
  // measured against rank 0 alone (9.0 - 5.3 = 3.7 s)
  auto all = fr53_run(9'000'000'000);
  for (auto& e : all)
    if (e.rank == 1 && e.sequence == 1189) e.state = "completed";
  const fr53::FlightAnalysis a = fr53::analyze_flight_records(all, 3);
  ASSERT_FALSE(a.findings.empty());
  EXPECT_EQ(a.findings[0].ranks, std::vector<int32_t>{2});
  EXPECT_NE(a.findings[0].text.find("it had entered it before rank 0 failed (300 ms timeout), and failed there only "
                                    "3.7 s after the last of them"),
            std::string::npos) << a.findings[0].text;
  // no peer failed at all (rank 0 completed too): nothing to measure rank 2 against
  for (auto& e : all)
    if (e.rank == 0 && e.sequence == 1189) e.state = "completed";
  const fr53::FlightAnalysis none = fr53::analyze_flight_records(all, 3);
  for (const auto& f : none.findings) EXPECT_EQ(f.text.find("failed there only"), std::string::npos) << f.text;
}

TEST(Fr53FlightStopped, ARankStoppedInACollectiveItsPeersCompletedIsNamedBesideTheOneItDidNotReach) {
  // ranks 0 and 1 completed world#1189 and timed out in world#1190 (entered at 5.1 s, failed at
  // 5.4 s); rank 2, stopped inside #1189, failed there at 9.0 s: 3.6 s after them
  auto all = fr53_run(9'000'000'000);
  for (auto& e : all)
    if (e.rank != 2 && e.sequence == 1189) {
      e.state = "completed";
      e.time_completed_ns = e.time_created_ns + 2'000'000;
    }
  for (int32_t r = 0; r < 2; ++r) {
    fr53::FlightRecord next = all[static_cast<size_t>(2 * r + 1)];
    next.record_id = 2;
    next.sequence = 1190;
    next.op = "all_reduce";
    next.name = "dense_all_reduce";
    next.state = "started";
    next.time_created_ns = 5'100'000'000 + r * 1000;
    next.time_started_ns = next.time_created_ns + 10'000;
    next.time_completed_ns = 5'400'000'000 + r * 1000;
    all.push_back(next);
  }
  const fr53::FlightAnalysis a = fr53::analyze_flight_records(all, 3);
  ASSERT_EQ(a.findings.size(), 2u);
  EXPECT_EQ(a.findings[0].kind, fr53::FlightFinding::Kind::stalled);
  EXPECT_EQ(a.findings[0].ranks, std::vector<int32_t>{2});
  EXPECT_EQ(a.findings[0].sequences, std::vector<uint64_t>{1189});
  EXPECT_EQ(a.findings[0].text.rfind("rank 2 stalled in all_gather 'input_dist/splits/split_check' (group world, "
                                     "sequence 1189): it had entered it before ranks 0, 1 failed (300 ms timeout), "
                                     "and failed there only 3.6 s after the last of them, 4.0 s after it entered;", 0),
            0u) << a.findings[0].text;
  // and where its peers wait for it, as before
  EXPECT_EQ(a.findings[1].kind, fr53::FlightFinding::Kind::not_reached);
  EXPECT_EQ(a.findings[1].ranks, std::vector<int32_t>{2});
  EXPECT_EQ(a.findings[1].sequences, std::vector<uint64_t>{1190});
}
