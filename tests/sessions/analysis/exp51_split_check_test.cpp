// tester51 F4: the per-collective figures folded each all-to-all's split check (Embedscope's
// all-gather of the split sizes, not TorchRec's) into its bytes but not into its count: a 2-rank
// table-wise output dist read 256 B a step where TorchRec's moves 192 B. The check is now a line of
// its own (NAME/split_check: its count and bytes), the collective's bytes its own.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/split_checks.h"
#include "import_test_support.h"
#include "support/cli_run.h"

namespace {
namespace ex51 = embedscope::sessions;
namespace fs = std::filesystem;

ex51::OpRecord exp51_op(int32_t rank, int32_t name_id, int64_t start, int64_t end, int64_t bytes, uint64_t corr) {
  ex51::OpRecord o;
  o.rank = rank;
  o.lane = 1;
  o.category = ex51::OpCategory::comm;
  o.name_id = name_id;
  o.start_ns = start;
  o.end_ns = end;
  o.bytes = bytes;
  o.correlation = corr;
  return o;
}
ex51::CollectiveRecord exp51_rec(int32_t rank, const std::string& name, uint64_t seq, int64_t start, int64_t end,
                                 int64_t sent, int64_t received) {
  ex51::CollectiveRecord c;
  c.rank = rank;
  c.op = name.find("split_check") != std::string::npos ? "all_gather" : "all_to_all";
  c.name = name;
  c.group = "world";
  c.sequence = seq;
  c.start_ns = start;
  c.end_ns = end;
  c.bytes_sent = sent;
  c.bytes_received = received;
  c.peers = {0, 1};
  return c;
}
}  // namespace

TEST(Exp51SplitCheck, NameOfTheCheckedCollective) {
  EXPECT_EQ(ex51::split_check_of("output_dist/all_to_all/split_check"), "output_dist/all_to_all");
  EXPECT_EQ(ex51::split_check_of("output_dist/all_to_all"), "");
  EXPECT_EQ(ex51::split_check_of("/split_check"), "");
  EXPECT_EQ(ex51::split_check_of("split_check"), "");
}

TEST(Exp51SplitCheck, ChecksInsideTheirOpMoveOutOfItsBytesChecksOfTheirOwnOpStay) {
  // names: 0 output_dist/all_to_all, 1 input_dist (an op running input_dist/ids and its check),
  // 2 grad_dist/all_to_all, 3 grad_dist/all_to_all/split_check (an LM run's check: an op of its own)
  const std::vector<std::string> names{"output_dist/all_to_all", "input_dist", "grad_dist/all_to_all",
                                       "grad_dist/all_to_all/split_check"};
  // each rank: the all-to-all sends 96 B and receives 96 B, its check 32 B each way (2 x 2 int64 to
  // the one peer); the op's bytes hold both: 96 + 96 + 32 + 32 = 256
  std::vector<ex51::OpRecord> ops;
  std::vector<ex51::CollectiveRecord> recs;
  for (int32_t r = 0; r < 2; ++r) {
    ops.push_back(exp51_op(r, 0, 100, 200, 256, 11));
    recs.push_back(exp51_rec(r, "output_dist/all_to_all/split_check", 10, 100, 120, 32, 32));
    recs.push_back(exp51_rec(r, "output_dist/all_to_all", 11, 120, 200, 96, 96));
    ops.push_back(exp51_op(r, 1, 300, 400, 256, 21));
    recs.push_back(exp51_rec(r, "input_dist/ids/split_check", 20, 300, 300, 32, 32));  // no duration (a GPU profile)
    recs.push_back(exp51_rec(r, "input_dist/ids", 21, 300, 400, 96, 96));
    ops.push_back(exp51_op(r, 3, 500, 520, 64, 30));  // the LM's check op and its op
    recs.push_back(exp51_rec(r, "grad_dist/all_to_all/split_check", 30, 500, 520, 32, 32));
    ops.push_back(exp51_op(r, 2, 520, 600, 192, 31));
    recs.push_back(exp51_rec(r, "grad_dist/all_to_all", 31, 520, 600, 96, 96));
  }
  std::map<int32_t, ex51::CollectiveTimes> out;
  ex51::add_collective_times(ops, ex51::collective_instances(ops, recs), out, recs);
  // before: the check's bytes in the all-to-all's, 2 x 128 sent
  ASSERT_EQ(out.at(0).bytes_sent, 256);
  ex51::move_split_checks(ops, recs, [&](int32_t id) -> const std::string& { return names.at(static_cast<size_t>(id)); },
                          out);
  for (int32_t id : {0, 1}) {
    SCOPED_TRACE(names[static_cast<size_t>(id)]);
    const auto& t = out.at(id);
    EXPECT_EQ(t.count, 2);            // one op a rank
    EXPECT_EQ(t.bytes_sent, 2 * 96);  // the all-to-all's own: TorchRec's figure
    EXPECT_EQ(t.bytes_received, 2 * 96);
    EXPECT_EQ(t.check_count, 2);  // one check a rank
    EXPECT_EQ(t.check_bytes_sent, 2 * 32);
    EXPECT_EQ(t.check_bytes_received, 2 * 32);
    EXPECT_EQ(t.bytes, 2 * 256);  // the ops' bytes: both
  }
  // the LM's check is its own op (its own row): nothing moved out of grad_dist/all_to_all
  EXPECT_EQ(out.at(2).check_count, 0);
  EXPECT_EQ(out.at(2).bytes_sent, 2 * 96);
  EXPECT_EQ(out.at(3).check_count, 0);
  EXPECT_EQ(out.at(3).bytes_sent, 2 * 32);
}

