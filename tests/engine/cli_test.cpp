// The `embedscope` CLI as a user runs it: exit codes, messages and the --json summary.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace {
struct Result {
  int code;
  std::string out, err;
};

Result cli(const std::string& args) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string out = (dir / "es_cli_out.txt").string(), err = (dir / "es_cli_err.txt").string();
  const std::string cmd = std::string(EMBEDSCOPE_CLI) + " " + args + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  auto slurp = [](const std::string& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  };
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}
const std::string kData = EMBEDSCOPE_TEST_DATA;
}  // namespace

TEST(Cli, RunJsonSummary) {
  Result r = cli("run --preset tiny --devices 3 --sharding row_wise --steps 4 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["steps"], 4);
  EXPECT_EQ(j["ended"], "complete");
  for (const char* k : {"mean", "p50", "p99"}) EXPECT_GT(j["step_time_ns"][k].get<double>(), 0) << k;
  EXPECT_GT(j["samples_per_s"].get<double>(), 0);
  EXPECT_TRUE(j["loss_first"].is_number());
  EXPECT_TRUE(j["loss_last"].is_number());
  ASSERT_EQ(j["ranks"].size(), 3u);
  for (const auto& rk : j["ranks"]) {
    EXPECT_GT(rk["ids_looked_up"].get<int64_t>(), 0);
    EXPECT_GT(rk["bytes_sent"].get<int64_t>(), 0);
    EXPECT_GT(rk["bytes_received"].get<int64_t>(), 0);
    EXPECT_GT(rk["memory_bytes"].get<int64_t>(), 0);
  }
  EXPECT_EQ(j["sharding"]["tables"][0]["sharding_type"], "row_wise");
  EXPECT_NE(r.err.find("step 4/4"), std::string::npos) << r.err;  // progress on stderr
}

TEST(Cli, RunWorkloadFileHumanSummary) {
  Result r = cli("run " + kData + "/specs/small_ok.json --sharding column_wise");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step time    mean"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("column_wise"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("loss         first"), std::string::npos) << r.out;
}

TEST(Cli, BadInputExitsTwoWithAClearMessage) {
  Result r = cli("run " + kData + "/specs/bad_dim.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad_dim.json: /tables/1/embedding_dim: must be > 0, got 0"), std::string::npos) << r.err;
  r = cli("run /nonexistent/w.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/nonexistent/w.json: cannot open"), std::string::npos) << r.err;
  r = cli("run --preset tiny --sharding diagonal");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--sharding"), std::string::npos) << r.err;
  r = cli("run --preset nope");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("criteo_kaggle"), std::string::npos) << r.err;  // lists the known presets
  r = cli("run --preset tiny --steps 0");
  EXPECT_EQ(r.code, 2);
  r = cli("frobnicate");
  EXPECT_EQ(r.code, 2);
  r = cli("run " + kData + "/specs/too_small.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/devices/memory_bytes: the workload does not fit"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 1: needs"), std::string::npos) << r.err;
}

TEST(Cli, PlanShowsShardsAndMemory) {
  Result r = cli("plan --preset criteo_kaggle --devices 4 --sharding table_row_wise --local-world-size 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tables"].size(), 26u);
  EXPECT_EQ(j["local_world_size"], 2);
  EXPECT_EQ(j["memory"].size(), 4u);
  int64_t weights = 0;
  for (const auto& m : j["memory"]) weights += m["weights_bytes"].get<int64_t>();
  EXPECT_EQ(weights, int64_t{33762577} * 16 * 4);  // every row of the 26 tables, once
  r = cli("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("run"), std::string::npos);
}
