// Exchanges that do not pay (issue 17, rebalance/policy.h propose): LPT places the hot tables
// first and the cold ones on whichever rank came out lightest, so it can send identical cold
// tables round the ranks (hot_table_straggler's lookup_time runs moved 2-3 x 62.9 MiB of them for
// the balance of 3 hot-table moves); the exchange of two ranks' tables takes them home. And with
// balance lookup_time, a move whose own gain is within 2 sigma of the measured noise is undone.
// Hand-computed proposals.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "embedscope/engine/rebalance/policy.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"
#include "engine/rebalance/policy_fixtures.h"

using namespace embedscope::engine;
using namespace embedscope::engine::rebalance;
using nlohmann::json;
using embedscope::test_support::first_shard_ranks;
using embedscope::test_support::table_load;

namespace {

struct ExchangeTable {
  std::string name;
  int64_t rows;
  int rank;
};

/// Table-wise tables of 32 fp32 columns on the given ranks, `world` ranks of 1 GiB, sgd.
WorkloadSpec exchange_spec(int world, const std::vector<ExchangeTable>& tables) {
  json j = {{"name", "rebalance_exchange"},
            {"batch_size", 8},
            {"steps", 4},
            {"devices", {{"count", world}, {"memory_bytes", int64_t{1} << 30}}},
            {"optimizer", {{"type", "sgd"}}},
            {"dense", nullptr},
            {"tables", json::array()},
            {"sharding", {{"default", "table_wise"}, {"tables", json::object()}}}};
  for (const ExchangeTable& t : tables) {
    j["tables"].push_back({{"name", t.name}, {"num_embeddings", t.rows}, {"embedding_dim", 32}, {"feature_names", {"f_" + t.name}}});
    j["sharding"]["tables"][t.name] = {{"type", "table_wise"}, {"ranks", {t.rank}}};
  }
  return parse_workload(j, "rebalance_exchange");
}

}  // namespace

TEST(RebalanceExchange, ColdTablesSentRoundTheRanksGoHome) {
  // hot_table_straggler's shape with a measured load: c0..c2 (500,000 rows, 64,000,000 bytes)
  // on ranks 0..2, loads {340, 320, 300}; h0..h3 (20,000 rows, 2,560,000 bytes) on rank 3, loads
  // {670, 680, 690, 700}: {340, 320, 300, 2740}, total 3700.
  const WorkloadSpec s = exchange_spec(4, {{"c0", 500000, 0}, {"c1", 500000, 1}, {"c2", 500000, 2}, {"h0", 20000, 3},
                                           {"h1", 20000, 3}, {"h2", 20000, 3}, {"h3", 20000, 3}});
  const ShardingPlan cur = plan_sharding(s);
  const Proposal p = propose(s, cur, table_load({340, 320, 300, 670, 680, 690, 700}), 0);
  EXPECT_DOUBLE_EQ(p.imbalance_before, 2740.0 * 4 / 3700);
  // LPT (descent reaches 1020, LPT 1010: LPT is chosen): h3 stays, h2 -> 0, h1 -> 1, h0 -> 2
  // ({690, 680, 670, 700}), then c0 (340) -> rank 2 (670, the lightest), c1 stays (680), c2 ->
  // rank 0 (690): {990, 1000, 1010, 700}, 5 moves, 3 x 2,560,000 + 2 x 64,000,000 bytes. Neither
  // cold move can be undone alone (rank 0 or 2 would carry 1330 / 1310 > 1010 x 1.02). The
  // exchange of ranks 0 and 2 (h2 + c2 <-> h0 + c0) takes both cold tables home: the two ranks'
  // loads swap, {1010, 1000, 990, 700}, the same maximum, for 3 hot tables alone.
  EXPECT_EQ(first_shard_ranks(p.plan), (std::vector<int>{0, 1, 2, 0, 1, 2, 3}));
  ASSERT_EQ(p.moves.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(p.moves[i].table, 3 + static_cast<int>(i));
    EXPECT_EQ(p.moves[i].from, 3);
    EXPECT_EQ(p.moves[i].to, static_cast<int>(i));
    EXPECT_EQ(p.moves[i].bytes, 2560000);
  }
  EXPECT_EQ(p.bytes_moved, 3 * 2560000);
  EXPECT_EQ(p.load_after, (std::vector<int64_t>{1010, 1000, 990, 700}));
  EXPECT_DOUBLE_EQ(p.imbalance_after, 1010.0 * 4 / 3700);
  EXPECT_TRUE(p.refused.empty());
}

TEST(RebalanceExchange, AMoveWithinTwiceTheNoiseIsUndone) {
  // 3 ranks, 5 tables of 1,000 rows (128,000 bytes each): rank 0 {h1 100, h2 100, c 8}, rank 1
  // {b 80}, rank 2 empty: {208, 80, 0}, total 288, mean 96, max/mean 2.1667. Descent (2 moves,
  // LPT 3, the same maximum 100): h1 -> 2 ({108, 80, 100}), c -> 1 ({100, 88, 100}). With the ids
  // measure (noise 0) the limit is 100 + floor(2) = 102: c back gives 108, kept; no exchange
  // lowers the bytes (every table weighs the same).
  const WorkloadSpec s = exchange_spec(3, {{"h1", 1000, 0}, {"h2", 1000, 0}, {"c", 1000, 0}, {"b", 1000, 1}});
  const ShardingPlan cur = plan_sharding(s);
  const auto load = table_load({100, 100, 8, 80});
  const Proposal ids = propose(s, cur, load, 0);
  ASSERT_EQ(ids.moves.size(), 2u);
  EXPECT_EQ(ids.moves[0].table, 0);
  EXPECT_EQ(ids.moves[0].to, 2);
  EXPECT_EQ(ids.moves[1].table, 2);
  EXPECT_EQ(ids.moves[1].to, 1);
  EXPECT_EQ(ids.load_after, (std::vector<int64_t>{100, 88, 100}));
  // lookup_time with noise 0.05 (max/mean units): allowance floor(2 x 0.05 x 96) = 9, limit 109:
  // c's own gain (108 -> 100, 8 <= 9) is within the noise and undone; h1's (200 -> 108) is not
  EXPECT_EQ(noise_allowance({208, 80, 0}, 0.05), 9);
  const Proposal noisy = propose(s, cur, load, 0, 0.05);
  ASSERT_EQ(noisy.moves.size(), 1u);
  EXPECT_EQ(noisy.moves[0].table, 0);
  EXPECT_EQ(noisy.moves[0].to, 2);
  EXPECT_EQ(noisy.bytes_moved, 128000);
  EXPECT_EQ(noisy.load_after, (std::vector<int64_t>{108, 80, 100}));
  EXPECT_DOUBLE_EQ(noisy.imbalance_after, 108.0 * 3 / 288);
  // noise 0.04: allowance floor(7.68) = 7 < 8: c's move clears it and stays
  EXPECT_EQ(noise_allowance({208, 80, 0}, 0.04), 7);
  EXPECT_EQ(propose(s, cur, load, 0, 0.04).moves.size(), 2u);
  // a noise that would undo every move leaves the 2% result, for the noise rule (noise.h) to hold
  // with its numbers: allowance floor(2 x 1.0 x 96) = 192 puts even h1 back (200 <= 100 + 192)
  const Proposal all = propose(s, cur, load, 0, 1.0);
  EXPECT_EQ(all.moves.size(), 2u);
  EXPECT_EQ(noise_allowance({3000, 3000, 3000, 4800}, 0.1), 690);  // policy.h's example
  EXPECT_EQ(noise_allowance({208, 80, 0}, 0), 0);
}
