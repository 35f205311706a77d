// fixi50: retest49 R4 (a simulated session's hot-row block read "- ids/step" although its replica
// load counters hold the ids), R5 (the --dense-precision refusal of an lm_embedding workload said
// "runs on CPU ranks" under --simulate), and `plan --json`'s dense_precision (the plan file read
// back checks it against the workload, as pipeline / qcomms / network).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/sharding/plan_json.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/model/hot_row_replica.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;
namespace es = embedscope::engine;
namespace ss = embedscope::sessions;

fs::path fi50_scratch() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_fixi50_cli_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

embedscope::test_support::CliResult fi50_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, fi50_scratch());
}

// 2 ranks, 8 samples a rank, 1 warm-up + 4 measured steps, no dense part. "tw": 20 x 4, 2 uniform
// ids a bag, table_wise; "hr": 40 x 4, 3 uniform ids a bag, row_wise with hot rows 0..9 (a
// quarter of its rows, so a quarter of its ids).
std::string fi50_hot_workload() {
  const json wl = {
      {"name", "fixi50_hot"},
      {"batch_size", 8},
      {"steps", 4},
      {"warmup_steps", 1},
      {"seed", 3},
      {"devices", {{"count", 2}, {"memory_bytes", 64 << 20}}},
      {"optimizer", {{"type", "sgd"}}},
      {"dense", nullptr},
      {"tables",
       {{{"name", "tw"}, {"num_embeddings", 20}, {"embedding_dim", 4}, {"feature_names", {"f_tw"}}},
        {{"name", "hr"}, {"num_embeddings", 40}, {"embedding_dim", 4}, {"feature_names", {"f_hr"}}}}},
      {"features", {{{"name", "f_tw"}, {"pooling_factor", 2}}, {{"name", "f_hr"}, {"pooling_factor", 3}}}},
      {"sharding",
       {{"default", "table_wise"},
        {"tables", {{"hr", {{"type", "row_wise"}, {"hot_rows", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}}}}}}}};
  const fs::path p = fi50_scratch() / "hot.json";
  std::ofstream(p) << wl.dump(2);
  return p.string();
}

// The line of table `name` in stats' hot-rows block; "" when absent.
std::string fi50_hot_line(const std::string& stats, const std::string& name) {
  const size_t block = stats.find("\nhot rows (replicated on every rank");
  if (block == std::string::npos) return "";
  std::istringstream in(stats.substr(block + 1));
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line) && line.starts_with("  "))
    if (line.substr(2, name.size() + 1) == name + " ") return line;
  return "";
}
}  // namespace

// R4: the simulated session's replica counters hold 8 x 3 x 10/40 = 6 ids a rank a step (the
// cost model's expected hot ids, whole here), 2 ranks -> 12.0 ids a step (the warm-up step's are
// left out: with them 15.0). 10 rows x (4 + 1) x 4 B = 200 B all-reduced a step.
TEST(Fixi50Stats, SimulatedHotRowsReadTheReplicaCounters) {
  const std::string wl = fi50_hot_workload();
  const std::string db = (fi50_scratch() / "sim.db").string();
  auto r = fi50_cli("run " + wl + " --simulate h100_sxm -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  {
    const ss::SessionReader s(db);
    const auto ids = ss::hot_row_replica_ids(s.load(), 4);
    ASSERT_EQ(ids.size(), 1u);
    EXPECT_EQ(ids.at(1), 48);  // table 1 = hr
  }
  r = fi50_cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string line = fi50_hot_line(r.out, "hr");
  EXPECT_NE(line.find(" 10 rows "), std::string::npos) << r.out;
  EXPECT_NE(line.find(" 12.0 ids/step "), std::string::npos) << r.out;
  EXPECT_NE(line.find(" 200 B/step"), std::string::npos) << r.out;
  EXPECT_EQ(fi50_hot_line(r.out, "tw"), "") << r.out;
}

