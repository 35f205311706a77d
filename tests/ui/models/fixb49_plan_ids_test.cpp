// tester49 F3 and F8a: the workbench's Sharding plan credits each step's ids to the shard that
// served them. A live rebalance that splits a table_wise table row_wise after step 1 leaves the
// table_wise shard its ids of steps 0-1 (a row of its own, "until step 1") and the new row_wise
// shards count from step 2; a rank's hot-row replica has a row of its own with the ids it served,
// and the Load view names it. Sessions written by hand, every figure hand-computed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QAbstractItemModelTester>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "embedscope/engine/input/input.h"
#include "embedscope/engine/input/source.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/load_imbalance.h"
#include "embedscope/sessions/model/events.h"
#include "embedscope/sessions/model/hot_row_replica.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "models/sharding_plan_model.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
namespace eng = embedscope::engine;
namespace ss = embedscope::sessions;
using embedscope::ui::ShardingPlanModel;

fs::path fixb49_db(const std::string& name) {
  auto p = fs::temp_directory_path() / ("es_fixb49_" + name + "_" + std::to_string(getpid()) + ".db");
  fs::remove(p);
  return p;
}

// Steps 0..3 on 2 ranks (one dense op and one step window each), the tiny preset's workload.
void fixb49_steps(ss::SessionWriter& w) {
  w.set_metadata("world_size", "2");
  w.set_metadata("workload_json", eng::to_json(eng::load_preset("tiny")).dump());
  for (int64_t s = 0; s < 4; ++s) {
    const int64_t t = 1000 + 100 * s;
    for (int32_t r = 0; r < 2; ++r) {
      w.add_ops({{r, ss::Lane::compute, ss::OpCategory::dense, "dense", s, t, t + 100}});
      w.add_step({s, r, t, t + 100, 0.5, 0, 0});
    }
  }
}

void fixb49_load(ss::SessionWriter& w, int64_t step, int32_t rank, int32_t table, int32_t shard, int64_t ids) {
  ss::LoadCounter c;
  c.step = step;
  c.rank = rank;
  c.table = table;
  c.shard = shard;
  c.ids = ids;
  c.bytes_in = ids * 8;
  w.add_load(c);
}

const ShardingPlanModel::ShardRow* fixb49_row(const ShardingPlanModel::RankRow& r, const std::string& table, int shard,
                                              bool former) {
  for (const auto& s : r.shards)
    if (s.table == table && s.shard == shard && s.former() == former) return &s;
  return nullptr;
}

}  // namespace

