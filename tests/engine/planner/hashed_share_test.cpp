// Row shards of hashed tables (hash_size) with skewed ids: the planner's and the simulator's
// expected lookups follow the fixed id hash (input/realized_share.h), so each hot id counts in
// the one bucket it lands in. The reference figures were computed by hand outside the project:
// libxxhash's XXH64 of the id as 8 little-endian bytes, seed 0, mod hash_size, with Zipf rank k
// as id k - 1 (a short C program), and agree with a user's count of the same workload.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/input/realized_share.h"
#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"
#include "support/build_paths.h"
#include "support/cli_run.h"

using namespace embedscope::engine;

namespace {
// small_hot_table_straggler.json with hash_size = rows / 10: 3 cold tables 50,000 ids (uniform,
// 1 a bag) into 5,000 rows, 3 hot tables 2,000 ids (Zipf 1.05, not permuted, 8 a bag) into 200
// rows; 4 ranks, batch 64 a rank (256 a step).
WorkloadSpec hashed_spec() {
  return load_workload_file(std::string(EMBEDSCOPE_TEST_DATA) + "/specs/hashed_zipf_row_wise.json");
}

ShardingPlan row_wise_plan(WorkloadSpec spec) {
  spec.sharding.default_type = ShardingType::row_wise;
  spec.sharding.per_table.clear();
  return plan_sharding(spec);
}
}  // namespace

// A hot table's 200 buckets in 4 blocks of 50: by hand 0.1831 / 0.3085 / 0.1475 / 0.3609 of its
// ids (the even share num_rows / hash_size said 0.25 each); a cold table's: 0.2503 / 0.2473 /
// 0.2504 / 0.2520 (50,000 uniform ids, each 1 / 50,000, in its bucket).
TEST(HashedRowShare, BlocksOfAHashedZipfTableByHand) {
  const WorkloadSpec spec = hashed_spec();
  const TableSpec& hot = spec.tables[3];
  const TableSpec& cold = spec.tables[0];
  ASSERT_EQ(hot.hash_size, 200);
  ASSERT_EQ(cold.hash_size, 5000);
  const double hot_by_hand[4] = {0.1831, 0.3085, 0.1475, 0.3609};
  const double cold_by_hand[4] = {0.2503, 0.2473, 0.2504, 0.2520};
  double hot_sum = 0, cold_sum = 0;
  for (int b = 0; b < 4; ++b) {
    const double h = realized_id_share(spec, hot, 3, 50 * b, 50), c = realized_id_share(spec, cold, 0, 1250 * b, 1250);
    EXPECT_NEAR(h, hot_by_hand[b], 1e-4) << b;
    EXPECT_NEAR(c, cold_by_hand[b], 1e-4) << b;
    hot_sum += h;
    cold_sum += c;
  }
  EXPECT_NEAR(hot_sum, 1.0, 1e-12);
  EXPECT_NEAR(cold_sum, 1.0, 1e-12);
  // id 0 (Zipf rank 1, 1 / H(2000, 1.05) = 12.9% of the ids) sits in bucket XXH64(0) % 200 =
  // 0x34c96acdcadb1bbb % 200 = 179 (input/hashing.h's example: % 10 == 9)
  EXPECT_GT(realized_id_share(spec, hot, 3, 179, 1), 0.12);
  EXPECT_EQ(realized_id_share(spec, hot, 3, 0, 0), 0.0);
}

// The planner's lookups of the workload sharded row_wise: per step 8 ids x 256 x 3 hot tables x
// their block's share + 256 x 3 cold x theirs. The user's count over 8 steps, by hand with the
// same hash: 10534 / 16699 / 8786 / 19277 (max/mean 1.39; the run measured 1.41); on main's
// even share the planner said 1728 a rank a step (13824 / 8), 1.00.
TEST(HashedRowShare, PlannerLookupsOfTheUsersWorkload) {
  const WorkloadSpec spec = hashed_spec();
  const ShardingPlan plan = row_wise_plan(spec);
  const auto look = expected_lookups_per_rank(spec, plan);
  ASSERT_EQ(look.size(), 4u);
  const double by_hand[4] = {10534, 16699, 8786, 19277};
  for (size_t r = 0; r < 4; ++r) EXPECT_NEAR(look[r] * 8 / by_hand[r], 1.0, 0.005) << r;
  const PlanStats st = plan_stats(spec, plan, load_hardware_profile("h100_sxm"));
  EXPECT_NEAR(st.lookups.max_over_mean, 1.39, 0.01);
}

// Uniform ids hashed stay even: the three cold tables alone, row_wise: max/mean within 1% of 1.
TEST(HashedRowShare, UniformHashedTableStaysEven) {
  WorkloadSpec spec = hashed_spec();
  spec.tables.resize(3);
  spec.features.resize(3);
  const auto look = expected_lookups_per_rank(spec, row_wise_plan(spec));
  const Imbalance im = imbalance(look);
  EXPECT_NEAR(im.max_over_mean, 1.0, 0.01);
  double sum = 0;
  for (double x : look) sum += x;
  EXPECT_NEAR(sum, 3.0 * 256, 1e-9);  // every id counted once
}

// The simulator's ids per rank (run --simulate --json, 8 steps) follow the same shares: the
// user saw 13824 on every rank.
TEST(HashedRowShare, SimulatedRunLooksUpTheHashedShares) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_hashed_share_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "sim.db").string();
  const auto r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI,
      "run " + std::string(EMBEDSCOPE_TEST_DATA) +
          "/specs/hashed_zipf_row_wise.json --sharding row_wise --simulate h100_sxm --gpus-per-node 4 --json "
          "--force-overwrite -o " + db,
      dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["ranks"].size(), 4u);
  const double by_hand[4] = {10534, 16699, 8786, 19277};
  for (size_t k = 0; k < 4; ++k)
    EXPECT_NEAR(j["ranks"][k]["ids_looked_up"].get<double>() / by_hand[k], 1.0, 0.005) << "rank " << k;
}
