// retest47 R9: after a SIGSTOP / SIGCONT of rank 1, rank 0's recorded hang says "rank(s) 1 did not
// arrive" while the flight recorder, seeing both ranks inside the same collective, blamed "a slow
// link". The recorder now defers to the recorded hang. Hand-built dumps of that run (2 ranks,
// group world, timeout 1000 ms) and a hand-written session holding them.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/flight_recorder.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace fixc48_fr = embedscope::sessions;

// Rank `rank`'s entry `id`: world#seq, entered at `created_ns`, completed 1 ms later when `done`.
fixc48_fr::FlightRecord fixc48_entry(int32_t rank, int64_t id, uint64_t seq, const char* op, const char* name, bool done,
                                     int64_t created_ns) {
  fixc48_fr::FlightRecord e;
  e.rank = rank;
  e.reason = rank == 0 ? "collective timeout" : "run ended crashed";
  e.dump_time_ns = 9'000'000'000;
  e.record_id = id;
  e.group = "world";
  e.members = "0,1";
  e.sequence = seq;
  e.op = op;
  e.name = name;
  e.dtype = "int64";
  e.input_elements = 2;
  e.output_elements = 2;
  e.state = done ? "completed" : "started";
  e.time_created_ns = created_ns;
  e.time_started_ns = created_ns + 1000;
  e.time_completed_ns = done ? created_ns + 1'000'000 : -1;
  e.timeout_ms = 1000;
  return e;
}

// Both ranks completed world#972 and are inside all_gather world#973 (rank 1 entered it after
// SIGCONT, 2 s after rank 0 gave up; the dumps hold no clock that says so).
std::vector<fixc48_fr::FlightRecord> fixc48_both_inside() {
  return {fixc48_entry(0, 0, 972, "all_to_all", "input_dist/ids", true, 4'000'000'000),
          fixc48_entry(0, 1, 973, "all_gather", "input_dist/ids/split_check", false, 4'010'000'000),
          fixc48_entry(1, 0, 972, "all_to_all", "input_dist/ids", true, 4'000'000'000),
          fixc48_entry(1, 1, 973, "all_gather", "input_dist/ids/split_check", false, 7'020'000'000)};
}

const char* const kFixc48Hang =
    "rank 0: all_gather 'input_dist/ids/split_check' (group world, sequence 973) did not finish within 1000 ms: "
    "rank(s) 1 did not arrive (rank(s) 1 reported no failure within 2000 ms: the process did not answer: it exited, "
    "was killed, or is stopped or stalled)";

const char* const kFixc48Late =
    "rank 1 arrived late in all_gather 'input_dist/ids/split_check' (group world, sequence 973): rank 0's own hang "
    "records that it had not arrived when its 1000 ms timeout ran out, and rank 1's dump shows it inside the "
    "collective since (a stopped or stalled process: SIGSTOP, swapping, a debugger; not a slow link)";

}  // namespace

TEST(Fixc48FlightLate, TheRecordedHangNamesTheLateRankNotASlowLink) {
  fixc48_fr::FlightAnalysis a = fixc48_fr::analyze_flight_records(fixc48_both_inside(), 2);
  // the dumps alone: no finding, the "slow link" note
  ASSERT_TRUE(a.findings.empty());
  EXPECT_EQ(a.in_flight_note.rfind("every rank reached the collectives its peers wait in", 0), 0u);
  fixc48_fr::defer_to_recorded_hang(a, kFixc48Hang);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].kind, fixc48_fr::FlightFinding::Kind::stalled);
  EXPECT_EQ(a.findings[0].ranks, std::vector<int32_t>{1});
  EXPECT_EQ(a.findings[0].groups, std::vector<std::string>{"world"});
  EXPECT_EQ(a.findings[0].sequences, std::vector<uint64_t>{973});
  EXPECT_EQ(a.findings[0].text, kFixc48Late);
  EXPECT_EQ(a.in_flight_note, "");
  // said once however often it is asked
  fixc48_fr::defer_to_recorded_hang(a, kFixc48Hang);
  EXPECT_EQ(a.findings.size(), 1u);

  // rank 1 completed #973 since and went on to #974: "entered"
  auto recs = fixc48_both_inside();
  recs[3] = fixc48_entry(1, 1, 973, "all_gather", "input_dist/ids/split_check", true, 7'020'000'000);
  recs.push_back(fixc48_entry(1, 2, 974, "all_to_all", "input_dist/ids", false, 7'030'000'000));
  a = fixc48_fr::analyze_flight_records(recs, 2);
  fixc48_fr::defer_to_recorded_hang(a, std::string("st.rank0.db: ") + kFixc48Hang);  // a merged session's prefix
  const auto late = std::find_if(a.findings.begin(), a.findings.end(), [](const fixc48_fr::FlightFinding& f) {
    return f.kind == fixc48_fr::FlightFinding::Kind::stalled;
  });
  ASSERT_NE(late, a.findings.end());
  EXPECT_NE(late->text.find("rank 1's dump shows it entered the collective since"), std::string::npos) << late->text;
}

TEST(Fixc48FlightLate, AHangThatTheDumpsDoNotBearOutChangesNothing) {
  // rank 1 named late in #974, which its dump never entered; another message; a rank with no dump
  for (const std::string& msg :
       {std::string("rank 0: all_gather 'x' (group world, sequence 974) did not finish within 1000 ms: rank(s) 1 did "
                    "not arrive"),
        std::string("rank 0: training diverged: the loss is nan at step 3"),
        std::string("rank 0: all_gather 'x' (group world, sequence 973) did not finish within 1000 ms: rank(s) 5 did "
                    "not arrive")}) {
    fixc48_fr::FlightAnalysis a = fixc48_fr::analyze_flight_records(fixc48_both_inside(), 2);
    const std::string note = a.in_flight_note;
    fixc48_fr::defer_to_recorded_hang(a, msg);
    EXPECT_TRUE(a.findings.empty()) << msg;
    EXPECT_EQ(a.in_flight_note, note) << msg;
  }
}

TEST(Fixc48FlightLate, ASessionsEndMessageIsReadByTheSessionAnalysis) {
  const std::filesystem::path p = std::filesystem::temp_directory_path() / "fixc48_late.db";
  std::filesystem::remove(p);
  {
    fixc48_fr::SessionWriter w(p.string());
    w.set_metadata(fixc48_fr::meta::kWorldSize, "2");
    w.add_flight_records(fixc48_both_inside());
    w.close("hang", kFixc48Hang);
  }
  const fixc48_fr::SessionReader r(p.string());
  const fixc48_fr::FlightAnalysis a = fixc48_fr::analyze_flight_records(r);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].text, kFixc48Late);
  EXPECT_EQ(a.in_flight_note, "");
}
