// A rebalanced session in the summary (issue 17): the plan at each step from the run's first plan
// and its live rebalances' changes, when each rank's memory peaked, and the sharding plan model
// showing the plan the run ended with and comparing each rank's peak with the estimate of the
// plan in force then - not with the first plan's (a move that gave rank 0 a table read "the plan
// under-estimated the measured peak" before).
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QLabel>
#include <QtTest/QtTest>

#include <filesystem>
#include <set>

#include "core/plan_history.h"
#include "core/rebalance_marks.h"
#include "embedscope/engine/rebalance/reshard.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "engine/rebalance/straggler_workload.h"
#include "jobs/analysis_job.h"
#include "models/sharding_plan_model.h"
#include "views/compare_view.h"
#include "views/summary_view.h"
#include "ui/support/ui_fixtures.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {

// t0 (10 x 4) and t1 (8 x 4) table_wise on rank 0; from step 2 t0 on rank 1 and t1 row_wise,
// rows 0-3 on rank 0 and 4-7 on rank 1 (rows and columns as files before schema 9 give them: -1).
std::vector<sessions::ShardRecord> ph_initial() {
  return {{0, "t0", "table_wise", -1, 0, 0, 0, 10, 0, 4, 160}, {1, "t1", "table_wise", -1, 0, 0, 0, 8, 0, 4, 128}};
}
std::vector<sessions::PlanChangeRecord> ph_changes() {
  return {{2, 1, "t1", 1, 0, 1, 16, "table_wise", "row_wise", 4, 4, 0, -1},
          {2, 0, "t0", 0, 0, 1, 40, "table_wise", "table_wise", 0, 10, 0, 4},
          {2, 1, "t1", 0, 0, 0, 0, "table_wise", "row_wise", 0, 4, 0, -1}};
}

// The straggler workload (c0..c2 on ranks 0..2, the four hot tables on rank 3 under the greedy
// plan) with h1 moved to rank 0 after measured step 1, written with `counters`.
struct PhStraggler {
  engine::WorkloadSpec spec;
  engine::ShardingPlan initial, final_plan;
  std::string path;
};
PhStraggler ph_straggler(const std::string& file, const std::vector<sessions::MemoryCounter>& counters) {
  PhStraggler s;
  s.spec = engine::parse_workload(test_support::straggler_workload("straggler"), "straggler");
  s.initial = engine::plan_sharding(s.spec);
  s.final_plan = s.initial;
  s.final_plan.tables[4].shards[0].rank = 0;  // h1
  s.path = fixtures::scratch(file).string();
  std::filesystem::remove(s.path);
  sessions::SessionWriter w(s.path);
  w.set_metadata("world_size", "4");
  w.set_metadata("workload_json", engine::to_json(s.spec).dump());
  std::vector<sessions::ShardRecord> shards;
  for (const auto& tp : s.initial.tables)
    for (size_t i = 0; i < tp.shards.size(); ++i) {
      const auto& sh = tp.shards[i];
      shards.push_back({tp.table, s.spec.tables[static_cast<size_t>(tp.table)].name, "table_wise", -1,
                        static_cast<int32_t>(i), sh.rank, sh.row_offset, sh.num_rows, sh.col_offset, sh.num_cols, -1});
    }
  w.add_shards(shards);
  sessions::RebalanceRecord rb;
  rb.step = 1;
  rb.reason = "every 2 steps";
  rb.moves = 1;
  rb.bytes_moved = 16000;
  rb.window_steps = 2;
  rb.imbalance_before = 3.556;
  rb.imbalance_predicted = 3.0;
  rb.imbalance_after = 3.0;
  rb.after_steps = 2;
  w.add_rebalances({rb}, {{2, 4, "h1", 0, 3, 0, 16000, "table_wise", "table_wise", 0, 500, 0, 8}});
  for (int r = 0; r < 4; ++r)
    for (int st = 0; st < 4; ++st) w.add_step({st, r, st * 1000, st * 1000 + 900, 0.5, 0, 0});
  for (const auto& c : counters) w.add_memory(c);
  w.close("complete");
  return s;
}

sessions::MemoryCounter ph_counter(int64_t step, int32_t rank, int64_t peak) {
  sessions::MemoryCounter c;
  c.step = step;
  c.rank = rank;
  c.allocated = peak;
  c.reserved = peak;
  c.peak_allocated = peak;
  c.peak_reserved = peak;
  return c;
}

}  // namespace

