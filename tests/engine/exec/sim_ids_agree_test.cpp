// A simulated run's ids looked up per rank are the same number in `run --json` and in `stats
// --json` of its session (crit42, tester42 F2: ranks 4-9 of a 16-rank row_wise criteo_kaggle read
// 257680, 257660, ... in run and 257700, 257700, ... in stats). The run's figure is the rank's
// expected ids of a step rounded once (the program's lookup rows); the session's per-shard load
// counters rounded each slot on its own and drifted by up to half an id a slot and step.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "support/cli_run.h"

TEST(SimIdsAgree, RunAndStatsGiveTheSameIdsLookedUp) {
  const auto dir = std::filesystem::temp_directory_path() / "embedscope_sim_ids_agree";
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "rw16.db").string();
  auto run = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI,
      "run --preset criteo_kaggle --simulate h100_sxm --nodes 2 --gpus-per-node 8 --sharding row_wise --force-overwrite "
      "--json -o " + db,
      dir);
  ASSERT_EQ(run.code, 0) << run.err;
  auto stats = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats --json " + db, dir);
  ASSERT_EQ(stats.code, 0) << stats.err;
  const auto r = nlohmann::json::parse(run.out), s = nlohmann::json::parse(stats.out);
  ASSERT_EQ(r["ranks"].size(), 16u);
  ASSERT_EQ(s["ranks"].size(), 16u);
  for (size_t k = 0; k < 16; ++k)
    EXPECT_EQ(s["ranks"][k]["ids_looked_up"], r["ranks"][k]["ids_looked_up"]) << "rank " << k;
  // tester42's figures of the run (unchanged by the fix): ranks 4..9
  const int64_t want[] = {257680, 257660, 257660, 257380, 250560, 248740};
  for (size_t k = 0; k < 6; ++k) EXPECT_EQ(s["ranks"][4 + k]["ids_looked_up"].get<int64_t>(), want[k]) << "rank " << 4 + k;
}
