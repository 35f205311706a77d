// tester49 F8a, N2: how looked-up ids are counted. Every id a run looks up is in one load counter,
// on the rank that served it - the hot ids a rank looks up in its hot-row replica included
// (sessions::kHotRowReplicaShard) - checked against an independent count over the batches the run
// trains on (make_batch_source); and `rebalance` counts the steps `stats` counts (a pipeline's
// drain steps left out by one rule, sessions/analysis/counted_steps.h).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/input/input.h"
#include "embedscope/engine/input/source.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/analysis/counted_steps.h"
#include "embedscope/sessions/model/hot_row_replica.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;
namespace eng = embedscope::engine;
namespace ss = embedscope::sessions;

fs::path fb49_scratch() {
  static const fs::path dir = embedscope::test_support::fresh_scratch("es_fixb49_counts_" + std::to_string(getpid()));
  return dir;
}

embedscope::test_support::CliResult fb49_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, fb49_scratch());
}

// W ranks, batch 8, 1 warm-up + 4 measured steps, no dense part. "hr": 40 rows x 4, 3 ids a bag,
// row_wise with hot rows {0, 5, 17, 39} (uniform ids: about 1 in 10 is hot); "tw": 20 rows x 4,
// 2 ids a bag, table_wise.
json fb49_hot_workload(int world) {
  return {{"name", "fixb49_hot"},
          {"batch_size", 8},
          {"steps", 4},
          {"warmup_steps", 1},
          {"seed", 11},
          {"devices", {{"count", world}, {"memory_bytes", 64 << 20}}},
          {"optimizer", {{"type", "sgd"}}},
          {"dense", nullptr},
          {"tables",
           {{{"name", "hr"}, {"num_embeddings", 40}, {"embedding_dim", 4}, {"feature_names", {"f_hr"}}},
            {{"name", "tw"}, {"num_embeddings", 20}, {"embedding_dim", 4}, {"feature_names", {"f_tw"}}}}},
          {"features", {{{"name", "f_hr"}, {"pooling_factor", 3}}, {{"name", "f_tw"}, {"pooling_factor", 2}}}},
          {"sharding",
           {{"default", "table_wise"}, {"tables", {{"hr", {{"type", "row_wise"}, {"hot_rows", {0, 5, 17, 39}}}}}}}}};
}

using Fb49Key = std::tuple<int64_t, int32_t, int32_t, int32_t>;  // step, rank, table, shard

// The ids each (measured step, rank, table, shard) served, counted from the batches the run trains
// on: a hot id of "hr" by the replica of the rank whose batch holds it, every other id by the rank
// holding the shard of its row (the session's shards table: where, not how many).
std::map<Fb49Key, int64_t> fb49_expected(const json& wl, const std::vector<ss::ShardRecord>& shards) {
  const eng::WorkloadSpec spec = eng::parse_workload(wl, "fixb49_hot");
  const std::unique_ptr<eng::BatchSource> src = eng::make_batch_source(spec);
  const std::set<int64_t> hot = {0, 5, 17, 39};
  const int W = spec.devices.count;
  const int64_t B = spec.batch_size;
  std::map<Fb49Key, int64_t> out;
  for (int64_t it = 0; it < spec.warmup_steps + spec.steps; ++it)
    for (int q = 0; q < W; ++q) {
      const eng::Batch b = src->make(it, q);
      const int64_t step = it - spec.warmup_steps;
      int64_t k = 0;
      for (int f = 0; f < 2; ++f)  // feature f reads table f (f_hr -> hr, f_tw -> tw)
        for (int64_t s = 0; s < B; ++s)
          for (int64_t n = 0; n < b.kjt.lengths[static_cast<size_t>(f * B + s)]; ++n) {
            const int64_t id = b.kjt.values[static_cast<size_t>(k++)];
            if (step < 0) continue;
            if (f == 0 && hot.count(id)) {
              ++out[{step, q, 0, ss::kHotRowReplicaShard}];
              continue;
            }
            for (const auto& sh : shards)
              if (sh.table == f && id >= sh.row_offset && id < sh.row_offset + sh.num_rows)
                ++out[{step, sh.rank, sh.table, sh.shard_index}];
          }
    }
  return out;
}

}  // namespace

