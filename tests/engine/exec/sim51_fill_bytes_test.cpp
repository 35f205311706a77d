// sim51: the simulated executor records a pipelined run's fill as the measured executors do
// (trace50): in a run without warm-up, the collectives (and their comm spans) of the phases only
// iteration 0 runs - semi_sync's input dists of batches 0 and 1 and its lookup's output dist of
// batch 0, sparse_dist's input dist of batch 0 - go to step -1, and semi_sync's fill lookup's
// load counters with them (fixb49). Before, the simulated step 0 held them: semi_sync's step 0
// sent 960 B of ids and 512 B of pooled output (3 and 2 batches) against a measured 320 and 256.
// So a simulated and a measured session of one workload agree step by step, and the totals of
// the records are unchanged (every batch once).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/model/events.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
namespace s51fs = embedscope::sessions;
using nlohmann::json;

fs::path s51f_scratch() {
  static const fs::path dir =
      embedscope::test_support::fresh_scratch("es_sim51_fill_" + std::to_string(::getpid()));
  return dir;
}

// trace50's workload: 2 ranks, batch 8 a rank, table_wise, no dense part: ta (40 x 4, 3 ids a bag)
// and tb (20 x 4, 2 ids a bag), 6 steps, no warm-up.
json s51f_workload(const std::string& pipeline) {
  return {{"name", "sim51_fill"},
          {"batch_size", 8},
          {"steps", 6},
          {"warmup_steps", 0},
          {"seed", 11},
          {"pipeline", pipeline},
          {"devices", {{"count", 2}, {"memory_bytes", 64 << 20}}},
          {"optimizer", {{"type", "sgd"}}},
          {"dense", nullptr},
          {"tables",
           {{{"name", "ta"}, {"num_embeddings", 40}, {"embedding_dim", 4}, {"feature_names", {"f_a"}}},
            {{"name", "tb"}, {"num_embeddings", 20}, {"embedding_dim", 4}, {"feature_names", {"f_b"}}}}},
          {"features", {{{"name", "f_a"}, {"pooling_factor", 3}}, {{"name", "f_b"}, {"pooling_factor", 2}}}},
          {"sharding", {{"default", "table_wise"}}}};
}

struct S51fRun {
  json run;
  std::map<int64_t, std::map<std::string, int64_t>> sent;  // step -> collective name -> bytes sent (all ranks)
  std::map<int64_t, int64_t> step_sent;                    // step -> bytes sent (all ranks)
  std::map<int64_t, int64_t> step_moved;                   // step -> records' bytes sent + received
  std::map<int64_t, int64_t> span_moved;                   // step -> comm spans' bytes (sent + received)
  std::map<int64_t, int64_t> load_ids;                     // step -> load counters' ids (all ranks)
};

// `run` of the workload, measured on cpu ranks or (`simulate`) on h100_sxm, and its session.
S51fRun s51f_run(const std::string& pipeline, bool simulate) {
  const std::string tag = pipeline + (simulate ? "_sim" : "_cpu");
  const fs::path dir = s51f_scratch();
  std::ofstream(dir / (tag + ".json")) << s51f_workload(pipeline).dump(2);
  S51fRun out;
  const auto r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI,
      "run " + (dir / (tag + ".json")).string() + (simulate ? " --simulate h100_sxm" : "") + " --json -o " +
          (dir / (tag + ".db")).string(),
      dir);
  EXPECT_EQ(r.code, 0) << r.err;
  out.run = json::parse(r.out, nullptr, false);
  const s51fs::SessionReader s((dir / (tag + ".db")).string());
  for (const auto& c : s.collectives()) {
    out.sent[c.step][c.name] += c.bytes_sent;
    out.step_sent[c.step] += c.bytes_sent;
    out.step_moved[c.step] += c.bytes_sent + c.bytes_received;
  }
  for (const auto& o : s.all_ops())
    if (o.lane == static_cast<int32_t>(s51fs::Lane::comm)) out.span_moved[o.step] += o.bytes;
  for (const auto& c : s.load()) out.load_ids[c.step] += c.ids;
  return out;
}

// Bytes sent a batch, summed over the 2 ranks (W = 2, B = 8 a rank; whichever rank holds a table,
// the other rank's bags cross the wire):
//   input_dist/ids          (W-1) x B x (3 + 2) ids x 8 B (int64)   = 320
//   output_dist/all_to_all  (W-1) x B x (4 + 4) dims x 4 B (fp32)    = 256
// and ids a batch looked up: W x B x (3 + 2) = 80.
constexpr int64_t kS51fIds = 1 * 8 * (3 + 2) * 8;
constexpr int64_t kS51fOutput = 1 * 8 * (4 + 4) * 4;
constexpr int64_t kS51fLookups = 2 * 8 * (3 + 2);

int64_t s51f_sum(const json& ranks, const char* key) {
  int64_t s = 0;
  for (const auto& r : ranks) s += r[key].get<int64_t>();
  return s;
}

