// Hot-row replication end to end through the CLI (issue 17; workload sharding.tables.NAME.hot_rows,
// sharding/hot_rows.cpp): `embedscope run` with listed and automatic hot rows, the figures
// `embedscope stats` reads back from the session (table_storage_json) against hand-computed
// counts, and a refused workload (exit 2, the pointer named).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/cli_run.h"

using nlohmann::json;

namespace {
std::filesystem::path hotrep_cli_scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("es_hotrep_cli_" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}
embedscope::test_support::CliResult hotrep_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, hotrep_cli_scratch());
}

// 4 ranks, 16 samples a rank, 1 warm-up + 3 measured steps. "zr": 200 rows x 8, 20 Zipf(1.2) ids
// a bag, row_wise, hot rows chosen from the first 2 iterations; "one": 1 row x 4, 2 ids a bag
// (fixed), row_wise with its row hot; "tw": table_wise, uniform.
json hotrep_cli_workload() {
  return {{"name", "hot_rows_replication_cli"},
          {"batch_size", 16},
          {"steps", 3},
          {"warmup_steps", 1},
          {"seed", 5},
          {"devices", {{"count", 4}, {"memory_bytes", 64 << 20}}},
          {"optimizer", {{"type", "adam"}}},
          {"dense", {{"num_dense_features", 4}, {"bottom_mlp", {8}}, {"interaction", "cat"}, {"top_mlp", {8, 1}}}},
          {"tables",
           {{{"name", "zr"}, {"num_embeddings", 200}, {"embedding_dim", 8}, {"feature_names", {"f_zr"}}},
            {{"name", "one"}, {"num_embeddings", 1}, {"embedding_dim", 4}, {"feature_names", {"f_one"}}},
            {{"name", "tw"}, {"num_embeddings", 300}, {"embedding_dim", 8}, {"feature_names", {"f_tw"}}}}},
          {"features",
           {{{"name", "f_zr"}, {"pooling_factor", 20}, {"ids", {{"distribution", "zipf"}, {"alpha", 1.2}}}},
            {{"name", "f_one"}, {"pooling_factor", 2}},
            {{"name", "f_tw"}, {"pooling_factor", 2}}}},
          {"sharding",
           {{"default", "table_wise"},
            {"tables",
             {{"zr", {{"type", "row_wise"}, {"hot_rows", {{"auto", true}, {"sample_steps", 2}}}}},
              {"one", {{"type", "row_wise"}, {"hot_rows", {0}}}}}}}}};
}

const json* hotrep_table(const json& tables, const std::string& name) {
  for (const auto& t : tables)
    if (t.value("table", "") == name) return &t;
  return nullptr;
}

TEST(HotRowsReplicationCli, StatsReportsTheHotRowsOfTheRun) {
  const auto wl = hotrep_cli_scratch() / "hot.json";
  std::ofstream(wl) << hotrep_cli_workload().dump(2);
  const auto db = hotrep_cli_scratch() / "hot.db";
  auto r = hotrep_cli("run " + wl.string() + " --json -o " + db.string() + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  const json run = json::parse(r.out);
  r = hotrep_cli("stats " + db.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json s = json::parse(r.out);
  // one number for one session (tester35 D1): the run's ids looked up per rank are its shards',
  // as the load counters stats reads (the hot ids, looked up in each rank's replica, apart)
  ASSERT_EQ(run["ranks"].size(), s["ranks"].size());
  for (size_t i = 0; i < s["ranks"].size(); ++i)
    EXPECT_EQ(run["ranks"][i]["ids_looked_up"], s["ranks"][i]["ids_looked_up"]) << "rank " << i;
  // "one": every id is hot: 4 ranks x 16 bags x 2 ids x 3 measured steps = 384 kept off the
  // input all-to-all; the all-reduce block is 1 row x (4 + 1) fp32 = 20 bytes a step
  const json* one = hotrep_table(s["tables"], "one");
  ASSERT_NE(one, nullptr) << r.out;
  EXPECT_EQ((*one)["hot_rows"], 1);
  EXPECT_EQ((*one)["hot_ids"], 384);
  EXPECT_EQ((*one)["hot_all_reduce_bytes"], 20);
  // "zr": 1,280 ids a step, Zipf(1.2) over 200 rows: the hottest rows pass W x (dim + 1) = 36
  // ids a step (expected about 6 of them: 1,280 k^-1.2 / H(200, 1.2) > 36 for k <= 6)
  const json* zr = hotrep_table(s["tables"], "zr");
  ASSERT_NE(zr, nullptr);
  const int64_t rows = (*zr)["hot_rows"].get<int64_t>();
  EXPECT_GE(rows, 3);
  EXPECT_LE(rows, 12);
  EXPECT_EQ((*zr)["hot_all_reduce_bytes"], rows * 9 * 4);
  EXPECT_GT((*zr)["hot_ids"].get<int64_t>(), 36 * rows * 3);  // each chosen row's ids clear the bar
  const json* tw = hotrep_table(s["tables"], "tw");
  ASSERT_NE(tw, nullptr);
  EXPECT_EQ((*tw)["hot_rows"], 0);
  r = hotrep_cli("stats " + db.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("hot rows (replicated on every rank, trained data-parallel)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  one                         1 rows        128.0 ids/step         20 B/step"), std::string::npos)
      << r.out;
}

TEST(HotRowsReplicationCli, HotRowsOfATableNotSplitByRowsAreRefused) {
  json w = hotrep_cli_workload();
  w["sharding"]["tables"]["tw"] = {{"type", "table_wise"}, {"hot_rows", {1}}};
  const auto wl = hotrep_cli_scratch() / "bad.json";
  std::ofstream(wl) << w.dump(2);
  const auto r = hotrep_cli("run " + wl.string() + " -o " + (hotrep_cli_scratch() / "bad.db").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/sharding/tables/tw/hot_rows: only allowed with /sharding/tables/tw/type row_wise, "
                       "table_row_wise or grid_shard, not table_wise"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(hotrep_cli_scratch() / "bad.db"));
}

// A hand-edited plan that shards a hot-rows table table_wise is bad input (exit 2) naming the plan
// file and the pointer of its type, before the run starts (tester35 D4: exit 1 from the run, no
// file named).
TEST(HotRowsReplicationCli, APlanThatShardsAHotRowsTableTableWiseIsRefused) {
  const auto wl = hotrep_cli_scratch() / "hot_plan.json";
  std::ofstream(wl) << hotrep_cli_workload().dump(2);
  auto r = hotrep_cli("plan " + wl.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  json plan = json::parse(r.out);
  size_t one = 0;
  for (size_t i = 0; i < plan["tables"].size(); ++i)
    if (plan["tables"][i]["name"] == "one") one = i;
  ASSERT_EQ(plan["tables"][one]["name"], "one");
  plan["tables"][one]["sharding_type"] = "table_wise";
  plan["tables"][one]["shards"] = json::array({plan["tables"][one]["shards"][0]});
  plan["tables"][one]["shards"][0]["rank"] = 1;
  const auto pf = hotrep_cli_scratch() / "hot_plan_tw.json";
  std::ofstream(pf) << plan.dump(2);
  r = hotrep_cli("run " + wl.string() + " --plan " + pf.string() + " -o " + (hotrep_cli_scratch() / "hp.db").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("hot_plan_tw.json: /tables/" + std::to_string(one) +
                       "/sharding_type: table one (1 rows x 4 columns, table_wise) has hot_rows "
                       "(sharding.tables.one.hot_rows): hot-row replication needs row_wise, table_row_wise or grid_shard"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(hotrep_cli_scratch() / "hp.db"));
}

}  // namespace
