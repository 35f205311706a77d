// Plans read from JSON (`embedscope run --plan`): round trip, every validation error, and a run
// of a hand-edited plan.
#include <gtest/gtest.h>

#include <limits>

#include <nlohmann/json.hpp>

#include "embedscope/engine/sharding/plan_json.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"

using namespace embedscope::engine;
using nlohmann::json;

namespace {
WorkloadSpec plan_json_tiny(int world, ShardingType type = ShardingType::table_wise) {
  WorkloadSpec s = load_preset("tiny");
  s.devices.count = world;
  s.sharding.default_type = type;
  s.sharding.per_table.clear();
  s.steps = 3;
  return s;
}
bool same(const ShardingPlan& a, const ShardingPlan& b) { return to_json(load_preset("tiny"), a) == to_json(load_preset("tiny"), b); }

std::string plan_json_error_of(const WorkloadSpec& s, const json& j) {
  try {
    plan_from_json(s, j, "p.json");
  } catch (const SpecError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST(PlanJson, RoundTripsEveryShardingType) {
  for (ShardingType t : {ShardingType::data_parallel, ShardingType::table_wise, ShardingType::row_wise,
                         ShardingType::column_wise, ShardingType::table_row_wise, ShardingType::table_column_wise,
                         ShardingType::grid_shard}) {
    WorkloadSpec s = plan_json_tiny(4, t);
    if (t == ShardingType::table_row_wise || t == ShardingType::table_column_wise || t == ShardingType::grid_shard)
      s.sharding.local_world_size = 2;
    const ShardingPlan p = plan_sharding(s);
    EXPECT_TRUE(same(plan_from_json(s, to_json(s, p), "p.json"), p)) << to_string(t);
  }
}

TEST(PlanJson, AcceptsWhatPlanJsonPrintsAndTablesInAnyOrder) {
  const WorkloadSpec s = plan_json_tiny(2);
  json j = to_json(s, plan_sharding(s));
  j["pipeline"] = "base";
  j["qcomms"] = json::object();
  j["network"] = json::object();
  j["memory"] = json::array();
  std::swap(j["tables"][0], j["tables"][3]);
  EXPECT_TRUE(same(plan_from_json(s, j, "p.json"), plan_sharding(s)));
}

// pipeline / qcomms / network are the workload's: a plan file that says otherwise is refused
// (the edit would be ignored), one that agrees (or leaves keys out) is accepted.
TEST(PlanJson, RefusesPipelineKeysThatDifferFromTheWorkload) {
  const WorkloadSpec s = plan_json_tiny(2);
  json j = to_json(s, plan_sharding(s));
  j["pipeline"] = "base";
  j["qcomms"] = to_json(s).at("qcomms");
  EXPECT_NO_THROW(plan_from_json(s, j, "p.json"));
  auto error = [&](const json& plan) {
    try {
      plan_from_json(s, plan, "p.json");
    } catch (const SpecError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  json semi = j;
  semi["pipeline"] = "semi_sync";
  EXPECT_EQ(error(semi).rfind("p.json: /pipeline: \"semi_sync\" differs from the workload's \"base\"; the workload "
                              "decides pipeline", 0), 0u) << error(semi);
  json q = j;
  q["qcomms"]["forward_precision"] = "bf16";
  EXPECT_EQ(error(q).rfind("p.json: /qcomms/forward_precision: \"bf16\" differs from the workload's \"fp32\"", 0), 0u)
      << error(q);
  json unknown = j;
  unknown["network"]["speed"] = 1;
  EXPECT_EQ(error(unknown), "p.json: /network/speed: the workload's network has no key 'speed'");
}

TEST(PlanJson, ErrorsNameTheFileTheShardAndTheReason) {
  const WorkloadSpec s = plan_json_tiny(2);
  const json good = to_json(s, plan_sharding(s));  // t_small, t_a, t_b on rank 1; t_c on rank 0
  json j = good;
  j["tables"][3]["shards"][0]["num_rows"] = 1200;
  EXPECT_EQ(plan_json_error_of(s, j),
            "p.json: /tables/3/shards/0: rows [0, 1200) are outside table t_c (1000 rows x 12 columns, table_wise)");
  j = good;
  j["tables"][1]["shards"][0]["rank"] = 2;
  EXPECT_EQ(plan_json_error_of(s, j), "p.json: /tables/1/shards/0: rank 2 is outside [0, 2)");
  j = good;
  j["world_size"] = 3;
  EXPECT_EQ(plan_json_error_of(s, j), "p.json: /world_size: the plan is for 3 ranks but the workload has devices.count 2");
  j = good;
  j["tables"].erase(2);
  EXPECT_EQ(plan_json_error_of(s, j), "p.json: /tables: table 't_b' of the workload is not planned");
  j = good;
  j["tables"][2]["name"] = "t_x";
  EXPECT_EQ(plan_json_error_of(s, j), "p.json: /tables/2/name: the workload has no table 't_x'");
  j = good;
  j["tables"][1]["name"] = "t_small";
  EXPECT_EQ(plan_json_error_of(s, j), "p.json: /tables/1/name: table 't_small' is planned twice");
  j = good;
  j["tables"][0]["shards"][0]["extra"] = 1;
  EXPECT_EQ(plan_json_error_of(s, j),
            "p.json: /tables/0/shards/0/extra: unknown key (expected one of: rank, row_offset, num_rows, col_offset, "
            "num_cols)");
  j = good;
  j["tables"][0]["sharding_type"] = "diagonal";
  EXPECT_NE(plan_json_error_of(s, j).find("p.json: /tables/0/sharding_type"), std::string::npos) << plan_json_error_of(s, j);
  j = good;
  j["tables"][3]["shards"][0]["num_rows"] = "many";
  EXPECT_EQ(plan_json_error_of(s, j), "p.json: /tables/3/shards/0/num_rows: must be an integer, got \"many\"");
  j = good;
  j["tables"][3]["shards"].push_back(j["tables"][3]["shards"][0]);
  EXPECT_EQ(plan_json_error_of(s, j), "p.json: /tables/3/shards: table t_c (1000 rows x 12 columns, table_wise): one shard, got 2");
  EXPECT_EQ(plan_json_error_of(s, json::array()), "p.json: /: a sharding plan is a JSON object (as `embedscope plan --json` prints)");
}

// Numbers a hand edit can make: a rank or world size beyond int must not wrap to a valid one
// (4294967297 was read as rank 1 and ran), an offset near INT64_MAX must not overflow into a
// garbage range, and an unsigned number above INT64_MAX must not wrap to a negative one.
TEST(PlanJson, HugeNumbersAreBadInputNotWrapped) {
  const WorkloadSpec s = plan_json_tiny(2);
  const json good = to_json(s, plan_sharding(s));  // t_c on rank 0
  json j = good;
  j["tables"][3]["shards"][0]["rank"] = int64_t{4294967297};
  EXPECT_EQ(plan_json_error_of(s, j), "p.json: /tables/3/shards/0/rank: is too large, got 4294967297");
  j = good;
  j["world_size"] = int64_t{4294967298};
  EXPECT_EQ(plan_json_error_of(s, j), "p.json: /world_size: is too large, got 4294967298");
  j = good;
  j["tables"][3]["shards"][0]["row_offset"] = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(plan_json_error_of(s, j),
            "p.json: /tables/3/shards/0: rows [9223372036854775807, 9223372036854775807 + 1000) are outside table t_c "
            "(1000 rows x 12 columns, table_wise)");
  j = good;
  j["tables"][3]["shards"][0]["col_offset"] = std::numeric_limits<int64_t>::max();
  EXPECT_NE(plan_json_error_of(s, j).find("p.json: /tables/3/shards/0: columns [9223372036854775807, 9223372036854775807 + 12) "
                                "are outside"),
            std::string::npos)
      << plan_json_error_of(s, j);
  j = good;
  j["tables"][3]["shards"][0]["row_offset"] = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(plan_json_error_of(s, j), "p.json: /tables/3/shards/0/row_offset: is too large, got 18446744073709551615");
}

TEST(PlanJson, RowAndColumnRangesMustCoverTheTableOnce) {
  const WorkloadSpec rw = plan_json_tiny(2, ShardingType::row_wise);
  const json good = to_json(rw, plan_sharding(rw));  // t_c rows [0, 500) on rank 0, [500, 1000) on rank 1
  json j = good;
  j["tables"][3]["shards"][1]["row_offset"] = 400;
  j["tables"][3]["shards"][1]["num_rows"] = 600;
  EXPECT_EQ(plan_json_error_of(rw, j),
            "p.json: /tables/3/shards: table t_c (1000 rows x 12 columns, row_wise): rows [400, 500) are held by two shards");
  j = good;
  j["tables"][3]["shards"][1]["num_rows"] = 400;
  EXPECT_EQ(plan_json_error_of(rw, j),
            "p.json: /tables/3/shards: table t_c (1000 rows x 12 columns, row_wise): rows [900, 1000) are held by no shard");
  j = good;
  j["tables"][3]["shards"][1]["rank"] = 0;
  EXPECT_EQ(plan_json_error_of(rw, j),
            "p.json: /tables/3/shards: table t_c (1000 rows x 12 columns, row_wise): one shard on each of the ranks [0, 1], "
            "got [0, 0]");
  // uneven but complete row ranges are a valid plan
  j = good;
  j["tables"][3]["shards"][0]["num_rows"] = 100;
  j["tables"][3]["shards"][1]["row_offset"] = 100;
  j["tables"][3]["shards"][1]["num_rows"] = 900;
  EXPECT_EQ(plan_from_json(rw, j, "p.json").tables[3].shards[1].num_rows, 900);

  const WorkloadSpec cw = plan_json_tiny(2, ShardingType::column_wise);
  json c = to_json(cw, plan_sharding(cw));
  c["tables"][3]["shards"][0]["num_cols"] = 3;  // t_c: 12 columns as 8 + 4; now 3 + 4
  EXPECT_NE(plan_json_error_of(cw, c).find("columns [3, 8) are held by no shard"), std::string::npos) << plan_json_error_of(cw, c);
  c = to_json(cw, plan_sharding(cw));
  c["tables"][3]["shards"][0]["row_offset"] = 1;
  c["tables"][3]["shards"][0]["num_rows"] = 999;
  EXPECT_NE(plan_json_error_of(cw, c).find("a shard holds every row, got rows [1, 1000)"), std::string::npos) << plan_json_error_of(cw, c);
}

// table_column_wise keeps its shards inside its node; grid_shard's column blocks each cover the
// rows over the ranks of one node. tiny on 4 ranks in 2 nodes: t_c (1000 x 12) as table_column_wise
// on node 0 (8 + 4 columns on ranks 0, 1); as grid_shard columns [0, 8) rows 500 + 500 on ranks
// 0, 1 and columns [8, 12) on ranks 2, 3.
TEST(PlanJson, NodeBoundTypesKeepTheirShardsInANode) {
  WorkloadSpec tcw = plan_json_tiny(4, ShardingType::table_column_wise);
  tcw.sharding.local_world_size = 2;
  json t = to_json(tcw, plan_sharding(tcw));
  ASSERT_EQ(t["tables"][3]["node"], 0);
  t["tables"][3]["shards"][1]["rank"] = 2;
  EXPECT_EQ(plan_json_error_of(tcw, t),
            "p.json: /tables/3/shards/1: table t_c (1000 rows x 12 columns, table_column_wise): rank 2 is not on node 0 "
            "(ranks [0, 2))");
  t = to_json(tcw, plan_sharding(tcw));
  t["tables"][3].erase("node");
  EXPECT_EQ(plan_json_error_of(tcw, t),
            "p.json: /tables/3/node: table t_c (1000 rows x 12 columns, table_column_wise): node -1 is outside [0, 2)");

  WorkloadSpec grid = plan_json_tiny(4, ShardingType::grid_shard);
  grid.sharding.local_world_size = 2;
  const json good = to_json(grid, plan_sharding(grid));
  ASSERT_EQ(good["tables"][3]["shards"].size(), 4u);
  json g = good;
  g["tables"][3]["shards"][1]["rank"] = 2;  // block [0, 8) on ranks 0 and 2: two nodes
  EXPECT_EQ(plan_json_error_of(grid, g),
            "p.json: /tables/3/shards: table t_c (1000 rows x 12 columns, grid_shard): the shards of columns [0, 8) are "
            "one on each rank of one node (node 0: ranks [0, 2))");
  g = good;
  g["tables"][3]["shards"][3]["num_rows"] = 400;
  EXPECT_EQ(plan_json_error_of(grid, g),
            "p.json: /tables/3/shards: table t_c (1000 rows x 12 columns, grid_shard), columns [8, 12): rows [900, 1000) "
            "are held by no shard");
  g = good;
  g["tables"][3]["shards"][2]["num_cols"] = 2;  // block [8, 10) of ranks 2 and [8, 12) of rank 3
  EXPECT_NE(plan_json_error_of(grid, g).find("the shards of columns [8, 10) are one on each rank of one node"),
            std::string::npos)
      << plan_json_error_of(grid, g);
  g = good;
  g["tables"][3]["node"] = 1;
  EXPECT_EQ(plan_json_error_of(grid, g),
            "p.json: /tables/3/node: only table_row_wise and table_column_wise tables have a node (t_c is grid_shard)");
}

TEST(PlanJson, RunTrainingValidatesTheGivenPlan) {
  const WorkloadSpec s = plan_json_tiny(2);
  ShardingPlan p = plan_sharding(s);
  p.tables[3].shards[0].rank = 5;
  EXPECT_THROW(run_training(s, p), SpecError);
}

// A hand-edited plan runs as written: t_c (1000 x 12, 2 ids per bag) moves from rank 0 to rank
// 1, so rank 0 looks up nothing and rank 1 every id.
TEST(PlanJson, AHandEditedPlanRunsAsWritten) {
  const WorkloadSpec s = plan_json_tiny(2);
  json j = to_json(s, plan_sharding(s));
  ASSERT_EQ(j["tables"][3]["shards"][0]["rank"], 0);
  j["tables"][3]["shards"][0]["rank"] = 1;
  const ShardingPlan p = plan_from_json(s, j, "moved.json");
  TrainerOptions opt;
  opt.trace = false;
  const RunResult r = run_training(s, p, opt);
  ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
  EXPECT_EQ(r.plan.tables[3].shards[0].rank, 1);
  EXPECT_EQ(r.ranks[0].ids_looked_up, 0);
  EXPECT_GT(r.ranks[1].ids_looked_up, 0);
  // under the planner's plan rank 0 looks up f_c: 3 steps x 2 ranks x 8 bags x 2 ids
  const RunResult planned = run_training(s, plan_sharding(s), opt);
  EXPECT_EQ(planned.ranks[0].ids_looked_up, 3 * 2 * 8 * 2);
  EXPECT_EQ(r.ranks[1].ids_looked_up, planned.ranks[0].ids_looked_up + planned.ranks[1].ids_looked_up);
}
