// misc55 (tester55 F6): `rebalance` shows what smaller byte budgets reach - the same proposal
// re-run under each budget that admits the k smallest of its moves - so that a user sees that
// 4% of the bytes give almost all of the gain (3 cold 50,000-row tables and 3 hot 2,000-row ones,
// all hot on rank 3: 6.7 MiB of moves for ids max/mean 1.25, 265.6 KiB for 1.33).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/rebalance/move_budget.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"
#include "support/cli_run.h"

namespace es = embedscope::engine;
namespace rb = embedscope::engine::rebalance;
using nlohmann::json;

namespace {
std::filesystem::path scratch() {
  static const auto dir = embedscope::test_support::fresh_scratch("es_misc55_budgets_" + std::to_string(getpid()));
  return dir;
}
embedscope::test_support::CliResult cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, scratch());
}

rb::Proposal proposal_of(const std::vector<int64_t>& move_bytes) {
  rb::Proposal p;
  for (size_t k = 0; k < move_bytes.size(); ++k) {
    p.moves.push_back({static_cast<int>(k), 0, 1, 0, move_bytes[k]});
    p.bytes_moved += move_bytes[k];
  }
  return p;
}

// tester55's hot.json: 3 cold 50,000 x 16 tables (1 id a sample), 3 hot 2,000 x 16 tables (16
// Zipf ids a sample), 32 samples a rank, 4 cpu ranks, rowwise_adagrad, 3 measured steps; greedy
// by bytes puts a cold table on each of ranks 0..2 and the 3 hot ones on rank 3.
json hot_workload() {
  json j = es::to_json(es::load_preset("tiny"));
  j["tables"] = json::array();
  j["features"] = json::array();
  for (int k = 0; k < 3; ++k) {
    const std::string c = "cold_" + std::to_string(k), fc = "fc" + std::to_string(k);
    j["tables"].push_back({{"name", c}, {"num_embeddings", 50000}, {"embedding_dim", 16}, {"pooling", "sum"}, {"feature_names", {fc}}});
    j["features"].push_back({{"name", fc}, {"pooling_factor", 1}, {"ids", "uniform"}});
  }
  for (int k = 0; k < 3; ++k) {
    const std::string h = "hot_" + std::to_string(k), fh = "fh" + std::to_string(k);
    j["tables"].push_back({{"name", h}, {"num_embeddings", 2000}, {"embedding_dim", 16}, {"pooling", "sum"}, {"feature_names", {fh}}});
    j["features"].push_back({{"name", fh}, {"pooling_factor", 16},
                             {"ids", {{"distribution", "zipf"}, {"alpha", 1.05}, {"permute", true}}}});
  }
  j["batch_size"] = 32;
  j["steps"] = 3;
  j["warmup_steps"] = 1;
  j["devices"] = {{"count", 4}, {"backend", "cpu"}, {"memory_bytes", 64 << 20}};
  j["optimizer"] = {{"type", "rowwise_adagrad"}, {"learning_rate", 0.05}};
  j["dense"] = {{"num_dense_features", 4}, {"bottom_mlp", {8}}, {"interaction", "cat"}, {"top_mlp", {16, 1}}};
  j["sharding"] = {{"default", "table_wise"}};
  return j;
}
}  // namespace

