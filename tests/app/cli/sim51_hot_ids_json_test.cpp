// sim51: `stats --json` gives a simulated session's hot_ids: the replicas' load counters (shard
// -1) over the measured steps, the figure the text's hot-rows block divides by the steps (fixi50,
// retest49 R4). Before, the JSON's tables[].hot_ids stayed null (the session's table_storage_json:
// a simulated run measures no hot ids) while the text said "12.0 ids/step".
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path s51h_scratch() {
  static const fs::path dir = embedscope::test_support::fresh_scratch("es_sim51_hot_" + std::to_string(getpid()));
  return dir;
}

// fixi50's workload: 2 ranks, 8 samples a rank, 1 warm-up + 4 measured steps, no dense part;
// "tw": 20 x 4, 2 uniform ids a bag, table_wise; "hr": 40 x 4, 3 uniform ids a bag, row_wise with
// hot rows 0..9 (a quarter of its rows, so a quarter of its ids).
std::string s51h_workload() {
  const json wl = {
      {"name", "sim51_hot"},
      {"batch_size", 8},
      {"steps", 4},
      {"warmup_steps", 1},
      {"seed", 3},
      {"devices", {{"count", 2}, {"memory_bytes", 64 << 20}}},
      {"optimizer", {{"type", "sgd"}}},
      {"dense", nullptr},
      {"tables",
       {{{"name", "tw"}, {"num_embeddings", 20}, {"embedding_dim", 4}, {"feature_names", {"f_tw"}}},
        {{"name", "hr"}, {"num_embeddings", 40}, {"embedding_dim", 4}, {"feature_names", {"f_hr"}}}}},
      {"features", {{{"name", "f_tw"}, {"pooling_factor", 2}}, {{"name", "f_hr"}, {"pooling_factor", 3}}}},
      {"sharding",
       {{"default", "table_wise"},
        {"tables", {{"hr", {{"type", "row_wise"}, {"hot_rows", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}}}}}}}};
  const fs::path p = s51h_scratch() / "hot.json";
  std::ofstream(p) << wl.dump(2);
  return p.string();
}

embedscope::test_support::CliResult s51h_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, s51h_scratch());
}
}  // namespace

// The replicas' counters: 8 samples x 3 ids x 10/40 of the rows = 6 ids a rank a step, x 2 ranks
// x 4 measured steps = 48 (the warm-up step's 12 left out), which the text divides by the 4 steps:
// 12.0 ids/step. tw has no hot rows: its hot_ids stays as the session has it.
TEST(Sim51HotIdsJson, SimulatedStatsJsonCarriesTheReplicaCountersHotIds) {
  const std::string db = (s51h_scratch() / "sim.db").string();
  auto r = s51h_cli("run " + s51h_workload() + " --simulate h100_sxm -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  {
    const embedscope::sessions::SessionReader s(db);
    const json stored = json::parse(s.meta("table_storage_json"));
    EXPECT_TRUE(stored.at(1).at("hot_ids").is_null());  // the session measures none
  }
  r = s51h_cli("stats --json " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j.at("tables").size(), 2u);
  EXPECT_EQ(j["tables"][1]["table"], "hr");
  EXPECT_EQ(j["tables"][1]["hot_ids"], 48) << j["tables"][1].dump();
  EXPECT_EQ(j["tables"][0]["hot_rows"], 0);
  EXPECT_TRUE(j["tables"][0]["hot_ids"].is_null());  // no replica, nothing read in
  r = s51h_cli("stats " + db);  // the text's figure: the same 48 over the 4 steps
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(" 12.0 ids/step "), std::string::npos) << r.out;
}

// A measured (cpu) session keeps its own hot_ids in the JSON, which equal its replica counters.
TEST(Sim51HotIdsJson, MeasuredStatsJsonKeepsItsHotIds) {
  const std::string db = (s51h_scratch() / "cpu.db").string();
  auto r = s51h_cli("run " + s51h_workload() + " -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  json stored;
  {
    const embedscope::sessions::SessionReader s(db);
    stored = json::parse(s.meta("table_storage_json"));
  }
  ASSERT_TRUE(stored.at(1).at("hot_ids").is_number());
  r = s51h_cli("stats --json " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["tables"][1]["hot_ids"], stored[1]["hot_ids"]);
}
