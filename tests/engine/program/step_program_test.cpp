// StepProgram: op sequences written out by hand for each sharding type and pipeline, and the
// program read against what the cpu executor records (span names per lane, collective records).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::engine;
using embedscope::sessions::Lane;

namespace {

WorkloadSpec tiny(int world, ShardingType type, PipelineKind pipeline = PipelineKind::base) {
  WorkloadSpec s = load_preset("tiny");
  s.devices.count = world;
  s.sharding.default_type = type;
  s.sharding.per_table.clear();
  if (type == ShardingType::table_row_wise || type == ShardingType::grid_shard ||
      type == ShardingType::table_column_wise)
    s.sharding.local_world_size = world >= 4 ? 2 : 1;
  s.pipeline = pipeline;
  s.steps = 4;
  return s;
}

// "name@batch" per op on one lane, or every op when lane is absent.
std::vector<std::string> names(const StepProgram& p, std::optional<Lane> lane = std::nullopt) {
  std::vector<std::string> out;
  for (const auto& op : p.ops)
    if (!lane || op.lane == *lane) out.push_back(op.batch ? op.name + "@" + std::to_string(op.batch) : op.name);
  return out;
}

const ProgramOp& op_named(const StepProgram& p, const std::string& name) {
  for (const auto& op : p.ops)
    if (op.name == name) return op;
  throw std::runtime_error("no op " + name);
}

const std::vector<std::string> kInput = {"input", "bucketize", "input_dist/splits", "input_dist/lengths",
                                         "input_dist/ids"};

}  // namespace

