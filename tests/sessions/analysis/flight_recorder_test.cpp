// The flight recorder's dumps in the session (table `flight_recorder`, schema 8) and their
// analysis (sessions/analysis/flight_recorder.h) on hand-written dumps whose answers are known.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "embedscope/sessions/analysis/flight_recorder.h"
#include "embedscope/sessions/merge/merge.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::sessions;
namespace fs = std::filesystem;

namespace {

fs::path flight_scratch() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_flight_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// An entry of rank `rank`'s dump `dump`: collective `seq` of `group` (members "0,1,2" unless
// given) in `state`.
FlightRecord fr_entry(int32_t rank, int64_t id, const char* group, uint64_t seq, const char* op, const char* name,
                      const char* state, int32_t dump = 0, const char* members = "0,1,2") {
  FlightRecord e;
  e.rank = rank;
  e.dump = dump;
  e.reason = "collective timeout";
  e.dump_time_ns = 9'000'000;
  e.record_id = id;
  e.group = group;
  e.members = members;
  e.sequence = seq;
  e.op = op;
  e.name = name;
  e.dtype = "float32";
  e.input_elements = 16;
  e.output_elements = 16;
  e.step = 3;
  e.state = state;
  e.time_created_ns = 1000 * (id + 1);
  e.time_started_ns = std::string(state) == "scheduled" ? -1 : e.time_created_ns + 10;
  e.time_completed_ns = std::string(state) == "completed" ? e.time_created_ns + 500 : -1;
  e.timeout_ms = 800;
  return e;
}

// Ranks 0 and 1 completed world#1 and wait in world#2; rank 2 completed world#1 only.
std::vector<FlightRecord> rank2_behind() {
  return {fr_entry(0, 0, "world", 1, "all_to_all", "fwd", "completed"), fr_entry(0, 1, "world", 2, "all_reduce", "dense", "started"),
          fr_entry(1, 0, "world", 1, "all_to_all", "fwd", "completed"), fr_entry(1, 1, "world", 2, "all_reduce", "dense", "started"),
          fr_entry(2, 0, "world", 1, "all_to_all", "fwd", "completed")};
}

const FlightFinding* find_kind(const FlightAnalysis& a, FlightFinding::Kind k) {
  auto it = std::find_if(a.findings.begin(), a.findings.end(), [&](const auto& f) { return f.kind == k; });
  return it == a.findings.end() ? nullptr : &*it;
}

}  // namespace

TEST(FlightRecorderAnalysis, NamesTheRankThatDidNotReachTheCollectiveItsPeersWaitIn) {
  const FlightAnalysis a = analyze_flight_records(rank2_behind(), 3);
  ASSERT_EQ(a.findings.size(), 1u);
  const FlightFinding& f = a.findings[0];
  EXPECT_EQ(f.kind, FlightFinding::Kind::not_reached);
  EXPECT_EQ(f.ranks, std::vector<int32_t>{2});
  EXPECT_EQ(f.groups, std::vector<std::string>{"world"});
  EXPECT_EQ(f.sequences, std::vector<uint64_t>{2});
  EXPECT_EQ(f.text, "rank 2 did not reach all_reduce 'dense' (group world, sequence 2), which ranks 0, 1 wait in; its "
                    "last collective, all_to_all 'fwd' (group world, sequence 1), completed");
  ASSERT_EQ(a.groups.size(), 1u);
  EXPECT_EQ(a.groups[0].members, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(a.groups[0].entered, (std::vector<uint64_t>{2, 2, 1}));
  EXPECT_EQ(a.groups[0].completed, (std::vector<uint64_t>{1, 1, 1}));
  EXPECT_EQ(a.groups[0].completed_everywhere, 1u);
  ASSERT_TRUE(a.groups[0].completed_everywhere_entry);
  EXPECT_EQ(a.groups[0].completed_everywhere_entry->name, "fwd");
  ASSERT_EQ(a.ranks.size(), 3u);
  ASSERT_TRUE(a.ranks[0].waiting);
  EXPECT_EQ(a.ranks[0].waiting->name, "dense");
  EXPECT_FALSE(a.ranks[2].waiting);
  EXPECT_EQ(a.ranks[2].last_completed->sequence, 1u);
}

TEST(FlightRecorderAnalysis, ARankWithoutADumpIsNamedOnceWithTheCollectiveTheOthersWaitIn) {
  auto recs = rank2_behind();
  recs.pop_back();  // rank 2 was killed: no dump
  FlightAnalysis a = analyze_flight_records(recs, 3);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].kind, FlightFinding::Kind::not_reached);
  EXPECT_EQ(a.findings[0].text, "rank 2 left no dump; ranks 0, 1 wait in all_reduce 'dense' (group world, sequence 2) for it");
  EXPECT_FALSE(a.ranks[2].dumped);
  // a world rank that no group names and that left no dump: its own finding
  a = analyze_flight_records(recs, 4);
  const FlightFinding* f = find_kind(a, FlightFinding::Kind::no_dump);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->ranks, std::vector<int32_t>{3});
  EXPECT_EQ(a.ranks.size(), 4u);
}

