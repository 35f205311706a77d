// tester48 F9: "fits" must mean the run's allocator can hold the plan. 4 tables of 200,000 x 32
// on 2 cpu ranks of 40 MiB with the caching allocator: t0, t1 fp16 and t2, t3 fp32, row_wise,
// is 36.7 MiB allocated a rank - and `plan` said it fits - but PyTorch's segments need more:
// each rank's fp16 shards are 200,000 / 2 x 32 x 2 B = 6,400,000 B (1-10 MiB: both share one
// 20 MiB segment) and its fp32 shards 12,800,000 B (> 10 MiB: a segment each, rounded up to
// 2 MiB: 14 MiB), 20 + 14 + 14 = 48 MiB for the weights alone, and the step's small buffers
// (<= 1 MiB) a 2 MiB small-pool segment: 50 MiB reserved. At 40 MiB the second fp32 shard
// finds 34 MiB reserved, 6 MiB unreserved and no free block of 12.2 MiB: the run ended oom at
// the weights. Now the planner says so, the storage search goes on to a change that fits,
// and `run` refuses before training (exit 2).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/planner/storage_fallback.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec_error.h"
#include "support/cli_run.h"

namespace fixd48_allocator_fit_test {

using namespace embedscope::engine;

constexpr int64_t MiB = int64_t{1} << 20;

// tester48's fit.json (every table fp32) and fit2.json (t0, t1 fp16, row_wise)
std::string fit_json(bool fp16_first_two) {
  nlohmann::json j = {{"name", fp16_first_two ? "fit2" : "fit"}, {"batch_size", 32}, {"steps", 3}, {"seed", 2},
                      {"devices", {{"count", 2}, {"backend", "cpu"}, {"memory_bytes", 40 * MiB}}},
                      {"optimizer", {{"type", "sgd"}, {"learning_rate", 0.05}}}};
  for (int t = 0; t < 4; ++t) {
    nlohmann::json tj = {{"name", "t" + std::to_string(t)}, {"num_embeddings", 200000}, {"embedding_dim", 32},
                         {"feature_names", {"f" + std::to_string(t)}}};
    if (fp16_first_two && t < 2) tj["data_type"] = "fp16";
    j["tables"].push_back(tj);
  }
  if (fp16_first_two) j["sharding"] = {{"default", "row_wise"}};
  return j.dump();
}

WorkloadSpec fit_spec(bool fp16_first_two) {
  return parse_workload(nlohmann::json::parse(fit_json(fp16_first_two)), "fit");
}

std::string fits_error(const WorkloadSpec& spec, const ShardingPlan& plan, ShortfallScope scope = ShortfallScope::plan) {
  try {
    check_memory_fits(spec, estimate_memory(spec, plan), scope);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}

std::filesystem::path scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("es_fixd48_fit_" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

embedscope::test_support::CliResult cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, scratch());
}

TEST(Fixd48AllocatorFit, TheReplayReservesFiftyMiBAndRunsOutAtTheSecondFp32Shard) {
  const WorkloadSpec spec = fit_spec(true);
  const ShardingPlan plan = plan_sharding(spec);
  const auto est = estimate_memory(spec, plan);
  ASSERT_EQ(est.size(), 2u);
  for (const auto& e : est) {
    EXPECT_EQ(e.weights, 2 * 6400000 + 2 * 12800000) << e.rank;  // 36.6 MiB
    EXPECT_LE(e.total(), 40 * MiB) << e.rank;                      // the bytes fit
    EXPECT_EQ(e.peak_reserved, (20 + 14 + 14 + 2) * MiB) << e.rank;
    EXPECT_EQ(e.shortfall_request, 12800000) << e.rank;  // t3's shard
    EXPECT_EQ(e.shortfall_what, "weights") << e.rank;
    EXPECT_EQ(e.shortfall_iteration, -1) << e.rank;
    EXPECT_TRUE(e.shortfall_fragmentation) << e.rank;  // 15.6 MiB free, none where 14 MiB could go
    // expandable (alloc52: PyTorch's large pool maps 20 MiB pages): 36.6 MiB of the large pool in
    // two 20 MiB pages (40 MiB) + the small pool's 2 MiB page = 42 MiB > 40 MiB (before: 19 pages
    // of 2 MiB, 40 MiB, and it served)
    EXPECT_FALSE(e.expandable_serves) << e.rank;
    EXPECT_TRUE(e.direct_serves) << e.rank;
  }
  const std::string why = fits_error(spec, plan);
  EXPECT_NE(why.find("ranks 0-1: fits in bytes (36.7 MiB of 40.0 MiB: weights 36.6 MiB, optimizer state 0 B, dense "),
            std::string::npos) << why;
  EXPECT_NE(why.find("but the caching allocator reserves 50.0 MiB for its buffers in the run's order"), std::string::npos)
      << why;
  EXPECT_NE(why.find("at 40.0 MiB it runs out allocating 12.2 MiB for the weights before the first step (fragmentation"),
            std::string::npos) << why;
  EXPECT_NE(why.find("use the direct allocator or devices of at least 50.0 MiB each"),
            std::string::npos) << why;
  // the run's own check refuses it too (before the first step), and plan_stats does not call it a fit
  EXPECT_EQ(fits_error(spec, plan, ShortfallScope::setup), why);
  EXPECT_FALSE(plan_stats(spec, plan, planning_profile(spec)).fits);
}

TEST(Fixd48AllocatorFit, FiftyMiBDevicesOrTheExpandableAllocatorOnFortyTwoHoldTheSamePlan) {
  WorkloadSpec big = fit_spec(true);
  big.devices.memory_bytes = 50 * MiB;
  EXPECT_EQ(fits_error(big, plan_sharding(big)), "");
  WorkloadSpec under = fit_spec(true);
  under.devices.memory_bytes = 50 * MiB - 512;  // one block short: the small-pool segment does not fit
  const auto e = estimate_memory(under, plan_sharding(under));
  EXPECT_EQ(e[0].shortfall_what, "buffers");
  EXPECT_NE(fits_error(under, plan_sharding(under)).find("for a step's buffers in step 0"), std::string::npos);
  // ... which `run` leaves to the run (its session shows it), as the teaching scenarios' fragmentation
  EXPECT_EQ(fits_error(under, plan_sharding(under), ShortfallScope::setup), "");
  // expandable: the large pool's 36.6 MiB of weights in two 20 MiB pages + the small pool's
  // 2 MiB page: 42 MiB, which no 40 MiB device holds (min_reservation says so before the replay)
  WorkloadSpec exp = fit_spec(true);
  exp.memory.allocator = AllocatorKind::expandable;
  const auto ee = estimate_memory(exp, plan_sharding(exp));
  EXPECT_EQ(ee[0].peak_reserved, 42 * MiB);
  EXPECT_EQ(ee[0].min_reserved_expandable, 42 * MiB);
  EXPECT_NE(fits_error(exp, plan_sharding(exp)).find("the expandable allocator must reserve at least 42.0 MiB at once"),
            std::string::npos);
  exp.devices.memory_bytes = 42 * MiB;
  EXPECT_EQ(estimate_memory(exp, plan_sharding(exp))[0].shortfall_request, 0);
  EXPECT_EQ(fits_error(exp, plan_sharding(exp)), "");
}

TEST(Fixd48AllocatorFit, TheStorageSearchGoesOnToThreeFp16Tables) {
  const WorkloadSpec spec = fit_spec(false);
  const StoragePlanResult r = plan_search_with_storage(spec, planning_profile(spec), {},
                                                       {StorageOption::fp16, StorageOption::int8});
  // with two tables fp16 every rank holds 36.6 MiB of blocks over 1 MiB: no 2-rank layout of
  // them fits 38 MiB of large segments (two 12.8 MB fp32 shards take 14 MiB each; 6.4 MB pieces
  // go three to a 20 MiB segment) beside the small pool's 2 MiB; three fp16 tables do
  ASSERT_EQ(r.changes.size(), 3u);
  EXPECT_EQ(r.changes[0].name, "t0");
  EXPECT_EQ(r.changes[1].name, "t1");
  EXPECT_EQ(r.changes[2].name, "t2");
  EXPECT_TRUE(r.search.stats.fits);
  for (const auto& e : estimate_memory(r.spec, r.search.plan)) {
    EXPECT_EQ(e.shortfall_request, 0) << e.rank;
    EXPECT_LE(e.peak_reserved, 40 * MiB) << e.rank;
  }
}

TEST(Fixd48AllocatorFit, PlanSaysItAndRunRefusesBeforeTraining) {
  const auto fit2 = scratch() / "fit2.json", fit = scratch() / "fit.json";
  std::ofstream(fit2) << fit_json(true);
  std::ofstream(fit) << fit_json(false);
  auto p = cli("plan " + fit2.string());
  EXPECT_EQ(p.code, 2) << p.out << p.err;
  EXPECT_NE(p.err.find("but the caching allocator reserves 50.0 MiB"), std::string::npos) << p.err;
  const auto db = scratch() / "fit2.db";
  auto r = cli("run " + fit2.string() + " -o " + db.string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;  // bad input: refused, not an oom of the run (1)
  EXPECT_NE(r.err.find("ranks 0-1: fits in bytes (36.7 MiB of 40.0 MiB: weights 36.6 MiB"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("runs out allocating 12.2 MiB for the weights before the first step"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(db));  // before training: no session
  // one block short of the 50 MiB the replay reserves: the shards fit, a step's small buffers
  // do not; `plan` refuses it, `run` leaves it to the run, which ends oom (exit 1) as replayed
  nlohmann::json under = nlohmann::json::parse(fit_json(true));
  under["devices"]["memory_bytes"] = 50 * MiB - 512;
  const auto under_path = scratch() / "fit2_under.json";
  std::ofstream(under_path) << under.dump();
  EXPECT_EQ(cli("plan " + under_path.string()).code, 2);
  auto o = cli("run " + under_path.string() + " -o " + (scratch() / "under.db").string());
  EXPECT_EQ(o.code, 1) << o.out << o.err;
  EXPECT_NE(o.err.find("run ended oom"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("give the device 512 B more than its 50.0 MiB"), std::string::npos) << o.err;
  auto a = cli("plan " + fit.string() + " --auto --allow-storage fp16,int8 --json");
  ASSERT_EQ(a.code, 0) << a.err;
  const auto j = nlohmann::json::parse(a.out);
  EXPECT_TRUE(j["fits"].get<bool>());
  EXPECT_EQ(j["storage_changes"].size(), 3u);
}

}  // namespace fixd48_allocator_fit_test
