// int4 tables and stochastic_rounding in the spec: errors naming the JSON pointer (odd dims, odd
// column shards, stochastic rounding of fp32 rows, a shared table that rounds differently), the
// round trip, and the bytes the estimates and a run count for int4 rows (hand-computed).

#include <gtest/gtest.h>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/sharding/plan_json.h"
#include "embedscope/engine/sharding/sharding.h"
#include "engine/workload/spec_test_support.h"
#include "program/program_sink.h"

namespace es = embedscope::engine;
using nlohmann::json;
using namespace spec_testing;

namespace {

std::string int4_patched_error(const char* patch) { return parse_error(base_spec().patch(json::parse(patch))); }

TEST(Int4Spec, ErrorsNameThePointer) {
  EXPECT_EQ(int4_patched_error(R"([{"op": "add", "path": "/tables/0/data_type", "value": "int4"},
                                   {"op": "replace", "path": "/tables/0/embedding_dim", "value": 5}])"),
            "test.json: /tables/0/embedding_dim: 5 is odd with data_type int4 (table \"t0\"): int4 rows pack two "
            "4-bit codes a byte (FBGEMM's fused 4-bit rows); use an even embedding_dim or another data_type");
  EXPECT_EQ(int4_patched_error(R"([{"op": "add", "path": "/tables/1/stochastic_rounding", "value": true}])"),
            "test.json: /tables/1/stochastic_rounding: true with data_type fp32 (table \"t1\"): fp32 rows are stored "
            "unrounded; stochastic rounding needs fp16, bf16, int8 or int4");
  EXPECT_EQ(int4_patched_error(R"([{"op": "add", "path": "/tables/0/stochastic_rounding", "value": "yes"}])"),
            "test.json: /tables/0/stochastic_rounding: must be a boolean, got string");
  // the cuda backend runs int4 tables (RankDevice::update_encoded), but not under a live reshard
  EXPECT_EQ(int4_patched_error(R"([{"op": "add", "path": "/tables/0/data_type", "value": "int4"},
                                   {"op": "add", "path": "/devices/backend", "value": "cuda"}])"),
            "<no error>");
  EXPECT_EQ(int4_patched_error(R"([{"op": "add", "path": "/tables/0/data_type", "value": "int4"},
                                   {"op": "add", "path": "/devices/backend", "value": "cuda"},
                                   {"op": "add", "path": "/rebalance", "value": {"every": 2}}])"),
            "test.json: /tables/0/data_type: int4 (table \"t0\") with live rebalancing (/rebalance) is not supported on "
            "the cuda backend yet (fp32 only)");
  // an even dim, and fp16 / int4 with an explicit choice of rounding, are fine
  EXPECT_EQ(int4_patched_error(R"([{"op": "add", "path": "/tables/0/data_type", "value": "int4"},
                                   {"op": "add", "path": "/tables/0/stochastic_rounding", "value": false},
                                   {"op": "add", "path": "/tables/1/data_type", "value": "fp16"},
                                   {"op": "add", "path": "/tables/1/stochastic_rounding", "value": true}])"),
            "<no error>");
}

TEST(Int4Spec, SharedTableMustRoundAsItsOwner) {
  json j = base_spec();
  j["features"].push_back({{"name", "fu"}});
  j["tables"][1]["data_type"] = "fp16";
  j["tables"].push_back({{"name", "u"}, {"num_embeddings", 20}, {"embedding_dim", 4}, {"feature_names", {"fu"}},
                         {"data_type", "fp16"}, {"stochastic_rounding", true}, {"shared_with", "t1"}});
  EXPECT_EQ(parse_error(j),
            "test.json: /tables/2/stochastic_rounding: true but table \"t1\" it shares (shared_with) has false: a "
            "shared table uses the owner's rows and must match them");
}

// 6 columns over 4 column shards split 2, 2, 1, 1 (sharding.h column_split): odd int4 shards.
TEST(Int4Spec, OddColumnShardsAreRefused) {
  json j = base_spec();
  j["tables"][0]["embedding_dim"] = 6;
  j["tables"][0]["data_type"] = "int4";
  j["devices"]["count"] = 4;
  j["dense"]["interaction"] = "cat";
  j["sharding"] = {{"tables", {{"t0", {{"type", "column_wise"}, {"ranks", {0, 1, 2, 3}}}}}}};
  const es::WorkloadSpec s = es::parse_workload(j, "test.json");
  try {
    es::plan_sharding(s);
    FAIL() << "no error";
  } catch (const es::SpecError& e) {
    EXPECT_EQ(std::string(e.what()),
              "/sharding/tables/t0/ranks: 4 column shards of table \"t0\" (6 columns, data_type int4) are 2, 2, 1, 1 "
              "columns wide: an int4 column shard needs an even width (two 4-bit codes a byte); use fewer column "
              "shards");
  }
  // three shards split 2, 2, 2: planned; a hand-edited plan with a 3-column shard is refused
  es::WorkloadSpec three = s;
  three.sharding.per_table["t0"].ranks = {0, 1, 2};
  es::ShardingPlan plan = es::plan_sharding(three);
  ASSERT_EQ(plan.tables[0].shards.size(), 3u);
  for (const auto& sh : plan.tables[0].shards) EXPECT_EQ(sh.num_cols, 2);
  plan.tables[0].shards = {{0, 0, 10, 0, 3}, {1, 0, 10, 3, 3}};
  try {
    es::validate_plan(three, plan, "plan.json");
    FAIL() << "no error";
  } catch (const es::SpecError& e) {
    EXPECT_EQ(std::string(e.what()),
              "plan.json: /tables/0/shards/0: table t0 (10 rows x 6 columns, column_wise) is int4: a shard of 3 "
              "columns (odd) cannot hold packed 4-bit codes (two a byte); give it an even number of columns");
  }
}

