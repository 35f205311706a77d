// misc53 (tester53 F6): a workload the validator accepts whose rank needs more than 1 PiB
// (kMaxMemoryBytes, the capacity of the estimate's bookkeeping allocator) - one table of 2^40 x
// 65536 fp32 rows, 2^58 bytes - made `plan` and `run` fail with that allocator's own OOM ("out of
// memory allocating 262144.0 TiB for  (caching allocator): capacity: the device (1024.0 TiB) ...",
// exit 1). The replay now counts such blocks beside its allocator (AllocatorReplay::beyond), so the
// estimate says what the rank needs and the fit check refuses it as it refuses 256 GiB: naming the
// file and /devices/memory_bytes, exit 2. Sums saturate at INT64_MAX instead of wrapping.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/host_memory_check.h"
#include "embedscope/engine/memory/allocator.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"
#include "planner/memory_replay.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
namespace es = embedscope::engine;

constexpr int64_t kMisc53GiB = int64_t{1} << 30;

// one table of `rows` x `dim` (one feature), batch 4, 2 steps, 2 cpu ranks of 8 GiB (the default)
nlohmann::json misc53_workload(int64_t rows, int64_t dim, int tables = 1, const char* optimizer = "sgd") {
  nlohmann::json t = nlohmann::json::array();
  for (int i = 0; i < tables; ++i)
    t.push_back({{"name", "t" + std::to_string(i)},
                 {"num_embeddings", rows},
                 {"embedding_dim", dim},
                 {"feature_names", {"f" + std::to_string(i)}}});
  return {{"name", "misc53"},
          {"tables", t},
          {"batch_size", 4},
          {"steps", 2},
          {"devices", {{"count", 2}, {"backend", "cpu"}}},
          {"optimizer", {{"type", optimizer}}}};
}

std::string misc53_refusal(const es::WorkloadSpec& spec, const std::vector<es::DeviceMemoryEstimate>& est) {
  try {
    es::check_memory_fits(spec, est);
  } catch (const es::SpecError& e) {
    return e.what();
  }
  return "(no refusal)";
}
}  // namespace

TEST(Misc53BeyondDevice, ReplayCountsBlocksPastItsPebibyteBesideTheAllocator) {
  es::detail::AllocatorReplay r(es::AllocatorKind::caching, 0);
  r.set_context("weights", -1);
  es::Allocation small = r.take(3 * kMisc53GiB);  // served: 3 GiB is a 2 MiB multiple
  EXPECT_FALSE(r.beyond());
  const int64_t big_bytes = int64_t{1} << 58;  // 2^40 rows x 65536 x 4 B
  es::Allocation big = r.take(big_bytes);
  EXPECT_TRUE(r.beyond());
  EXPECT_EQ(big.size, big_bytes);
  EXPECT_EQ(r.allocated(), big_bytes + 3 * kMisc53GiB);
  EXPECT_EQ(r.stats().peak_allocated, big_bytes + 3 * kMisc53GiB);
  EXPECT_GE(r.stats().peak_reserved, big_bytes + 3 * kMisc53GiB);
  // a device of 8 GiB refuses it where the run would: the block past the 3 GiB
  const es::detail::ReplayShortfall s = r.shortfall_at(8 * kMisc53GiB);
  EXPECT_EQ(s.request, big_bytes);
  EXPECT_STREQ(s.what, "weights");
  EXPECT_EQ(s.iteration, -1);
  r.give(big);
  EXPECT_EQ(r.allocated(), 3 * kMisc53GiB);
  EXPECT_EQ(big.size, 0);  // emptied, as a served block
  r.give(small);
  EXPECT_EQ(r.allocated(), 0);
  EXPECT_EQ(r.stats().peak_allocated, big_bytes + 3 * kMisc53GiB);
}