TEST(FlightRecorderAnalysis, DifferentCollectivesAtOneSequenceAreAMismatch) {
  auto recs = rank2_behind();
  recs.push_back(fr_entry(2, 1, "world", 2, "all_to_all", "grad", "started"));
  const FlightAnalysis a = analyze_flight_records(recs, 3);
  ASSERT_EQ(a.findings.size(), 1u) << a.findings[1].text;
  EXPECT_EQ(a.findings[0].kind, FlightFinding::Kind::mismatch);
  EXPECT_EQ(a.findings[0].ranks, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(a.findings[0].text, "ranks 0 and 2 ran different collectives at group world's sequence 2: rank 0 all_reduce "
                                "'dense' (16 float32 elements), rank 2 all_to_all 'grad' (16 float32 elements)");
  // an all-reduce of another size is one too; all-to-alls of other sizes are not (their splits differ)
  recs.back() = fr_entry(2, 1, "world", 2, "all_reduce", "dense", "started");
  recs.back().input_elements = 8;
  EXPECT_EQ(analyze_flight_records(recs, 3).findings.size(), 1u);
  recs.back().input_elements = 16;
  EXPECT_TRUE(analyze_flight_records(recs, 3).findings.empty());
}

TEST(FlightRecorderAnalysis, TwoGroupsEnteredInOppositeOrdersAreNamedWithBothRanksGroupsAndSequences) {
  // groups a and b, both of ranks 0 and 1: rank 0 completed a#1, b#1 and waits in a#2; rank 1
  // completed a#1, b#1 and waits in b#2
  std::vector<FlightRecord> recs{
      fr_entry(0, 0, "a", 1, "all_reduce", "warm_a", "completed", 0, "0,1"), fr_entry(0, 1, "b", 1, "all_reduce", "warm_b", "completed", 0, "0,1"),
      fr_entry(0, 2, "a", 2, "all_reduce", "grad_a", "started", 0, "0,1"),
      fr_entry(1, 0, "a", 1, "all_reduce", "warm_a", "completed", 0, "0,1"), fr_entry(1, 1, "b", 1, "all_reduce", "warm_b", "completed", 0, "0,1"),
      fr_entry(1, 2, "b", 2, "all_reduce", "grad_b", "started", 0, "0,1")};
  const FlightAnalysis a = analyze_flight_records(recs, 2);
  ASSERT_EQ(a.findings.size(), 1u) << a.findings[1].text;  // the plain "did not reach"s are explained by it
  const FlightFinding& f = a.findings[0];
  EXPECT_EQ(f.kind, FlightFinding::Kind::opposite_order);
  EXPECT_EQ(f.ranks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(f.groups, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(f.sequences, (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(f.text, "ranks 0 and 1 entered process groups a and b in opposite orders: rank 0 waits in all_reduce 'grad_a' "
                    "(group a, sequence 2) and has not reached group b's sequence 2; rank 1 waits in all_reduce 'grad_b' "
                    "(group b, sequence 2) and has not reached group a's sequence 2");
}

TEST(FlightRecorderAnalysis, TheLastDumpOfEachRankCountsAndMemberListsMustAgree) {
  auto recs = rank2_behind();
  // an earlier dump (SIGUSR1) of rank 2 in which world#1 had not completed: ignored
  FlightRecord early = fr_entry(2, 0, "world", 1, "all_to_all", "fwd", "started");
  early.dump = 0;
  for (auto& r : recs)
    if (r.rank == 2) r.dump = 1;
  recs.push_back(early);
  FlightAnalysis a = analyze_flight_records(recs, 3);
  EXPECT_EQ(a.ranks[2].dump, 1);
  EXPECT_EQ(a.ranks[2].entries, 1);
  EXPECT_EQ(a.groups[0].completed, (std::vector<uint64_t>{1, 1, 1}));
  // a rank that names other members for the same group
  recs = rank2_behind();
  recs[4].members = "0,1";
  a = analyze_flight_records(recs, 3);
  const FlightFinding* f = find_kind(a, FlightFinding::Kind::mismatch);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->text, "rank 2 has group world with members 0,1, another rank with members 0,1,2");
  EXPECT_TRUE(analyze_flight_records({}, 4).empty());
}

TEST(FlightRecorderSession, DumpsRoundTripMergeWithTheirRankAndOlderFilesHaveNone) {
  const fs::path p = flight_scratch() / "fr.db";
  {
    SessionWriter w(p.string());
    w.set_metadata(meta::kWorldSize, "3");
    w.add_flight_records(rank2_behind());
    w.close("hang", "world#2 timed out");
  }
  SessionReader r(p.string());
  const auto back = r.flight_records();
  ASSERT_EQ(back.size(), 5u);
  const auto want = rank2_behind();
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].rank, want[i].rank);
    EXPECT_EQ(back[i].record_id, want[i].record_id);
    EXPECT_EQ(back[i].group, want[i].group);
    EXPECT_EQ(back[i].members, want[i].members);
    EXPECT_EQ(back[i].sequence, want[i].sequence);
    EXPECT_EQ(back[i].name, want[i].name);
    EXPECT_EQ(back[i].state, want[i].state);
    EXPECT_EQ(back[i].reason, want[i].reason);
    EXPECT_EQ(back[i].time_started_ns, want[i].time_started_ns);
    EXPECT_EQ(back[i].time_completed_ns, want[i].time_completed_ns);
    EXPECT_EQ(back[i].timeout_ms, 800);
  }
  EXPECT_EQ(analyze_flight_records(r).findings.size(), 1u);

  // two rank sessions merged: each rank's dump comes along with its times moved as its ops
  const fs::path p0 = flight_scratch() / "r0.db", p1 = flight_scratch() / "r1.db", all = flight_scratch() / "all.db";
  auto recs = rank2_behind();
  for (const auto& [path, keep] : {std::pair{p0, 0}, std::pair{p1, 1}}) {
    SessionWriter w(path.string());
    w.set_metadata(meta::kWorldSize, "3");
    w.set_metadata(meta::kWallAnchorUnixNs, keep == 0 ? "1000000000" : "1000002000");  // rank 1 started 2 us later
    w.add_rank({keep, "host", "cpu (thread)", 0});
    std::vector<FlightRecord> mine;
    for (const auto& e : recs)
      if (e.rank == keep) mine.push_back(e);
    w.add_flight_records(mine);
    w.close("hang");
  }
  merge_sessions({p0.string(), p1.string()}, all.string(), MergeOptions{});
  SessionReader m(all.string());
  const auto merged = m.flight_records();
  ASSERT_EQ(merged.size(), 4u);
  EXPECT_EQ(merged[0].time_created_ns, recs[0].time_created_ns);         // rank 0: the origin
  EXPECT_EQ(merged[2].time_created_ns, recs[2].time_created_ns + 2000);  // rank 1: 2 us later
  EXPECT_EQ(merged[3].time_completed_ns, -1);                            // "not yet" stays -1
  const FlightAnalysis a = analyze_flight_records(m);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].text, "rank 2 left no dump; ranks 0, 1 wait in all_reduce 'dense' (group world, sequence 2) for it");

  // a file of version 7 (before the table): no dumps, no analysis
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(p.string().c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "DROP TABLE flight_recorder; PRAGMA user_version=7;", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  SessionReader old(p.string());
  EXPECT_EQ(old.schema_version(), 7);
  EXPECT_TRUE(old.flight_records().empty());
  EXPECT_TRUE(analyze_flight_records(old).empty());
}

