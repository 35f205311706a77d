// exp51: tester51 F12 (--network-latency takes the number forms --network-bandwidth takes, 1e6,
// and refuses others naming the flag, where CLI11 said "Failed parsing 1e6 as a INT") and F8
// (run's per-step distinct rows, summed, named "rows updated" and told apart from inspect-input's
// distinct rows over all the batches).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;

fs::path exp51c_scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("es_exp51c_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

embedscope::test_support::CliResult exp51c_cli(const std::string& args) {
  return embedscope::test_support::run_merged(std::string(EMBEDSCOPE_CLI) + " " + args);
}
}  // namespace

TEST(Exp51NetworkLatency, TakesScientificNotationAsBandwidthDoes) {
  const fs::path dir = exp51c_scratch("lat");
  // 1e6 ns = 1 ms (run's header says the latency in its unit: imp50)
  auto r = exp51c_cli("run --preset tiny --steps 1 --network-latency 1e6 -o " + (dir / "a.db").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("intra_node unlimited bandwidth, 1.00 ms latency; inter_node unlimited bandwidth, 1.00 ms latency"),
            std::string::npos) << r.out;
  // 2.5e3 ns = 2.5 us, beside a bandwidth in the same form
  r = exp51c_cli("run --preset tiny --steps 1 --network-bandwidth 1e9 --network-latency 2.5e3 -o " + (dir / "b.db").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("intra_node 1 GB/s, 2.50 us latency"), std::string::npos) << r.out;
}

TEST(Exp51NetworkLatency, RefusalsNameTheFlagAndWhatToGive) {
  const struct {
    const char* value;
    const char* says;
  } cases[] = {
      {"1.5", "--network-latency: 1.5 ns is not a whole number of ns; give e.g. 1"},
      {"abc", "--network-latency: not a number of ns (got 'abc'); give e.g. 50000 or 5e4"},
      {"1e11", "--network-latency: 1e11 ns is out of range: give 0 to 1e+10 ns (10 s), e.g. 5e4"},
      {"-1", "--network-latency: -1 ns is out of range: give 0 to 1e+10 ns (10 s), e.g. 5e4"},
      {"nan", "--network-latency: not a number of ns (got 'nan')"},
      {"inf", "--network-latency: inf ns is out of range"},
  };
  for (const auto& c : cases) {
    const auto r = exp51c_cli(std::string("plan --preset tiny --network-latency ") + c.value);
    EXPECT_EQ(r.code, 2) << c.value << "\n" << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.value << "\n" << r.out;
    EXPECT_EQ(r.out.find("Failed parsing"), std::string::npos) << r.out;
  }
}

TEST(Exp51RowsUpdated, RunSaysRowsUpdatedPerStepSummedAndInspectInputDistinctOverAll) {
  const fs::path dir = exp51c_scratch("rows");
  // ta: ONE row on rank 0 (every id is row 0), tb 200 rows on rank 1; 2 ranks, batch 4, 3 steps
  std::ofstream(dir / "one.json") << R"({"name": "one",
    "tables": [{"name": "ta", "num_embeddings": 1, "embedding_dim": 8, "pooling": "sum", "feature_names": ["fa"]},
               {"name": "tb", "num_embeddings": 200, "embedding_dim": 4, "pooling": "sum", "feature_names": ["fb"]}],
    "features": [{"name": "fa", "pooling_factor": 2, "ids": "uniform"}, {"name": "fb", "pooling_factor": 3, "ids": "uniform"}],
    "batch_size": 4, "steps": 3, "warmup_steps": 0, "seed": 1,
    "devices": {"count": 2, "backend": "cpu", "memory_bytes": 67108864},
    "optimizer": {"type": "sgd", "learning_rate": 0.1}, "dense": null,
    "sharding": {"default": "table_wise", "tables": {"ta": {"type": "table_wise", "ranks": [0]},
                                                     "tb": {"type": "table_wise", "ranks": [1]}}}})";
  auto r = exp51c_cli("run " + (dir / "one.json").string() + " -o " + (dir / "one.db").string());
  ASSERT_EQ(r.code, 0) << r.out;
  // by hand, rank 0: 2 ranks x 4 bags x 2 ids = 16 ids a step, all row 0: 1 distinct row a step,
  // updated in each of the 3 steps: 48 ids looked up, 3 rows updated (summed over the steps)
  EXPECT_NE(r.out.find("rank   ids looked up rows updated     bytes sent bytes received  memory peak\n"
                       "0                 48            3 "),
            std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("unique rows"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(rows updated: distinct rows per step that the fused optimizer updated, summed over the steps - "
                       "a row updated in 3 steps counts 3; distinct over the steps is inspect-input's and the Load page's "
                       "\"distinct (all)\")"),
            std::string::npos) << r.out;
  // the same batches counted once: row 0 is 1 distinct row over all of them
  r = exp51c_cli("inspect-input " + (dir / "one.json").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(" distinct (all) "), std::string::npos) << r.out;
  const size_t fa = r.out.find("\nfa ");
  ASSERT_NE(fa, std::string::npos) << r.out;
  const std::string row = r.out.substr(fa + 1, r.out.find('\n', fa + 1) - fa - 1);
  EXPECT_NE(row.find("     2              1   100.0%"), std::string::npos) << row;  // max 2 ids/bag, distinct 1
  EXPECT_NE(r.out.find("distinct (all): in-range rows looked up at least once over all these batches"), std::string::npos)
      << r.out;
}
