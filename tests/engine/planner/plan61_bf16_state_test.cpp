// When tables do not fit, the planner's storage options include bf16 optimizer state (a user
// with Adam on 4 MiB devices: fp16 and int8 rows did not fit, bf16 state did and was never
// mentioned); a refusal with --allow-storage still lists the options not allowed (host_cached
// was dropped), and neither a refusal nor the changed-storage block of `plan --auto` advises
// running `plan --auto`. planner/storage_fallback.h; numbers by hand.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/planner/storage_fallback.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec_error.h"

namespace plan61 {

using namespace embedscope::engine;

// The user's workload: 4 cpu ranks of 4 MiB, Adam, t0 50,000 x 16, t1 20,000 x 32, t2 and t3
// 10,000 x 16, fp32. Rows 3.2 + 2.56 + 0.64 + 0.64 = 7.04 MB, Adam's state twice that, 14.08 MB:
// 21.12 MB = 20.1 MiB, 5.0 MiB a rank at best. bf16 state halves the state: 7.04 + 7.04 MB =
// 14.08 MB = 13.4 MiB, 3.36 MiB a rank.
const char* kTight4 = R"({"name": "tight", "tables": [
  {"name": "t0", "num_embeddings": 50000, "embedding_dim": 16, "feature_names": ["f0"]},
  {"name": "t1", "num_embeddings": 20000, "embedding_dim": 32, "feature_names": ["f1"]},
  {"name": "t2", "num_embeddings": 10000, "embedding_dim": 16, "feature_names": ["f2"]},
  {"name": "t3", "num_embeddings": 10000, "embedding_dim": 16, "feature_names": ["f3"]}],
  "features": [{"name": "f0", "pooling_factor": 2, "ids": {"distribution": "zipf", "alpha": 1.05, "permute": true}},
               {"name": "f1", "pooling_factor": 2, "ids": "uniform"},
               {"name": "f2", "pooling_factor": 2, "ids": {"distribution": "zipf", "alpha": 1.05, "permute": true}},
               {"name": "f3", "pooling_factor": 2, "ids": "uniform"}],
  "batch_size": 64, "steps": 5, "warmup_steps": 1, "seed": 1,
  "devices": {"count": 4, "backend": "cpu", "memory_bytes": 4194304},
  "optimizer": {"type": "adam", "learning_rate": 0.01},
  "dense": {"num_dense_features": 4, "bottom_mlp": [16], "interaction": "cat", "top_mlp": [16, 1]},
  "sharding": {"default": "table_wise"}})";

WorkloadSpec tight4() { return parse_workload(nlohmann::json::parse(kTight4), "tight4"); }

StoragePlanResult fallback(const WorkloadSpec& s, const std::vector<StorageOption>& allowed) {
  return plan_search_with_storage(s, planning_profile(s), {}, allowed);
}

std::string refusal(const WorkloadSpec& s, const std::vector<StorageOption>& allowed) {
  try {
    fallback(s, allowed);
  } catch (const NoPlanFits& e) {
    return e.what();
  }
  ADD_FAILURE() << "a plan fit";
  return "";
}

TEST(Plan61Bf16State, OptionParsesInItsPlaceAndNamesItselfInTheError) {
  EXPECT_EQ(storage_options_from_strings({"host_cached", "bf16_state", "fp16"}),
            (std::vector<StorageOption>{StorageOption::fp16, StorageOption::bf16_state, StorageOption::host_cached}));
  EXPECT_STREQ(to_string(StorageOption::bf16_state), "bf16_state");
  try {
    storage_options_from_strings({"int4"});
    ADD_FAILURE();
  } catch (const SpecError& e) {
    EXPECT_STREQ(e.what(), "--allow-storage: unknown option 'int4' (expected fp16, bf16_state, int8, host_cached)");
  }
}

// Without --allow-storage the refusal lists bf16_state, which fits: every table's state bf16,
// 21.12 MB -> 14.08 MB (20.1 -> 13.4 MiB) when all 4 are changed; the search takes the fewest
// of the largest (t0 alone leaves 17.92 MB = 4.3 MiB a rank even split evenly: more are needed).
TEST(Plan61Bf16State, RefusalSaysBf16StateFits) {
  const std::string m = refusal(tight4(), {});
  EXPECT_NE(m.find("--allow-storage bf16_state: "), std::string::npos) << m;
  const size_t at = m.find("--allow-storage bf16_state: ");
  const std::string line = m.substr(at, m.find('\n', at) - at);
  EXPECT_NE(line.find("; a plan fits ("), std::string::npos) << line;
  EXPECT_EQ(line.find("the 1 largest"), std::string::npos) << line;
  // no advice to run what was just run (`plan --auto` is what raised this)
  EXPECT_EQ(m.find("to try: `plan --auto`"), std::string::npos) << m;
  EXPECT_NE(m.find("to try: more devices (--devices) or a larger devices.memory_bytes"), std::string::npos) << m;
}

