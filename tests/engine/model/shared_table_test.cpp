// "shared_with" (TableSpec::shared_tables): a table that uses another table's rows is folded
// into it (TorchRec's one table config with several feature_names): one storage, both
// features' gradients accumulated, bytes counted once; errors name the pointer as written.

#include <gtest/gtest.h>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/input/input.h"
#include "embedscope/engine/reference/reference.h"
#include "embedscope/engine/sharding/sharding.h"
#include "engine/parity_check.h"
#include "engine/workload/spec_test_support.h"

namespace es = embedscope::engine;
using nlohmann::json;
using namespace spec_testing;

namespace {


// base_spec's t1 (20 x 4, feature f1) and a third table "u" of the same shape sharing t1, with
// its own feature fu.
json shared_spec() {
  json j = base_spec();
  j["features"].push_back({{"name", "fu"}, {"pooling_factor", 2}});
  j["tables"].push_back({{"name", "u"}, {"num_embeddings", 20}, {"embedding_dim", 4}, {"feature_names", {"fu"}},
                         {"shared_with", "t1"}});
  return j;
}

TEST(SharedTable, FoldsIntoTheOwner) {
  const es::WorkloadSpec s = es::parse_workload(shared_spec(), "test.json");
  ASSERT_EQ(s.tables.size(), 2u);
  EXPECT_EQ(s.tables[1].name, "t1");
  EXPECT_EQ(s.tables[1].feature_names, (std::vector<std::string>{"f1", "fu"}));
  ASSERT_EQ(s.tables[1].shared_tables.size(), 1u);
  EXPECT_EQ(s.tables[1].shared_tables[0].name, "u");
  EXPECT_EQ(s.table_of_feature(2), 1);  // fu reads t1's rows
  // written back as given, and read again to the same spec
  const json back = es::to_json(s);
  ASSERT_EQ(back["tables"].size(), 3u);
  EXPECT_EQ(back["tables"][1]["feature_names"], json({"f1"}));
  EXPECT_EQ(back["tables"][2]["name"], "u");
  EXPECT_EQ(back["tables"][2]["shared_with"], "t1");
  const es::WorkloadSpec again = es::parse_workload(back, "back.json");
  EXPECT_EQ(again.tables[1].feature_names, s.tables[1].feature_names);
}

TEST(SharedTable, ErrorsNameThePointer) {
  auto with = [](const char* extra) {
    json j = shared_spec();
    j.merge_patch(json::object());
    for (const auto& op : json::parse(extra)) j = j.patch(json::array({op}));
    return parse_error(j);
  };
  EXPECT_EQ(with(R"([{"op": "replace", "path": "/tables/2/shared_with", "value": "t9"}])"),
            "test.json: /tables/2/shared_with: no table named \"t9\"");
  EXPECT_EQ(with(R"([{"op": "replace", "path": "/tables/2/shared_with", "value": "u"}])"),
            "test.json: /tables/2/shared_with: table \"u\" cannot share its own rows");
  EXPECT_EQ(with(R"([{"op": "add", "path": "/tables/1/shared_with", "value": "t0"},
                     {"op": "replace", "path": "/tables/1/num_embeddings", "value": 10}])"),
            "test.json: /tables/2/shared_with: \"t1\" itself shares the rows of \"t0\" (/tables/1/shared_with): name "
            "the table that owns the rows (no chains or cycles)");
  EXPECT_EQ(with(R"([{"op": "add", "path": "/tables/1/shared_with", "value": "u"}])"),
            "test.json: /tables/1/shared_with: \"u\" itself shares the rows of \"t1\" (/tables/2/shared_with): name "
            "the table that owns the rows (no chains or cycles)");
  EXPECT_EQ(with(R"([{"op": "replace", "path": "/tables/2/embedding_dim", "value": 8},
                     {"op": "add", "path": "/dense/interaction", "value": "cat"}])"),
            "test.json: /tables/2/embedding_dim: 8 but table \"t1\" it shares (shared_with) has 4: a shared table "
            "uses the owner's rows and must match them");
  EXPECT_EQ(with(R"([{"op": "add", "path": "/tables/2/data_type", "value": "fp16"}])"),
            "test.json: /tables/2/data_type: fp16 but table \"t1\" it shares (shared_with) has fp32: a shared table "
            "uses the owner's rows and must match them");
  EXPECT_EQ(with(R"([{"op": "add", "path": "/sharding", "value": {"tables": {"u": {"type": "row_wise"}}}}])"),
            "test.json: /sharding/tables/u: table \"u\" shares the rows of \"t1\" (shared_with): shard \"t1\" instead");
  EXPECT_EQ(with(R"([{"op": "replace", "path": "/tables/2/shared_with", "value": ""}])"),
            "test.json: /tables/2/shared_with: must not be empty");
}

// tester55 F9: hash_size and low_rank_dim 0 mean "not set" (spec.h); the mismatch says so rather
// than "0 but ... has 100".
TEST(Lm55SharedTable, AnUnsetHashSizeOrLowRankIsSaidNotSet) {
  auto with = [](const char* extra) {
    json j = shared_spec();
    for (const auto& op : json::parse(extra)) j = j.patch(json::array({op}));
    return parse_error(j);
  };
  EXPECT_EQ(with(R"([{"op": "add", "path": "/tables/1/hash_size", "value": 10}])"),
            "test.json: /tables/2/hash_size: not set but table \"t1\" it shares (shared_with) has 10: a shared "
            "table uses the owner's rows and must match them");
  EXPECT_EQ(with(R"([{"op": "add", "path": "/tables/2/hash_size", "value": 10}])"),
            "test.json: /tables/2/hash_size: 10 but table \"t1\" it shares (shared_with) has it not set: a shared "
            "table uses the owner's rows and must match them");
  EXPECT_EQ(with(R"([{"op": "add", "path": "/tables/1/low_rank_dim", "value": 2}])"),
            "test.json: /tables/2/low_rank_dim: not set but table \"t1\" it shares (shared_with) has 2: a shared "
            "table uses the owner's rows and must match them");
}