// Tester36 D4: a rank's SIGUSR1 snapshot taken before its peers entered the collective they failed
// in is set aside (the rank counts as having left no dump at the failure); D3: ranks not in a
// rank-per-process session are named as such, never as "left no dump"; D9: every collective a
// rank is inside is listed; D10 / D14: what in-flight collectives without a finding mean.
TEST(FlightRecorderAnalysis, StaleSnapshotsAbsentRanksAndInFlightNotes) {
  // ranks 0, 1 time out in world#2 (entered at 2,000 ns); rank 2's last dump is a SIGUSR1
  // snapshot at 1,500 ns, inside world#1
  auto recs = rank2_behind();
  recs.pop_back();
  FlightRecord snap = fr_entry(2, 0, "world", 1, "all_to_all", "fwd", "started");
  snap.reason = "SIGUSR1";
  snap.dump_time_ns = 1'500;
  recs.push_back(snap);
  FlightAnalysis a = analyze_flight_records(recs, 3);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].text,
            "rank 2 left no dump at the failure (rank 2: its last dump, a SIGUSR1 snapshot, was taken 0.000 s before "
            "its peers entered the collective they failed in); ranks 0, 1 wait in all_reduce 'dense' (group world, "
            "sequence 2) for it");
  EXPECT_FALSE(a.ranks[2].dumped);
  EXPECT_FALSE(a.ranks[2].stale_dump.empty());
  // a snapshot taken after they entered it still counts
  recs.back().dump_time_ns = 2'500;
  a = analyze_flight_records(recs, 3);
  EXPECT_TRUE(a.ranks[2].dumped);
  EXPECT_TRUE(a.ranks[2].stale_dump.empty());

  // rank 0's own session of a 3-process run: ranks 1 and 2 are elsewhere
  const std::vector<FlightRecord> own{fr_entry(0, 0, "world", 1, "all_to_all", "fwd", "completed"),
                                      fr_entry(0, 1, "world", 2, "all_reduce", "dense", "started"),
                                      fr_entry(0, 2, "world", 3, "all_gather", "split", "started")};
  a = analyze_flight_records(own, 3, {1, 2});
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].text,
            "rank 0 waits in all_gather 'split' (group world, sequence 3); ranks 1, 2 are not in this session (each "
            "process wrote its own: merge the ranks' sessions to see where they stopped)");
  EXPECT_FALSE(a.ranks[1].in_session);
  ASSERT_EQ(a.ranks[0].in_flight.size(), 2u);  // the dense all-reduce and the split check
  EXPECT_EQ(a.ranks[0].in_flight[1].sequence, 3u);

  // no finding: every rank inside world#2
  std::vector<FlightRecord> all_in{fr_entry(0, 0, "world", 1, "all_to_all", "fwd", "completed", 0, "0,1"),
                                   fr_entry(0, 1, "world", 2, "all_reduce", "dense", "started", 0, "0,1"),
                                   fr_entry(1, 0, "world", 1, "all_to_all", "fwd", "completed", 0, "0,1"),
                                   fr_entry(1, 1, "world", 2, "all_reduce", "dense", "started", 0, "0,1")};
  EXPECT_EQ(analyze_flight_records(all_in, 2).in_flight_note.rfind("every rank reached the collectives", 0), 0u);
  for (auto& e : all_in) e.reason = "SIGUSR1";
  EXPECT_EQ(analyze_flight_records(all_in, 2).in_flight_note.rfind("a snapshot taken while the run went on", 0), 0u);
  for (auto& e : all_in)
    if (e.state == "started") e.state = "scheduled";
  all_in[0].reason = all_in[1].reason = all_in[2].reason = all_in[3].reason = "run ended crashed";
  EXPECT_EQ(analyze_flight_records(all_in, 2).in_flight_note.rfind("every rank entered the collectives below but none "
                                                                  "started", 0), 0u);
}