TEST(Exp51SplitCheck, StatsOfATableWiseRunShowTorchRecsBytesAndTheCheckOnItsOwnLine) {
  const fs::path dir = ex51::testing::import_scratch() / "exp51_split_check";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // tester51's hand.json: 2 ranks, table-wise, ta 100 x 8 on rank 0 (2 ids a bag), tb 200 x 4 on
  // rank 1 (3 ids a bag), batch 4 a rank, 3 steps, cpu ranks (Gloo)
  std::ofstream(dir / "hand.json") << R"({"name": "hand",
    "tables": [{"name": "ta", "num_embeddings": 100, "embedding_dim": 8, "pooling": "sum", "feature_names": ["fa"]},
               {"name": "tb", "num_embeddings": 200, "embedding_dim": 4, "pooling": "sum", "feature_names": ["fb"]}],
    "features": [{"name": "fa", "pooling_factor": 2, "ids": "uniform"}, {"name": "fb", "pooling_factor": 3, "ids": "uniform"}],
    "batch_size": 4, "steps": 3, "warmup_steps": 0, "seed": 1,
    "devices": {"count": 2, "backend": "cpu", "memory_bytes": 67108864},
    "optimizer": {"type": "sgd", "learning_rate": 0.1}, "dense": null,
    "sharding": {"default": "table_wise", "tables": {"ta": {"type": "table_wise", "ranks": [0]},
                                                     "tb": {"type": "table_wise", "ranks": [1]}}}})";
  const std::string db = (dir / "hand.db").string();
  auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "run " + (dir / "hand.json").string() + " -o " + db, dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + db + " --json", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& c : j.at("collectives")) by_name[c.at("name").get<std::string>()] = c;
  // By hand, a step: the output dist sends rank 1's 4 samples of ta (4 x 8 x 4 B = 128 B) and rank
  // 0's 4 samples of tb (4 x 4 x 4 B = 64 B): 192 B; the ids 4 bags x 2 ids x 8 B = 64 B and 4 x 3
  // x 8 B = 96 B: 160 B; the lengths 4 x 8 B a rank: 64 B. Each check: 2n = 4 int64 = 32 B a rank
  // to its one peer: 64 B, 2 a step (one a rank); each all-to-all 2 a step.
  const std::map<std::string, int64_t> own{{"output_dist/all_to_all", 192}, {"input_dist/ids", 160},
                                           {"input_dist/lengths", 64}, {"grad_dist/all_to_all", 192}};
  for (const auto& [name, bytes] : own) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(by_name.count(name)) << j.at("collectives").dump();
    const auto& c = by_name.at(name);
    EXPECT_EQ(c.at("count"), 3 * 2);
    EXPECT_EQ(c.at("bytes_sent"), 3 * bytes);
    EXPECT_EQ(c.at("bytes_received"), 3 * bytes);
    const auto& check = c.at("split_check");
    ASSERT_TRUE(check.is_object());
    EXPECT_EQ(check.at("name"), name + "/split_check");
    EXPECT_EQ(check.at("count"), 3 * 2);
    EXPECT_EQ(check.at("bytes_sent"), 3 * 64);
    EXPECT_EQ(check.at("bytes_received"), 3 * 64);
    EXPECT_EQ(c.at("bytes"), 3 * (2 * bytes + 2 * 64));  // the ops' bytes: both ways, checks included
  }
  // the text: the collective's own 192 B, the check under it with its own count
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + db, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t table = r.out.find("\ncollectives, per step");  // (the critical path lists the ops too)
  ASSERT_NE(table, std::string::npos) << r.out;
  const auto line = [&](const std::string& name) {
    const size_t at = r.out.find("\n  " + name + " ", table);
    return at == std::string::npos ? std::string() : r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(line("output_dist/all_to_all").find(" 2.0        192 B          192 B "), std::string::npos)
      << line("output_dist/all_to_all") << "\n" << r.out;
  EXPECT_NE(line("output_dist/all_to_all/split_check").find(" 2.0         64 B           64 B "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("NAME/split_check: Embedscope's all-gather of the split sizes"), std::string::npos) << r.out;
}
