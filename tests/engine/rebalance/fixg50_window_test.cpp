// retest49 R1, R2: the steps an imbalance and a rebalance window cover.
// R1: `rebalance` of a session whose ranks hold different steps (a merged launch with a
// SIGKILLed rank) took every step, stats the steps every rank holds: the window now ends at the
// last step every rank holds, and a window line says so.
// R2: a pipeline's last 1-2 steps were left out as "drain" steps by position, also for a run
// that was killed before its drain: only the drain steps the run reached are left out
// (sessions/analysis/counted_steps.h drain_steps_run), by stats and rebalance alike.
// The fixtures are hand-written sessions with the workload and plan of a real run (a 2-rank run
// of two table_wise tables) and hand-chosen step rows and load counters.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/sharding/plan_json.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/counted_steps.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;
namespace ss = embedscope::sessions;
namespace eng = embedscope::engine;

fs::path g50_scratch() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_fixg50_window_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

embedscope::test_support::CliResult g50_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, g50_scratch());
}

// The metadata of a real complete run: 2 ranks, tables "ta" and "tb" (table_wise), 10 measured
// steps after 1 warm-up step, `pipeline`; and each table's rank in its plan.
struct G50Run {
  std::string workload_json, plan_json;
  int rank_of[2] = {-1, -1};
};
G50Run g50_real_run(const std::string& pipeline) {
  const json wl = {{"name", "fixg50_" + pipeline},
                   {"batch_size", 8},
                   {"steps", 10},
                   {"warmup_steps", 1},
                   {"seed", 5},
                   {"pipeline", pipeline},
                   {"devices", {{"count", 2}, {"memory_bytes", 64 << 20}}},
                   {"optimizer", {{"type", "sgd"}}},
                   {"dense", nullptr},
                   {"tables",
                    {{{"name", "ta"}, {"num_embeddings", 40}, {"embedding_dim", 4}, {"feature_names", {"fa"}}},
                     {{"name", "tb"}, {"num_embeddings", 40}, {"embedding_dim", 4}, {"feature_names", {"fb"}}}}},
                   {"features", {{{"name", "fa"}, {"pooling_factor", 1}}, {{"name", "fb"}, {"pooling_factor", 1}}}},
                   {"sharding", {{"default", "table_wise"}}}};
  const fs::path wf = g50_scratch() / ("w_" + pipeline + ".json");
  std::ofstream(wf) << wl.dump(2);
  const fs::path db = g50_scratch() / ("real_" + pipeline + ".db");
  const auto r = g50_cli("run " + wf.string() + " -o " + db.string() + " --force-overwrite");
  EXPECT_EQ(r.code, 0) << r.err;
  G50Run out;
  const ss::SessionReader s(db.string());
  out.workload_json = s.meta(ss::meta::kWorkloadJson);
  out.plan_json = s.meta(ss::meta::kShardingPlanJson);
  const eng::WorkloadSpec spec = eng::parse_workload(json::parse(out.workload_json), "fixg50");
  EXPECT_EQ(spec.steps, 10);  // the planned steps the drain rule reads
  const eng::ShardingPlan plan = eng::plan_from_json(spec, json::parse(out.plan_json), "fixg50");
  for (int t = 0; t < 2; ++t) out.rank_of[t] = plan.tables[static_cast<size_t>(t)].shards.at(0).rank;
  return out;
}

// A session with `run`'s metadata that ended `ended`: rank r holds measured steps 0..last[r]
// (a step row and one load counter of its table a step: `ids[r]` ids, 100 ns; steps 0-3 take
// 1 ms, later ones 3 ms), and a warm-up step -1.
std::string g50_session(const G50Run& run, const std::string& name, const std::string& pipeline, const std::string& ended,
                        const int64_t last[2], const int64_t ids[2]) {
  const fs::path p = g50_scratch() / (name + ".db");
  fs::remove(p);
  ss::SessionWriter w(p.string());
  w.set_metadata(ss::meta::kWorkloadJson, run.workload_json);
  w.set_metadata(ss::meta::kShardingPlanJson, run.plan_json);
  w.set_metadata(ss::meta::kWorldSize, "2");
  w.set_metadata(ss::meta::kSamplesPerStep, "16");
  w.set_metadata(ss::meta::kPipeline, pipeline);
  for (int t = 0; t < 2; ++t) {
    const int32_t r = run.rank_of[t];
    for (int64_t s = -1; s <= last[r]; ++s) {
      const int64_t t0 = 10'000'000 * (s + 1);
      const int64_t dt = s >= 4 ? 3'000'000 : 1'000'000;
      ss::LoadCounter c;
      c.step = s;
      c.rank = r;
      c.table = t;
      c.shard = 0;
      c.ids = ids[r];
      c.lookup_ns = 100;
      w.add_step_records({s, r, t0, t0 + dt, 0.5, 0, 0}, {c}, {});
    }
  }
  w.close(ended, ended == "complete" ? "" : "stopped by the test");
  return p.string();
}
}  // namespace