TEST(PlanHistory, ShardsAtAStepApplyTheChangesUpToIt) {
  const auto before = shards_at(ph_initial(), ph_changes(), 1);
  ASSERT_EQ(before.size(), 2u);
  EXPECT_EQ(before[0].rank, 0);
  EXPECT_EQ(before[1].sharding_type, "table_wise");
  const auto after = shards_at(ph_initial(), ph_changes(), 2);
  ASSERT_EQ(after.size(), 3u);
  EXPECT_EQ(after[0].table_name, "t0");
  EXPECT_EQ(after[0].rank, 1);
  EXPECT_EQ(after[0].sharding_type, "table_wise");
  for (size_t i : {1u, 2u}) {
    EXPECT_EQ(after[i].table_name, "t1");
    EXPECT_EQ(after[i].sharding_type, "row_wise");
    EXPECT_EQ(after[i].shard_index, static_cast<int>(i) - 1);  // in shard order
    EXPECT_EQ(after[i].rank, static_cast<int>(i) - 1);
    EXPECT_EQ(after[i].row_offset, (static_cast<int>(i) - 1) * 4);
    EXPECT_EQ(after[i].num_rows, 4);
    EXPECT_EQ(after[i].num_cols, 4);  // -1: the table's columns
  }
  EXPECT_EQ(shards_at(ph_initial(), {}, 5).size(), 2u);
}

TEST(PlanHistory, PeakStepIsTheFirstStepWhoseRunningPeakGotThere) {
  const std::vector<sessions::MemoryCounter> c = {ph_counter(2, 1, 20), ph_counter(0, 1, 10), ph_counter(1, 1, 12),
                                                  ph_counter(3, 1, 20), ph_counter(0, 0, 99)};
  EXPECT_EQ(peak_step(c, 1, 20), std::optional<int64_t>(2));
  EXPECT_EQ(peak_step(c, 1, 12), std::optional<int64_t>(1));
  EXPECT_EQ(peak_step(c, 0, 99), std::optional<int64_t>(0));
  EXPECT_FALSE(peak_step(c, 1, 21));
  EXPECT_FALSE(peak_step(c, 2, 1));
}

// Every rank's peak is the first plan's estimate until the move after step 1, which adds its new
// shards and all-to-all buffers (rank 0 receives h1, rank 3 sends it), and step 1's counter is
// the one after the move: the peaks equal the plan before plus the move, so no rank is flagged
// (against the first plan's estimate rank 0 was); the plan shown is the final one.
TEST(PlanHistory, SummaryPlanIsTheFinalOneAndAPeakInTheMoveIsNotUnderPlanned) {
  const auto spec = engine::parse_workload(test_support::straggler_workload("straggler"), "straggler");
  const auto initial = engine::plan_sharding(spec);
  ASSERT_EQ(initial.tables[4].shards[0].rank, 3);  // h1 on the straggler
  auto final_plan = initial;
  final_plan.tables[4].shards[0].rank = 0;
  const auto est = engine::estimate_memory(spec, initial), est_final = engine::estimate_memory(spec, final_plan);
  const auto move = engine::rebalance::move_transient_bytes(spec, initial, final_plan);
  ASSERT_GT(move[0].total(), 0);
  ASSERT_GT(est_final[0].total(), est[0].total());
  std::vector<sessions::MemoryCounter> counters;
  for (int r = 0; r < 4; ++r) {  // step 1's counter is written after the move (it replaces the step's end)
    const int64_t first = est[static_cast<size_t>(r)].total(), moved = first + move[static_cast<size_t>(r)].total();
    for (int st = 0; st < 4; ++st) counters.push_back(ph_counter(st, r, st < 1 ? first : moved));
  }
  const PhStraggler s = ph_straggler("ph_move.db", counters);
  sessions::SessionReader reader(s.path);
  const sessions::RunStats st = sessions::analyze(reader);
  ShardingPlanModel m(reader, st);
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  EXPECT_EQ(m.plan_changes(), 1);
  ASSERT_EQ(m.ranks().size(), 4u);
  std::set<std::string> rank0;
  for (const auto& sh : m.ranks()[0].shards) rank0.insert(sh.table);
  EXPECT_EQ(rank0, (std::set<std::string>{"c0", "h1"}));  // the final plan
  EXPECT_EQ(m.ranks()[3].shards.size(), 3u);
  EXPECT_EQ(m.ranks()[0].planned_bytes, est_final[0].total());
  EXPECT_EQ(m.ranks()[0].peak_bytes, est[0].total() + move[0].total());
  EXPECT_EQ(m.ranks()[0].peak_planned_bytes, est[0].total() + move[0].total());
  EXPECT_TRUE(m.under_planned().empty());
  const QString tip = m.data(m.index(0, ShardingPlanModel::PeakMemory), Qt::ToolTipRole).toString();
  EXPECT_TRUE(tip.contains("step 1 or the live rebalance's move after it")) << tip.toStdString();
  const QString peak = m.data(m.index(0, ShardingPlanModel::PeakMemory)).toString();
  EXPECT_TRUE(peak.endsWith("(at the move after step 1)")) << peak.toStdString();
  EXPECT_FALSE(peak.contains("over the plan"));
}

