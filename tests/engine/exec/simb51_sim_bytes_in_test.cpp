// tester51 F2: a simulated session's load counters counted only the ids in `bytes in` (ids x 8),
// the measured executor the ids and the bags' lengths it receives for a slot (threaded/
// rank_input.cpp: (slot_ids + slot_len) x 8), as the schema says ("ids and lengths received for
// the lookup"). The same program now gives the same figure on both.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace fs = std::filesystem;
namespace b51 = embedscope::engine;
namespace s51 = embedscope::sessions;

// tester51's hand.json: 2 ranks, ta 100 x 8 (2 ids a bag) and tb 200 x 4 (3 ids a bag), batch 4,
// no dense part, 1 + 2 steps; `sharding` every table's type.
b51::WorkloadSpec simb51_hand(const std::string& backend, const std::string& sharding) {
  nlohmann::json j = {
      {"name", "simb51_hand"},
      {"tables",
       {{{"name", "ta"}, {"num_embeddings", 100}, {"embedding_dim", 8}, {"pooling", "sum"}, {"feature_names", {"fa"}}},
        {{"name", "tb"}, {"num_embeddings", 200}, {"embedding_dim", 4}, {"pooling", "sum"}, {"feature_names", {"fb"}}}}},
      {"features",
       {{{"name", "fa"}, {"pooling_factor", 2}, {"ids", "uniform"}}, {{"name", "fb"}, {"pooling_factor", 3}, {"ids", "uniform"}}}},
      {"batch_size", 4},
      {"steps", 2},
      {"warmup_steps", 1},
      {"seed", 1},
      {"devices", {{"count", 2}, {"backend", backend}, {"memory_bytes", 64 << 20}}},
      {"optimizer", {{"type", "sgd"}, {"learning_rate", 0.1}}},
      {"dense", nullptr},
      {"sharding", {{"default", sharding}}}};
  if (backend == "simulated") j["devices"]["hardware"] = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";
  return b51::with_resolved_backend(b51::parse_workload(j, "simb51"), "simb51");
}

// (step, rank, table, shard) -> (ids, bytes_in) of the session at `db`, after running `s` into it
std::map<std::tuple<int64_t, int32_t, int32_t, int32_t>, std::pair<int64_t, int64_t>> simb51_loads(
    const b51::WorkloadSpec& s, const b51::ShardingPlan& plan, const fs::path& db) {
  b51::TrainerOptions o;
  o.session_path = db.string();
  o.trace = false;
  o.held_out_batches = 0;
  const b51::RunResult r = b51::run_training(s, plan, o);
  EXPECT_EQ(r.ended, b51::RunEnd::complete) << r.error;
  std::map<std::tuple<int64_t, int32_t, int32_t, int32_t>, std::pair<int64_t, int64_t>> out;
  for (const auto& c : s51::SessionReader(db.string()).load()) out[{c.step, c.rank, c.table, c.shard}] = {c.ids, c.bytes_in};
  return out;
}
}  // namespace

// table_wise: the rank of ta receives 2 ranks x 4 bags x 2 ids = 16 ids and 8 lengths, (16 + 8) x
// 8 = 192 B a step; the rank of tb 24 ids and 8 lengths, 256 B. column_wise (ta's 8 columns in
// two shards of 4 on the two ranks, tb's 4 in one): every shard receives its feature's ids and
// lengths whole, 192 B for each of ta's shards and 256 B for tb's. Measured (cpu ranks) and simulated alike; fixed bag lengths, so the
// simulation's expected ids are the measured ids.
TEST(Simb51SimBytesIn, SimulatedBytesInCountTheLengthsAsTheMeasuredRun) {
  const fs::path dir = fs::temp_directory_path() / "embedscope_simb51_bytes_in";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const std::string sharding : {"table_wise", "column_wise"}) {
    const b51::WorkloadSpec cpu = simb51_hand("cpu", sharding), sim = simb51_hand("simulated", sharding);
    const b51::ShardingPlan plan = b51::plan_sharding(cpu);
    const auto measured = simb51_loads(cpu, plan, dir / (sharding + "_cpu.db"));
    const auto simulated = simb51_loads(sim, plan, dir / (sharding + "_sim.db"));
    size_t shards = 0;  // table_wise 2; column_wise 3 (ta's 8 columns in two shards of 4, tb's 4 in one)
    for (const auto& tp : plan.tables) shards += tp.shards.size();
    ASSERT_EQ(shards, sharding == "table_wise" ? 2u : 3u) << sharding;
    ASSERT_EQ(measured.size(), 3 * shards) << sharding;  // 3 steps (warm-up included) x shards
    ASSERT_EQ(simulated.size(), measured.size()) << sharding;
    for (const auto& [key, m] : measured) {
      const auto& [step, rank, table, shard] = key;
      const std::string what = sharding + " step " + std::to_string(step) + " rank " + std::to_string(rank) + " table " +
                               std::to_string(table) + " shard " + std::to_string(shard);
      ASSERT_TRUE(simulated.count(key)) << what;
      EXPECT_EQ(simulated.at(key).first, m.first) << what;    // ids
      EXPECT_EQ(simulated.at(key).second, m.second) << what;  // bytes in
      EXPECT_EQ(m.second, table == 0 ? 192 : 256) << what;
    }
  }
}