// tester49 F4: the tiny preset (no warm-up) under semi_sync: step 0 looked up batch 0 (the
// pipeline's fill) and batch 1, so the Sharding plan's and stats' ids held one batch too many.
// Step s now holds batch s + 1's ids (the fill is recorded as step -1), and the plan's ranks count
// steps 0-1 (2 and 3 drain the pipeline) as stats does: batches 1 and 2, counted from the batches.
TEST(Fixb49PlanIds, SemiSyncWithoutWarmupCountsOneBatchAStep) {
  const fs::path dir = fs::temp_directory_path() / ("es_fixb49_w0_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path db = dir / "semi.db";
  const auto r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "run --preset tiny --pipeline semi_sync --steps 4 -o " + db.string() + " --force-overwrite", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  eng::WorkloadSpec spec = eng::load_preset("tiny");
  spec.steps = 4;
  ASSERT_EQ(spec.warmup_steps, 0);
  const auto src = eng::make_batch_source(spec);
  std::vector<int64_t> batch(4, 0);  // ids of each iteration's batch, both ranks
  for (int64_t it = 0; it < 4; ++it)
    for (int q = 0; q < 2; ++q) batch[static_cast<size_t>(it)] += static_cast<int64_t>(src->make(it, q).kjt.values.size());
  ss::SessionReader rd(db.string());
  int64_t step0 = 0;
  for (const auto& c : rd.load())
    if (c.step == 0) step0 += c.ids;
  EXPECT_EQ(step0, batch[1]);
  const ss::RunStats st = ss::analyze(rd);
  ASSERT_EQ(st.drain_steps, 2);
  ShardingPlanModel m(rd, st);
  ASSERT_EQ(m.ranks().size(), 2u);
  EXPECT_EQ(m.ranks()[0].ids + m.ranks()[1].ids, batch[1] + batch[2]);
  EXPECT_EQ(st.ranks[0].ids_looked_up + st.ranks[1].ids_looked_up, batch[1] + batch[2]);
  fs::remove_all(dir);
}

// t_c (1000 rows x 12) table_wise on rank 0 and t_b (100 x 6) table_wise on rank 1 for steps 0-1;
// after step 1 a live rebalance splits t_c row_wise: rows 0-499 on rank 0 (shard 0), 500-999 on
// rank 1 (shard 1). Rank 0 looked up 100 t_c ids a step in steps 0-1 (table_wise #0), then 30 a
// step in row_wise #0; rank 1 70 a step in row_wise #1; t_b 10 a step on rank 1 throughout.
TEST(Fixb49PlanIds, ANewRowWiseShardCountsFromTheStepItExists) {
  const fs::path path = fixb49_db("split");
  {
    ss::SessionWriter w(path.string());
    fixb49_steps(w);
    w.add_shards({{3, "t_c", "table_wise", -1, 0, 0, 0, 1000, 0, 12, -1}, {2, "t_b", "table_wise", -1, 0, 1, 0, 100, 0, 6, -1}});
    ss::PlanChangeRecord c0{2, 3, "t_c", 0, 0, 0, 0, "table_wise", "row_wise", 0, 500, 0, 12};
    ss::PlanChangeRecord c1{2, 3, "t_c", 1, 0, 1, 500 * 12 * 4, "table_wise", "row_wise", 500, 500, 0, 12};
    ss::RebalanceRecord rb;
    rb.step = 1;
    rb.reason = "every 2 steps";
    rb.moves = 1;
    w.add_rebalances({rb}, {c0, c1});
    for (int64_t s = 0; s < 4; ++s) {
      if (s < 2) {
        fixb49_load(w, s, 0, 3, 0, 100);
      } else {
        fixb49_load(w, s, 0, 3, 0, 30);
        fixb49_load(w, s, 1, 3, 1, 70);
      }
      fixb49_load(w, s, 1, 2, 0, 10);
    }
    w.close("complete");
  }
  ss::SessionReader rd(path.string());
  const ss::RunStats st = ss::analyze(rd);
  ShardingPlanModel m(rd, st);
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  ASSERT_EQ(m.ranks().size(), 2u);
  const auto& r0 = m.ranks()[0];
  const auto& r1 = m.ranks()[1];
  // rank totals: every id the rank served, as stats counts it
  EXPECT_EQ(r0.ids, 2 * 100 + 2 * 30);
  EXPECT_EQ(r1.ids, 2 * 70 + 4 * 10);
  EXPECT_EQ(st.ranks[0].ids_looked_up, r0.ids);
  EXPECT_EQ(st.ranks[1].ids_looked_up, r1.ids);
  // the new row_wise shards: only the steps they served (before: row_wise #0 read 260)
  const auto* rw0 = fixb49_row(r0, "t_c", 0, false);
  ASSERT_NE(rw0, nullptr);
  EXPECT_EQ(rw0->type, "row_wise");
  EXPECT_EQ(rw0->ids, 2 * 30);
  EXPECT_EQ(rw0->bytes_in, 2 * 30 * 8);
  const auto* rw1 = fixb49_row(r1, "t_c", 1, false);
  ASSERT_NE(rw1, nullptr);
  EXPECT_EQ(rw1->ids, 2 * 70);
  // the table_wise shard keeps its ids of steps 0-1, on rank 0, holding no bytes now
  const auto* tw = fixb49_row(r0, "t_c", 0, true);
  ASSERT_NE(tw, nullptr);
  EXPECT_EQ(tw->type, "table_wise");
  EXPECT_EQ(tw->ids, 2 * 100);
  EXPECT_EQ(tw->served_until, 1);
  EXPECT_EQ(tw->num_rows, 1000);
  EXPECT_EQ(tw->weight_bytes, 0);
  const auto* tb = fixb49_row(r1, "t_b", 0, false);
  ASSERT_NE(tb, nullptr);
  EXPECT_EQ(tb->ids, 4 * 10);
  // the shard rows add up to the rank's figure: each id once
  for (const auto& r : m.ranks()) {
    int64_t sum = 0;
    for (const auto& s : r.shards) sum += s.ids;
    EXPECT_EQ(sum, r.ids) << "rank " << r.rank;
  }
  // what the tree shows: the former shard's type and last step; rank 0 holds one RW shard now
  const QModelIndex rank0 = m.index(0, 0);
  bool seen = false;
  for (int i = 0; i < m.rowCount(rank0); ++i)
    if (m.index(i, ShardingPlanModel::Sharding, rank0).data().toString() == "table_wise #0 (until step 1)") {
      seen = true;
      EXPECT_EQ(m.index(i, ShardingPlanModel::IdsLookedUp, rank0).data().toLongLong(), 200);
    }
  EXPECT_TRUE(seen);
  EXPECT_EQ(m.index(0, ShardingPlanModel::Sharding).data().toString(), "RW: 1");
  // the Load view: the table_wise shard #0 of steps 0-1 is a column of its own, not row_wise #0's
  const ss::LoadData d = ss::load_data(rd, ss::LoadMetric::ids_looked_up);
  EXPECT_EQ(d.shards, (std::vector<std::string>{"t_b #0", "t_c #0", "t_c #0 (table_wise to step 1)", "t_c #1"}));
  ASSERT_EQ(d.shards.size(), 4u);
  EXPECT_EQ(d.at_shard(0, 1), 60.0);
  EXPECT_EQ(d.at_shard(0, 2), 200.0);
  EXPECT_EQ(d.at_shard(1, 3), 140.0);
  EXPECT_EQ(d.at_shard(1, 0), 40.0);
  EXPECT_FALSE(d.holds(1, 2));
  fs::remove(path);
}

// t_b (100 x 6) row_wise over 2 ranks with hot rows: each rank also looked up 25 ids a step of its
// own batch in its hot-row replica (shard kHotRowReplicaShard), 5 and 15 a step in its shard.
TEST(Fixb49PlanIds, AHotRowReplicaHasTheIdsItServed) {
  const fs::path path = fixb49_db("hot");
  {
    ss::SessionWriter w(path.string());
    fixb49_steps(w);
    w.add_shards({{2, "t_b", "row_wise", -1, 0, 0, 0, 50, 0, 6, -1}, {2, "t_b", "row_wise", -1, 1, 1, 50, 50, 0, 6, -1}});
    for (int64_t s = 0; s < 4; ++s) {
      fixb49_load(w, s, 0, 2, 0, 5);
      fixb49_load(w, s, 1, 2, 1, 15);
      fixb49_load(w, s, 0, 2, ss::kHotRowReplicaShard, 25);
      fixb49_load(w, s, 1, 2, ss::kHotRowReplicaShard, 25);
    }
    w.close("complete");
  }
  ss::SessionReader rd(path.string());
  const ss::RunStats st = ss::analyze(rd);
  ShardingPlanModel m(rd, st);
  ASSERT_EQ(m.ranks().size(), 2u);
  EXPECT_EQ(m.ranks()[0].ids, 4 * (5 + 25));
  EXPECT_EQ(m.ranks()[1].ids, 4 * (15 + 25));
  EXPECT_EQ(st.ranks[0].ids_looked_up, 4 * (5 + 25));
  for (int r = 0; r < 2; ++r) {
    const auto* rep = fixb49_row(m.ranks()[static_cast<size_t>(r)], "t_b", ss::kHotRowReplicaShard, false);
    ASSERT_NE(rep, nullptr) << r;
    EXPECT_TRUE(rep->hot_row_replica());
    EXPECT_EQ(rep->ids, 4 * 25);
  }
  const QModelIndex rank1 = m.index(1, 0);
  ASSERT_EQ(m.rowCount(rank1), 2);
  EXPECT_EQ(m.index(1, ShardingPlanModel::Sharding, rank1).data().toString(), "hot-row replica");
  EXPECT_EQ(m.index(1, ShardingPlanModel::IdsLookedUp, rank1).data().toLongLong(), 100);
  EXPECT_EQ(m.index(1, ShardingPlanModel::Sharding).data().toString(), "RW: 1");  // the plan's shards
  // the Load view: a column "t_b hot rows" with each rank's replica ids
  const ss::LoadData d = ss::load_data(rd, ss::LoadMetric::ids_looked_up);
  size_t col = d.shards.size();
  for (size_t k = 0; k < d.shards.size(); ++k)
    if (d.shards[k] == "t_b hot rows") col = k;
  ASSERT_LT(col, d.shards.size());
  EXPECT_EQ(d.at_shard(0, col), 100.0);
  EXPECT_EQ(d.at_shard(1, col), 100.0);
  EXPECT_EQ(d.per_rank[0], 120.0);
  EXPECT_EQ(d.per_rank[1], 160.0);
  fs::remove(path);
}
