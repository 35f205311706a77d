// The planner's messages a user of a DLRM-like job on 8 GPUs asked for: ranks with no embedding
// rows named by plan, run and scaling (sharding/idle_ranks.h); what to try when a plan does not
// fit (check_memory_fits); and plan's dense column the same on every rank under every plan.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "embedscope/engine/sharding/idle_ranks.h"
#include "support/cli_run.h"

using nlohmann::json;
namespace es = embedscope::engine;

namespace {
std::filesystem::path plan58_scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("es_plan58_" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}
using Plan58Result = embedscope::test_support::CliResult;
Plan58Result plan58_cli(const std::string& args) { return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, plan58_scratch()); }

es::ShardingPlan plan58_plan_of(int world, const std::vector<std::vector<es::Shard>>& tables) {
  es::ShardingPlan p;
  p.world_size = world;
  p.local_world_size = world;
  for (size_t t = 0; t < tables.size(); ++t) {
    es::TablePlan tp;
    tp.table = static_cast<int>(t);
    tp.shards = tables[t];
    p.tables.push_back(tp);
  }
  return p;
}
}  // namespace

// By hand: 2 table_wise tables on ranks 0 and 2 of 6, a row_wise table whose shard on rank 5 is
// empty (0 rows) and one on rank 3 of 0 columns: ranks 1, 3, 4, 5 hold no rows.
TEST(IdleRanks, RanksWithoutRowsAndTheirNote) {
  const es::ShardingPlan p = plan58_plan_of(6, {{{0, 0, 10, 0, 8}}, {{2, 0, 10, 0, 8}}, {{5, 3, 0, 0, 8}, {3, 0, 3, 0, 0}}});
  EXPECT_EQ(es::ranks_without_rows(p), (std::vector<int>{1, 3, 4, 5}));
  EXPECT_EQ(es::format_rank_list({1, 3, 4, 5}), "ranks 1, 3-5");
  EXPECT_EQ(es::format_rank_list({4, 5, 6, 7}), "ranks 4-7");
  EXPECT_EQ(es::format_rank_list({5}), "rank 5");
  EXPECT_EQ(es::format_rank_list({}), "");
  EXPECT_EQ(es::idle_ranks_note(p).rfind("note: ranks 1, 3-5 (4 of 6) hold no embedding rows (3 tables over 6 ranks): "
                                         "they look nothing up but still join every collective",
                                         0),
            0u)
      << es::idle_ranks_note(p);
  EXPECT_EQ(es::idle_ranks_note(plan58_plan_of(2, {{{0, 0, 1, 0, 4}}, {{1, 0, 1, 0, 4}}})), "");
}

// tiny's 4 tables table_wise on 8 ranks: greedy puts one on each of ranks 0-3, ranks 4-7 hold
// none (tester58 F4: plan, run and scaling said nothing).
TEST(IdleRanks, PlanRunAndScalingNameTheRanksWithNoShard) {
  Plan58Result r = plan58_cli("plan --preset tiny --devices 8 --sharding table_wise");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("note: ranks 4-7 (4 of 8) hold no embedding rows (4 tables over 8 ranks): they look nothing up "
                       "but still join every collective (the embedding all-to-alls and the dense all-reduce); to give "
                       "them work shard the largest tables row_wise, table_row_wise or column_wise (`plan --auto` "
                       "chooses), or use fewer devices\n"),
            std::string::npos)
      << r.out;
  r = plan58_cli("plan --preset tiny --devices 8 --sharding table_wise --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["ranks_without_rows"], json({4, 5, 6, 7}));
  r = plan58_cli("plan --preset tiny --devices 4 --sharding table_wise");  // one table a rank: no note
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("hold no embedding rows"), std::string::npos) << r.out;
  r = plan58_cli("plan --preset tiny --devices 8 --sharding row_wise");  // t_c's 1000 rows give every rank some
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("hold no embedding rows"), std::string::npos) << r.out;

  r = plan58_cli("run --preset tiny --devices 8 --steps 1 --held-out-batches 0 -o " + (plan58_scratch() / "tiny8.db").string() +
          " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("note: ranks 4-7 (4 of 8) hold no embedding rows (4 tables over 8 ranks)"), std::string::npos)
      << r.err;

  r = plan58_cli("scaling --preset tiny --simulate h100_sxm --gpus 8 --shardings table_wise --steps 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("table_wise at 8 GPUs: ranks "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" (4 of 8) hold no embedding rows (4 tables): they look nothing up but still join every "
                       "collective; try row_wise or table_row_wise for the largest tables, or fewer GPUs"),
            std::string::npos)
      << r.out;
  r = plan58_cli("scaling --preset tiny --simulate h100_sxm --gpus 8 --shardings table_wise --steps 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["points"].size(), 1u);
  EXPECT_EQ(j["points"][0]["ranks_without_rows"].size(), 4u) << r.out;
}

// A plan that does not fit says what to try, naming the largest table (tester58 F5). "big" is
// 100,000 x 64 fp32 = 25,600,000 B = 24.4 MiB; devices of 16 MiB.
TEST(MemoryRefusal, SaysWhatToTry) {
  const json w = {{"name", "oom"},
                  {"tables",
                   {{{"name", "small"}, {"num_embeddings", 10}, {"embedding_dim", 8}, {"feature_names", {"fs"}}},
                    {{"name", "big"}, {"num_embeddings", 100000}, {"embedding_dim", 64}, {"feature_names", {"fb"}}}}},
                  {"features", {{{"name", "fs"}, {"pooling_factor", 1}}, {{"name", "fb"}, {"pooling_factor", 1}}}},
                  {"batch_size", 4},
                  {"devices", {{"count", 2}, {"memory_bytes", 16 << 20}}}};
  const auto f = plan58_scratch() / "oom.json";
  std::ofstream(f) << w.dump();
  const Plan58Result r = plan58_cli("plan " + f.string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("/devices/memory_bytes: the workload does not fit on the devices under this sharding plan:\n  "
                       "rank "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("\n  to try: `plan --auto` (a plan that fits, if one does; with --allow-storage "
                       "fp16,bf16_state,int8,host_cached it may also store the largest tables or their optimizer state "
                       "smaller, or the tables in host memory), row_wise "
                       "or column_wise for the largest table (\"big\", 24.4 MiB), more devices (--devices), or a larger "
                       "devices.memory_bytes"),
            std::string::npos)
      << r.err;
}

// plan's dense column is the dense part's own bytes: equal on every rank and under every plan
// (tester58 F7: criteo_kaggle table_wise on 8 ranks at batch 512 read 15,473,664 B on ranks 0-5
// and 16,391,168 B on ranks 6-7, the allocator's unsplit remainder of a reused block).
TEST(PlanDense, TheSameOnEveryRankUnderEveryPlan) {
  std::set<int64_t> dense;
  for (const char* type : {"table_wise", "row_wise", "column_wise"}) {
    const Plan58Result r = plan58_cli(std::string("plan --preset criteo_kaggle --devices 8 --sharding ") + type + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const json j = json::parse(r.out);
    ASSERT_EQ(j["memory"].size(), 8u);
    for (const auto& m : j["memory"]) dense.insert(m["dense_bytes"].get<int64_t>());
  }
  EXPECT_EQ(dense.size(), 1u) << ::testing::PrintToString(dense);
}