// Rank 0's peak comes in step 3, 1 MiB above the final plan's estimate: flagged against that
// plan (not the first one), and its tooltip says when.
TEST(PlanHistory, APeakAfterTheMoveIsComparedWithThePlanInForce) {
  const auto spec = engine::parse_workload(test_support::straggler_workload("straggler"), "straggler");
  const auto initial = engine::plan_sharding(spec);
  auto final_plan = initial;
  final_plan.tables[4].shards[0].rank = 0;
  const auto est = engine::estimate_memory(spec, initial), est_final = engine::estimate_memory(spec, final_plan);
  std::vector<sessions::MemoryCounter> counters;
  for (int r = 0; r < 4; ++r)
    for (int st = 0; st < 4; ++st)
      counters.push_back(ph_counter(st, r, r == 0 && st == 3 ? est_final[0].total() + (1 << 20) : est[static_cast<size_t>(r)].total()));
  const PhStraggler s = ph_straggler("ph_after.db", counters);
  sessions::SessionReader reader(s.path);
  const sessions::RunStats st = sessions::analyze(reader);
  ShardingPlanModel m(reader, st);
  EXPECT_EQ(m.under_planned(), (std::vector<int>{0}));
  EXPECT_EQ(m.ranks()[0].peak_planned_bytes, est_final[0].total());
  const QModelIndex peak0 = m.index(0, ShardingPlanModel::PeakMemory);
  EXPECT_TRUE(m.data(peak0).toString().endsWith("(+1.0 MiB over the plan)")) << m.data(peak0).toString().toStdString();
  EXPECT_TRUE(m.data(peak0, Qt::ToolTipRole).toString().contains("step 3, under the plan in force from step 2"));
  // rank 1's peak came in step 0, before the move, but the move left its estimate alone: its peak
  // is compared with the figure shown, without "(under an earlier plan)" (tester32 D12); rank 3
  // gave h1 away, so its step-0 peak was under a plan with more on it
  ASSERT_EQ(est[1].total(), est_final[1].total());
  ASSERT_NE(est[3].total(), est_final[3].total());
  const QString peak1 = m.data(m.index(1, ShardingPlanModel::PeakMemory)).toString();
  EXPECT_FALSE(peak1.contains("earlier plan")) << peak1.toStdString();
  EXPECT_TRUE(m.data(m.index(1, ShardingPlanModel::PeakMemory), Qt::ToolTipRole).toString().contains("step 0, under the plan the run started with"));
  const QString peak3 = m.data(m.index(3, ShardingPlanModel::PeakMemory)).toString();
  EXPECT_TRUE(peak3.contains("(under an earlier plan)")) << peak3.toStdString();
}

// Without memory counters the moment of the peak is unknown: a rebalanced run's peak is not
// compared with any plan (and says so), rather than with the first one.
TEST(PlanHistory, WithoutCountersARebalancedPeakIsNotCompared) {
  const PhStraggler s = ph_straggler("ph_none.db", {});
  sessions::SessionReader reader(s.path);
  sessions::RunStats st = sessions::analyze(reader);
  ASSERT_EQ(st.ranks.size(), 4u);
  for (auto& r : st.ranks) r.peak_allocated_bytes = 1LL << 40;
  ShardingPlanModel m(reader, st);
  EXPECT_TRUE(m.under_planned().empty());
  EXPECT_EQ(m.ranks()[0].peak_planned_bytes, -1);
  EXPECT_TRUE(m.data(m.index(0, ShardingPlanModel::PeakMemory), Qt::ToolTipRole).toString().contains("not compared"));
}

// The Compare view's line on a run's rebalances (its figures span both plans).
TEST(PlanHistory, RebalancesBriefSaysWhatEachMoveDid) {
  sessions::RebalanceRecord moved, idle;
  moved.step = 2;
  moved.moves = 3;
  moved.imbalance_before = 3.914;
  moved.imbalance_predicted = 1.1;
  moved.imbalance_after = 1.006;
  idle.step = 5;
  EXPECT_EQ(rebalances_brief({}, false), "");
  EXPECT_EQ(rebalances_brief({moved}, false), "live rebalance after step 2: 3 table(s) moved, ids max/mean 3.91 -> 1.01 "
                                              "observed after");
  moved.imbalance_after = -1;
  EXPECT_EQ(rebalances_brief({moved, idle}, true), "live rebalance after step 2: 3 table(s) moved, lookup ns max/mean 3.91 "
                                                   "-> 1.10 predicted (and 1 firing(s) that moved nothing)");
  EXPECT_EQ(rebalances_brief({idle, idle}, false), "live rebalancing: 2 firing(s), none moved a table");
}

