// Every older schema version stays readable: the session files under tests/data/sessions/ were
// written with the DDL of schema versions 1, 2, 3 and 4 (make_old_sessions.py beside them, which
// copies it from the writer of each version) and hold a small hand-chosen run.
#include <gtest/gtest.h>

#include <string>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::sessions;

namespace {

std::string old_file(int version) { return std::string(EMBEDSCOPE_TEST_DATA) + "/sessions/v" + std::to_string(version) + ".db"; }

class OldSchema : public ::testing::TestWithParam<int> {};

TEST_P(OldSchema, OpensAndReadsEveryTableItHas) {
  const int v = GetParam();
  SessionReader r(old_file(v));
  EXPECT_EQ(r.schema_version(), v);
  EXPECT_EQ(r.status(), "complete");
  EXPECT_EQ(r.meta(meta::kWorkloadName), "old_tiny");
  EXPECT_EQ(r.meta(meta::kWorldSize), "2");
  EXPECT_EQ(r.meta(meta::kToolVersion), "0.0." + std::to_string(v));

  const auto ranks = r.ranks();
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[1].rank, 1);
  EXPECT_EQ(ranks[1].device, "cpu (thread)");
  EXPECT_EQ(ranks[1].memory_capacity_bytes, int64_t{1} << 30);
  const auto lanes = r.lanes();
  ASSERT_EQ(lanes.size(), 4u);
  EXPECT_EQ(lanes[1].rank, 0);
  EXPECT_EQ(lanes[1].lane, 1);
  EXPECT_EQ(lanes[1].name, "comm");
  EXPECT_EQ(lanes[1].kind, "thread");