// tester41 #1: SIGTERM dumped the rings mid-step (rank 2 one collective behind), then every rank
// finished the step and the run ended cancelled: no "did not reach" finding, a note instead; the
// same dumps in a run that hung keep their finding.
TEST(FlightRecorderSession, ACleanCancelAfterSigtermReportsNoHang) {
  const fs::path p = flight_scratch() / "term.db", hung = flight_scratch() / "term_hung.db";
  auto recs = rank2_behind();
  for (auto& e : recs) e.reason = "SIGTERM";
  for (const auto& [path, ended] : {std::pair{p, "cancelled"}, std::pair{hung, "hang"}}) {
    SessionWriter w(path.string());
    w.set_metadata(meta::kWorldSize, "3");
    w.add_flight_records(recs);
    w.close(ended);
  }
  const FlightAnalysis a = analyze_flight_records(SessionReader(p.string()));
  EXPECT_TRUE(a.findings.empty());
  EXPECT_EQ(a.in_flight_note, "dumped when SIGTERM arrived, mid-step; the run then finished that step and stopped cleanly "
                              "(ended: cancelled), so the collectives below completed after the dump: no sign of a hang");
  ASSERT_EQ(a.ranks.size(), 3u);
  ASSERT_TRUE(a.ranks[0].waiting);  // where each rank was when the signal came: still shown
  const FlightAnalysis h = analyze_flight_records(SessionReader(hung.string()));
  ASSERT_EQ(h.findings.size(), 1u);
  EXPECT_EQ(h.findings[0].kind, FlightFinding::Kind::not_reached);
}
