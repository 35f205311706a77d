// --align collectives: per-rank clock offsets from matching collectives (importers/common/
// clock_align.h), on records and end to end on two Kineto traces whose rank 1 runs 400 us ahead
// (data/traces/align/make_align.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/importers/common/clock_align.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "import_test_support.h"
#include "support/cli_run.h"

using namespace embedscope::sessions;
using namespace embedscope::sessions::testing;
namespace si = embedscope::sessions::importers;

namespace {
si::RankRecords rank_with(int32_t rank, const std::vector<std::tuple<std::string, uint64_t, int64_t>>& ends) {
  si::RankRecords r;
  r.rank = rank;
  for (const auto& [g, seq, end] : ends) {
    CollectiveRecord c;
    c.rank = rank;
    c.group = g;
    c.sequence = seq;
    c.start_ns = end - 100;
    c.end_ns = end;
    r.collectives.push_back(c);
  }
  return r;
}
}  // namespace

TEST(ClockAlign, MedianOfEndDifferencesChainedThroughAlignedRanks) {
  // rank 1: +1000 ns, one late end (+50000) the median ignores; rank 2 shares only group "b"
  // with rank 1 (+1000 + 300 = 1300 ahead of rank 0); rank 3 shares nothing.
  std::vector<si::RankRecords> ranks{
      rank_with(0, {{"a", 1, 10000}, {"a", 2, 20000}, {"a", 3, 30000}}),
      rank_with(1, {{"a", 1, 11000}, {"a", 2, 71000}, {"a", 3, 31000}, {"b", 1, 41000}}),
      rank_with(2, {{"b", 1, 41300}}),
      rank_with(3, {{"c", 1, 5}})};
  const auto a = si::align_by_collectives(ranks);
  EXPECT_EQ(a.reference_rank, 0);
  EXPECT_EQ(a.offset_ns.at(0), 0);
  EXPECT_EQ(a.offset_ns.at(1), 1000);   // median of {1000, 51000, 1000}
  EXPECT_EQ(a.offset_ns.at(2), 1300);   // 41300 - (41000 - 1000)
  EXPECT_EQ(a.offset_ns.at(3), 0);
  EXPECT_EQ(a.unaligned, std::vector<int32_t>{3});
  EXPECT_EQ(a.matches.at(1), 3);
  // residual skews: a1 0, a2 50000, a3 0, b1 0 (c1 has one member)
  EXPECT_EQ(a.matched_collectives, 4);
  EXPECT_EQ(a.max_skew_ns, 50000);
  EXPECT_EQ(a.median_skew_ns, 0);
  const auto j = nlohmann::json::parse(si::alignment_json(a));
  EXPECT_EQ(j["offsets_ns"]["2"], 1300);
  EXPECT_EQ(j["unaligned_ranks"], nlohmann::json::array({3}));
}

TEST(ClockAlign, TwoRanksOneRunning400usAheadAreAligned) {
  const std::string db = scratch_db("align.db");
  {
    SessionWriter w(db, true);
    si::ImportOptions opt;
    opt.align = "collectives";
    const auto sum = si::import_kineto_json(si::expand_inputs({trace_fixture("align")}), w, opt);
    w.close("complete");
    EXPECT_EQ(problem_count(sum.problems, "kernel_before_launch"), 1);  // flagged, not dropped
    EXPECT_EQ(problem(sum.problems, "kernel_before_launch")->severity, "error");
    EXPECT_NE(sum.alignment_text.find("rank 1    clock offset +400.000 us (median of 5 collective end(s))"),
              std::string::npos) << sum.alignment_text;
  }
  const SessionReader r(db);
  EXPECT_EQ(r.meta(meta::kImportAlign), "collectives");
  const auto j = nlohmann::json::parse(r.meta(meta::kImportAlignJson));
  const int64_t offset = j["offsets_ns"]["1"];
  EXPECT_NEAR(offset, 400000, 5000);  // the bar: 400 us within 5 us
  EXPECT_EQ(offset, 400000);          // exactly: the median of jitters {0, 2, -1, 3, -2} us is 0
  EXPECT_EQ(j["max_skew_ns"], 3000);
  EXPECT_EQ(j["median_skew_ns"], 2000);
  EXPECT_EQ(j["matched_collectives"], 5);
  // Aligned: the collectives' ends coincide up to the jitter; the raw time is t + offset.
  std::map<std::pair<int32_t, uint64_t>, int64_t> end;
  for (const auto& c : r.collectives()) end[{c.rank, c.sequence}] = c.end_ns;
  ASSERT_EQ(end.size(), 10u);
  EXPECT_EQ(end[std::make_pair(1, uint64_t{0})] - end[std::make_pair(0, uint64_t{0})], 0);
  EXPECT_EQ(end[std::make_pair(1, uint64_t{3})] - end[std::make_pair(0, uint64_t{3})], 3000);
  const int64_t origin = std::stoll(r.meta(meta::kImportOriginNs));
  EXPECT_EQ(origin, 100000);  // rank 0's first record_param_comms at 100 us
  EXPECT_EQ(end[std::make_pair(1, uint64_t{0})] + offset + origin, 900000);  // rank 1's first NCCL kernel ends at trace ts 900 us
  // The kernel that starts before its launch is kept, on rank 1's stream.
  int gemm_on_1 = 0;
  for (const auto& o : r.all_ops())
    if (o.rank == 1 && r.name(o.name_id) == "gemm_kernel") ++gemm_on_1;
  EXPECT_EQ(gemm_on_1, 1);
}

