// A free_completed whose address is corrupt (points inside a block, at no block start) is named as
// the one wrong entry, and the block whose free_requested it follows is freed there: the import
// and the analysis (what `stats` reads) give the figures of the uncorrupted trace, and the trace is
// not called mid-way. Fixtures: memory_snapshots/make_tester59.py (tester59_mine.pickle, its hand
// figures; tester59_badfree.pickle: entry 8's address A + 123).
#include <gtest/gtest.h>

#include <string>

#include "embedscope/sessions/analysis/memory_analysis.h"
#include "embedscope/sessions/analysis/memory_history.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "embedscope/sessions/model/torch_allocator.h"
#include "import_test_support.h"
#include "support/cli_run.h"

using namespace embedscope::sessions;
using namespace embedscope::sessions::testing;

namespace {
constexpr int64_t kMiB = int64_t{1} << 20;
std::string m59b_snap(const std::string& name) { return std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/" + name; }
// Imports one snapshot fixture into the scratch session `db_name`.
torch_snapshot::ImportSummary m59b_import(const std::string& fixture, const std::string& db_name) {
  SessionWriter w(scratch_db(db_name), true);
  auto sum = torch_snapshot::import_torch_memory_snapshot(m59b_snap(fixture), w);
  w.close("complete");
  return sum;
}
}  // namespace

TEST(Mem59bMisaddressedFree, ThePairingTakesOnlyAMissingCompletionOfTheSameSize) {
  using S = TorchFreeStep;
  // two frees in flight completed in the other order: both pair by address, nothing stray
  EXPECT_EQ(torch_misaddressed_frees({{S::free_requested, 0x1000, 512}, {S::free_requested, 0x2000, 512},
                                      {S::free_completed, 0x2000, 512}, {S::free_completed, 0x1000, 512}}),
            (std::vector<int64_t>{-1, -1, -1, -1}));
  // a completion whose request came before the trace (mid-way) with no request left open: stray, unpaired
  EXPECT_EQ(torch_misaddressed_frees({{S::free_completed, 0x3000, 512}, {S::other, 0, 0}}),
            (std::vector<int64_t>{-1, -1}));
  // two requests never completed, 1024 B each; the stray completion inside the first pairs with it
  // (not the later one); a completion of another size pairs with nothing
  EXPECT_EQ(torch_misaddressed_frees({{S::free_requested, 0x1000, 1024}, {S::free_requested, 0x4000, 1024},
                                      {S::free_completed, 0x1000 + 7, 1024}, {S::free_completed, 0x9000, 512}}),
            (std::vector<int64_t>{-1, -1, 0, -1}));
  // none holds the address: the latest request before it
  EXPECT_EQ(torch_misaddressed_frees({{S::free_requested, 0x1000, 1024}, {S::free_requested, 0x4000, 1024},
                                      {S::free_completed, 0x8000, 1024}}),
            (std::vector<int64_t>{-1, -1, 1}));
  // a request after the completion is no candidate
  EXPECT_EQ(torch_misaddressed_frees({{S::free_completed, 0x1000, 1024}, {S::free_requested, 0x1000, 1024}}),
            (std::vector<int64_t>{-1, -1}));
}

TEST(Mem59bMisaddressedFree, TheImportNamesEntryEightOnlyAndTheTraceStartsAtProcessStart) {
  const auto sum = m59b_import("tester59_badfree.pickle", "mem59b_badfree.db");
  ASSERT_EQ(sum.problems.size(), 1u);
  EXPECT_EQ(sum.problems[0],
            "device 0 entry 8 (free_completed): address 0x7f000000007b is the start of no block; it is taken as the "
            "completion of the free of block 0x7f0000000000 (4194304 B) requested at entry 7, which has no other "
            "completion");
  EXPECT_EQ(problem_count(sum.import_stats, "free_completed_address_not_a_block"), 1);
  EXPECT_EQ(problem_count(sum.import_stats, "alloc_block_not_live"), 0);
  EXPECT_EQ(problem_count(sum.import_stats, "free_requested_block_not_pending"), 0);
  EXPECT_TRUE(sum.starts_at_process_start);
  // the CLI says no "mid-way"
  const std::string db = scratch_db("mem59b_badfree_cli.db");
  std::filesystem::remove(db);
  const auto r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "import " + m59b_snap("tester59_badfree.pickle") + " -o " + db, import_scratch());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("mid-way"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("entry 8 (free_completed): address 0x7f000000007b"), std::string::npos) << r.out;
}