// The cpu run's block still reads its measured hot_ids, which equal its replica counters
// (tester49 F8a): both divided by the 4 measured steps.
TEST(Fixi50Stats, CpuHotRowsEqualTheReplicaCounters) {
  const std::string wl = fi50_hot_workload();
  const std::string db = (fi50_scratch() / "cpu.db").string();
  auto r = fi50_cli("run " + wl + " -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  int64_t counted = 0;
  {
    const ss::SessionReader s(db);
    const auto ids = ss::hot_row_replica_ids(s.load(), 4);
    ASSERT_EQ(ids.count(1), 1u);
    counted = ids.at(1);
    const json tables = json::parse(s.meta("table_storage_json"));
    EXPECT_EQ(tables.at(1).at("hot_ids"), counted);
  }
  EXPECT_GT(counted, 0);
  r = fi50_cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  char want[32];
  std::snprintf(want, sizeof want, " %.1f ids/step ", static_cast<double>(counted) / 4.0);
  EXPECT_NE(fi50_hot_line(r.out, "hr").find(want), std::string::npos) << want << "\n" << r.out;
}

// hot_row_replica_ids: shard -1 only, measured steps [0, steps) only, summed per table.
TEST(Fixi50Stats, ReplicaIdsCountShardMinusOneOfTheMeasuredSteps) {
  std::vector<ss::LoadCounter> load;
  auto add = [&](int64_t step, int32_t rank, int32_t table, int32_t shard, int64_t ids) {
    ss::LoadCounter c;
    c.step = step;
    c.rank = rank;
    c.table = table;
    c.shard = shard;
    c.ids = ids;
    load.push_back(c);
  };
  add(-1, 0, 2, -1, 100);  // warm-up / a pipeline's fill
  add(0, 0, 2, -1, 7);
  add(0, 1, 2, -1, 5);
  add(1, 0, 2, -1, 3);
  add(2, 0, 2, -1, 1000);  // past steps = 2
  add(0, 0, 2, 0, 50);     // a shard of the plan
  add(1, 1, 0, -1, 11);
  const auto ids = ss::hot_row_replica_ids(load, 2);
  EXPECT_EQ(ids, (std::map<int32_t, int64_t>{{0, 11}, {2, 15}}));
}

// R5: the refusal says where the lm_embedding run happens: simulated under --simulate, CPU ranks
// otherwise; and why dense.precision is not its.
TEST(Fixi50LmRefusal, DensePrecisionRefusalSaysSimulatedOrCpu) {
  const std::string file = std::string(EMBEDSCOPE_SOURCE_DIR) + "/resources/workloads/lm/gpt2_small_embedding.json";
  const std::string o = " --steps 2 --dense-precision bf16 -o " + (fi50_scratch() / "lm.db").string();
  auto r = fi50_cli("run " + file + " --simulate h100_sxm" + o);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--dense-precision: not for an lm_embedding workload (" + file +
                       " is simulated on h100_sxm's modelled cluster; dense.precision is a DLRM workload's, for its "
                       "dense part's GEMMs; its flags: --devices,"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("CPU ranks"), std::string::npos) << r.err;
  r = fi50_cli("run " + file + o);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--dense-precision: not for an lm_embedding workload (" + file +
                       " runs on CPU ranks; dense.precision is a DLRM workload's, for its dense part's GEMMs; its "
                       "flags: --devices,"),
            std::string::npos)
      << r.err;
  // another refused flag under --simulate: the same place, no dense.precision note
  r = fi50_cli("run --preset gpt2_small_embedding --simulate h100_sxm --pipeline semi_sync -o " +
               (fi50_scratch() / "lm2.db").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--pipeline: not for an lm_embedding workload (preset gpt2_small_embedding is simulated on "
                       "h100_sxm's modelled cluster; its flags:"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(fi50_scratch() / "lm.db"));
  EXPECT_FALSE(fs::exists(fi50_scratch() / "lm2.db"));
}

// plan --json carries dense_precision (the workload's dense.precision; null without a dense
// part), and the plan file read back by run --plan is checked against the workload's.
TEST(Fixi50PlanJson, DensePrecisionIsInPlanJsonAndCheckedWhenReadBack) {
  auto r = fi50_cli("plan --preset tiny --json --dense-precision bf16");
  ASSERT_EQ(r.code, 0) << r.err;
  const json bf = json::parse(r.out);
  EXPECT_EQ(bf.at("dense_precision"), "bf16");
  r = fi50_cli("plan --preset tiny --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out).at("dense_precision"), "fp32");
  r = fi50_cli("plan --preset tiny --json --dense-precision tf32 --auto");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out).at("dense_precision"), "tf32");
  r = fi50_cli("plan " + fi50_hot_workload() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(json::parse(r.out).at("dense_precision").is_null()) << r.out;

  const fs::path plan = fi50_scratch() / "plan_bf16.json";
  std::ofstream(plan) << bf.dump(2);
  r = fi50_cli("run --preset tiny --steps 1 --dense-precision bf16 --plan " + plan.string() + " -o " +
               (fi50_scratch() / "p1.db").string());
  EXPECT_EQ(r.code, 0) << r.err;
  r = fi50_cli("run --preset tiny --steps 1 --plan " + plan.string() + " -o " + (fi50_scratch() / "p2.db").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(plan.string() + ": /dense_precision: \"bf16\" differs from the workload's \"fp32\"; the "
                                       "workload decides dense_precision"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(fi50_scratch() / "p2.db"));
}

// plan_from_json itself: the key matches (also null without a dense part) or is refused.
TEST(Fixi50PlanJson, PlanFromJsonChecksDensePrecision) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.dense->precision = es::DensePrecision::fp16;
  json j = es::to_json(s, es::plan_sharding(s));
  j["dense_precision"] = "fp16";
  EXPECT_NO_THROW(es::plan_from_json(s, j, "p.json"));
  j["dense_precision"] = "fp32";
  try {
    es::plan_from_json(s, j, "p.json");
    ADD_FAILURE() << "no error";
  } catch (const es::SpecError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("p.json: /dense_precision: \"fp32\" differs from the workload's \"fp16\"", 0), 0u)
        << e.what();
  }
  s.dense.reset();
  j = es::to_json(s, es::plan_sharding(s));
  j["dense_precision"] = nullptr;
  EXPECT_NO_THROW(es::plan_from_json(s, j, "p.json"));
}