// The summary page of the rebalanced session: the rebalance under the run's figures, the plan's
// caption saying it is the final plan, and no "under-estimated" banner (the peaks are those of
// the plan in force, plus the move).
TEST(PlanHistory, SummaryPageOfARebalancedRun) {
  const auto spec = engine::parse_workload(test_support::straggler_workload("straggler"), "straggler");
  const auto initial = engine::plan_sharding(spec);
  auto final_plan = initial;
  final_plan.tables[4].shards[0].rank = 0;
  const auto est = engine::estimate_memory(spec, initial);
  const auto move = engine::rebalance::move_transient_bytes(spec, initial, final_plan);
  std::vector<sessions::MemoryCounter> counters;
  for (int r = 0; r < 4; ++r)
    for (int st = 0; st < 4; ++st)
      counters.push_back(ph_counter(st, r, est[static_cast<size_t>(r)].total() + (st >= 1 ? move[static_cast<size_t>(r)].total() : 0)));
  const PhStraggler s = ph_straggler("ph_summary.db", counters);
  SummaryView view(std::make_shared<sessions::SessionReader>(s.path));
  QTRY_VERIFY_WITH_TIMEOUT(!view.job()->busy(), 20000);
  QString all;
  for (const QLabel* l : view.findChildren<QLabel*>()) all += l->text() + "\n";
  EXPECT_TRUE(all.contains("live rebalance after step 1: 1 table(s) moved, ids max/mean 3.56 -&gt; 3.00 observed after"))
      << all.toStdString();
  EXPECT_FALSE(all.contains("under-estimated")) << all.toStdString();
  const QLabel* caption = view.findChild<QLabel*>("sharding_plan_caption");
  ASSERT_NE(caption, nullptr);
  EXPECT_TRUE(caption->text().contains("Sharding plan as the run ended</b>, after 1 live rebalance(s)"))
      << caption->text().toStdString();
}

// The median step time around each move follows the brief, in the summary and in Compare, which
// lacked it (tester32 D12): only rebalances that moved tables and have measured steps on both sides.
TEST(PlanHistory, RebalanceStepTimesFollowTheBriefInCompareToo) {
  sessions::RebalanceEffect moved, idle, unmeasured;
  moved.rebalance.step = 2;
  moved.rebalance.moves = 3;
  moved.step_p50_before_ns = 159'060'000;
  moved.step_p50_after_ns = 143'260'000;
  idle.rebalance.step = 4;  // moved nothing: its steps ran the same plan
  idle.step_p50_before_ns = idle.step_p50_after_ns = 1'000;
  unmeasured.rebalance.step = 6;  // no measured step after it
  unmeasured.rebalance.moves = 1;
  unmeasured.step_p50_before_ns = 2'000;
  auto later = moved;
  later.rebalance.step = 8;
  later.step_p50_after_ns = 100'000;
  EXPECT_EQ(rebalance_step_times({}), "");
  EXPECT_EQ(rebalance_step_times({idle, unmeasured}), "");
  EXPECT_EQ(rebalance_step_times({moved, idle, unmeasured, later}),
            "; median step after step 2 159.06 ms -> 143.26 ms, after step 8 159.06 ms -> 100.0 us");

  // ph_straggler's steps take 900 ns on every rank, before and after the move after step 1
  const PhStraggler s = ph_straggler("ph_compare.db", {});
  auto reader = std::make_shared<sessions::SessionReader>(s.path);
  EXPECT_EQ(rebalances_brief(*reader),
            "live rebalance after step 1: 1 table(s) moved, ids max/mean 3.56 -> 3.00 observed after; median step after "
            "step 1 900 ns -> 900 ns");
  CompareView view({{"greedy", reader}, {"live", reader}});
  ASSERT_TRUE(wait_for_analyses(&view));
  QString all;
  for (const QLabel* l : view.findChildren<QLabel*>()) all += l->text() + "\n";
  EXPECT_TRUE(all.contains("<b>live</b>: live rebalance after step 1: 1 table(s) moved, ids max/mean 3.56 -&gt; 3.00 "
                           "observed after; median step after step 1 900 ns -&gt; 900 ns"))
      << all.toStdString();
}
