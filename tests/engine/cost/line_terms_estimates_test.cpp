// The per-line host work (look46: the lookup's lines, opt45: the update's) in the estimates
// beside the DLRM program: the planner's pre-ranking estimate (planner/search.h
// pre_rank_estimate) adds the same lines x coefficients as plan_stats' program, and the LM
// program (program/lm_program.h) counts its lookup's and embedding backward's lines of the
// distinct rows of a rank's ids, against a brute-force sum over the rows.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/input/id_share.h"
#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/program/lm_program.h"
#include "embedscope/engine/sharding/vocab_parallel.h"
#include "engine/planner/round_profile.h"

namespace es = embedscope::engine;

namespace {

// expected distinct rows of R uniform rows named by n ids
double line_terms_uniform(double R, double n) { return R * (1.0 - std::pow(1.0 - 1.0 / R, n)); }

const es::TablePlan line_terms_tw(int table, int rank) { return {table, es::ShardingType::table_wise, -1, {{rank, 0, 1000, 0, 8}}}; }
const es::TablePlan line_terms_rw(int table) {
  return {table, es::ShardingType::row_wise, -1, {{0, 0, 500, 0, 8}, {1, 500, 500, 0, 8}}};
}

// brute force: the distinct rows among n ids over the vocabulary rows [lo, hi), id k drawn with
// P ~ (k + 1)^-alpha
double line_terms_zipf_distinct(int64_t lo, int64_t hi, double alpha, double n) {
  double total = 0;
  for (int64_t k = lo; k < hi; ++k) total += std::pow(static_cast<double>(k + 1), -alpha);
  double u = 0;
  for (int64_t k = lo; k < hi; ++k) u += 1.0 - std::pow(1.0 - std::pow(static_cast<double>(k + 1), -alpha) / total, n);
  return u;
}

const es::ProgramOp& line_terms_op(const es::StepProgram& p, const std::string& name) {
  for (const auto& op : p.ops)
    if (op.name == name) return op;
  throw std::runtime_error("no " + name);
}

}  // namespace

// Two tables of 1000 rows x 8 fp32 (32 B: a line), uniform ids, pooling factor 2 and 1 (16 and
// 8 ids a step on 2 ranks of batch 4), sgd: a line a row both ways. With 40 ns a lookup line and
// 30 ns an update line, the pre-ranking adds the shard's expected distinct rows x 40 forward
// and x 30 backward, what plan_stats' program adds (its lines rounded to whole items).
//  table_wise, t0 on rank 0: 15.880 distinct rows: + 635.2 ns forward, + 476.4 ns backward.
//  row_wise: rank 0's halves get 8 and 4 ids: 7.944 + 3.988 = 11.932 rows: + 477.3 / + 358.0 ns.
TEST(LineTermsEstimates, PreRankAddsTheLinesAsThePlanStatsProgram) {
  const es::WorkloadSpec spec = planner_testing::round_workload(2, {2.0, 1.0});
  const es::HardwareProfile gpu = planner_testing::round_profile("line_terms", 0);
  es::HardwareProfile cpu = gpu;
  cpu.gpu.lookup_line_ns = 40;
  cpu.gpu.update_line_ns = 30;
  const es::ShardingPlan tw{2, 2, {line_terms_tw(0, 0), line_terms_tw(1, 1)}};
  const es::ShardingPlan rw{2, 2, {line_terms_rw(0), line_terms_rw(1)}};
  const double u_tw = line_terms_uniform(1000, 16);
  EXPECT_NEAR(u_tw, 15.880, 0.001);
  const double u_rw = line_terms_uniform(500, 8) + line_terms_uniform(500, 4);
  EXPECT_NEAR(u_rw, 11.932, 0.001);
  for (const auto& [plan, u] : {std::pair{tw, u_tw}, std::pair{rw, u_rw}}) {
    const es::PreRankEstimate a = es::pre_rank_estimate(spec, plan, gpu), b = es::pre_rank_estimate(spec, plan, cpu);
    EXPECT_NEAR(b.fwd_compute_ns - a.fwd_compute_ns, 40 * u, 1e-6);
    EXPECT_NEAR(b.bwd_compute_ns - a.bwd_compute_ns, 30 * u, 1e-6);
    EXPECT_EQ(b.fwd_comms_ns, a.fwd_comms_ns);
    // plan_stats (the program's lookup and update ops, compute_ns): the same lines, rounded
    const es::PlanStats sa = es::plan_stats(spec, plan, gpu), sb = es::plan_stats(spec, plan, cpu);
    EXPECT_EQ(sb.ranks[0].fwd_compute_ns - sa.ranks[0].fwd_compute_ns, 40 * std::llround(u));
    EXPECT_EQ(sb.ranks[0].bwd_compute_ns - sa.ranks[0].bwd_compute_ns, 30 * std::llround(u));
    EXPECT_NEAR(b.fwd_compute_ns, static_cast<double>(sb.ranks[0].fwd_compute_ns), 40.0);
  }
}