TEST(Int4Spec, RoundTripsThroughJsonAndDefaultsToStochasticRounding) {
  json j = base_spec();
  j["tables"][0]["data_type"] = "int4";
  j["tables"][1]["data_type"] = "fp16";
  es::WorkloadSpec s = es::parse_workload(j, "test.json");
  EXPECT_EQ(s.tables[0].data_type, es::TableDataType::int4);
  EXPECT_FALSE(s.tables[0].stochastic_rounding.has_value());
  EXPECT_TRUE(s.tables[0].uses_stochastic_rounding());   // int4: stochastic unless told
  EXPECT_FALSE(s.tables[1].uses_stochastic_rounding());  // fp16: nearest unless told
  json back = es::to_json(s);
  EXPECT_EQ(back["tables"][0]["data_type"], "int4");
  EXPECT_FALSE(back["tables"][0].contains("stochastic_rounding"));  // absent stays absent
  j["tables"][0]["stochastic_rounding"] = false;
  j["tables"][1]["stochastic_rounding"] = true;
  s = es::parse_workload(j, "test.json");
  EXPECT_FALSE(s.tables[0].uses_stochastic_rounding());
  EXPECT_TRUE(s.tables[1].uses_stochastic_rounding());
  back = es::to_json(s);
  EXPECT_EQ(back["tables"][0]["stochastic_rounding"], false);
  EXPECT_EQ(back["tables"][1]["stochastic_rounding"], true);
  expect_same(es::parse_workload(back, "back.json"), s);
}

// 1000 x 16 int4 on rank 0 (12 B a row: 8 bytes of codes, fp16 scale and bias), t1 20 x 4 fp32 on
// rank 1: estimate, table storage and the run's allocation agree; rowwise_adagrad state stays
// 4 B a row.
TEST(Int4Spec, EstimatesAndTheRunCountInt4Rows) {
  json j = base_spec();
  j["tables"][0] = {{"name", "t0"}, {"num_embeddings", 1000}, {"embedding_dim", 16}, {"feature_names", {"f0"}},
                    {"data_type", "int4"}};
  j["optimizer"] = {{"type", "rowwise_adagrad"}, {"learning_rate", 0.05}};
  j["dense"]["interaction"] = "cat";
  j["sharding"] = {{"tables", {{"t0", {{"type", "table_wise"}, {"ranks", {0}}}}, {"t1", {{"type", "table_wise"}, {"ranks", {1}}}}}}};
  es::WorkloadSpec s = es::parse_workload(j, "test.json");
  const es::ShardingPlan plan = es::plan_sharding(s);
  const auto st = es::estimate_table_storage(s, plan);
  EXPECT_EQ(st[0].data_type, es::TableDataType::int4);
  EXPECT_EQ(st[0].row_bytes, 12);
  EXPECT_EQ(st[0].weight_bytes, 12000);
  EXPECT_EQ(st[0].optimizer_state_bytes, 4000);
  const auto est = es::estimate_memory(s, plan);
  EXPECT_EQ(est[0].weights, 12288);  // 12,000 in 512 B blocks
  // the program reads 12 B a looked-up row (+ 8 B its id) and writes 4 B a column of every bag
  EXPECT_DOUBLE_EQ(es::program::ProgramSink::lookup_bytes(100, s.tables[0], 16, 10), 100 * (12 + 8) + 10 * 4 * 16);
  s.steps = 2;
  es::TrainerOptions opt;
  opt.trace = false;
  const es::RunResult r = es::run_training(s, plan, opt);
  ASSERT_EQ(r.ended, es::RunEnd::complete) << r.error;
  EXPECT_EQ(r.table_storage[0].weight_bytes, (std::vector<int64_t>{12000, 0}));
  EXPECT_EQ(r.table_storage[0].data_type, es::TableDataType::int4);
  EXPECT_TRUE(r.table_storage[0].stochastic_rounding);
  EXPECT_FALSE(r.table_storage[1].stochastic_rounding);
  EXPECT_EQ(r.table_storage[0].master_copy_bytes, 0);
  // the updated rows' error against their fp32 values: above 0, at most one int4 step (1/15 of
  // the row's range, a little more through the fp16 scale), relative to max |row|
  EXPECT_GT(r.table_storage[0].relative_error, 0.0);
  EXPECT_LE(r.table_storage[0].relative_error, 2.0 / 15);
}

}  // namespace
