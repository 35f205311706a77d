// A factorized (low_rank_dim) table sharded data_parallel: DDP over its parameters A (rows x r)
// and B (r x dim) all-reduces their gradients, rows x r + r x dim floats, not the rows x dim
// gradient of E = A B, and the run's gradient buffer has that size (sharding/data_parallel.cpp,
// program/data_parallel_bytes.h). The step program's calls, the measured cpu session's records
// and the memory estimate against numbers by hand; parity with the unsharded reference is
// reference/low_rank_parity_test.cpp's (data_parallel on 1 to 4 ranks, every optimizer).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <tuple>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/sessions/store/session.h"
#include "engine/planner/round_profile.h"

namespace {
namespace fs = std::filesystem;
namespace dplr = embedscope::engine;

// One data_parallel table of `rows` x 64 fp32 with low_rank_dim 4 (sum pooling, pooling factor
// 2), batch 4, on `ranks` cpu ranks, 2 steps after 1 warm-up step, sgd.
dplr::WorkloadSpec dplr_spec(int ranks, int64_t rows) {
  dplr::WorkloadSpec s = planner_testing::round_workload(ranks, {2.0});
  s.tables[0].num_embeddings = rows;
  s.tables[0].embedding_dim = 64;
  s.tables[0].low_rank_dim = 4;
  s.sharding.default_type = dplr::ShardingType::data_parallel;
  s.sharding.per_table.clear();
  s.devices.backend = dplr::Backend::cpu;
  s.steps = 2;
  s.warmup_steps = 1;
  return s;
}

}  // namespace

// 1,000 x 64, r 4: dA 1,000 x 4 + dB 4 x 64 = 4,256 floats = 17,024 B a buffer (the full
// gradient was 64,000 floats, 256,000 B); a ring moves 2 (n-1)/n of it: 17,024 B on 2 ranks,
// 2 x 3/4 x 17,024 = 25,536 B on 4. The flags stay 1,000 floats (4,000 / 6,000 B).
TEST(DpLowRankAllReduce, ProgramAllReducesTheFactorsGradients) {
  for (const int W : {2, 4}) {
    const dplr::WorkloadSpec s = dplr_spec(W, 1000);
    const dplr::ShardingPlan plan = dplr::plan_sharding(s);
    for (int r = 0; r < W; ++r) {
      const dplr::StepProgram p = dplr::build_step_program(s, plan, r, 0);
      int ops = 0;
      for (const auto& op : p.ops) {
        if (op.name != "grad_dist/data_parallel_all_reduce") continue;
        ++ops;
        ASSERT_EQ(op.collectives.size(), 2u);
        EXPECT_EQ(op.collectives[0].count, 4256);
        EXPECT_EQ(op.collectives[0].bytes_sent(), W == 2 ? 17024 : 25536);
        EXPECT_EQ(op.collectives[1].count, 1000);
        EXPECT_EQ(op.collectives[1].bytes_sent(), W == 2 ? 4000 : 6000);
      }
      EXPECT_EQ(ops, 1) << "rank " << r;
    }
  }
}

// The measured cpu run (Gloo, 2 ranks) records 17,024 B each way per rank and measured step for
// the gradient (2 ranks x 2 steps = 4 records) and 4,000 B for the flags.
TEST(DpLowRankAllReduce, MeasuredCpuSessionRecordsTheFactorsAllReduce) {
  const fs::path dir = fs::temp_directory_path() / "embedscope_dplr_cpu";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const dplr::WorkloadSpec s = dplr::with_resolved_backend(dplr_spec(2, 1000), "test");
  dplr::TrainerOptions o;
  o.session_path = (dir / "cpu.db").string();
  o.held_out_batches = 0;
  const dplr::RunResult r = dplr::run_training(s, dplr::plan_sharding(s), o);
  ASSERT_EQ(r.ended, dplr::RunEnd::complete) << r.error;
  std::map<std::tuple<std::string, int64_t, int64_t>, int> got;
  const embedscope::sessions::SessionReader reader(o.session_path);
  for (const auto& c : reader.collectives())
    if (c.step >= 0 && c.name.rfind("grad_dist/", 0) == 0) ++got[{c.name, c.bytes_sent, c.bytes_received}];
  const std::map<std::tuple<std::string, int64_t, int64_t>, int> want = {
      {{"grad_dist/data_parallel_all_reduce", 17024, 17024}, 4}, {{"grad_dist/data_parallel_touched", 4000, 4000}, 4}};
  EXPECT_EQ(got, want);
}

// 4,000 x 64, r 4, direct allocator (512 B blocks): the gradient buffer is (16,000 + 256) x 4 =
// 65,024 B (127 blocks), the largest block of the estimate (A is 64,000 B, the flags 16,000 B;
// the full table's gradient was 1,024,000 B), and the measured peak holds A, B, the buffer and
// the flags together (64,000 + 1,024 + 65,024 + 16,000 B) yet stays below the full gradient's
// 1,024,000 B; the estimate stays within the matrix's bounds of the peak (-512 B, +2 %).
TEST(DpLowRankAllReduce, GradientBufferIsTheFactorsSize) {
  dplr::WorkloadSpec s = dplr_spec(2, 4000);
  s.memory.allocator = dplr::AllocatorKind::direct;
  const dplr::ShardingPlan plan = dplr::plan_sharding(s);
  const auto est = dplr::estimate_memory(s, plan);
  ASSERT_EQ(est.size(), 2u);
  dplr::TrainerOptions opt;
  opt.trace = false;
  opt.held_out_batches = 0;
  const dplr::RunResult r = dplr::run_training(s, plan, opt);
  ASSERT_EQ(r.ended, dplr::RunEnd::complete) << r.error;
  for (size_t k = 0; k < est.size(); ++k) {
    EXPECT_EQ(est[k].largest_block, 65024) << k;
    const int64_t peak = r.ranks[k].memory_bytes;
    EXPECT_GE(peak, 64000 + 1024 + 65024 + 16000) << k;
    EXPECT_LT(peak, 1024000) << k;
    EXPECT_GE(est[k].total(), peak - 512) << k;
    EXPECT_LE(static_cast<double>(est[k].total()), 1.02 * static_cast<double>(peak)) << k;
  }
}