TEST(Misc55, SmallerBudgetsAreTheRunningSumsOfTheSmallestMoves) {
  // two cold moves of 3,400,000 B and two hot of 136,000 B: 136,000, 272,000, 3,672,000 (the
  // fourth sum is the proposal's own 7,072,000)
  const rb::Proposal p = proposal_of({3'400'000, 136'000, 3'400'000, 136'000});
  EXPECT_EQ(rb::smaller_budgets(p, 8), (std::vector<int64_t>{136'000, 272'000, 3'672'000}));
  // at most 2: evenly spaced by rank, the largest kept
  EXPECT_EQ(rb::smaller_budgets(p, 2), (std::vector<int64_t>{272'000, 3'672'000}));
  EXPECT_TRUE(rb::smaller_budgets(p, 0).empty());
  // one move: no smaller budget moves anything
  EXPECT_TRUE(rb::smaller_budgets(proposal_of({136'000}), 8).empty());
  // equal sums once: 3 moves of 100 -> 100, 200
  EXPECT_EQ(rb::smaller_budgets(proposal_of({100, 100, 100}), 8), (std::vector<int64_t>{100, 200}));
  // budget_trade_off: a re-run whose result equals the row above is left out
  std::vector<int64_t> asked;
  const auto rows = rb::budget_trade_off(p, 8, [&](int64_t budget) {
    asked.push_back(budget);
    rb::Proposal q = proposal_of(budget < 272'000 ? std::vector<int64_t>{136'000} : std::vector<int64_t>{136'000, 136'000});
    q.imbalance_before = 3.0;
    q.imbalance_after = budget < 272'000 ? 2.5 : 1.33;
    return q;
  });
  EXPECT_EQ(asked, (std::vector<int64_t>{136'000, 272'000, 3'672'000}));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].max_bytes_per_move, 136'000);
  EXPECT_EQ(rows[0].bytes_moved, 136'000);
  EXPECT_EQ(rows[0].tables, 1);
  EXPECT_DOUBLE_EQ(rows[0].imbalance_after, 2.5);
  EXPECT_TRUE(rows[0].worth_it);
  EXPECT_EQ(rows[1].max_bytes_per_move, 272'000);
  EXPECT_EQ(rows[1].bytes_moved, 272'000);
  EXPECT_EQ(rows[1].tables, 2);
}

// A larger budget whose balance reads the same at 2 decimals (1.02141 with 5 moves of 1 MiB,
// then 1.02114 with 5 moves of 5.34 MiB) is left out: 5x the bytes for no printed gain; one
// that reaches 1.01 (rounds apart) stays.
TEST(Misc55, BudgetRowThatRoundsToTheRowAboveIsLeftOut) {
  const rb::Proposal p = proposal_of(std::vector<int64_t>(10, 5'600'000));
  const auto rows = rb::budget_trade_off(p, 3, [&](int64_t budget) {
    rb::Proposal q = proposal_of(std::vector<int64_t>(5, budget / 5));
    q.imbalance_before = 1.29;
    q.imbalance_after = budget <= 18'666'667 ? 1.02141 : budget <= 37'333'334 ? 1.02114 : 1.0149;
    return q;
  });
  // budgets: the running sums 5.6, 11.2, ..., 50.4 MB, 3 of the 9 evenly by rank: 16.8, 33.6, 50.4 MB
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].max_bytes_per_move, 16'800'000);
  EXPECT_DOUBLE_EQ(rows[0].imbalance_after, 1.02141);
  EXPECT_EQ(rows[1].max_bytes_per_move, 50'400'000);
  EXPECT_DOUBLE_EQ(rows[1].imbalance_after, 1.0149);
}

TEST(Misc55, RebalanceShowsWhatSmallerBudgetsReach) {
  const auto wl = scratch() / "hot.json";
  std::ofstream(wl) << hot_workload().dump(2);
  const auto db = scratch() / "hot.db";
  auto r = cli("run " + wl.string() + " -o " + db.string() + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  r = cli("rebalance " + db.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json p = json::parse(r.out);
  // 3 steps x 128 samples: a cold table 384 ids, a hot one 16 x 384 = 6,144
  EXPECT_EQ(p["ids_before"], json({384, 384, 384, 3 * 6144}));
  // the optimum: the 3 cold tables on one rank, a hot one on each other: max 6,144 of mean 4,896
  EXPECT_NEAR(p["imbalance_after_predicted"].get<double>(), 6144.0 / 4896, 1e-12);
  // a move: rows x (16 fp32 + 1 rowwise_adagrad float) x 4 B = 68 B a row
  EXPECT_EQ(p["bytes_moved"], 2 * 50000 * 68 + 2 * 2000 * 68);
  const json& b = p["smaller_budgets"];
  ASSERT_EQ(b.size(), 2u) << b.dump();
  // 136,000 B: one hot table off rank 3, which keeps 2 x 6,144 = 12,288
  EXPECT_EQ(b[0]["max_bytes_per_move"], 136000);
  EXPECT_EQ(b[0]["bytes_moved"], 136000);
  EXPECT_EQ(b[0]["tables_moved"], 1);
  EXPECT_NEAR(b[0]["imbalance_after_predicted"].get<double>(), 12288.0 / 4896, 1e-12);
  // 272,000 B: two hot tables moved to cold ranks: 384 + 6,144 = 6,528 (1.33); 3,672,000 reaches
  // no more (a cold move alone lowers no maximum), so it is left out
  EXPECT_EQ(b[1]["max_bytes_per_move"], 272000);
  EXPECT_EQ(b[1]["bytes_moved"], 272000);
  EXPECT_EQ(b[1]["tables_moved"], 2);
  EXPECT_NEAR(b[1]["imbalance_after_predicted"].get<double>(), 6528.0 / 4896, 1e-12);
  // each row is what `rebalance --max-bytes-per-move B` proposes
  for (const auto& row : b) {
    r = cli("rebalance " + db.string() + " --json --max-bytes-per-move " + std::to_string(row["max_bytes_per_move"].get<int64_t>()));
    ASSERT_EQ(r.code, 0) << r.err;
    const json q = json::parse(r.out);
    EXPECT_EQ(q["bytes_moved"], row["bytes_moved"]);
    EXPECT_DOUBLE_EQ(q["imbalance_after_predicted"].get<double>(), row["imbalance_after_predicted"].get<double>());
  }
  // the text
  r = cli("rebalance " + db.string());
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s : {"budgets      the same proposal under a smaller --max-bytes-per-move",
                        "  --max-bytes-per-move 136000       2.51  1 table(s), 132.8 KiB",
                        "  --max-bytes-per-move 272000       1.33  2 table(s), 265.6 KiB",
                        "  (this proposal: 1.25, 4 table(s), 6.7 MiB)"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}