  EXPECT_EQ(r.op_count(), 12);
  const auto ops = r.ops(0, 0, 1250, 1350);  // rank 0 compute, step 0: lookup [1200,1300), dense [1300,1600)
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].category, OpCategory::lookup);
  EXPECT_EQ(r.name(ops[0].name_id), "lookup");
  EXPECT_EQ(ops[0].start_ns, 1200);
  EXPECT_EQ(ops[0].end_ns, 1300);
  EXPECT_EQ(ops[1].category, OpCategory::dense);
  EXPECT_EQ(r.name(ops[1].name_id), "dense_forward_backward");
  const auto comm = r.ops(1, 1, 0, 2000);
  ASSERT_EQ(comm.size(), 2u);
  EXPECT_EQ(comm[1].step, 0);
  EXPECT_EQ(comm[1].bytes, 96);
  EXPECT_EQ(comm[1].correlation, 2u);

  const auto steps = r.steps();
  ASSERT_EQ(steps.size(), 4u);  // (step, rank)
  EXPECT_EQ(steps[0].step, -1);
  EXPECT_DOUBLE_EQ(steps[0].loss, 0.6931);
  EXPECT_EQ(steps[3].step, 0);
  EXPECT_EQ(steps[3].rank, 1);
  EXPECT_EQ(steps[3].end_ns, 1700);
  EXPECT_EQ(steps[3].memory_peak_bytes, 8193);

  const auto load = r.load();
  ASSERT_EQ(load.size(), 3u);  // (step, rank, table, shard)
  EXPECT_EQ(load[0].rank, 0);
  EXPECT_EQ(load[0].table, 1);
  EXPECT_EQ(load[0].ids, 40);
  EXPECT_EQ(load[1].rank, 1);
  EXPECT_EQ(load[1].table, 0);
  EXPECT_EQ(load[1].lookup_ns, 90);
  EXPECT_EQ(load[2].shard, 1);
  EXPECT_EQ(load[2].unique_ids, 31);

  const auto coll = r.collectives();
  ASSERT_EQ(coll.size(), 4u);
  EXPECT_EQ(coll[0].op, "all_to_all");
  EXPECT_EQ(coll[0].group, "world");
  EXPECT_EQ(coll[0].sequence, 1u);
  EXPECT_EQ(coll[3].rank, 1);
  EXPECT_EQ(coll[3].peers, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(coll[3].send_elements, (std::vector<int64_t>{3, 6}));

  const RunStats st = analyze(r);
  ASSERT_EQ(st.ranks.size(), 2u);
  EXPECT_EQ(st.steps, 1);  // the measured step
  EXPECT_EQ(st.ranks[0].compute_ns, 400);
  EXPECT_EQ(st.ranks[0].comm_ns, 150);

  // memory tables: version 2
  if (v < 2) {
    EXPECT_TRUE(r.memory_counters().empty());
    EXPECT_TRUE(r.memory_events().empty());
    EXPECT_TRUE(r.memory_snapshots().empty());
  } else {
    const auto mc = r.memory_counters();
    ASSERT_EQ(mc.size(), 2u);
    EXPECT_EQ(mc[1].allocated, 3001);
    EXPECT_EQ(mc[1].reserved, 4096);
    EXPECT_DOUBLE_EQ(mc[1].memviz_fragmentation, 0.125);
    const auto ev = r.memory_events();
    ASSERT_EQ(ev.size(), 4u);
    EXPECT_EQ(ev[1].action, "alloc");
    EXPECT_EQ(ev[1].requested, 3000);
    EXPECT_EQ(ev[1].tag, "weights");
    const auto snaps = r.memory_snapshots();
    ASSERT_EQ(snaps.size(), 1u);
    EXPECT_EQ(snaps[0].rank, 1);
    EXPECT_EQ(snaps[0].reason, "step");
    const auto blocks = r.memory_blocks(snaps[0].id);
    ASSERT_EQ(blocks.size(), 2u);
    EXPECT_EQ(blocks[0].requested, 3001);
    EXPECT_TRUE(blocks[0].allocated);
    EXPECT_EQ(blocks[1].address, 7168);
    EXPECT_FALSE(blocks[1].allocated);
  }
  // id histogram: version 3
  EXPECT_EQ(r.has_id_histogram(), v >= 3);
  const auto h = r.id_histogram();
  if (v < 3) {
    EXPECT_TRUE(h.empty());
  } else {
    ASSERT_EQ(h.size(), 3u);  // (table, bucket, rank)
    EXPECT_EQ(h[0].table, 0);
    EXPECT_EQ(h[0].bucket, 99);
    EXPECT_EQ(h[0].row_begin, 99);
    EXPECT_EQ(h[0].ids, 5);
    EXPECT_EQ(h[2].rank, 1);
    EXPECT_EQ(h[2].ids, 2);
  }
  // shards: no table before version 4, built from sharding_plan_json
  EXPECT_EQ(r.has_shards_table(), v >= 4);
  const auto shards = r.shards();
  ASSERT_EQ(shards.size(), 3u);
  EXPECT_EQ(shards[0].table, 0);
  EXPECT_EQ(shards[0].table_name, "t_user");
  EXPECT_EQ(shards[0].sharding_type, "table_wise");
  EXPECT_EQ(shards[0].rank, 1);
  EXPECT_EQ(shards[0].num_rows, 100);
  EXPECT_EQ(shards[0].num_cols, 8);
  EXPECT_EQ(shards[0].node, -1);
  EXPECT_EQ(shards[0].planned_bytes, v >= 4 ? 6400 : -1);
  EXPECT_EQ(shards[2].table, 1);
  EXPECT_EQ(shards[2].shard_index, 1);
  EXPECT_EQ(shards[2].sharding_type, "row_wise");
  EXPECT_EQ(shards[2].row_offset, 500);
  EXPECT_EQ(shards[2].num_rows, 500);
  EXPECT_EQ(shards[2].num_cols, 16);
  EXPECT_EQ(shards[2].planned_bytes, v >= 4 ? 64000 : -1);
  // import_stats: version 5; older files read as empty
  EXPECT_TRUE(r.import_stats().empty());
}

INSTANTIATE_TEST_SUITE_P(Versions, OldSchema, ::testing::Values(1, 2, 3, 4),
                         [](const auto& p) { return std::string("v").append(std::to_string(p.param)); });

}  // namespace