TEST(SharedTable, BytesCountedOnce) {
  const es::WorkloadSpec s = es::parse_workload(shared_spec(), "test.json");
  const es::ShardingPlan plan = es::plan_sharding(s);
  ASSERT_EQ(plan.tables.size(), 2u);
  const auto st = es::estimate_table_storage(s, plan);
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[1].weight_bytes, 20 * 4 * 4);  // t1 once, not t1 + u
  // the same as the table with both features written by hand
  json j = base_spec();
  j["features"].push_back({{"name", "fu"}, {"pooling_factor", 2}});
  j["tables"][1]["feature_names"] = {"f1", "fu"};
  const es::WorkloadSpec by_hand = es::parse_workload(j, "test.json");
  const auto a = es::estimate_memory(s, plan), b = es::estimate_memory(by_hand, es::plan_sharding(by_hand));
  for (size_t r = 0; r < a.size(); ++r) {
    EXPECT_EQ(a[r].weights, b[r].weights);
    EXPECT_EQ(a[r].total(), b[r].total());
  }
}

// Both features' gradients reach the one table: the sharded run matches the reference, and the
// table differs from a run where fu reads a table of its own.
TEST(SharedTableParity, BothFeaturesTrainTheOneTable) {
  for (auto type : {es::ShardingType::table_wise, es::ShardingType::row_wise, es::ShardingType::data_parallel}) {
    json j = shared_spec();
    j["devices"]["count"] = 2;
    j["steps"] = 3;
    j["optimizer"] = {{"type", "rowwise_adagrad"}, {"learning_rate", 0.05}};
    j["sharding"] = {{"default", es::to_string(type)}};
    const es::WorkloadSpec s = es::parse_workload(j, "test.json");
    const es::RunResult run = es::parity::check_parity(s);
    ASSERT_EQ(run.ended, es::RunEnd::complete) << run.error;
    ASSERT_EQ(run.tables.size(), 2u);
    json own = j;
    own["tables"][2].erase("shared_with");
    const es::ReferenceResult separate = es::run_reference(es::parse_workload(own, "own.json"), 3);
    size_t differ = 0;
    for (size_t i = 0; i < run.tables[1].size(); ++i) differ += std::abs(run.tables[1][i] - separate.tables[1][i]) > 1e-4f;
    EXPECT_GT(differ, 0u) << "fu's gradients did not reach t1 under " << es::to_string(type);
  }
}

// The teacher labels a row by the table as the workload wrote it: with "u" written between t0
// and t1 (/tables/1), folding it into t1 renumbers t1 from 2 to 1 and moves fu to t1's rows,
// and the labels must still be those of the run that keeps u separate (the compression study
// compares the two). Read back from to_json, u is written where it was, with the same labels.
TEST(SharedTable, LabelsAreThoseOfTheTablesAsWritten) {
  json shared = base_spec();
  shared["features"].push_back({{"name", "fu"}, {"pooling_factor", 2}});
  shared["tables"].insert(shared["tables"].begin() + 1, json{{"name", "u"},
                                                             {"num_embeddings", 20},
                                                             {"embedding_dim", 4},
                                                             {"feature_names", {"fu"}},
                                                             {"shared_with", "t1"}});
  json own = shared;
  own["tables"][1].erase("shared_with");
  const es::WorkloadSpec s = es::parse_workload(shared, "shared.json");
  const es::WorkloadSpec o = es::parse_workload(own, "own.json");
  ASSERT_EQ(s.tables.size(), 2u);
  ASSERT_EQ(o.tables.size(), 3u);
  EXPECT_EQ(s.tables[1].written_index, 2);
  EXPECT_EQ(s.tables[1].shared_tables.at(0).written_index, 1);
  const json back = es::to_json(s);
  ASSERT_EQ(back["tables"].size(), 3u);
  EXPECT_EQ(back["tables"][1]["name"], "u");
  EXPECT_EQ(back["tables"][2]["name"], "t1");
  const es::WorkloadSpec again = es::parse_workload(back, "back.json");
  const es::BatchGenerator gs(s), go(o), ga(again);
  int64_t positives = 0, n = 0;
  for (int64_t it = 0; it < 4; ++it)
    for (int rank = 0; rank < 2; ++rank) {
      const es::Batch bs = gs.make(it, rank), bo = go.make(it, rank), ba = ga.make(it, rank);
      EXPECT_EQ(bs.kjt.values, bo.kjt.values);
      EXPECT_EQ(bs.labels, bo.labels) << "iteration " << it << " rank " << rank;
      EXPECT_EQ(ba.labels, bo.labels) << "iteration " << it << " rank " << rank;
      for (float l : bo.labels) positives += l > 0.5f, ++n;
    }
  EXPECT_GT(positives, 0);  // labels of both kinds, so equal labels say something
  EXPECT_LT(positives, n);
}

}  // namespace
