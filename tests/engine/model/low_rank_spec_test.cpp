// Low-rank tables (TableSpec::low_rank_dim) in the spec (errors naming the JSON pointer), the
// memory estimate, the table storage estimate, the program's byte counts and the measured run:
// hand-computed numbers.

#include <gtest/gtest.h>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/sharding/plan_json.h"
#include "embedscope/engine/sharding/sharding.h"
#include "engine/workload/spec_test_support.h"
#include "program/program_sink.h"

namespace es = embedscope::engine;
using nlohmann::json;
using namespace spec_testing;

namespace {

std::string patched_error(const char* patch) { return parse_error(base_spec().patch(json::parse(patch))); }

TEST(LowRankSpec, ErrorsNameThePointer) {
  EXPECT_EQ(patched_error(R"([{"op": "add", "path": "/tables/0/low_rank_dim", "value": 0}])"),
            "test.json: /tables/0/low_rank_dim: must be in [1, embedding_dim = 4), got 0 (leave it out for a full table)");
  EXPECT_EQ(patched_error(R"([{"op": "add", "path": "/tables/1/low_rank_dim", "value": 4}])"),
            "test.json: /tables/1/low_rank_dim: must be in [1, embedding_dim = 4), got 4");
  EXPECT_EQ(patched_error(R"([{"op": "add", "path": "/tables/1/low_rank_dim", "value": -2}])"),
            "test.json: /tables/1/low_rank_dim: must be in [1, embedding_dim = 4), got -2");
  EXPECT_EQ(patched_error(R"([{"op": "add", "path": "/tables/0/low_rank_dim", "value": 1.5}])"),
            "test.json: /tables/0/low_rank_dim: must be an integer, got 1.5");
  EXPECT_EQ(patched_error(R"([{"op": "add", "path": "/tables/0/low_rank_dim", "value": 2},
                             {"op": "add", "path": "/tables/0/data_type", "value": "int8"}])"),
            "test.json: /tables/0/data_type: int8 with low_rank_dim (table \"t0\"): the factors A and B are stored in "
            "fp32; leave data_type out or drop low_rank_dim");
  EXPECT_EQ(patched_error(R"([{"op": "add", "path": "/tables/0/low_rank_dim", "value": 2},
                             {"op": "add", "path": "/sharding", "value": {"default": "row_wise"}}])"),
            "<no error>");
  EXPECT_EQ(patched_error(R"([{"op": "add", "path": "/tables/0/low_rank_dim", "value": 2},
                             {"op": "add", "path": "/sharding", "value": {"default": "table_row_wise"}}])"),
            "test.json: /sharding/default: table_row_wise for table \"t0\" with low_rank_dim (/tables/0/low_rank_dim): "
            "a factorized table is sharded table_wise, row_wise (A's rows split, B copied to every rank) or "
            "data_parallel; table_row_wise (rows split within a node, partial sums reduced there and sent across "
            "nodes) is not implemented for factorized tables: use row_wise");
  EXPECT_EQ(patched_error(R"([{"op": "add", "path": "/tables/1/low_rank_dim", "value": 3},
                             {"op": "add", "path": "/sharding", "value": {"tables": {"t1": {"type": "column_wise"}}}}])"),
            "test.json: /sharding/tables/t1/type: column_wise for table \"t1\" with low_rank_dim "
            "(/tables/1/low_rank_dim): a factorized table is sharded table_wise, row_wise (A's rows split, B copied "
            "to every rank) or data_parallel; split by columns, every block would need all of A (rows x r, the large "
            "factor), so column-wise sharding would save none of it");
  EXPECT_EQ(patched_error(R"([{"op": "add", "path": "/tables/1/low_rank_dim", "value": 3},
                             {"op": "add", "path": "/sharding", "value": {"tables": {"t1": {"type": "data_parallel"}}}}])"),
            "<no error>");
}

TEST(LowRankSpec, RoundTripsThroughJson) {
  json j = base_spec();
  j["tables"][1]["low_rank_dim"] = 2;
  const es::WorkloadSpec s = es::parse_workload(j, "test.json");
  EXPECT_EQ(s.tables[1].low_rank_dim, 2);
  EXPECT_EQ(s.tables[0].low_rank_dim, 0);
  const json back = es::to_json(s);
  EXPECT_EQ(back["tables"][1]["low_rank_dim"], 2);
  EXPECT_FALSE(back["tables"][0].contains("low_rank_dim"));  // a full table writes nothing new
}

