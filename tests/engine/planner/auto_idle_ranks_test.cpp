// `plan --auto` names the chosen plan's ranks that hold no embedding rows, as `plan` does
// (sharding/idle_ranks.h): the note in its text, `ranks_without_rows` in its JSON.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/cli_run.h"

using nlohmann::json;

namespace {
embedscope::test_support::CliResult auto_idle_cli(const std::string& args) {
  static const auto dir = embedscope::test_support::fresh_scratch("es_auto_idle_ranks");
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, dir);
}
}  // namespace

// tiny's 4 tables, every one table_wise (--sharding-types table_wise) on 8 ranks: by hand, 4
// whole tables occupy 4 ranks; the search's best is greedy (largest first on the emptiest rank:
// t_c on 0, t_b on 1, t_a on 2, t_small on 3) so ranks 4-7 hold none. Before, plan --auto said
// nothing of them (plain plan did).
TEST(PlanAutoIdleRanks, TableWiseOnMoreRanksThanTablesNamesTheRanksWithoutRows) {
  auto r = auto_idle_cli("plan --auto --preset tiny --devices 8 --sharding-types table_wise");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\nnote: ranks 4-7 (4 of 8) hold no embedding rows (4 tables over 8 ranks): they look nothing "
                       "up but still join every collective (the embedding all-to-alls and the dense all-reduce); to "
                       "give them work shard the largest tables row_wise, table_row_wise or column_wise (`plan --auto` "
                       "chooses), or use fewer devices\n\nplanner search: "),
            std::string::npos)
      << r.out;
  r = auto_idle_cli("plan --auto --preset tiny --devices 8 --sharding-types table_wise --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["ranks_without_rows"], json({4, 5, 6, 7})) << r.out;
  std::set<int> used;
  for (const auto& t : j["tables"])
    for (const auto& s : t["shards"]) used.insert(s["rank"].get<int>());
  EXPECT_EQ(used, (std::set<int>{0, 1, 2, 3}));

  // 4 ranks: one table each, no note and an empty list
  r = auto_idle_cli("plan --auto --preset tiny --devices 4 --sharding-types table_wise");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("no embedding rows"), std::string::npos) << r.out;
  r = auto_idle_cli("plan --auto --preset tiny --devices 4 --sharding-types table_wise --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["ranks_without_rows"], json::array());
}

// The unrestricted search's plan of tiny on 8 ranks: ranks_without_rows is every rank that no
// shard of rows x cols > 0 names (recounted here from the plan's own shards), and the text's note
// names the same ranks. The search leaves one rank empty there (t_b, t_small whole, t_a and t_c
// column_wise over 2 and 3: 7 shards): one rank, said in the singular.
TEST(PlanAutoIdleRanks, TheSearchsOwnPlanNamesExactlyTheRanksItLeavesEmpty) {
  auto r = auto_idle_cli("plan --auto --preset tiny --devices 8 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  std::set<int> held;
  for (const auto& t : j["tables"])
    for (const auto& s : t["shards"])
      if (s["num_rows"].get<int64_t>() > 0 && s["num_cols"].get<int64_t>() > 0) held.insert(s["rank"].get<int>());
  std::vector<int> empty;
  for (int k = 0; k < 8; ++k)
    if (!held.count(k)) empty.push_back(k);
  EXPECT_EQ(j["ranks_without_rows"], json(empty)) << r.out;
  ASSERT_EQ(empty.size(), 1u) << r.out;
  r = auto_idle_cli("plan --auto --preset tiny --devices 8");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("note: rank " + std::to_string(empty[0]) +
                       " (1 of 8) holds no embedding rows (4 tables over 8 ranks): it looks nothing up but still joins "
                       "every collective (the embedding all-to-alls and the dense all-reduce); to give it work shard"),
            std::string::npos)
      << r.out;
}
