// A simulated run's ids looked up per rank are the same number in `run --json` and in `stats
// --json` of its session (crit42, tester42 F2: ranks 4-9 of a 16-rank row_wise criteo_kaggle read
// 257680, 257660, ... in run and 257700, 257700, ... in stats). The run's figure is the rank's
// expected ids of a step rounded once (the program's lookup rows); the session's per-shard load
// counters rounded each slot on its own and drifted by up to half an id a slot and step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/input/id_share.h"
#include "embedscope/engine/input/input.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
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
  // The figures themselves: each step a rank looks up the expected ids of its row shards,
  // 512 x 16 ids a table (pooling factor 1) times the share of the table's ids its rows hold.
  // Since share43 that is the mass the feature's seeded permutation puts in them (tester42's
  // 257680, 257660, 257660, 257380, 250560, 248740 of ranks 4..9 were the even share, rows /
  // num_embeddings); checked here against the exact sum of every Zipf rank's mass (k + 1)^-alpha
  // / H(n, alpha) over the rows the permutation gives it (33.8 M ranks), 20 steps, within 0.2%.
  embedscope::engine::WorkloadSpec spec = embedscope::engine::load_preset("criteo_kaggle");
  spec.devices.count = 16;
  spec.sharding.default_type = embedscope::engine::ShardingType::row_wise;
  spec.sharding.per_table.clear();
  const embedscope::engine::ShardingPlan plan = embedscope::engine::plan_sharding(spec);
  std::vector<double> exact(16, 0.0);
  for (const auto& tp : plan.tables) {
    const auto& t = spec.tables[static_cast<size_t>(tp.table)];
    const int f = tp.table;  // one feature a table, in table order
    const double alpha = spec.features[static_cast<size_t>(f)].ids.alpha;
    const auto perm = embedscope::engine::feature_row_permutation(spec, f, t.num_embeddings);
    const double H = embedscope::engine::zipf_mass(t.num_embeddings, alpha);
    std::vector<int64_t> ends;  // the shards' row ends, ascending (row_wise: in rank order)
    for (const auto& sh : tp.shards) ends.push_back(sh.row_offset + sh.num_rows);
    for (int64_t k = 0; k < t.num_embeddings; ++k) {
      const size_t i = static_cast<size_t>(std::upper_bound(ends.begin(), ends.end(), perm(k)) - ends.begin());
      exact[static_cast<size_t>(tp.shards[i].rank)] += 512.0 * 16 * std::pow(static_cast<double>(k + 1), -alpha) / H;
    }
  }
  for (size_t k = 0; k < 16; ++k)
    EXPECT_NEAR(s["ranks"][k]["ids_looked_up"].get<double>() / (20 * exact[k]), 1.0, 2e-3) << "rank " << k;
}