TEST(LowRankSpec, HandEditedPlanWithColumnWiseIsRefused) {
  json j = base_spec();
  j["tables"][1]["low_rank_dim"] = 2;
  const es::WorkloadSpec s = es::parse_workload(j, "test.json");
  es::ShardingPlan plan = es::plan_sharding(s);
  plan.tables[1].type = es::ShardingType::row_wise;  // allowed: A's rows split, B on both
  plan.tables[1].shards = {{0, 0, 10, 0, 4}, {1, 10, 10, 0, 4}};
  EXPECT_NO_THROW(es::validate_plan(s, plan, "plan.json"));
  plan.tables[1].type = es::ShardingType::column_wise;
  plan.tables[1].shards = {{0, 0, 20, 0, 2}, {1, 0, 20, 2, 2}};
  try {
    es::validate_plan(s, plan, "plan.json");
    FAIL() << "no error";
  } catch (const es::SpecError& e) {
    EXPECT_EQ(std::string(e.what()),
              "plan.json: /tables/1/sharding_type: table t1 (20 rows x 4 columns, column_wise) has low_rank_dim 2: a factorized "
              "table is sharded table_wise, row_wise or data_parallel");
  }
}

// 1000 x 64 with r 8, rowwise_adagrad, table_wise on one of two ranks: A 32,000 B (32,256 in
// 512 B blocks) + B 2,048; state 4,000 (4,096) + 32 (512).
es::WorkloadSpec big_low_rank() {
  json j = base_spec();
  j["tables"][0] = {{"name", "t0"}, {"num_embeddings", 1000}, {"embedding_dim", 64}, {"feature_names", {"f0"}},
                    {"low_rank_dim", 8}};
  j["optimizer"] = {{"type", "rowwise_adagrad"}, {"learning_rate", 0.05}};
  j["dense"]["interaction"] = "cat";  // dims 64 and 4
  j["sharding"] = {{"tables", {{"t0", {{"type", "table_wise"}, {"ranks", {0}}}}, {"t1", {{"type", "table_wise"}, {"ranks", {1}}}}}}};
  return es::parse_workload(j, "test.json");
}

TEST(LowRankEstimate, MemoryAndTableStorageCountTheFactors) {
  const es::WorkloadSpec s = big_low_rank();
  const es::ShardingPlan plan = es::plan_sharding(s);
  const auto est = es::estimate_memory(s, plan);
  EXPECT_EQ(est[0].weights, 32256 + 2048);
  EXPECT_EQ(est[0].optimizer_state, 4096 + 512);
  const auto st = es::estimate_table_storage(s, plan);
  EXPECT_EQ(st[0].low_rank_dim, 8);
  EXPECT_EQ(st[0].rows, 1000);
  EXPECT_EQ(st[0].row_bytes, 32);
  EXPECT_EQ(st[0].weight_bytes, 34048);
  EXPECT_EQ(st[0].optimizer_state_bytes, 4032);
  EXPECT_EQ(st[1].weight_bytes, 20 * 4 * 4);  // the full table beside it
  // the run allocates exactly the factors and their state
  es::WorkloadSpec run = s;
  run.steps = 2;
  es::TrainerOptions opt;
  opt.trace = false;
  const es::RunResult r = es::run_training(run, plan, opt);
  ASSERT_EQ(r.ended, es::RunEnd::complete) << r.error;
  EXPECT_EQ(r.table_storage[0].weight_bytes, (std::vector<int64_t>{34048, 0}));
  EXPECT_EQ(r.table_storage[0].optimizer_state_bytes, (std::vector<int64_t>{4032, 0}));
  EXPECT_EQ(r.table_storage[0].low_rank_dim, 8);
}

TEST(LowRankEstimate, ProgramBytesReadTheFactors) {
  es::TableSpec t{"t", 1000, 64, es::Pooling::sum, {"f"}};
  EXPECT_DOUBLE_EQ(es::program::ProgramSink::lookup_bytes(100, t, 64, 10), 100 * 264 + 2560);  // full fp32
  t.low_rank_dim = 8;
  EXPECT_DOUBLE_EQ(es::program::ProgramSink::lookup_bytes(100, t, 64, 10), 100 * 40 + 2048 + 2560);
  // sgd: bags 4 x 64 x 10 + ids (8 + 64) + 2 x 2,048
  EXPECT_DOUBLE_EQ(es::program::ProgramSink::update_bytes(100, t, 64, 10, es::OptimizerType::sgd),
                   2560 + 100 * 72 + 4096);
  // rowwise_adagrad: + 2 x 4 a row of A, + 2 x 32 for B's 8 accumulators
  EXPECT_DOUBLE_EQ(es::program::ProgramSink::update_bytes(100, t, 64, 10, es::OptimizerType::rowwise_adagrad),
                   2560 + 100 * 80 + 2 * (2048 + 32));
}

TEST(LowRankEstimate, PlanSearchKeepsFactorizedTablesWhole) {
  es::WorkloadSpec s = big_low_rank();
  s.sharding.per_table.clear();
  s.devices.count = 4;
  const es::PlanSearchResult r = es::plan_search(s, es::load_hardware_profile("h100_sxm"));
  EXPECT_GT(r.proposals, 1);
  for (const auto& tp : r.plan.tables)
    if (tp.table == 0) {
      EXPECT_TRUE(tp.type == es::ShardingType::table_wise || tp.type == es::ShardingType::data_parallel);
    }
}

}  // namespace