// tester49 F8a: before, the hot ids ("hr"'s replica lookups) were in no load counter, so stats'
// and the run's ids per rank left out about 1 in 10 of "hr"'s ids.
TEST(Fixb49HotRowCounts, EveryIdIsCountedOnceOnTheRankThatServedIt) {
  for (int world : {2, 4}) {
    SCOPED_TRACE("world " + std::to_string(world));
    const json wl = fb49_hot_workload(world);
    const fs::path wf = fb49_scratch() / ("hot" + std::to_string(world) + ".json");
    std::ofstream(wf) << wl.dump(2);
    const fs::path db = fb49_scratch() / ("hot" + std::to_string(world) + ".db");
    auto r = fb49_cli("run " + wf.string() + " --json -o " + db.string() + " --force-overwrite");
    ASSERT_EQ(r.code, 0) << r.err;
    const json run = json::parse(r.out);
    const ss::SessionReader s(db.string());
    const std::map<Fb49Key, int64_t> expected = fb49_expected(wl, s.shards());
    std::map<Fb49Key, int64_t> got;
    for (const auto& c : s.load())
      if (c.step >= 0 && c.ids != 0) got[{c.step, c.rank, c.table, c.shard}] += c.ids;
    EXPECT_EQ(got, expected);
    // every id of the measured steps' batches once: 4 steps x W ranks x 8 bags x (3 + 2) ids
    // when every bag holds its pooling factor; counted from the batches either way
    int64_t all = 0, replica = 0;
    std::vector<int64_t> per_rank(static_cast<size_t>(world), 0);
    for (const auto& [k, n] : expected) {
      all += n;
      per_rank[static_cast<size_t>(std::get<1>(k))] += n;
      if (std::get<3>(k) == ss::kHotRowReplicaShard) replica += n;
    }
    EXPECT_GT(replica, 0);  // the workload does look hot rows up
    const eng::WorkloadSpec spec = eng::parse_workload(wl, "fixb49_hot");
    {
      const std::unique_ptr<eng::BatchSource> src = eng::make_batch_source(spec);
      int64_t ids = 0;
      for (int64_t it = 0; it < 5; ++it)
        for (int q = 0; q < world; ++q) {
          const eng::Batch b = src->make(it, q);
          if (it >= 1) ids += static_cast<int64_t>(b.kjt.values.size());
        }
      EXPECT_EQ(all, ids);
    }
    // the run's and stats' ids per rank are the same figures
    r = fb49_cli("stats " + db.string() + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const json st = json::parse(r.out);
    ASSERT_EQ(st["ranks"].size(), static_cast<size_t>(world));
    ASSERT_EQ(run["ranks"].size(), static_cast<size_t>(world));
    for (int q = 0; q < world; ++q) {
      EXPECT_EQ(st["ranks"][static_cast<size_t>(q)]["ids_looked_up"].get<int64_t>(), per_rank[static_cast<size_t>(q)]) << q;
      EXPECT_EQ(run["ranks"][static_cast<size_t>(q)]["ids_looked_up"].get<int64_t>(), per_rank[static_cast<size_t>(q)]) << q;
    }
  }
}

// The rule itself (counted_steps.h): the measured steps the counts cover.
TEST(Fixb49CountedSteps, DrainStepsLeftOutOnlyBeyondTheDrain) {
  EXPECT_EQ(ss::counted_step_range("semi_sync", "complete", 6, 6, 5).last, 3);
  EXPECT_EQ(ss::counted_step_range("semi_sync", "complete", 6, 6, 5).drain_left_out, 2);
  EXPECT_EQ(ss::counted_step_range("semi_sync", "complete", 2, 2, 1).last, 1);  // every step drains: all counted
  EXPECT_EQ(ss::counted_step_range("semi_sync", "complete", 2, 2, 1).drain_left_out, 0);
  EXPECT_EQ(ss::counted_step_range("sparse_dist", "complete", 4, 4, 3).last, 2);
  EXPECT_EQ(ss::counted_step_range("base", "complete", 6, 6, 5).last, 5);
  EXPECT_EQ(ss::counted_step_range("base", "complete", 6, 0, -1).last, -1);
}

// tester49 N2: `rebalance` read a sparse_dist session's drain step (it looks up its batch) and
// semi_sync's second-last step, which stats leaves out of its ids: the two now count the same
// steps, and rebalance's load over its default window (every counted step) is stats' ids.
TEST(Fixb49CountedSteps, RebalanceCountsTheStepsStatsCounts) {
  for (const char* pipeline : {"sparse_dist", "semi_sync"}) {
    SCOPED_TRACE(pipeline);
    json wl = fb49_hot_workload(2);
    wl["sharding"] = {{"default", "table_wise"}};  // two table_wise tables, the plan's ranks
    wl["pipeline"] = pipeline;
    const fs::path wf = fb49_scratch() / (std::string(pipeline) + ".json");
    std::ofstream(wf) << wl.dump(2);
    const fs::path db = fb49_scratch() / (std::string(pipeline) + ".db");
    auto r = fb49_cli("run " + wf.string() + " -o " + db.string() + " --force-overwrite");
    ASSERT_EQ(r.code, 0) << r.err;
    r = fb49_cli("stats " + db.string() + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const json st = json::parse(r.out);
    const int64_t drain = std::string(pipeline) == "semi_sync" ? 2 : 1;
    EXPECT_EQ(st["drain_steps"].get<int64_t>(), drain);
    int64_t stats_ids = 0;
    for (const auto& rk : st["ranks"]) stats_ids += rk["ids_looked_up"].get<int64_t>();
    // the same figure from the session's counters over steps 0 .. 3 - drain
    const ss::SessionReader s(db.string());
    int64_t counted = 0;
    for (const auto& c : s.load())
      if (c.step >= 0 && c.step <= 3 - drain) counted += c.ids;
    EXPECT_EQ(stats_ids, counted);
    EXPECT_GT(counted, 0);
    r = fb49_cli("rebalance " + db.string() + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const json p = json::parse(r.out);
    EXPECT_EQ(p["first_step"], 0);
    EXPECT_EQ(p["last_step"], 3 - drain);
    int64_t rebalance_ids = 0;
    for (const auto& v : p["load_before"]) rebalance_ids += v.get<int64_t>();
    EXPECT_EQ(rebalance_ids, stats_ids);
    EXPECT_NE(p["window_drain_note"].get<std::string>().find("drain the " + std::string(pipeline) +
                                                             " pipeline: left out, as stats leaves them out of its counts"),
              std::string::npos)
        << p["window_drain_note"];
  }
}

// tester49 F4: with warmup_steps 0 the semi_sync pipeline's step 0 looks up batch 0 (its fill) and
// batch 1 (the next batch, as every step does): its load counters read two batches' ids (160 for
// 2 ranks x 8 bags x (3 + 2) ids, 80 after). The fill's lookup is recorded as a warm-up's (step -1,
// counted nowhere): step s holds batch s + 1's ids, as in a run with a warm-up; base and
// sparse_dist look up each step's own batch.
TEST(Fixb49WarmupZero, StepZeroHoldsOneBatchOfIds) {
  for (const char* pipeline : {"base", "sparse_dist", "semi_sync"}) {
    SCOPED_TRACE(pipeline);
    json wl = fb49_hot_workload(2);
    wl["sharding"] = {{"default", "table_wise"}};
    wl["warmup_steps"] = 0;
    wl["pipeline"] = pipeline;
    const bool semi = std::string(pipeline) == "semi_sync";
    const fs::path wf = fb49_scratch() / (std::string("w0_") + pipeline + ".json");
    std::ofstream(wf) << wl.dump(2);
    const fs::path db = fb49_scratch() / (std::string("w0_") + pipeline + ".db");
    auto r = fb49_cli("run " + wf.string() + " --json -o " + db.string() + " --force-overwrite");
    ASSERT_EQ(r.code, 0) << r.err;
    const json run = json::parse(r.out);
    // the ids of each batch (iteration), all ranks, from the batches the run trains on
    const eng::WorkloadSpec spec = eng::parse_workload(wl, "fixb49_w0");
    const std::unique_ptr<eng::BatchSource> src = eng::make_batch_source(spec);
    std::vector<int64_t> batch_ids(4, 0);
    for (int64_t it = 0; it < 4; ++it)
      for (int q = 0; q < 2; ++q) batch_ids[static_cast<size_t>(it)] += static_cast<int64_t>(src->make(it, q).kjt.values.size());
    std::map<int64_t, int64_t> step_ids;
    const ss::SessionReader s(db.string());
    for (const auto& c : s.load()) step_ids[c.step] += c.ids;
    if (semi) {
      EXPECT_EQ(step_ids[-1], batch_ids[0]);  // the fill, as a warm-up step holds it
      for (int64_t st = 0; st < 3; ++st) EXPECT_EQ(step_ids[st], batch_ids[static_cast<size_t>(st + 1)]) << st;
      EXPECT_EQ(step_ids[3], 0);  // the last step looks nothing up
    } else {
      EXPECT_EQ(step_ids.count(-1), 0u);
      for (int64_t st = 0; st < 4; ++st) EXPECT_EQ(step_ids[st], batch_ids[static_cast<size_t>(st)]) << st;
    }
    EXPECT_EQ(step_ids[0], 80);  // 2 ranks x 8 bags x (3 + 2) ids: one batch (semi_sync read 160)
    // stats: the counted steps' ids (drain left out); run: every measured step's
    r = fb49_cli("stats " + db.string() + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const json st = json::parse(r.out);
    int64_t stats_ids = 0, run_ids = 0;
    for (const auto& rk : st["ranks"]) stats_ids += rk["ids_looked_up"].get<int64_t>();
    for (const auto& rk : run["ranks"]) run_ids += rk["ids_looked_up"].get<int64_t>();
    const int64_t counted = 4 - st["drain_steps"].get<int64_t>();
    int64_t want = 0, all = 0;
    for (int64_t k = 0; k < 4; ++k) {
      if (k < counted) want += step_ids[k];
      all += step_ids[k];
    }
    EXPECT_EQ(stats_ids, want);
    EXPECT_EQ(stats_ids, 80 * counted);
    EXPECT_EQ(run_ids, all);
  }
}