// The rule: the drain steps a run reached.
TEST(Fixg50DrainRun, OnlyTheDrainStepsTheRunReached) {
  EXPECT_EQ(ss::drain_steps_run("semi_sync", "complete", 6, 5), 2);
  EXPECT_EQ(ss::drain_steps_run("semi_sync", "complete", 0, 5), 2);  // complete: by position, as before
  EXPECT_EQ(ss::drain_steps_run("semi_sync", "crashed", 3000, 336), 0);
  EXPECT_EQ(ss::drain_steps_run("semi_sync", "cancelled", 3000, 2997), 0);
  EXPECT_EQ(ss::drain_steps_run("semi_sync", "cancelled", 3000, 2998), 1);
  EXPECT_EQ(ss::drain_steps_run("semi_sync", "cancelled", 3000, 2999), 2);
  EXPECT_EQ(ss::drain_steps_run("sparse_dist", "write_failed", 400, 296), 0);
  EXPECT_EQ(ss::drain_steps_run("sparse_dist", "crashed", 400, 399), 1);
  EXPECT_EQ(ss::drain_steps_run("semi_sync", "crashed", 0, 336), 0);  // planned steps unknown: none
  EXPECT_EQ(ss::drain_steps_run("base", "complete", 6, 5), 0);
  // counted_step_range: a killed semi_sync run counts every step it holds
  EXPECT_EQ(ss::counted_step_range("semi_sync", "crashed", 3000, 337, 336).last, 336);
  EXPECT_EQ(ss::counted_step_range("semi_sync", "crashed", 3000, 337, 336).drain_left_out, 0);
  EXPECT_EQ(ss::counted_step_range("semi_sync", "cancelled", 10, 10, 9).last, 7);
}

// The rule: the steps every rank holds.
TEST(Fixg50DrainRun, HeldStepsOfTheRanks) {
  std::vector<ss::StepMetric> rows;
  for (int64_t s = -1; s <= 4; ++s) rows.push_back({s, 0, 0, 1, 0, 0, 0});
  for (int64_t s = -1; s <= 2; ++s) rows.push_back({s, 1, 0, 1, 0, 0, 0});
  const ss::HeldSteps h = ss::held_steps(rows);
  ASSERT_EQ(h.ranks.size(), 2u);
  EXPECT_EQ(h.ranks[0].steps, 5);
  EXPECT_EQ(h.ranks[0].last_step, 4);
  EXPECT_EQ(h.ranks[1].steps, 3);
  EXPECT_EQ(h.ranks[1].last_step, 2);
  EXPECT_EQ(h.common_last_step, 2);
  rows.resize(6);  // rank 0 alone
  EXPECT_TRUE(ss::held_steps(rows).ranks.empty());
  for (int64_t s = -1; s <= 4; ++s) rows.push_back({s, 1, 0, 1, 0, 0, 0});  // both 0..4
  EXPECT_TRUE(ss::held_steps(rows).ranks.empty());
  EXPECT_EQ(ss::held_steps(rows).common_last_step, -1);
}