TEST(ClockAlign, AlignNoneKeepsEachRankAsRecordedAndTheCliPrintsOffsets) {
  {
    SessionWriter w(scratch_db("align_none.db"), true);
    si::import_kineto_json(si::expand_inputs({trace_fixture("align")}), w, {});
    w.close("complete");
  }
  const SessionReader r(scratch_db("align_none.db"));
  EXPECT_EQ(r.meta(meta::kImportAlign), "none");
  EXPECT_EQ(r.meta(meta::kImportAlignJson), "");
  std::map<std::pair<int32_t, uint64_t>, int64_t> end;
  for (const auto& c : r.collectives()) end[{c.rank, c.sequence}] = c.end_ns;
  EXPECT_EQ(end[std::make_pair(1, uint64_t{0})] - end[std::make_pair(0, uint64_t{0})], 400000);
  const std::string db = scratch_db("align_cli.db");
  std::remove(db.c_str());
  auto res = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "import " + trace_fixture("align") + " --align collectives -o " + db,
                                               import_scratch());
  ASSERT_EQ(res.code, 0) << res.err;
  EXPECT_NE(res.out.find("rank 1    clock offset +400.000 us"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("residual skew of 5 matched collective(s): max 3.000 us, median 2.000 us"), std::string::npos)
      << res.out;
  EXPECT_NE(res.out.find("kernel_before_launch"), std::string::npos) << res.out;
}

// A CPU trace (Gloo backend, tests/data/traces/gloo: per step aten::mm 20 us, then a 40 us
// record_param_comms span holding gloo:all_reduce; rank 1 runs 5 us ahead). Its
// record_param_comms spans are the collectives (tester34 D3: none before, so nothing to align):
// records with bytes (ring all-reduce of 1,000 floats on 2 ranks: 2 x 1/2 x 4,000 = 4,000 B each
// way), listed once per step in the collectives view; gloo:* is communication, not compute, so
// nothing of it is hidden (was 95 %); --align collectives finds the 5 us.
TEST(ClockAlign, GlooTraceRecordParamCommsAreItsCollectives) {
  const std::string db = scratch_db("gloo.db");
  {
    SessionWriter w(db, true);
    si::ImportOptions opt;
    opt.align = "collectives";
    const auto sum = si::import_kineto_json(si::expand_inputs({trace_fixture("gloo")}), w, opt);
    w.close("complete");
    EXPECT_NE(sum.alignment_text.find("rank 1    clock offset +5.000 us"), std::string::npos) << sum.alignment_text;
  }
  const SessionReader r(db);
  const auto colls = r.collectives();
  ASSERT_EQ(colls.size(), 4u);  // 2 ranks x 2 steps
  for (const auto& c : colls) {
    EXPECT_EQ(c.op, "all_reduce");
    EXPECT_EQ(c.bytes_sent, 4000);
    EXPECT_EQ(c.bytes_received, 4000);
    EXPECT_EQ(c.end_ns - c.start_ns, 40000);
  }
  const RunStats st = analyze(r);
  EXPECT_FALSE(st.stream_ranks);
  ASSERT_EQ(st.collectives.size(), 1u);  // record_param_comms, not also gloo:all_reduce
  EXPECT_EQ(r.name(st.collectives[0].name_id), "record_param_comms");
  EXPECT_EQ(st.collectives[0].count, 4);       // 2 steps x 2 ranks
  EXPECT_EQ(st.collectives[0].bytes, 4 * 8000);  // each: sent + received
  ASSERT_EQ(st.ranks.size(), 2u);
  EXPECT_EQ(st.ranks[0].comm_ns, 2 * 40000);
  EXPECT_EQ(st.ranks[0].compute_ns, 2 * 20000);
  EXPECT_EQ(st.ranks[0].overlap_ns, 0);
}

// Rank 1's clock runs 10 s behind (tester34 D16): it holds the raw minimum, which after alignment
// is no event at all. Time 0 is the earliest aligned event (rank 0's first at trace ts 1,000 us),
// not 10 s of nothing before it; the raw times stay recoverable (origin + t + offset).
TEST(ClockAlign, TimeZeroIsTheEarliestAlignedEvent) {
  const auto dir = import_scratch() / "gloo_behind";
  std::filesystem::create_directories(dir);
  for (int r : {0, 1}) {
    std::ifstream in(trace_fixture("gloo/rank" + std::to_string(r) + ".json"));
    nlohmann::json j = nlohmann::json::parse(in);
    if (r == 1)
      for (auto& e : j["traceEvents"])
        if (e.contains("ts")) e["ts"] = e["ts"].get<double>() - 10'000'000.0;  // 10 s behind
    std::ofstream(dir / ("rank" + std::to_string(r) + ".json")) << j.dump();
  }
  const std::string db = scratch_db("gloo_behind.db");
  {
    SessionWriter w(db, true);
    si::ImportOptions opt;
    opt.align = "collectives";
    const auto sum = si::import_kineto_json(si::expand_inputs({dir.string()}), w, opt);
    w.close("complete");
    EXPECT_NE(sum.alignment_text.find("rank 1    clock offset -9999995.000 us"), std::string::npos) << sum.alignment_text;
    EXPECT_EQ(sum.start_ns, 1000);  // the first op, aten::mm, 1 us into ProfilerStep#0 (was 10 s later)
  }
  const SessionReader r(db);
  EXPECT_EQ(std::stoll(r.meta(meta::kImportOriginNs)), 1'000'000);  // rank 0's ProfilerStep#0, trace ts 1,000 us
  int64_t first = std::numeric_limits<int64_t>::max();
  for (const auto& st : r.steps()) first = std::min(first, st.start_ns);
  EXPECT_EQ(first, 0);
}
