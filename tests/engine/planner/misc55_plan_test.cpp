// misc55 (tester55 F3, F5): the search's refusal of a sharding type says why the table does not
// allow it (column_wise on 1 rank, a table narrower than 8 columns, a low-rank table), and `plan`'s
// "row bytes" is a row over its column shards - an int8 / int4 column shard keeps its own scale
// and bias - so that rows x row bytes is the weights printed beside it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/engine/workload/spec_error.h"
#include "support/cli_run.h"

namespace es = embedscope::engine;
using nlohmann::json;

namespace {
const std::string kProfile = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";

std::filesystem::path scratch() {
  static const auto dir = embedscope::test_support::fresh_scratch("es_misc55_plan_" + std::to_string(getpid()));
  return dir;
}

// The SpecError text of plan_search restricted to `types`, "" when it does not throw.
std::string refusal(const es::WorkloadSpec& spec, std::vector<es::ShardingType> types) {
  try {
    es::plan_search(spec, es::load_hardware_profile(kProfile), es::PlanSearchOptions{std::move(types)});
  } catch (const es::SpecError& e) {
    return e.what();
  }
  return "";
}

// Five 1000 x 16 tables on 2 ranks, adam: q8 (int8) and q4 (int4) column_wise, t8 table_wise,
// r8 row_wise, d8 data_parallel (int8 all three).
json storage_workload() {
  json j = es::to_json(es::load_preset("tiny"));
  auto table = [](const char* name, const char* type, const char* feature) {
    return json{{"name", name}, {"num_embeddings", 1000}, {"embedding_dim", 16}, {"pooling", "sum"},
                {"feature_names", {feature}}, {"data_type", type}};
  };
  j["tables"] = {table("q8", "int8", "fa"), table("q4", "int4", "fb"), table("t8", "int8", "fc"),
                 table("r8", "int8", "fd"), table("d8", "int8", "fe")};
  j["features"] = json::array();
  for (const char* f : {"fa", "fb", "fc", "fd", "fe"}) j["features"].push_back({{"name", f}, {"pooling_factor", 2}, {"ids", "uniform"}});
  j["devices"]["count"] = 2;
  j["optimizer"] = {{"type", "adam"}, {"learning_rate", 0.01}};
  j["sharding"] = {{"default", "table_wise"},
                   {"tables", {{"q8", {{"type", "column_wise"}}}, {"q4", {{"type", "column_wise"}}},
                               {"r8", {{"type", "row_wise"}}}, {"d8", {{"type", "data_parallel"}}}}}};
  return j;
}
}  // namespace

TEST(Misc55, ASearchRefusalSaysWhyTheTableDoesNotAllowTheType) {
  // every table 16 wide, 1 rank: column_wise would be one shard of every column
  json j = es::to_json(es::load_preset("tiny"));
  for (auto& t : j["tables"]) t["embedding_dim"] = 16;
  j["devices"]["count"] = 1;
  es::WorkloadSpec one = es::parse_workload(j, "misc55");
  const std::string one_rank = refusal(one, {es::ShardingType::column_wise});
  EXPECT_EQ(one_rank.rfind("/tables/0 (t_small): none of the sharding types the search may use suits this table: "
                           "column_wise splits a table's columns over 2 ranks or more: on 1 rank its one column shard "
                           "would hold every column, which is table_wise (it allows table_wise, row_wise, ",
                           0),
            0u)
      << one_rank;
  // tiny as it is on 2 ranks: t_small is 4 wide
  es::WorkloadSpec narrow = es::load_preset("tiny");
  const std::string four = refusal(narrow, {es::ShardingType::column_wise});
  EXPECT_NE(four.find("/tables/0 (t_small): none of the sharding types the search may use suits this table: column_wise "
                      "needs embedding_dim >= 8 (two column shards of at least 4 columns); the table has 4"),
            std::string::npos)
      << four;
  // a low-rank table asked for column_wise and grid_shard: one reason each
  j = es::to_json(es::load_preset("tiny"));
  for (auto& t : j["tables"]) t["embedding_dim"] = 16;
  j["tables"][0]["num_embeddings"] = 1000;
  j["tables"][0]["low_rank_dim"] = 4;
  const std::string low = refusal(es::parse_workload(j, "misc55"), {es::ShardingType::column_wise, es::ShardingType::grid_shard});
  EXPECT_NE(low.find("column_wise: a low-rank table (low_rank_dim 4) is sharded table_wise, row_wise or data_parallel "
                     "(its rows of A split, B whole on every shard); grid_shard: a low-rank table"),
            std::string::npos)
      << low;
}

TEST(Misc55, RowBytesAreARowOverItsColumnShards) {
  const json j = storage_workload();
  const es::WorkloadSpec spec = es::parse_workload(j, "misc55");
  const es::ShardingPlan plan = es::plan_sharding(spec);
  const auto st = es::estimate_table_storage(spec, plan);
  ASSERT_EQ(st.size(), 5u);
  // row_codec.h: int8 dim + 8 (fp32 scale and bias), int4 dim / 2 + 4 (fp16 scale and bias);
  // 16 int8 columns whole: 24 a row
  // q8: 2 column shards of 8 int8 columns, each 8 + 8: 32 a row, 32,000 B (tester55 F5: 24)
  EXPECT_EQ(st[0].row_bytes, 2 * (8 + 8));
  EXPECT_EQ(st[0].weight_bytes, 1000 * 32);
  // q4: 2 column shards of 8 int4 columns, each 4 + 4: 16 a row (whole: 12), 16,000 B
  EXPECT_EQ(st[1].row_bytes, 2 * (4 + 4));
  EXPECT_EQ(st[1].weight_bytes, 1000 * 16);
  EXPECT_EQ(st[2].row_bytes, 24);        // table_wise: one shard
  EXPECT_EQ(st[2].weight_bytes, 24000);
  EXPECT_EQ(st[3].row_bytes, 24);        // row_wise: 2 row shards of every column, a row once
  EXPECT_EQ(st[3].weight_bytes, 24000);
  EXPECT_EQ(st[4].row_bytes, 24);        // data_parallel: a row once, the weights on both ranks
  EXPECT_EQ(st[4].weight_bytes, 2 * 24000);
  // plan's text and --json say the same
  const auto wl = scratch() / "storage.json";
  std::ofstream(wl) << j.dump(2);
  auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "plan " + wl.string() + " --json", scratch());
  ASSERT_EQ(r.code, 0) << r.err;
  const json out = json::parse(r.out);
  ASSERT_EQ(out["table_storage"].size(), 5u);
  const int64_t expected_row[] = {32, 16, 24, 24, 24}, expected_weights[] = {32000, 16000, 24000, 24000, 48000};
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(out["table_storage"][k]["row_bytes"], expected_row[k]) << k;
    EXPECT_EQ(out["table_storage"][k]["weight_bytes"], expected_weights[k]) << k;
  }
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "plan " + wl.string(), scratch());
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* row : {"q8                       int8              1000        -        32     31.2 KiB",
                          "q4                       int4              1000        -        16     15.6 KiB",
                          "t8                       int8              1000        -        24     23.4 KiB",
                          "d8                       int8              1000        -        24     46.9 KiB"})
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
}