// R1: the table on rank A looks up 10 ids a step over steps 0..7, the one on rank B 30 over steps
// 0..5 (B was killed; base pipeline, crashed). stats and rebalance: steps 0..5, loads 60 and 180,
// max/mean 180 / 120 = 1.50 (every step: 80 and 180, 180 / 130 = 1.38).
TEST(Fixg50RankWindow, RebalanceEndsAtTheLastStepEveryRankHolds) {
  const G50Run run = g50_real_run("base");
  const int a = run.rank_of[0], b = run.rank_of[1];
  ASSERT_NE(a, b);
  int64_t last[2], ids[2];
  last[a] = 7, last[b] = 5;
  ids[a] = 10, ids[b] = 30;
  const std::string db = g50_session(run, "killed_rank", "base", "crashed", last, ids);
  const ss::RunStats st = ss::analyze(ss::SessionReader(db));
  EXPECT_EQ(st.common_last_step, 5);
  EXPECT_DOUBLE_EQ(st.lookups_max_over_mean, 1.5);
  auto r = g50_cli("rebalance " + db + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json p = json::parse(r.out);
  EXPECT_EQ(p["first_step"], 0);
  EXPECT_EQ(p["last_step"], 5);  // was 7
  EXPECT_EQ(p["load_before"][static_cast<size_t>(a)], 60);
  EXPECT_EQ(p["load_before"][static_cast<size_t>(b)], 180);
  EXPECT_DOUBLE_EQ(p["imbalance_before"].get<double>(), 1.5);  // was 180 / 130
  EXPECT_EQ(p["window_drain_note"], "");
  const std::string note = p["window_ranks_note"].get<std::string>();
  EXPECT_NE(note.find(std::string("rank ") + std::to_string(b) + " 6 steps (through step 5); rank " + std::to_string(a) +
                      " 8 steps (through step 7)"),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("The window ends at step 5, the last step every rank holds, as stats' imbalance does"),
            std::string::npos)
      << note;
  r = g50_cli("rebalance " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("ids looked up in steps 0..5 (6 step(s))"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("window       the ranks hold different steps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ids max/mean 1.50 observed"), std::string::npos) << r.out;
  r = g50_cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("imbalance    ids looked up max/mean 1.50"), std::string::npos) << r.out;
  // the ranks holding the same steps: no line, every step (80 and 240 over 0..7: 1.50 as well,
  // so B looks up 20 here: 80 and 160, 160 / 120 = 1.33)
  last[b] = 7;
  ids[b] = 20;
  const std::string even = g50_session(run, "even_ranks", "base", "complete", last, ids);
  r = g50_cli("rebalance " + even + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json q = json::parse(r.out);
  EXPECT_EQ(q["last_step"], 7);
  EXPECT_EQ(q["window_ranks_note"], "");
  EXPECT_NEAR(q["imbalance_before"].get<double>(), 160.0 / 120.0, 1e-12);
}

// R2: semi_sync, 10 planned steps, both ranks 10 and 30 ids a step; steps 0-3 take 1 ms, later
// ones 3 ms. A crashed run holding steps 0..5 drained nothing: every step counted (stats: 6
// steps, mean (4 x 1 + 2 x 3) / 6 ms, ids 60 and 180; rebalance's window 0..5, no drain line).
// The complete run's steps 8-9 drain it (left out: window 0..7, mean (4 + 4 x 3) / 8 = 2 ms); a
// run cancelled after step 8 holds one drain step (8 = 10 - 2).
TEST(Fixg50DrainEnd, AKilledRunDrainedNothingACompleteOneDid) {
  const G50Run run = g50_real_run("semi_sync");
  const int a = run.rank_of[0], b = run.rank_of[1];
  ASSERT_NE(a, b);
  int64_t last[2] = {5, 5}, ids[2];
  ids[a] = 10, ids[b] = 30;
  {
    const std::string db = g50_session(run, "semi_crashed", "semi_sync", "crashed", last, ids);
    const ss::RunStats st = ss::analyze(ss::SessionReader(db));
    EXPECT_EQ(st.drain_steps, 0);
    EXPECT_FALSE(st.all_drain);
    EXPECT_EQ(st.counted_steps(), 6);
    EXPECT_DOUBLE_EQ(st.step_time_ns.mean, 10'000'000.0 / 6.0);
    for (const auto& t : st.per_step) EXPECT_FALSE(t.drain) << t.step;
    EXPECT_EQ(st.ranks[static_cast<size_t>(a)].ids_looked_up, 60);
    EXPECT_EQ(st.ranks[static_cast<size_t>(b)].ids_looked_up, 180);
    auto r = g50_cli("stats " + db);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out.find("drain"), std::string::npos) << r.out;
    r = g50_cli("stats " + db + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["drain_steps"], 0);
    r = g50_cli("rebalance " + db + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const json p = json::parse(r.out);
    EXPECT_EQ(p["last_step"], 5);
    EXPECT_EQ(p["window_drain_note"], "");
    EXPECT_EQ(p["load_before"][static_cast<size_t>(b)], 180);
    r = g50_cli("rebalance " + db);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out.find("drain"), std::string::npos) << r.out;
  }
  {
    last[0] = last[1] = 9;
    const std::string db = g50_session(run, "semi_complete", "semi_sync", "complete", last, ids);
    const ss::RunStats st = ss::analyze(ss::SessionReader(db));
    EXPECT_EQ(st.drain_steps, 2);
    EXPECT_EQ(st.counted_steps(), 8);
    EXPECT_DOUBLE_EQ(st.step_time_ns.mean, 2'000'000.0);
    EXPECT_EQ(st.ranks[static_cast<size_t>(b)].ids_looked_up, 240);
    auto r = g50_cli("stats " + db);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("(steps 8-9 drain the semi_sync pipeline: recorded, not in the step times"), std::string::npos)
        << r.out;
    r = g50_cli("rebalance " + db + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const json p = json::parse(r.out);
    EXPECT_EQ(p["last_step"], 7);
    EXPECT_EQ(p["window_drain_note"], "steps 8..9 drain the semi_sync pipeline: left out, as stats leaves them out of its "
                                      "counts (the window ends at step 7, the last counted step)");
  }
  {
    last[0] = last[1] = 8;
    const std::string db = g50_session(run, "semi_cancelled", "semi_sync", "cancelled", last, ids);
    const ss::RunStats st = ss::analyze(ss::SessionReader(db));
    EXPECT_EQ(st.drain_steps, 1);
    EXPECT_EQ(st.counted_steps(), 8);
    auto r = g50_cli("stats " + db);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("(step 8 drains the semi_sync pipeline"), std::string::npos) << r.out;
    r = g50_cli("rebalance " + db + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["last_step"], 7);
  }
}