// The LM program, vocab 48 (Zipf alpha 1 tokens), H 40 in bf16 (a row 80 B: 2 lines; its fp32
// gradient row 160 B: 3 lines), T 16 tokens a rank, 2 ranks. Vocab-parallel: rank r reads the
// distinct rows of its my_ids = round(16 x its rows' Zipf mass) ids; row_wise: of the ids every
// rank sends it (2 x my_ids). The lookup's second term counts 2 lines a row, the embedding
// backward 3; every other op none.
TEST(LineTermsEstimates, LmProgramCountsTheLinesOfEachRanksDistinctRows) {
  es::LmWorkloadSpec s;
  s.vocab_size = 48;
  s.hidden_size = 40;
  s.sequence_length = 8;
  s.micro_batch_size = 2;  // T = 16
  s.body_layers = 1;
  s.world_size = 2;
  s.data_type = es::LmDataType::bf16;
  s.steps = 1;
  const double all = es::zipf_mass(48, 1.0);
  for (const es::LmSharding sharding : {es::LmSharding::vocab_parallel, es::LmSharding::row_wise}) {
    s.sharding = sharding;
    for (int r = 0; r < 2; ++r) {
      SCOPED_TRACE(static_cast<int>(sharding) * 10 + r);
      const int64_t lo = 24 * r, hi = 24 * (r + 1);
      const double my_ids = std::round(16.0 * (es::zipf_mass(hi, 1.0) - es::zipf_mass(lo, 1.0)) / all);
      const double n = sharding == es::LmSharding::row_wise ? 2 * my_ids : my_ids;
      const double u = line_terms_zipf_distinct(lo, hi, 1.0, n);
      const es::StepProgram p = es::build_lm_step_program(s, r, 0);
      const es::ProgramOp& lookup = line_terms_op(p, "lookup");
      EXPECT_EQ(lookup.work2, es::HostWork::lookup_row_lines);
      EXPECT_EQ(lookup.work2_items, std::llround(2 * u));
      const es::ProgramOp& bwd = line_terms_op(p, "embedding_backward");
      EXPECT_EQ(bwd.work, es::HostWork::update_row_lines);
      EXPECT_EQ(bwd.work_items, std::llround(3 * u));
      for (const auto& op : p.ops)
        if (op.name != "lookup" && op.name != "embedding_backward") {
          EXPECT_EQ(op.work, es::HostWork::none) << op.name;
          EXPECT_EQ(op.work2, es::HostWork::none) << op.name;
        }
    }
  }
  // rank 0 vocab-parallel by hand: mass of ids 0..23 = H(24) / H(48) = 3.7760 / 4.4588 = 0.8469,
  // my_ids = round(13.55) = 14 ids over 24 rows
  s.sharding = es::LmSharding::vocab_parallel;
  EXPECT_EQ(line_terms_op(es::build_lm_step_program(s, 0, 0), "lookup").rows, 14);
}

// The same lines enter simulate_lm_step's times through compute_ns: a profile with 40 / 30 ns a
// lookup / update line makes rank 0's lookup and embedding backward longer by exactly those.
TEST(LineTermsEstimates, LmSimulationTimesTheLines) {
  es::LmWorkloadSpec s;
  s.vocab_size = 48;
  s.hidden_size = 40;
  s.sequence_length = 8;
  s.micro_batch_size = 2;
  s.body_layers = 1;
  s.world_size = 1;
  s.steps = 1;
  const es::HardwareProfile gpu = planner_testing::round_profile("line_terms", 0);
  es::HardwareProfile cpu = gpu;
  cpu.gpu.lookup_line_ns = 40;
  cpu.gpu.update_line_ns = 30;
  const es::LmSimulatedStep a = es::simulate_lm_step(s, gpu, 8), b = es::simulate_lm_step(s, cpu, 8);
  const es::StepProgram p = es::build_lm_step_program(s, 0, 0);
  const int64_t extra =
      40 * line_terms_op(p, "lookup").work2_items + 30 * line_terms_op(p, "embedding_backward").work_items;
  // one rank, 16 ids over all 48 rows (fp32 160 B rows: 3 lines both ways)
  EXPECT_EQ(line_terms_op(p, "lookup").work2_items, std::llround(3 * line_terms_zipf_distinct(0, 48, 1.0, 16)));
  EXPECT_GT(extra, 0);
  EXPECT_EQ(b.step_ns - a.step_ns, extra);
}