// The issue's example: tiny, 2 ranks, table_wise, base. t_c (48 KB) goes to rank 0, the three
// small tables to rank 1 (greedy by bytes).
TEST(StepProgram, TinyTableWiseBaseRank0ByHand) {
  const WorkloadSpec s = tiny(2, ShardingType::table_wise);
  const StepProgram p = build_step_program(s, plan_sharding(s), 0, 0);
  EXPECT_EQ(names(p), (std::vector<std::string>{"input", "bucketize", "input_dist/splits", "input_dist/lengths",
                                                "input_dist/ids", "kjt_permute", "lookup", "output_dist/all_to_all",
                                                "dense_forward_backward", "dense_all_reduce", "grad_dist/all_to_all",
                                                "backward_fused_optimizer", "dense_optimizer"}));
  // the input dist: 3 all-to-alls over the world, all before any lookup
  for (int id = 2; id <= 4; ++id) {
    ASSERT_EQ(p.ops[id].collectives.size(), 2u);  // the split check, then the all-to-all
    EXPECT_EQ(p.ops[id].collectives[0].name, p.ops[id].name + "/split_check");
    EXPECT_EQ(p.ops[id].collectives[0].send_elements, (std::vector<int64_t>{4, 4}));  // 2 x 2 counts
    EXPECT_EQ(p.ops[id].collectives.back().kind, CollectiveKind::all_to_all);
    EXPECT_EQ(p.ops[id].collectives.back().group, "world");
    EXPECT_EQ(p.ops[id].lane, Lane::comm);
  }
  // splits: one count per (shard, feature) bucket: rank 0 holds f_c (1), rank 1 f_small, f_a,
  // f_b0, f_b1 (4); this rank receives its 1 bucket from each rank
  EXPECT_EQ(p.ops[2].collectives.back().send_elements, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(p.ops[2].collectives.back().recv_elements, (std::vector<int64_t>{1, 1}));
  // lengths: B = 8 per bucket
  EXPECT_EQ(p.ops[3].collectives.back().send_elements, (std::vector<int64_t>{8, 32}));
  EXPECT_EQ(p.ops[3].collectives.back().bytes_sent(), 32 * 8);  // own slice not counted
  // ids: f_c 8 x 2 = 16 (fixed); to rank 1: f_small 8 + f_a 16 + f_b0/f_b1 2 x 24 (Poisson: expected)
  EXPECT_EQ(p.ops[4].collectives.back().send_elements, (std::vector<int64_t>{16, 72}));
  EXPECT_FALSE(p.ops[4].collectives.back().exact);
  EXPECT_TRUE(p.ops[3].collectives.back().exact);
  // output dist: rank 0 sends B x 12 columns to each rank, receives B x (4 + 8 + 6 + 6) from rank 1
  EXPECT_EQ(p.ops[7].collectives.back().send_elements, (std::vector<int64_t>{96, 96}));
  EXPECT_EQ(p.ops[7].collectives.back().recv_elements, (std::vector<int64_t>{96, 192}));
  EXPECT_EQ(p.ops[7].collectives.back().dtype, "float32");
  // the DDP bucket is queued from inside the backward pass, and comes after it on the comm lane
  EXPECT_EQ(p.ops[9].launched_by, 8);
  EXPECT_EQ(p.ops[9].waits_for, (std::vector<int>{7}));
  EXPECT_GT(p.ops[9].id, op_named(p, "dense_forward_backward").id);
  // dependencies: lanes in order plus the cross-lane edges
  EXPECT_EQ(p.ops[2].waits_for, (std::vector<int>{1}));     // the splits wait for bucketize
  EXPECT_EQ(p.ops[5].waits_for, (std::vector<int>{1, 4}));  // kjt_permute for the ids
  EXPECT_EQ(p.ops[8].waits_for, (std::vector<int>{6, 7}));  // dense for the output dist
  EXPECT_EQ(p.ops[10].waits_for, (std::vector<int>{9, 8})); // grad dist after the bucket and dense
  EXPECT_EQ(p.ops[12].waits_for, (std::vector<int>{11, 9}));
  EXPECT_EQ(op_named(p, "lookup").rows, 32);  // f_c: 8 bags x 2 ids from each of the 2 ranks
}

TEST(StepProgram, EachShardingTypeBaseByHand) {
  const std::vector<std::string> tail = {"dense_forward_backward", "dense_all_reduce"};
  struct Case {
    ShardingType type;
    int world;
    std::vector<std::string> comm;     // comm lane
    std::vector<std::string> compute;  // compute lane
  };
  const std::vector<std::string> compute_sharded = {"input", "bucketize", "kjt_permute", "lookup",
                                                    "dense_forward_backward", "backward_fused_optimizer",
                                                    "dense_optimizer"};
  std::vector<std::string> dp_compute = {"input", "bucketize", "kjt_permute", "lookup", "dense_forward_backward",
                                         "backward_fused_optimizer"};
  for (int t = 0; t < 4; ++t)
    for (const char* n : {"backward_data_parallel", "optimizer_data_parallel"}) dp_compute.push_back(n);
  dp_compute.push_back("dense_optimizer");
  // no table is looked up on another rank: no input dist and no pooled all-to-alls (tester33 D11)
  std::vector<std::string> dp_comm = {"dense_all_reduce"};
  // one comm op a table: DDP's all-reduce of its dense gradient and of its touched flags (dp51)
  for (int t = 0; t < 4; ++t) dp_comm.push_back("grad_dist/data_parallel_all_reduce");
  const std::vector<Case> cases = {
      {ShardingType::table_wise, 2,
       {"input_dist/splits", "input_dist/lengths", "input_dist/ids", "output_dist/all_to_all", "dense_all_reduce",
        "grad_dist/all_to_all"},
       compute_sharded},
      {ShardingType::column_wise, 2,
       {"input_dist/splits", "input_dist/lengths", "input_dist/ids", "output_dist/all_to_all", "dense_all_reduce",
        "grad_dist/all_to_all"},
       compute_sharded},
      // no table_wise / column_wise shard: no pooled all-to-all (empty before: tester33 D11)
      {ShardingType::row_wise, 2,
       {"input_dist/splits", "input_dist/lengths", "input_dist/ids", "output_dist/reduce_scatter", "dense_all_reduce",
        "grad_dist/all_gather"},
       compute_sharded},
      {ShardingType::table_row_wise, 4,
       {"input_dist/splits", "input_dist/lengths", "input_dist/ids", "output_dist/reduce_scatter_intra_node",
        "output_dist/all_to_all_cross_node", "dense_all_reduce", "grad_dist/all_to_all_cross_node",
        "grad_dist/all_gather_intra_node"},
       compute_sharded},
      {ShardingType::data_parallel, 2, dp_comm, dp_compute},
  };
  for (const auto& c : cases) {
    const WorkloadSpec s = tiny(c.world, c.type);
    for (int r = 0; r < c.world; ++r) {
      const StepProgram p = build_step_program(s, plan_sharding(s), r, 0);
      EXPECT_EQ(names(p, Lane::comm), c.comm) << to_string(c.type) << " rank " << r;
      EXPECT_EQ(names(p, Lane::compute), c.compute) << to_string(c.type) << " rank " << r;
    }
  }
  // row_wise: the partial sums of every sample's bags, B x (sum of dims = 4+8+6+6+12) to each rank
  const WorkloadSpec rw = tiny(2, ShardingType::row_wise);
  const StepProgram p = build_step_program(rw, plan_sharding(rw), 1, 0);
  const auto& rs = op_named(p, "output_dist/reduce_scatter").collectives.back();
  EXPECT_EQ(rs.kind, CollectiveKind::reduce_scatter);
  EXPECT_EQ(rs.send_elements, (std::vector<int64_t>{8 * 36, 8 * 36}));
  EXPECT_EQ(rs.bytes_sent(), 8 * 36 * 4);
  const auto& ag = op_named(p, "grad_dist/all_gather").collectives.back();
  EXPECT_EQ(ag.kind, CollectiveKind::all_gather);
  EXPECT_EQ(ag.bytes_received(), 8 * 36 * 4);
  // table_row_wise on 2 nodes of 2: the node and cross groups of rank 3 (node 1, local rank 1)
  const WorkloadSpec twrw = tiny(4, ShardingType::table_row_wise);
  const StepProgram q = build_step_program(twrw, plan_sharding(twrw), 3, 0);
  EXPECT_EQ(op_named(q, "output_dist/reduce_scatter_intra_node").collectives.back().group, "node1");
  EXPECT_EQ(op_named(q, "output_dist/reduce_scatter_intra_node").collectives.back().peers, (std::vector<int>{2, 3}));
  EXPECT_EQ(op_named(q, "output_dist/all_to_all_cross_node").collectives.back().group, "cross1");
  EXPECT_EQ(op_named(q, "output_dist/all_to_all_cross_node").collectives.back().peers, (std::vector<int>{1, 3}));
}

TEST(StepProgram, PipelinesAreSchedulesOverTheBatchPhases) {
  const std::vector<std::string> out = {"kjt_permute", "lookup", "output_dist/all_to_all"};
  const std::vector<std::string> train = {"dense_forward_backward", "dense_all_reduce", "grad_dist/all_to_all",
                                          "backward_fused_optimizer", "dense_optimizer"};
  auto cat = [](std::initializer_list<std::vector<std::string>> parts) {
    std::vector<std::string> v;
    for (const auto& p : parts) v.insert(v.end(), p.begin(), p.end());
    return v;
  };
  auto at = [](std::vector<std::string> v, int batch) {
    for (auto& n : v) n += "@" + std::to_string(batch);
    return v;
  };
  const ShardingPlan plan = plan_sharding(tiny(2, ShardingType::table_wise));
  {  // sparse_dist: the next batch's input and input dist just before the dense part
    const WorkloadSpec s = tiny(2, ShardingType::table_wise, PipelineKind::sparse_dist);
    EXPECT_EQ(names(build_step_program(s, plan, 0, 0)), cat({kInput, out, at(kInput, 1), train}));
    EXPECT_EQ(names(build_step_program(s, plan, 0, 1)), cat({out, at(kInput, 1), train}));
    EXPECT_EQ(names(build_step_program(s, plan, 0, 3)), cat({out, train}));  // the last: nothing ahead
    // batch 1's input dist is queued on the comm lane before the DDP bucket of batch 0
    const StepProgram p = build_step_program(s, plan, 0, 1);
    EXPECT_EQ(names(p, Lane::comm), (std::vector<std::string>{"output_dist/all_to_all", "input_dist/splits@1",
                                                              "input_dist/lengths@1", "input_dist/ids@1",
                                                              "dense_all_reduce", "grad_dist/all_to_all"}));
    // dense does not wait for the input dist of batch 1 (it runs under it)
    for (int w : op_named(p, "dense_forward_backward").waits_for) EXPECT_NE(p.ops[w].lane, Lane::comm);
  }
  {  // semi_sync: batch i+1 looked up and its output dist queued before batch i's dense part
    const WorkloadSpec s = tiny(2, ShardingType::table_wise, PipelineKind::semi_sync);
    EXPECT_EQ(names(build_step_program(s, plan, 0, 0)), cat({kInput, out, at(kInput, 1), at(out, 1), at(kInput, 2), train}));
    EXPECT_EQ(names(build_step_program(s, plan, 0, 1)), cat({at(out, 1), at(kInput, 2), train}));
    EXPECT_EQ(names(build_step_program(s, plan, 0, 2)), cat({at(out, 1), train}));
    EXPECT_EQ(names(build_step_program(s, plan, 0, 3)), train);
    const StepProgram p = build_step_program(s, plan, 0, 1);
    for (int w : op_named(p, "dense_forward_backward").waits_for) EXPECT_NE(p.ops[w].lane, Lane::comm);
    // the schedule the executors follow: wait for this batch's output dist (queued in the
    // previous step), look up the next batch and queue its output dist, start the one after
    std::vector<std::string> sched;
    for (const Phase& ph : p.schedule)
      sched.push_back(std::string(to_string(ph.kind)) + "@" + std::to_string(ph.batch) + (ph.sync ? "" : " async"));
    EXPECT_EQ(sched, (std::vector<std::string>{"finish_output_dist@0", "lookup@1 async", "start_batch@2 async", "train@0"}));
    EXPECT_EQ(p.schedule[1].first_op, 0);
    EXPECT_EQ(p.schedule[1].num_ops, 3);
    EXPECT_EQ(p.schedule[0].num_ops, 0);
  }
  EXPECT_EQ(steady_iteration(tiny(2, ShardingType::table_wise, PipelineKind::semi_sync)), 1);
  EXPECT_EQ(steady_iteration(tiny(2, ShardingType::table_wise)), 0);
}

// Executors build one program per place in the run: equal places must give equal programs.
TEST(StepProgram, PlaceInRunDecidesTheProgram) {
  for (PipelineKind pipeline : {PipelineKind::base, PipelineKind::sparse_dist, PipelineKind::semi_sync}) {
    WorkloadSpec s = tiny(2, ShardingType::row_wise, pipeline);
    s.warmup_steps = 1;  // 5 iterations
    const ShardingPlan plan = plan_sharding(s);
    std::map<int, nlohmann::json> by_place;
    std::vector<int> places;
    for (int64_t it = 0; it < 5; ++it) {
      const int place = place_in_run(s, it);
      places.push_back(place);
      nlohmann::json j = to_json(build_step_program(s, plan, 1, it));
      j.erase("iteration");
      j.erase("step");
      auto [found, fresh] = by_place.emplace(place, j);
      if (!fresh) {
        EXPECT_EQ(found->second, j) << to_string(pipeline) << " iteration " << it;
      }
    }
    if (pipeline == PipelineKind::base) {
      EXPECT_EQ(places, (std::vector<int>{0, 0, 0, 0, 0}));
    } else {
      EXPECT_EQ(places, (std::vector<int>{7, 6, 6, 2, 0}));
      EXPECT_NE(by_place.at(7), by_place.at(6)) << to_string(pipeline);
      EXPECT_NE(by_place.at(2), by_place.at(0)) << to_string(pipeline);
    }
  }
}

TEST(StepProgram, QCommsHalveTheEmbeddingCollectives) {
  WorkloadSpec s = tiny(2, ShardingType::table_wise);
  s.qcomms.forward_precision = CommPrecision::bf16;
  s.qcomms.backward_precision = CommPrecision::fp16;
  const StepProgram p = build_step_program(s, plan_sharding(s), 0, 0);
  const auto& fwd = op_named(p, "output_dist/all_to_all").collectives.back();
  EXPECT_EQ(fwd.dtype, "bfloat16");
  EXPECT_EQ(fwd.bytes_sent(), 96 * 2);
  EXPECT_EQ(op_named(p, "grad_dist/all_to_all").collectives.back().dtype, "float16");
  EXPECT_EQ(op_named(p, "input_dist/ids").collectives.back().dtype, "int64");
}

TEST(StepProgram, BadRankOrIterationIsBadInput) {
  const WorkloadSpec s = tiny(2, ShardingType::table_wise);
  EXPECT_THROW(build_step_program(s, plan_sharding(s), 2, 0), SpecError);
  EXPECT_THROW(build_step_program(s, plan_sharding(s), 0, 4), SpecError);
  try {
    build_step_program(s, plan_sharding(s), -1, 0);
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_STREQ(e.what(), "--rank: -1 is outside [0, 2)");
  }
}

// The program against what the cpu executor records: on every rank and lane the spans of a
// step carry the program's op names in its order, and every collective record of the step
// the program's group, peers and element counts (exactly, where the program says exact).
// tiny on 4 ranks in 2 nodes. grid_shard: column blocks min(2 nodes, dim / 4), largest tables
// first onto the node with the fewest bytes: t_c (12 cols: [0, 8) node 0, [8, 12) node 1), t_b
// (6: node 1), t_a (8: [0, 4) node 1, [4, 8) node 0), t_small (4: node 1). Node 0 reduces f_a's
// 4 and f_c's 8 columns (width 12), node 1 f_small 4, f_a 4, f_b0 6, f_b1 6, f_c 4 (width 24).
// table_column_wise: the same ops as column_wise, each table's shards inside one node.
TEST(StepProgram, GridShardAndTableColumnWiseByHand) {
  const WorkloadSpec grid = tiny(4, ShardingType::grid_shard);
  const ShardingPlan gp = plan_sharding(grid);
  const auto& tc = gp.tables[3];
  ASSERT_EQ(tc.shards.size(), 4u);
  EXPECT_EQ(tc.shards[0].rank, 0);
  EXPECT_EQ(tc.shards[0].num_rows, 500);
  EXPECT_EQ(tc.shards[0].num_cols, 8);
  EXPECT_EQ(tc.shards[1].rank, 1);
  EXPECT_EQ(tc.shards[1].row_offset, 500);
  EXPECT_EQ(tc.shards[2].rank, 2);
  EXPECT_EQ(tc.shards[2].col_offset, 8);
  EXPECT_EQ(tc.shards[3].rank, 3);
  EXPECT_EQ(tc.shards[3].num_cols, 4);
  const std::vector<std::string> twrw_comm = {  // no table_wise / column_wise shard: no pooled all-to-all
      "input_dist/splits", "input_dist/lengths", "input_dist/ids", "output_dist/reduce_scatter_intra_node",
      "output_dist/all_to_all_cross_node", "dense_all_reduce", "grad_dist/all_to_all_cross_node",
      "grad_dist/all_gather_intra_node"};
  for (int r = 0; r < 4; ++r) {
    const StepProgram p = build_step_program(grid, gp, r, 0);
    EXPECT_EQ(names(p, Lane::comm), twrw_comm) << "rank " << r;
    const int64_t width = r < 2 ? 12 : 24;
    const auto& rs = op_named(p, "output_dist/reduce_scatter_intra_node").collectives.back();
    EXPECT_EQ(rs.send_elements, (std::vector<int64_t>{2 * 8 * width, 2 * 8 * width})) << "rank " << r;
    EXPECT_EQ(rs.group, r < 2 ? "node0" : "node1");
    const auto& a2a = op_named(p, "output_dist/all_to_all_cross_node").collectives.back();
    EXPECT_EQ(a2a.send_elements, (std::vector<int64_t>{8 * width, 8 * width})) << "rank " << r;
    EXPECT_EQ(a2a.recv_elements, (std::vector<int64_t>{8 * 12, 8 * 24})) << "rank " << r;
    const auto& back = op_named(p, "grad_dist/all_to_all_cross_node").collectives.back();
    EXPECT_EQ(back.send_elements, (std::vector<int64_t>{8 * 12, 8 * 24})) << "rank " << r;
  }
  // table_column_wise: t_c's 8 + 4 columns on ranks 0 and 1 (node 0), t_b on rank 2, t_a's 4 + 4 on
  // ranks 3 and 2, t_small on rank 3; the pooled all-to-all of column_wise
  const WorkloadSpec tcw = tiny(4, ShardingType::table_column_wise);
  const ShardingPlan tp = plan_sharding(tcw);
  ASSERT_EQ(tp.tables[3].shards.size(), 2u);
  EXPECT_EQ(tp.tables[3].node, 0);
  EXPECT_EQ(tp.tables[3].shards[0].rank, 0);
  EXPECT_EQ(tp.tables[3].shards[1].rank, 1);
  EXPECT_EQ(tp.tables[2].shards[0].rank, 2);
  ASSERT_EQ(tp.tables[1].shards.size(), 2u);
  EXPECT_EQ(tp.tables[1].shards[0].rank, 3);
  EXPECT_EQ(tp.tables[1].shards[1].rank, 2);
  EXPECT_EQ(tp.tables[0].shards[0].rank, 3);
  const StepProgram q = build_step_program(tcw, tp, 2, 0);
  EXPECT_EQ(names(q, Lane::comm), (std::vector<std::string>{"input_dist/splits", "input_dist/lengths", "input_dist/ids",
                                                             "output_dist/all_to_all", "dense_all_reduce",
                                                             "grad_dist/all_to_all"}));
  // rank 2 sends B x (t_b 6 x 2 features + t_a's 4) = 8 x 16 to each rank
  EXPECT_EQ(op_named(q, "output_dist/all_to_all").collectives.back().send_elements,
            (std::vector<int64_t>{128, 128, 128, 128}));
}

TEST(StepProgram, MatchesWhatTheCpuExecutorRecords) {
  struct Case {
    ShardingType type;
    int world;
    PipelineKind pipeline;
  };
  const std::vector<Case> cases = {
      {ShardingType::table_wise, 2, PipelineKind::base},      {ShardingType::row_wise, 2, PipelineKind::base},
      {ShardingType::column_wise, 3, PipelineKind::base},     {ShardingType::data_parallel, 2, PipelineKind::base},
      {ShardingType::table_row_wise, 4, PipelineKind::base},  {ShardingType::table_wise, 2, PipelineKind::sparse_dist},
      {ShardingType::row_wise, 2, PipelineKind::semi_sync},   {ShardingType::grid_shard, 4, PipelineKind::base},
      {ShardingType::table_column_wise, 4, PipelineKind::sparse_dist},
  };
  const std::string path = ::testing::TempDir() + "/program_" + std::to_string(getpid()) + ".db";
  for (const auto& c : cases) {
    const std::string what = std::string(to_string(c.type)) + "/" + to_string(c.pipeline);
    WorkloadSpec s = tiny(c.world, c.type, c.pipeline);
    s.warmup_steps = 1;
    const ShardingPlan plan = plan_sharding(s);
    TrainerOptions opt;
    opt.session_path = path;
    opt.session_overwrite = true;
    const RunResult r = run_training(s, plan, opt);
    ASSERT_EQ(r.ended, RunEnd::complete) << what << ": " << r.error;
    embedscope::sessions::SessionReader reader(path);
    const auto records = reader.collectives();
    for (int64_t it = 0; it < s.warmup_steps + s.steps; ++it)
      for (int rank = 0; rank < c.world; ++rank) {
        const StepProgram p = build_step_program(s, plan, rank, it);
        for (Lane lane : {Lane::compute, Lane::comm}) {
          std::vector<std::string> recorded, planned;
          for (const auto& e : r.events)
            if (e.rank == rank && e.lane == lane && e.step == p.step) recorded.push_back(e.name);
          for (const ProgramOp* op : p.lane(lane)) planned.push_back(op->name);
          EXPECT_EQ(recorded, planned) << what << " rank " << rank << " iteration " << it << " lane "
                                       << embedscope::sessions::to_string(lane);
        }
        std::vector<const CollectiveCall*> calls;
        for (const auto& op : p.ops)
          for (const auto& call : op.collectives) calls.push_back(&call);
        std::vector<const embedscope::sessions::CollectiveRecord*> recs;
        for (const auto& rec : records)
          if (rec.rank == rank && rec.step == p.step) recs.push_back(&rec);
        std::sort(recs.begin(), recs.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
        ASSERT_EQ(recs.size(), calls.size()) << what << " rank " << rank << " iteration " << it;
        // the comm lane runs its collectives in program order
        std::vector<const CollectiveCall*> comm_calls;
        for (const ProgramOp* op : p.lane(Lane::comm))
          for (const auto& call : op->collectives) comm_calls.push_back(&call);
        for (size_t i = 0; i < recs.size(); ++i) {
          const auto& rec = *recs[i];
          const CollectiveCall& call = *comm_calls[i];
          const std::string where = what + " rank " + std::to_string(rank) + " iteration " + std::to_string(it) + " " + call.name;
          EXPECT_EQ(rec.name, call.name) << where;
          EXPECT_EQ(rec.op, to_string(call.kind)) << where;
          EXPECT_EQ(rec.group, call.group) << where;
          EXPECT_EQ(std::vector<int>(rec.peers.begin(), rec.peers.end()), call.peers) << where;
          EXPECT_EQ(rec.dtype, call.dtype) << where;
          if (call.exact) {
            EXPECT_EQ(rec.send_elements, call.send_elements) << where;
            EXPECT_EQ(rec.recv_elements, call.recv_elements) << where;
            EXPECT_EQ(rec.bytes_sent, call.bytes_sent()) << where;
            EXPECT_EQ(rec.bytes_received, call.bytes_received()) << where;
          }
        }
      }
  }
  std::filesystem::remove(path);
}

// The lookup and the fused backward count each table's stored row size (quant/row_codec.h,
// row_bytes: fp32 4 dim, fp16 2 dim, int8 dim + 8), not 4-byte values. One table of 1,000 x 64
// (pooling factor 2, fixed) on rank 0 of 2, batch 8: 32 ids (2 ranks x 8 bags x 2), 16 bags.
//   lookup   = ids x (row_bytes + 8) + bags x 4 x 64 (fp32 pooled):
//              fp32 32 x 264 + 4,096 = 12,544; fp16 32 x 136 + 4,096 = 8,448; int8 32 x 80 + 4,096 = 6,656
//   backward = bags x 256 + ids x (8 + 2 row_bytes + 2 x 4 x state floats a row), sgd (no state):
//              fp32 4,096 + 32 x 520 = 20,736; fp16 4,096 + 32 x 264 = 12,544; int8 4,096 + 32 x 152 = 8,960
//   rowwise_adagrad adds 1 state float a row: + 32 x 8 = 256.
TEST(StepProgram, LookupAndBackwardBytesUseTheStoredRowSize) {
  WorkloadSpec s = tiny(2, ShardingType::table_wise);
  s.tables.clear();
  s.features.clear();
  FeatureSpec f;
  f.name = "f";
  f.pooling_factor = {true, 2.0, 2};
  s.features.push_back(f);
  s.tables.push_back({"t", 1000, 64, Pooling::sum, {"f"}});
  s.optimizer.type = OptimizerType::sgd;
  auto bytes = [&](TableDataType dt, const char* op) {
    s.tables[0].data_type = dt;
    const ShardingPlan plan = plan_sharding(s);
    EXPECT_EQ(plan.tables[0].shards[0].rank, 0);
    return op_named(build_step_program(s, plan, 0, 0), op).bytes;
  };
  EXPECT_EQ(bytes(TableDataType::fp32, "lookup"), 12544);
  EXPECT_EQ(bytes(TableDataType::fp16, "lookup"), 8448);
  EXPECT_EQ(bytes(TableDataType::bf16, "lookup"), 8448);
  EXPECT_EQ(bytes(TableDataType::int8, "lookup"), 6656);
  EXPECT_EQ(bytes(TableDataType::fp32, "backward_fused_optimizer"), 20736);
  EXPECT_EQ(bytes(TableDataType::fp16, "backward_fused_optimizer"), 12544);
  EXPECT_EQ(bytes(TableDataType::int8, "backward_fused_optimizer"), 8960);
  s.optimizer.type = OptimizerType::rowwise_adagrad;
  EXPECT_EQ(bytes(TableDataType::int8, "backward_fused_optimizer"), 8960 + 256);
  // a data-parallel replica reads its own batch only: 16 ids, 8 bags
  s.optimizer.type = OptimizerType::sgd;
  s.sharding.default_type = ShardingType::data_parallel;
  EXPECT_EQ(bytes(TableDataType::int8, "lookup"), 16 * 80 + 8 * 256);
  EXPECT_EQ(bytes(TableDataType::fp32, "lookup"), 16 * 264 + 8 * 256);
}