// --allow-storage bf16_state: the plan fits in 95 % of 4 MiB (3,984,588 B) with the state of the
// changed tables in bf16: Adam's 2 x dim x 2 B a row, the same bytes as the fp32 rows (t0:
// 3,200,000 B of state before, 1,600,000 B after... summed over its shards).
TEST(Plan61Bf16State, AllowedBf16StateChangesTheStateAndFits) {
  const WorkloadSpec s = tight4();
  const StoragePlanResult r = fallback(s, {StorageOption::bf16_state});
  ASSERT_FALSE(r.changes.empty());
  for (const auto& c : r.changes) {
    EXPECT_EQ(c.option, StorageOption::bf16_state);
    EXPECT_EQ(c.state_before, OptimizerStateType::fp32);
    EXPECT_EQ(c.state_after, OptimizerStateType::bf16);
    EXPECT_EQ(c.data_type_after, TableDataType::fp32);
    EXPECT_EQ(c.after.weights, c.before.weights) << c.name;
    EXPECT_EQ(2 * c.after.optimizer_state, c.before.optimizer_state) << c.name;
    EXPECT_EQ(c.after.optimizer_state, c.after.weights) << c.name;  // 2 x dim x 2 B = dim x 4 B
    EXPECT_EQ(r.spec.tables[static_cast<size_t>(c.table)].optimizer_state_type, OptimizerStateType::bf16);
  }
  EXPECT_EQ(r.changes[0].name, "t0");
  EXPECT_EQ(r.changes[0].before.optimizer_state, 6400000);
  EXPECT_EQ(r.changes[0].after.optimizer_state, 3200000);
  int64_t fullest = 0;
  for (const auto& rk : r.search.stats.ranks) fullest = std::max(fullest, rk.hbm_bytes);
  EXPECT_LE(fullest, 3984588);
  // the reason keeps the nearest candidate but not the advice to run `plan --auto`
  EXPECT_EQ(r.why.find("`plan --auto`"), std::string::npos) << r.why;
  // the text block and the JSON carry the state change; applying the JSON gives the same spec
  EXPECT_NE(storage_changes_text(r).find("t0                   fp32 state -> bf16 state"), std::string::npos)
      << storage_changes_text(r);
  const nlohmann::json j = storage_changes_json(r);
  EXPECT_EQ(j["storage_changes"][0]["optimizer_state_type"], "bf16");
  EXPECT_EQ(j["storage_changes"][0]["before"]["optimizer_state_type"], "fp32");
  WorkloadSpec applied = s;
  apply_storage_changes(applied, j, "p.json");
  for (size_t i = 0; i < s.tables.size(); ++i)
    EXPECT_EQ(applied.tables[i].optimizer_state_type, r.spec.tables[i].optimizer_state_type) << i;
}

// --allow-storage fp16,int8: neither fits, and the refusal still says what the options not
// allowed would do (bf16_state and host_cached lines), without advising `plan --auto`.
TEST(Plan61Bf16State, RefusalWithAllowedOptionsKeepsTheOthers) {
  const std::string m = refusal(tight4(), {StorageOption::fp16, StorageOption::int8});
  EXPECT_NE(m.find("the allowed storage options do not make it fit either"), std::string::npos) << m;
  EXPECT_NE(m.find("--allow-storage fp16: 4 tables, 20.1 MiB -> "), std::string::npos) << m;
  EXPECT_NE(m.find("--allow-storage int8: 4 tables, 20.1 MiB -> "), std::string::npos) << m;
  EXPECT_NE(m.find("storage options the planner may use (not allowed"), std::string::npos) << m;
  EXPECT_NE(m.find("--allow-storage bf16_state: "), std::string::npos) << m;
  EXPECT_NE(m.find("--allow-storage host_cached: "), std::string::npos) << m;
  EXPECT_EQ(m.find("to try: `plan --auto`"), std::string::npos) << m;
}

// sgd keeps no optimizer state: bf16_state can take no table.
TEST(Plan61Bf16State, SgdHasNoStateToShrink) {
  WorkloadSpec s = tight4();
  s.optimizer.type = OptimizerType::sgd;
  s.devices.memory_bytes = 1 << 20;
  const std::string m = refusal(s, {});
  EXPECT_NE(m.find("--allow-storage bf16_state: no table can take it"), std::string::npos) << m;
}

}  // namespace plan61
