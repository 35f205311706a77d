// `embedscope plan --plan FILE`: a written plan's memory per device and everything plain `plan`
// prints, without running it; bad plans refused naming the file and the field (exit 2). And
// `plan --auto`'s near-tie of critical paths going to the plan with less memory per device
// (planner/search.h kCriticalPathTie). The workload: 3 cold tables of 50,000 x 16 fp32 and 3 hot
// of 2,000 x 16 on 4 ranks with rowwise_adagrad (one fp32 accumulator a row): a cold table
// 50,000 x 16 x 4 + 50,000 x 4 = 3,400,000 bytes, a hot one 2,000 x 68 = 136,000 bytes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/build_paths.h"
#include "support/cli_run.h"

namespace {
std::filesystem::path pf_scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("es_plan_file_" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}
embedscope::test_support::CliResult pf_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, pf_scratch());
}
std::string pf_data(const std::string& name) { return std::string(EMBEDSCOPE_TEST_DATA) + "/specs/" + name; }
const std::string kWorkload = pf_data("small_hot_table_straggler.json");
const std::string kPlan = pf_data("small_hot_table_straggler_plan.json");  // rebalance's plan of the greedy run

int64_t table_bytes(const nlohmann::json& rank) {
  return rank["weights_bytes"].get<int64_t>() + rank["optimizer_state_bytes"].get<int64_t>();
}
}  // namespace

// The plan written by `rebalance --plan-out`: the three cold tables on rank 2, hot_0 on rank 3,
// hot_1 on 0, hot_2 on 1. Each allocation is rounded up to the allocator's 512-byte blocks
// (memory/allocator.h kMinBlockSize): a cold table's state 200,000 -> 200,192 bytes, a hot one's
// 8,000 -> 8,192 (the weights are multiples of 512). Rank 2's tables: 3 x (3,200,000 + 200,192)
// = 10,200,576 bytes; the others 128,000 + 8,192 = 136,192. The greedy plan of the same workload:
// a cold table on each of ranks 0-2, the three hot ones on 3.
TEST(PlanFileCli, MemoryPerDeviceOfAWrittenPlan) {
  const auto r = pf_cli("plan " + kWorkload + " --plan " + kPlan + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["memory"].size(), 4u);
  EXPECT_EQ(table_bytes(j["memory"][0]), 136192);
  EXPECT_EQ(table_bytes(j["memory"][1]), 136192);
  EXPECT_EQ(table_bytes(j["memory"][2]), 10200576);
  EXPECT_EQ(table_bytes(j["memory"][3]), 136192);
  EXPECT_EQ(j["tables"][0]["shards"][0]["rank"], 2);
  EXPECT_TRUE(j["fits"].get<bool>());
  const auto g = nlohmann::json::parse(pf_cli("plan " + kWorkload + " --json").out);
  EXPECT_EQ(table_bytes(g["memory"][2]), 3400192);
  EXPECT_EQ(table_bytes(g["memory"][3]), 3 * 136192);
  // the text: the same plan table and memory block as plain plan's
  const auto t = pf_cli("plan " + kWorkload + " --plan " + kPlan);
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("9.2 MiB"), std::string::npos) << t.out;     // rank 2's weights, 9,600,000 B
  EXPECT_NE(t.out.find("586.5 KiB"), std::string::npos) << t.out;   // and state, 600,576 B
}

// A plan that does not fit the devices is shown, then refused (exit 2) as plain plan's.
TEST(PlanFileCli, PlanThatDoesNotFitIsShownAndRefused) {
  nlohmann::json w = nlohmann::json::parse(std::ifstream(kWorkload));
  // 8 MiB, allocated as asked (the caching allocator's 20 MiB segments would not fit any plan):
  // the greedy plan fits (3.5 MiB a rank), the written one's 10.2 MB of tables on rank 2 do not
  w["devices"]["memory_bytes"] = 8 << 20;
  w["memory"]["allocator"] = "direct";
  const std::string file = (pf_scratch() / "mem8.json").string();
  std::ofstream(file) << w.dump(1);
  ASSERT_EQ(pf_cli("plan " + file).code, 0);
  const auto r = pf_cli("plan " + file + " --plan " + kPlan);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("the devices DO NOT FIT this plan"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("/devices/memory_bytes"), std::string::npos) << r.err;
}

// Bad plans: the file and the field in the message, exit 2.
TEST(PlanFileCli, BadPlanNamesFileAndField) {
  nlohmann::json p = nlohmann::json::parse(std::ifstream(kPlan));
  p["tables"][0]["shards"][0]["rank"] = 7;
  const std::string bad = (pf_scratch() / "bad_rank.json").string();
  std::ofstream(bad) << p.dump(1);
  auto r = pf_cli("plan " + kWorkload + " --plan " + bad);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/tables/0/shards/0: rank 7 is outside [0, 4)"), std::string::npos) << r.err;
  r = pf_cli("plan " + kWorkload + " --plan " + (pf_scratch() / "missing.json").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("missing.json"), std::string::npos) << r.err;
  r = pf_cli("plan " + kWorkload + " --plan " + kPlan + " --auto");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("not with --auto"), std::string::npos) << r.err;
  r = pf_cli("plan " + kWorkload + " --plan " + kPlan + " --sharding row_wise");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--sharding: cannot be combined with --plan"), std::string::npos) << r.err;
}

// The user's tie: grid (two cold tables column_wise over 4 ranks, rowwise_adagrad's accumulator
// in every column block) estimated 29 ns (0.03%) faster than uniform:table_wise, which puts the 3
// cold tables on one rank: 3 x 3,400,192 bytes of tables there. Within the tie the plan with less
// on its fullest device wins - grid's fullest rank holds cold_2 whole and a quarter of cold_0
// and cold_1 - and the runner-up line gives both figures.
TEST(PlanFileCli, AutoTieGoesToLessMemoryPerDevice) {
  const auto r = pf_cli("plan " + kWorkload + " --auto --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto s = j["search"];
  ASSERT_FALSE(s["runner_up"].is_null());
  const int64_t best = s["critical_path_ns"], runner = s["runner_up"]["critical_path_ns"];
  EXPECT_LE(std::abs(static_cast<double>(best - runner)), 1e-3 * static_cast<double>(std::min(best, runner)));
  EXPECT_EQ(s["proposer"], "grid");
  EXPECT_EQ(s["runner_up"]["proposer"], "uniform:table_wise");
  EXPECT_LT(s["max_hbm_bytes"].get<int64_t>(), s["runner_up"]["max_hbm_bytes"].get<int64_t>());
  int64_t fullest = 0;
  for (const auto& m : j["memory"]) fullest = std::max(fullest, m["total_bytes"].get<int64_t>());
  EXPECT_EQ(s["max_hbm_bytes"].get<int64_t>(), fullest);
  // the runner-up's fullest rank holds the three cold tables: at least 3 x 3,400,192 bytes
  EXPECT_GE(s["runner_up"]["max_hbm_bytes"].get<int64_t>(), 3 * 3400192);
  const auto t = pf_cli("plan " + kWorkload + " --auto");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("ns: a tie within 0.1%, which goes to less memory on the fullest device: the best's "),
            std::string::npos)
      << t.out;
}