TEST(Mem59bMisaddressedFree, StatsFiguresEqualTheUncorruptedTrace) {
  m59b_import("tester59_mine.pickle", "mem59b_mine.db");
  m59b_import("tester59_badfree.pickle", "mem59b_badfree2.db");
  SessionReader good(scratch_db("mem59b_mine.db"));
  SessionReader bad(scratch_db("mem59b_badfree2.db"));
  const auto g = analyze_memory(good);
  const auto b = analyze_memory(bad);
  ASSERT_EQ(g.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  // the generator's hand figures: 4 x 4 MiB + a 1024 B block at entry 6; 22 MiB reserved; free
  // 4 MiB + (2 MiB - 1024) with 4 MiB the largest
  for (const RankMemoryAnalysis* a : {&g[0], &b[0]}) {
    EXPECT_EQ(a->peak_entry, 6);
    EXPECT_EQ(a->peak_allocated, 16 * kMiB + 1024);
    EXPECT_EQ(a->peak_reserved, 22 * kMiB);
    EXPECT_EQ(a->reserved_overhead_at_peak, 22 * kMiB - (16 * kMiB + 1000));
    EXPECT_EQ(a->rounding_loss_at_peak, 24);
    EXPECT_EQ(a->at_peak.largest_free_block, 4 * kMiB);
    EXPECT_NEAR(a->at_peak.external_fragmentation, 1.0 - 4.0 * kMiB / (6.0 * kMiB - 1024), 1e-12);
    EXPECT_NEAR(a->at_peak.external_fragmentation, 0.3332248, 1e-7);
    int64_t held = 0;
    for (const auto& s : a->top_stacks_at_peak) {
      EXPECT_EQ(s.name.find("op9"), std::string::npos) << s.name;  // the free's own frame holds nothing
      held += s.bytes;
    }
    EXPECT_EQ(held, 16 * kMiB + 1024);
  }
  EXPECT_EQ(g[0].problems, 0);
  EXPECT_EQ(b[0].problems, 1);
  const MemoryHistory h = MemoryHistory::load(bad, 0);
  ASSERT_EQ(h.problems().size(), 1u);
  EXPECT_EQ(h.problems()[0],
            "entry 8 (free_completed): address 0x7f000000007b is the start of no block; it is taken as the completion "
            "of the free of block 0x7f0000000000 (4194304 B) requested at entry 7, which has no other completion");
  EXPECT_TRUE(h.starts_empty());
  // after entry 8 the block at A is gone in both: the same layout entry by entry
  const MemoryHistory hg = MemoryHistory::load(good, 0);
  for (int64_t i = 0; i < h.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(h.allocated_after(i), hg.allocated_after(i));
    EXPECT_EQ(h.figures(h.state_at(i)).free_in_segments, hg.figures(hg.state_at(i)).free_in_segments);
  }
  // the import's counters over time agree
  const auto tb = bad.memory_timeline();
  const auto tg = good.memory_timeline();
  ASSERT_EQ(tb.size(), tg.size());
  for (size_t i = 0; i < tb.size(); ++i) {
    EXPECT_EQ(tb[i].allocated, tg[i].allocated);
    EXPECT_EQ(tb[i].active, tg[i].active);
    EXPECT_EQ(tb[i].largest_free_block, tg[i].largest_free_block);
  }
}

TEST(Mem59bMisaddressedFree, AGenuinelyMidWayTraceIsStillMidWay) {
  const auto sum = m59b_import("midway_p4.pickle", "mem59b_midway.db");
  EXPECT_FALSE(sum.starts_at_process_start);
  EXPECT_TRUE(sum.problems.empty());
  SessionReader r(scratch_db("mem59b_midway.db"));
  for (int32_t rank : MemoryHistory::ranks_with_history(r)) {
    const MemoryHistory h = MemoryHistory::load(r, rank);
    EXPECT_TRUE(h.problems().empty());
    EXPECT_FALSE(h.starts_empty());
  }
}

TEST(Mem59bMisaddressedFree, ReplayMemoryFreesTheBlockAsTheImportDoes) {
  // replay-memory's table and OOM explanations equal the uncorrupted trace's; only its first line
  // (the file) and the problem paragraph differ
  auto run = [](const std::string& fixture) {
    const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "replay-memory " + m59b_snap(fixture), import_scratch());
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    std::string out = r.out.substr(r.out.find('\n') + 1);
    if (const auto p = out.find("\n1 entry contradicts"); p != std::string::npos) out.erase(p, out.find("\n\n", p + 1) + 1 - p);
    return out;
  };
  const std::string good = run("tester59_mine.pickle");
  EXPECT_NE(good.find("direct                                         16.0 MiB       16.0 MiB"), std::string::npos) << good;
  EXPECT_NE(good.find("18.0 MiB are free"), std::string::npos) << good;
  EXPECT_EQ(run("tester59_badfree.pickle"), good);
}