// The checks both pipelines share: the simulated session's collectives, bytes and ids step by step
// are the measured session's (every collective's bytes are exact here: fixed bag sizes,
// table_wise), the comm spans go with their records, and run's rank table leaves step -1 out.
void s51f_expect_same(const S51fRun& sim, const S51fRun& cpu) {
  EXPECT_EQ(sim.sent, cpu.sent);
  EXPECT_EQ(sim.step_moved, cpu.step_moved);
  EXPECT_EQ(sim.span_moved, sim.step_moved);
  EXPECT_EQ(sim.load_ids, cpu.load_ids);
  int64_t measured = 0;
  for (const auto& [step, b] : sim.step_sent) measured += step >= 0 ? b : 0;
  EXPECT_EQ(s51f_sum(sim.run["ranks"], "bytes_sent"), measured);
  EXPECT_EQ(s51f_sum(sim.run["ranks"], "bytes_sent"), s51f_sum(cpu.run["ranks"], "bytes_sent"));
  EXPECT_EQ(s51f_sum(sim.run["ranks"], "ids_looked_up"), s51f_sum(cpu.run["ranks"], "ids_looked_up"));
}
}  // namespace

// semi_sync: the fill (batches 0 and 1's input dists, batch 0's lookup and output dist) at step
// -1; steps 0-3 each start one batch and look one up; step 4 looks up batch 5; step 5 trains it.
TEST(Sim51FillBytes, SemiSyncSimulatedStepsHoldWhatTheMeasuredStepsHold) {
  const S51fRun sim = s51f_run("semi_sync", true);
  ASSERT_TRUE(sim.run.is_object());
  EXPECT_EQ(sim.sent.at(-1).at("input_dist/ids"), 2 * kS51fIds);
  EXPECT_EQ(sim.sent.at(-1).at("output_dist/all_to_all"), kS51fOutput);
  EXPECT_EQ(sim.sent.at(-1).count("grad_dist/all_to_all"), 0u);
  for (int64_t st = 0; st <= 3; ++st) {
    EXPECT_EQ(sim.sent.at(st).at("input_dist/ids"), kS51fIds) << st;  // was 3 batches' at step 0
    EXPECT_EQ(sim.sent.at(st).at("output_dist/all_to_all"), kS51fOutput) << st;  // was 2 batches'
    EXPECT_EQ(sim.step_sent.at(st), sim.step_sent.at(1)) << st;
  }
  EXPECT_EQ(sim.sent.at(4).count("input_dist/ids"), 0u);
  EXPECT_EQ(sim.sent.at(5).count("output_dist/all_to_all"), 0u);
  // every batch once: 6 input dists and 6 output dists over the session
  int64_t ids = 0, output = 0;
  for (const auto& [step, by_name] : sim.sent) {
    if (auto it = by_name.find("input_dist/ids"); it != by_name.end()) ids += it->second;
    if (auto it = by_name.find("output_dist/all_to_all"); it != by_name.end()) output += it->second;
  }
  EXPECT_EQ(ids, 6 * kS51fIds);
  EXPECT_EQ(output, 6 * kS51fOutput);
  // the load counters follow the lookups: batch 0 at step -1, batches 1-5 at steps 0-4, and step
  // 5, which only trains, counters of 0 ids (a measured rank writes its shards' counters there
  // with 0 ids too); before, 80 at every step 0-5 and none at -1
  EXPECT_EQ(sim.load_ids, (std::map<int64_t, int64_t>{{-1, kS51fLookups},
                                                      {0, kS51fLookups},
                                                      {1, kS51fLookups},
                                                      {2, kS51fLookups},
                                                      {3, kS51fLookups},
                                                      {4, kS51fLookups},
                                                      {5, 0}}));
  EXPECT_EQ(s51f_sum(sim.run["ranks"], "ids_looked_up"), 5 * kS51fLookups);
  s51f_expect_same(sim, s51f_run("semi_sync", false));
}

// sparse_dist: batch 0's input dist at step -1; every step 0-4 starts the next batch.
TEST(Sim51FillBytes, SparseDistSimulatedStepsHoldWhatTheMeasuredStepsHold) {
  const S51fRun sim = s51f_run("sparse_dist", true);
  ASSERT_TRUE(sim.run.is_object());
  EXPECT_EQ(sim.sent.at(-1).at("input_dist/ids"), kS51fIds);
  EXPECT_EQ(sim.sent.at(-1).count("output_dist/all_to_all"), 0u);
  for (int64_t st = 0; st <= 4; ++st) {
    EXPECT_EQ(sim.sent.at(st).at("input_dist/ids"), kS51fIds) << st;  // was 2 batches' at step 0
    EXPECT_EQ(sim.sent.at(st).at("output_dist/all_to_all"), kS51fOutput) << st;
    EXPECT_EQ(sim.step_sent.at(st), sim.step_sent.at(1)) << st;
  }
  EXPECT_EQ(sim.sent.at(5).count("input_dist/ids"), 0u);
  EXPECT_EQ(sim.load_ids.count(-1), 0u);  // sparse_dist's fill looks nothing up
  EXPECT_EQ(sim.load_ids.at(5), kS51fLookups);
  s51f_expect_same(sim, s51f_run("sparse_dist", false));
}