TEST(Misc53BeyondDevice, AFourHundredThousandTebibyteTableIsRefusedByTheFitCheck) {
  for (const int64_t rows : {int64_t{1} << 40, int64_t{1} << 36}) {
    const es::WorkloadSpec spec = es::parse_workload(misc53_workload(rows, 65536), "big.json");
    const es::ShardingPlan plan = es::plan_sharding(spec);
    const auto est = es::estimate_memory(spec, plan);
    ASSERT_EQ(est.size(), 2u);
    const int64_t weights = rows * 65536 * 4;  // 2^58 / 2^54 bytes: whole 512 B blocks
    const int r = est[0].weights > 0 ? 0 : 1;  // table_wise: the one rank holding the table
    EXPECT_EQ(est[static_cast<size_t>(r)].weights, weights) << rows;
    EXPECT_EQ(est[static_cast<size_t>(1 - r)].weights, 0);
    EXPECT_EQ(est[static_cast<size_t>(r)].optimizer_state, 0);  // sgd
    EXPECT_GE(est[static_cast<size_t>(r)].total(), weights);
    EXPECT_LT(est[static_cast<size_t>(r)].total(), weights + 64 * (int64_t{1} << 20));  // + the batch's buffers
    const std::string why = misc53_refusal(spec, est);
    const std::string tib = rows == int64_t{1} << 40 ? "262144.0 TiB" : "16384.0 TiB";  // 2^58, 2^54 B
    EXPECT_EQ(why.rfind("/devices/memory_bytes: the workload does not fit on the devices under this sharding plan:", 0), 0u)
        << why;
    EXPECT_NE(why.find("rank " + std::to_string(r) + ": needs " + tib + " (weights " + tib + ", optimizer state 0 B"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("> 8.0 GiB"), std::string::npos) << why;
    EXPECT_EQ(why.find("1024.0 TiB"), std::string::npos) << why;  // not the bookkeeping allocator's capacity
  }
}

TEST(Misc53BeyondDevice, SumsPastInt64SaturateInsteadOfWrapping) {
  // 40 tables of 2^58 B with adam (two states of the rows' size: 2^59 B a table): a rank holding
  // n of them needs 3n x 2^58 B, past INT64_MAX (2^63 - 1 = 8 x 2^60 - 1) from n = 11 on
  const es::WorkloadSpec spec = es::parse_workload(misc53_workload(int64_t{1} << 40, 65536, 40, "adam"), "many.json");
  const es::ShardingPlan plan = es::plan_sharding(spec);
  const auto est = es::estimate_memory(spec, plan);
  ASSERT_EQ(est.size(), 2u);
  const int64_t max = std::numeric_limits<int64_t>::max(), table = int64_t{1} << 58;
  int held[2] = {0, 0};
  for (const auto& tp : plan.tables) {
    ASSERT_EQ(tp.shards.size(), 1u);  // table_wise
    ++held[tp.shards[0].rank];
  }
  EXPECT_EQ(held[0] + held[1], 40);
  for (int r = 0; r < 2; ++r) {
    const es::DeviceMemoryEstimate& e = est[static_cast<size_t>(r)];
    const int64_t n = held[r];
    EXPECT_EQ(e.weights, n < 32 ? n * table : max) << r;
    EXPECT_EQ(e.optimizer_state, n < 16 ? 2 * n * table : max) << r;
    EXPECT_GE(e.buffers, 0) << r;
    EXPECT_EQ(e.total() == max, n >= 11) << r << ": " << e.total();
    // this process's bytes (`plan`'s host line) saturate too: before, "-2 B"
    if (n >= 11) EXPECT_EQ(es::detail::host_bytes_of_rank(es::Backend::cpu, e), max) << r;
  }
  const std::string why = misc53_refusal(spec, est);
  EXPECT_EQ(why.rfind("/devices/memory_bytes: the workload does not fit", 0), 0u) << why;
}

TEST(Misc53BeyondDevice, PlanAndRunRefuseItNamingTheFileExitTwo) {
  const fs::path dir = embedscope::test_support::fresh_scratch("es_misc53_beyond_" + std::to_string(getpid()));
  std::ofstream(dir / "big.json") << misc53_workload(int64_t{1} << 40, 65536).dump(1);
  const std::string big = (dir / "big.json").string(), out = (dir / "x.db").string();
  for (const std::string& cmd : {"plan " + big, "run " + big + " -o " + out}) {
    const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, cmd, dir);
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.err;
    EXPECT_NE(r.err.find(big + ": /devices/memory_bytes: the workload does not fit on the devices"), std::string::npos)
        << cmd << "\n" << r.err;
    EXPECT_NE(r.err.find(": needs 262144.0 TiB (weights 262144.0 TiB"), std::string::npos) << cmd << "\n" << r.err;
    EXPECT_EQ(r.err.find("out of memory"), std::string::npos) << cmd << "\n" << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "x.db"));
  fs::remove_all(dir);
}
