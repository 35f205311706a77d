// build_lm_step_program against what run_lm records (the same collectives, in order, with the
// same bytes), hand-computed op lists, and simulate_lm_step on a hardware profile.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/program/lm_program.h"
#include "embedscope/engine/workload/spec_error.h"

using namespace embedscope::engine;

namespace {

struct ProgramMode {
  LmSharding sharding;
  bool sequence_parallel;
  bool tied;
  int world;
};

LmWorkloadSpec program_spec_of(const ProgramMode& m) {
  LmWorkloadSpec s;
  s.vocab_size = 48;
  s.hidden_size = 8;
  s.sequence_length = 8;
  s.micro_batch_size = 2;  // T = 16
  s.body_layers = 1;
  s.world_size = m.world;
  s.sharding = m.sharding;
  s.sequence_parallel = m.sequence_parallel;
  s.tie_word_embeddings = m.tied;
  s.steps = 1;
  return s;
}

/// A stable test name (the default prints the struct's bytes, padding included).
std::string program_name_of(const ::testing::TestParamInfo<ProgramMode>& info) {
  const ProgramMode& c = info.param;
  return std::string(to_string(c.sharding)) + (c.sequence_parallel ? "_sequence_parallel" : "") + (c.tied ? "_tied" : "_untied") +
         "_p" + std::to_string(c.world);
}

class LmProgramVsRun : public ::testing::TestWithParam<ProgramMode> {};

TEST_P(LmProgramVsRun, CollectivesMatchTheRecordedRunInOrderAndBytes) {
  const LmWorkloadSpec s = program_spec_of(GetParam());
  const LmRunResult run = run_lm(s);
  for (int r = 0; r < s.world_size; ++r) {
    SCOPED_TRACE(r);
    std::vector<const embedscope::sessions::CollectiveRecord*> rec;
    for (const auto& c : run.collectives)
      if (c.rank == r) rec.push_back(&c);
    std::sort(rec.begin(), rec.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
    std::vector<const CollectiveCall*> prog;
    const StepProgram p = build_lm_step_program(s, r, 0);
    for (const ProgramOp& op : p.ops)
      for (const CollectiveCall& c : op.collectives) prog.push_back(&c);
    ASSERT_EQ(rec.size(), prog.size());
    ASSERT_GE(rec.size(), 3u);  // data_parallel tied: loss, embedding and body gradients; the others more
    for (size_t k = 0; k < rec.size(); ++k) {
      SCOPED_TRACE(rec[k]->name);
      EXPECT_EQ(rec[k]->name, prog[k]->name);
      EXPECT_EQ(rec[k]->op, to_string(prog[k]->kind));
      if (!prog[k]->exact) continue;  // row_wise's ids and rows per peer depend on the batch
      EXPECT_EQ(rec[k]->bytes_sent, prog[k]->bytes_sent());
      EXPECT_EQ(rec[k]->bytes_received, prog[k]->bytes_received());
    }
    // the compute ops are LmRank's compute spans, in order
    std::vector<std::string> spans, ops;
    for (const auto& e : run.ops)
      if (e.rank == r && e.lane == embedscope::sessions::Lane::compute) spans.emplace_back(e.name);
    for (const ProgramOp& op : p.ops)
      if (op.lane == embedscope::sessions::Lane::compute) ops.push_back(op.name);
    EXPECT_EQ(spans, ops);
  }
}

INSTANTIATE_TEST_SUITE_P(AllModes, LmProgramVsRun,
                         ::testing::Values(ProgramMode{LmSharding::vocab_parallel, false, true, 2},
                                           ProgramMode{LmSharding::vocab_parallel, false, false, 4},
                                           ProgramMode{LmSharding::vocab_parallel, true, true, 2},
                                           ProgramMode{LmSharding::vocab_parallel, true, false, 4},
                                           ProgramMode{LmSharding::data_parallel, false, false, 2},
                                           ProgramMode{LmSharding::data_parallel, false, true, 4},
                                           ProgramMode{LmSharding::row_wise, false, false, 2},
                                           ProgramMode{LmSharding::row_wise, false, true, 4}),
                         program_name_of);

TEST(LmProgram, VocabParallelOpsByHand) {
  // p = 2, T = 16, H = 8, V = 48: rank 1 holds rows [24, 48)
  const StepProgram p = build_lm_step_program(program_spec_of({LmSharding::vocab_parallel, false, false, 2}), 1, 0);
  std::vector<std::string> names;
  for (const ProgramOp& op : p.ops) names.push_back(op.name);
  EXPECT_EQ(names, (std::vector<std::string>{"input", "lookup", "embedding/all_reduce", "body_forward",
                                             "output_projection/logits", "cross_entropy/max", "cross_entropy/exp",
                                             "cross_entropy/all_reduce", "output_projection/backward",
                                             "output_projection/grad_all_reduce", "body_backward", "embedding_backward",
                                             "optimizer"}));
  const CollectiveCall& ar = p.ops[2].collectives.at(0);
  EXPECT_EQ(ar.count, 16 * 8);
  EXPECT_EQ(ar.bytes_sent(), 2 * 1 * 16 * 8 * 4 / 2);  // ring: 2 (p - 1) / p of 512 B
  EXPECT_EQ(p.ops[4].flops, 2 * 16 * 24 * 8);          // logits [16 x 24], K = 8
  EXPECT_EQ(p.ops[3].flops, 2 * 1 * 16 * 8 * 8);       // one body layer
  EXPECT_EQ(p.ops[5].waits_for, (std::vector<int>{2, 4}));  // its lane's previous op and the op before it
}

TEST(LmProgram, RankOutsideTheWorldIsRefused) {
  EXPECT_THROW(build_lm_step_program(program_spec_of({LmSharding::vocab_parallel, false, true, 2}), 2, 0), SpecError);
}

TEST(LmProgram, ExpectedIdsFollowTheZipfMassOfEachRanksRows) {
  // T = 16, V = 48, alpha 1 (id k drawn with P ~ (k + 1)^-1): rank 0's rows [0, 24) get
  // H(24) / H(48) = 3.77596 / 4.45880 = 0.846856 of the ids, 13.55 -> 14; rank 1's 2.45 -> 2
  LmWorkloadSpec s = program_spec_of({LmSharding::vocab_parallel, false, false, 2});
  auto lookup_rows = [](const StepProgram& p) {
    for (const ProgramOp& op : p.ops)
      if (op.name == "lookup") return op.rows;
    return int64_t{-1};
  };
  EXPECT_EQ(lookup_rows(build_lm_step_program(s, 0, 0)), 14);
  EXPECT_EQ(lookup_rows(build_lm_step_program(s, 1, 0)), 2);
  // row_wise: each rank sends rank 0 its 14 expected ids and rank 1 its 2; rank 0 looks up 2 x 14
  s.sharding = LmSharding::row_wise;
  const StepProgram rw = build_lm_step_program(s, 0, 0);
  EXPECT_EQ(lookup_rows(rw), 28);
  for (const ProgramOp& op : rw.ops)
    for (const CollectiveCall& c : op.collectives)
      if (c.name == "input_dist/ids") {
        EXPECT_EQ(c.send_elements, (std::vector<int64_t>{14, 2}));
        EXPECT_EQ(c.recv_elements, (std::vector<int64_t>{14, 14}));
        EXPECT_FALSE(c.exact);
      }
  // ids from a file: each range's share of the rows, 8 and 8
  s.sharding = LmSharding::vocab_parallel;
  s.token_file_ids = std::make_shared<const std::vector<int64_t>>(std::vector<int64_t>{0, 1, 2});
  EXPECT_EQ(lookup_rows(build_lm_step_program(s, 0, 0)), 8);
  EXPECT_EQ(lookup_rows(build_lm_step_program(s, 1, 0)), 8);
}

TEST(LmSimulation, SymmetricRanksStepIsTheSumOfTheirOps) {
  const HardwareProfile hw = load_hardware_profile("h100_sxm");
  const LmWorkloadSpec s = program_spec_of({LmSharding::vocab_parallel, false, false, 4});
  const LmSimulatedStep sim = simulate_lm_step(s, hw, 4);
  // every rank the same sizes (V' = 48 splits evenly) but rank 0 looks up the most ids (the
  // Zipf head is in its rows), so it is the last into every collective: the step is the sum of
  // rank 0's compute figures and each collective's figure (the largest member's, all equal)
  int64_t sum = 0, comm = 0;
  for (const ProgramOp& op : sim.program.ops) {
    if (op.lane == embedscope::sessions::Lane::compute) sum += compute_ns(op, hw);
    for (const CollectiveCall& c : op.collectives) {
      int64_t d = 0;
      for (int r = 0; r < 4; ++r) d = std::max(d, collective_ns(c, r, 4, hw));
      sum += d;
      comm += d;
    }
  }
  EXPECT_EQ(sim.step_ns, sum);
  EXPECT_EQ(sim.comm_ns, comm);
  EXPECT_EQ(sim.end_ns.back(), sim.step_ns);
  // bytes on the wire of rank 0: the ring all-reduces 2 x 3/4 x [16 x 8] x 4 B twice, three of
  // 16 floats, and the embedding's own share is the first
  EXPECT_EQ(sim.bytes_sent, 2 * (2 * 3 * 512 / 4) + 3 * (2 * 3 * 64 / 4));
  EXPECT_GT(sim.embedding_comm_ns, 0);
  EXPECT_LT(sim.embedding_comm_ns, sim.comm_ns);
}

}  // namespace
