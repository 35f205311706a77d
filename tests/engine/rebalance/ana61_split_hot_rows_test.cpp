// `rebalance --split-hot-tables` on a session whose row_wise table replicates hot_rows: the
// policy changed the cooled row_wise table back to table_wise and failed ("table \"one\" has
// hot_rows but the plan shards it table_wise"); it now refuses that change, naming the hot rows,
// and the table stays row_wise. Also the live policy's trigger measure beside the proposal's.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/cli_run.h"

using nlohmann::json;

namespace {
std::filesystem::path ana61_rb_scratch() {
  static const auto dir = embedscope::test_support::fresh_scratch("es_ana61_rb_" + std::to_string(getpid()));
  return dir;
}
embedscope::test_support::CliResult ana61_rb_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, ana61_rb_scratch());
}

// 4 ranks, 16 samples a rank, 3 measured steps: "hot" 2,000 x 8 table_wise with 30 Zipf ids a
// bag (the straggler); "one": 1 row x 4, 2 ids a bag, row_wise with its row hot (replicated);
// "c0", "c1": 300 x 8 table_wise, 2 ids a bag.
json ana61_workload() {
  return {{"name", "ana61_split_hot_rows"},
          {"batch_size", 16},
          {"steps", 3},
          {"warmup_steps", 1},
          {"seed", 7},
          {"devices", {{"count", 4}, {"memory_bytes", 64 << 20}}},
          {"dense", {{"num_dense_features", 4}, {"bottom_mlp", {8}}, {"interaction", "cat"}, {"top_mlp", {8, 1}}}},
          {"tables",
           {{{"name", "hot"}, {"num_embeddings", 2000}, {"embedding_dim", 8}, {"feature_names", {"f_hot"}}},
            {{"name", "one"}, {"num_embeddings", 1}, {"embedding_dim", 4}, {"feature_names", {"f_one"}}},
            {{"name", "c0"}, {"num_embeddings", 300}, {"embedding_dim", 8}, {"feature_names", {"f_c0"}}},
            {{"name", "c1"}, {"num_embeddings", 300}, {"embedding_dim", 8}, {"feature_names", {"f_c1"}}}}},
          {"features",
           {{{"name", "f_hot"}, {"pooling_factor", 30}, {"ids", {{"distribution", "zipf"}, {"alpha", 1.05}}}},
            {{"name", "f_one"}, {"pooling_factor", 2}},
            {{"name", "f_c0"}, {"pooling_factor", 2}},
            {{"name", "f_c1"}, {"pooling_factor", 2}}}},
          {"sharding",
           {{"default", "table_wise"},
            {"tables",
             {{"hot", {{"type", "table_wise"}, {"ranks", {3}}}},
              {"one", {{"type", "row_wise"}, {"hot_rows", {0}}}},
              {"c0", {{"type", "table_wise"}, {"ranks", {0}}}},
              {"c1", {{"type", "table_wise"}, {"ranks", {1}}}}}}}}};
}
}  // namespace

TEST(Ana61SplitHotRows, ACooledRowWiseTableWithHotRowsStaysRowWise) {
  const auto wl = ana61_rb_scratch() / "w.json";
  std::ofstream(wl) << ana61_workload().dump(2);
  const auto db = ana61_rb_scratch() / "w.db";
  auto r = ana61_rb_cli("run " + wl.string() + " -o " + db.string());
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* split : {"row_wise", "both"}) {
    r = ana61_rb_cli("rebalance " + db.string() + " --split-hot-tables " + split + " --json");
    ASSERT_EQ(r.code, 0) << split << ": " << r.err << r.out;
    const json p = json::parse(r.out);
    bool refused = false;
    for (const auto& x : p["refused"])
      if (x["table"] == "one") {
        refused = true;
        EXPECT_NE(x["reason"].get<std::string>().find(
                      "row_wise back to table_wise on rank "),
                  std::string::npos)
            << x;
        EXPECT_NE(x["reason"].get<std::string>().find(
                      ": it has 1 hot_rows, whose replication needs row_wise, table_row_wise or grid_shard; it stays "
                      "row_wise"),
                  std::string::npos)
            << x;
      }
    EXPECT_TRUE(refused) << split << ": " << r.out;
    for (const auto& c : p["changes"]) EXPECT_NE(c["table"], "one") << c;
    // the proposed plan keeps "one" row_wise
    for (const auto& t : p["plan"]["tables"]) {
      if (t["name"] == "one") {
        EXPECT_EQ(t["sharding_type"], "row_wise") << t;
      }
    }
  }
}

// balance lookup_time: the proposal's "before" (each shard's median step x steps, summed per rank)
// and the live policy's trigger (each rank's median step x steps) are both printed, defined.
TEST(Ana61SplitHotRows, LookupTimePrintsTheTriggerMeasureBesideTheProposals) {
  const auto wl = ana61_rb_scratch() / "w2.json";
  std::ofstream(wl) << ana61_workload().dump(2);
  const auto db = ana61_rb_scratch() / "w2.db";
  auto r = ana61_rb_cli("run " + wl.string() + " -o " + db.string());
  ASSERT_EQ(r.code, 0) << r.err;
  r = ana61_rb_cli("rebalance " + db.string() + " --balance lookup_time --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json p = json::parse(r.out);
  ASSERT_TRUE(p["load_trigger"].is_array()) << r.out;
  ASSERT_EQ(p["load_trigger"].size(), 4u);
  double mx = 0, sum = 0;
  for (const auto& v : p["load_trigger"]) mx = std::max(mx, v.get<double>()), sum += v.get<double>();
  EXPECT_NEAR(p["imbalance_trigger"].get<double>(), mx / (sum / 4), 1e-9);
  r = ana61_rb_cli("rebalance " + db.string() + " --balance lookup_time");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("trigger      the live policy's `when` reads each rank's median step x 3 (the median of the "
                       "rank's per-step sums): max/mean "),
            std::string::npos)
      << r.out;
}
