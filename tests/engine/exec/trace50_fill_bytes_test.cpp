// A pipelined run without warm-up: its first step's collectives held the pipeline's fill.
// semi_sync's iteration 0 runs start_batch 0, lookup 0 and start_batch 1 besides the steady
// phases (finish_output_dist 0, lookup 1, start_batch 2, train 0): step 0 held three batches'
// input dists and two batches' output dists, so its bytes were 2-3 times a steady step's
// (sparse_dist's: two input dists). fixb49 moved the fill's lookup counters to step -1; the fill's
// collectives (records and comm spans) now go there too, as a warm-up step holds them: every
// steady step holds the same bytes, step 0 those of a run with warm-up, and the records' totals
// are unchanged.
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
namespace t50fs = embedscope::sessions;
using nlohmann::json;

fs::path t50f_scratch() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / ("es_trace50_fill_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// 2 ranks, batch 8 a rank, table_wise: ta (dim 4, 3 ids a bag) and tb (dim 4, 2 ids a bag).
json t50f_workload(const std::string& pipeline, int warmup) {
  return {{"name", "trace50_fill"},
          {"batch_size", 8},
          {"steps", 6},
          {"warmup_steps", warmup},
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

struct T50fRun {
  json run, stats;
  std::map<int64_t, std::map<std::string, int64_t>> sent;  // step -> collective name -> bytes sent (all ranks)
  std::map<int64_t, int64_t> step_sent;                    // step -> bytes sent (all ranks)
  std::map<int64_t, int64_t> step_moved;                   // step -> records' bytes sent + received
  std::map<int64_t, int64_t> span_moved;                   // step -> comm spans' bytes (sent + received)
};

T50fRun t50f_run(const std::string& pipeline, int warmup) {
  const std::string tag = pipeline + "_w" + std::to_string(warmup);
  const fs::path dir = t50f_scratch();
  std::ofstream(dir / (tag + ".json")) << t50f_workload(pipeline, warmup).dump(2);
  T50fRun out;
  auto r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "run " + (dir / (tag + ".json")).string() + " --json -o " + (dir / (tag + ".db")).string(), dir);
  EXPECT_EQ(r.code, 0) << r.err;
  out.run = json::parse(r.out, nullptr, false);
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats --json " + (dir / (tag + ".db")).string(), dir);
  EXPECT_EQ(r.code, 0) << r.err;
  out.stats = json::parse(r.out, nullptr, false);
  const t50fs::SessionReader s((dir / (tag + ".db")).string());
  for (const auto& c : s.collectives()) {
    out.sent[c.step][c.name] += c.bytes_sent;
    out.step_sent[c.step] += c.bytes_sent;
    out.step_moved[c.step] += c.bytes_sent + c.bytes_received;
  }
  for (const auto& o : s.all_ops())
    if (o.lane == static_cast<int32_t>(t50fs::Lane::comm) && o.step >= -1) out.span_moved[o.step] += o.bytes;
  return out;
}

// Bytes sent a batch, summed over the 2 ranks (W = 2, B = 8 a rank; whichever rank holds a table,
// the other rank's bags cross the wire):
//   input_dist/ids          (W-1) x B x (3 + 2) ids x 8 B (int64)       = 320
//   output_dist/all_to_all  (W-1) x B x (4 + 4) dims x 4 B (fp32)        = 256
constexpr int64_t kT50fIds = 1 * 8 * (3 + 2) * 8;
constexpr int64_t kT50fOutput = 1 * 8 * (4 + 4) * 4;

int64_t t50f_sum(const json& ranks, const char* key) {
  int64_t s = 0;
  for (const auto& r : ranks) s += r[key].get<int64_t>();
  return s;
}
}  // namespace

TEST(Trace50FillBytes, SemiSyncStepZeroHoldsOneSteadyStepsCollectives) {
  const T50fRun w0 = t50f_run("semi_sync", 0);
  ASSERT_TRUE(w0.run.is_object() && w0.stats.is_object());
  // the fill: batches 0 and 1's input dists, batch 0's output dist
  EXPECT_EQ(w0.sent.at(-1).at("input_dist/ids"), 2 * kT50fIds);
  EXPECT_EQ(w0.sent.at(-1).at("output_dist/all_to_all"), kT50fOutput);
  EXPECT_EQ(w0.sent.at(-1).count("grad_dist/all_to_all"), 0u);
  // steps 0-3 start batch s + 2 and look up batch s + 1: one batch each (step 0 held 3 and 2)
  for (int64_t st = 0; st <= 3; ++st) {
    EXPECT_EQ(w0.sent.at(st).at("input_dist/ids"), kT50fIds) << st;
    EXPECT_EQ(w0.sent.at(st).at("output_dist/all_to_all"), kT50fOutput) << st;
    EXPECT_EQ(w0.step_sent.at(st), w0.step_sent.at(1)) << st;  // every steady step the same bytes
  }
  // the drain: step 4 looks up batch 5, step 5 nothing
  EXPECT_EQ(w0.sent.at(4).count("input_dist/ids"), 0u);
  EXPECT_EQ(w0.sent.at(4).at("output_dist/all_to_all"), kT50fOutput);
  EXPECT_EQ(w0.sent.at(5).count("output_dist/all_to_all"), 0u);
  // the records' totals: every batch once (6 batches)
  int64_t ids = 0, output = 0;
  for (const auto& [step, by_name] : w0.sent) {
    if (auto it = by_name.find("input_dist/ids"); it != by_name.end()) ids += it->second;
    if (auto it = by_name.find("output_dist/all_to_all"); it != by_name.end()) output += it->second;
  }
  EXPECT_EQ(ids, 6 * kT50fIds);
  EXPECT_EQ(output, 6 * kT50fOutput);
  // the comm spans (the collectives table's bytes) went with their records: step by step the same
  EXPECT_EQ(w0.span_moved, w0.step_moved);
  // a run with one warm-up step: its step 0 holds what this run's step 0 holds
  const T50fRun w1 = t50f_run("semi_sync", 1);
  EXPECT_EQ(w1.step_sent.at(0), w0.step_sent.at(0));
  // run: the measured steps' records (step -1 left out, as its ids); stats: the counted steps
  // (the 2 drain steps left out): 4 steady steps
  int64_t measured = 0;
  for (const auto& [step, b] : w0.step_sent) measured += step >= 0 ? b : 0;
  EXPECT_EQ(t50f_sum(w0.run["ranks"], "bytes_sent"), measured);
  EXPECT_EQ(w0.stats["drain_steps"], 2);
  EXPECT_EQ(t50f_sum(w0.stats["ranks"], "bytes_sent"), 4 * w0.step_sent.at(0));
}

// sparse_dist's fill: batch 0's input dist (each step starts the next batch).
TEST(Trace50FillBytes, SparseDistStepZeroHoldsOneInputDist) {
  const T50fRun w0 = t50f_run("sparse_dist", 0);
  ASSERT_TRUE(w0.run.is_object());
  EXPECT_EQ(w0.sent.at(-1).at("input_dist/ids"), kT50fIds);
  EXPECT_EQ(w0.sent.at(-1).count("output_dist/all_to_all"), 0u);
  for (int64_t st = 0; st <= 4; ++st) {
    EXPECT_EQ(w0.sent.at(st).at("input_dist/ids"), kT50fIds) << st;
    EXPECT_EQ(w0.sent.at(st).at("output_dist/all_to_all"), kT50fOutput) << st;
    EXPECT_EQ(w0.step_sent.at(st), w0.step_sent.at(1)) << st;
  }
  EXPECT_EQ(w0.sent.at(5).count("input_dist/ids"), 0u);  // the last step starts no batch
  EXPECT_EQ(w0.span_moved, w0.step_moved);
  const T50fRun w1 = t50f_run("sparse_dist", 1);
  EXPECT_EQ(w1.step_sent.at(0), w0.step_sent.at(0));
}

// base has no fill: nothing at step -1 in a run without warm-up.
TEST(Trace50FillBytes, BaseHasNoFill) {
  const T50fRun w0 = t50f_run("base", 0);
  EXPECT_EQ(w0.sent.count(-1), 0u);
  for (int64_t st = 0; st < 6; ++st) EXPECT_EQ(w0.sent.at(st).at("input_dist/ids"), kT50fIds) << st;
}
