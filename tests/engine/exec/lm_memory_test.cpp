// run_lm's device memory: LmRank's buffers through each rank's DeviceArena, the measured peak
// per rank against the planner's estimate (planner/lm_memory_estimate.h), and the session's
// memory counters and snapshots.
//
// Tolerance: the estimate counts every buffer as alive at once; in the step the lookup's
// partial sum (row_wise: the rows sent and received), the embedding output where it is a buffer
// of its own (row_wise, sequence_parallel), the embedding output's gradient and the body's
// pre-activation gradient are never alive with the logits slice, and every other buffer is
// alive together while the logits are (the persistent parameters and gradients, the body's
// activations, the read copy, the gathered hidden states, the logits, the cross-entropy's three
// vectors, the gradient of the projection's input and, row_wise and sequence_parallel, the
// reduce-scatter's output it is reduced into). So the peak of requested bytes equals the
// estimate minus those terms exactly. The allocator's peak lies above it by its
// rounding: every block rounded up to a multiple of 512 B (PyTorch's kMinBlockSize), which is
// all of it for these buffers under 1 MiB; larger ones come from the large pool, whose blocks
// are not split when less than 1 MiB would remain, so a block can hold up to 1 MiB more than
// asked (the scaled Llama preset: 110.6 MiB requested, 113.0 MiB allocated per rank). The
// estimate's allocator replay (peak_*_bytes, lm45) is the run's peaks exactly.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/planner/lm_memory_estimate.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::engine;

namespace {

struct Case {
  LmSharding sharding;
  bool sequence_parallel;
  bool tied;
  int world;
};

LmWorkloadSpec spec_of(const Case& c) {
  LmWorkloadSpec s;
  s.vocab_size = 64;
  s.hidden_size = 8;
  s.sequence_length = 8;
  s.micro_batch_size = 2;  // T = 16 tokens
  s.body_layers = 2;
  s.world_size = c.world;
  s.sharding = c.sharding;
  s.sequence_parallel = c.sequence_parallel;
  s.tie_word_embeddings = c.tied;
  s.steps = 2;
  return s;
}

/// The estimate's terms for the buffers never alive with the logits: the lookup's (freed before
/// the logits exist), the embedding output where it is a buffer of its own ([T x H] row_wise,
/// [Tl x H] sequence_parallel; freed by the body's forward), the embedding output's gradient and
/// the pre-activation gradient (each [Tl x H], taken after the logits are freed), and row_wise's
/// ids sent ([T] int64, given back by input_dist once sent).
int64_t lookup_term(const LmWorkloadSpec& s) {
  const int64_t tokens_hidden_bytes = s.tokens_per_micro_batch() * s.hidden_size * 4;
  const int64_t local = s.sequence_parallel ? tokens_hidden_bytes / s.world_size : tokens_hidden_bytes;
  const bool rw = s.sharding == LmSharding::row_wise;
  const int64_t lookup = rw ? 2 * tokens_hidden_bytes : tokens_hidden_bytes;
  const int64_t own = rw ? tokens_hidden_bytes : s.sequence_parallel ? local : 0;
  const int64_t ids_sent = rw ? s.tokens_per_micro_batch() * 8 : 0;
  return lookup + own + local + (s.body_layers > 0 ? local : 0) + ids_sent;
}

/// A stable test name (the default prints the struct's bytes, padding included).
std::string name_of(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(to_string(c.sharding)) + (c.sequence_parallel ? "_sequence_parallel" : "") + (c.tied ? "_tied" : "_untied") +
         "_p" + std::to_string(c.world);
}

class LmMemory : public ::testing::TestWithParam<Case> {};

TEST_P(LmMemory, PeakPerRankIsTheEstimateLessTheLookup) {
  const LmWorkloadSpec s = spec_of(GetParam());
  const LmRunResult r = run_lm(s);
  const auto est = estimate_lm_memory(s);
  ASSERT_EQ(r.ranks.size(), est.size());
  for (size_t k = 0; k < est.size(); ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(r.ranks[k].peak_requested, est[k].total() - lookup_term(s));
    EXPECT_GE(r.ranks[k].peak_allocated, r.ranks[k].peak_requested);
    // at most 2 + 2 (E, O and their gradients) + 4 L (body) + 14 (transients: the cross-entropy's
    // three vectors, the token ids and targets, row_wise's ids' positions, ids received and
    // gathered targets among them) blocks, 512 B each
    EXPECT_LE(r.ranks[k].peak_allocated, r.ranks[k].peak_requested + 512 * (4 + 4 * s.body_layers + 14));
    EXPECT_EQ(r.ranks[k].peak_allocated, est[k].peak_allocated_bytes);
    EXPECT_EQ(r.ranks[k].peak_requested, est[k].peak_requested_bytes);
  }
}

INSTANTIATE_TEST_SUITE_P(AllModes, LmMemory,
                         ::testing::Values(Case{LmSharding::vocab_parallel, false, true, 1},
                                           Case{LmSharding::vocab_parallel, false, false, 2},
                                           Case{LmSharding::vocab_parallel, false, true, 4},
                                           Case{LmSharding::vocab_parallel, true, false, 2},
                                           Case{LmSharding::vocab_parallel, true, true, 4},
                                           Case{LmSharding::data_parallel, false, false, 2},
                                           Case{LmSharding::data_parallel, false, true, 4},
                                           Case{LmSharding::row_wise, false, false, 2},
                                           Case{LmSharding::row_wise, false, true, 4}),
                         name_of);

TEST(LmMemory, HandComputedPeakOfOneRank) {
  // V = 64, H = 8, T = 16, L = 2, p = 2 vocab_parallel untied fp32, rank 0 rows [0, 32):
  // E, O, dE, dO 4 x 32 x 8 x 4 = 4096; body 2 x (64 + 8) x 4 x 2 = 1152; activations
  // (2 L + 1) x 16 x 8 x 4 = 2560; logits 16 x 32 x 4 = 2048; projection-input gradient
  // 16 x 8 x 4 = 512; the cross-entropy's row max, target logit and sum of exps 3 x 16 x 4 = 192;
  // the batch's token ids and targets 2 x 16 x 8 = 256 (int64, blocks of the arena too).
  // Peak 10816 B requested (10560 before the ids were blocks of the arena, 10368 before the
  // cross-entropy's three vectors were).
  const LmRunResult r = run_lm(spec_of({LmSharding::vocab_parallel, false, false, 2}));
  EXPECT_EQ(r.ranks[0].peak_requested, 10816);
  // allocated: every block rounded to 512 B: E, O, dE, dO 1024 each; 4 body 256 B weights and
  // 4 32 B biases -> 8 x 512; activations 2560; logits 2048; gradient 512; 3 x 512; ids 2 x 512
  EXPECT_EQ(r.ranks[0].peak_allocated, 4 * 1024 + 8 * 512 + 2560 + 2048 + 512 + 3 * 512 + 2 * 512);
}

TEST(LmMemory, AdamAddsTwoMomentsOfEveryParameter) {
  // The case above with adam: m and v of E, O (32 x 8 x 4 = 1024 B each) and the body
  // (2 x (64 + 8) x 4 = 576 B): 2 x (2048 + 576) = 5248 B more, in the estimate and measured.
  LmWorkloadSpec s = spec_of({LmSharding::vocab_parallel, false, false, 2});
  s.optimizer = LmOptimizer::adam;
  s.learning_rate = 0.01;
  const auto est = estimate_lm_memory(s);
  EXPECT_EQ(est[0].optimizer_state_bytes, 5248);
  const LmRunResult r = run_lm(s);
  EXPECT_EQ(r.ranks[0].peak_requested, 10816 + 5248);
  EXPECT_EQ(r.ranks[0].peak_requested, est[0].total() - lookup_term(s));
}

TEST(LmMemory, SessionHoldsCountersSnapshotsAndHistory) {
  const auto path = std::filesystem::temp_directory_path() / ("lm_memory_" + std::to_string(getpid()) + ".esdb");
  LmRunOptions opt;
  opt.session_path = path.string();
  opt.overwrite = true;
  const LmWorkloadSpec s = spec_of({LmSharding::vocab_parallel, false, false, 2});
  const LmRunResult r = run_lm(s, opt);
  {
    embedscope::sessions::SessionReader session(opt.session_path);
    const auto counters = session.memory_counters();
    ASSERT_EQ(counters.size(), 4u);  // 2 ranks x 2 steps
    for (const auto& c : counters) {
      EXPECT_EQ(c.peak_allocated, r.ranks[static_cast<size_t>(c.rank)].peak_allocated);
      // between steps only the parameters and their gradients are alive: 4096 B in four 1 KiB
      // blocks and the body's 8 blocks of 512
      EXPECT_EQ(c.allocated, 4 * 1024 + 8 * 512);
    }
    // one snapshot per rank: the layout at the end of step 1 equals step 0's
    const auto snaps = session.memory_snapshots();
    ASSERT_EQ(snaps.size(), 2u);
    std::set<std::string> tags;
    for (const auto& b : session.memory_blocks(snaps[0].id))
      if (b.allocated) tags.insert(b.tag);
    EXPECT_EQ(tags, (std::set<std::string>{"weights", "gradients", "dense"}));
    std::set<std::string> history;
    for (const auto& e : session.memory_events()) history.insert(e.tag);
    EXPECT_TRUE(history.count("logits"));
    EXPECT_TRUE(history.count("activations"));
  }
  std::filesystem::remove(path);
}

TEST(LmMemory, TheBf16ReadCopyIsTwoBytesAnElement) {
  // The case above in bf16: the logits read a rounded copy of O, rank 0's 32 rows x 8 x 2 B =
  // 512 B (one 512 B block), alive with the logits, and the fp32 tile the GEMMs convert it into,
  // 32 x 8 x 4 = 1,024 B: 10816 + 512 + 1024 requested at the peak. (An fp32-sized copy, 1024 B,
  // would make it 11840 without the tile.)
  LmWorkloadSpec s = spec_of({LmSharding::vocab_parallel, false, false, 2});
  s.data_type = LmDataType::bf16;
  const auto est = estimate_lm_memory(s);
  EXPECT_EQ(est[0].read_copy_bytes, 32 * 8 * 2);
  const LmRunResult r = run_lm(s);
  EXPECT_EQ(r.ranks[0].peak_requested, 10816 + 512 + 1024);
  EXPECT_EQ(r.ranks[0].peak_allocated, 4 * 1024 + 8 * 512 + 2560 + 2048 + 512 + 3 * 512 + 2 * 512 + 512 + 1024);
  EXPECT_EQ(r.ranks[0].peak_allocated, est[0].peak_allocated_bytes);
}

TEST(LmMemory, TheRunAllocatesTheReadCopyAtTwoBytes) {
  // V 1000, H 16, 4 ranks vocab_parallel, tied, fp16: rank 0's copy of its 250 rows is a
  // 250 x 16 x 2 = 8,000 B "weights" block taken in each step (E itself, 16,000 B, before), then
  // the fp32 tile the logits' and the backward's GEMMs convert it into, 250 x 16 x 4 = 16,000 B each.
  LmWorkloadSpec s;
  s.vocab_size = 1000;
  s.hidden_size = 16;
  s.sequence_length = 8;
  s.micro_batch_size = 2;
  s.world_size = 4;
  s.data_type = LmDataType::fp16;
  s.steps = 1;
  const auto path = std::filesystem::temp_directory_path() / ("lm_memory_copy_" + std::to_string(getpid()) + ".esdb");
  LmRunOptions opt;
  opt.session_path = path.string();
  opt.overwrite = true;
  run_lm(s, opt);
  {
    embedscope::sessions::SessionReader session(opt.session_path);
    std::vector<int64_t> weights;
    for (const auto& e : session.memory_events())
      if (e.rank == 0 && e.action == "alloc" && e.tag == "weights") weights.push_back(e.requested);
    EXPECT_EQ(weights, (std::vector<int64_t>{16000, 8000, 16000, 16000}));  // E, the step's read copy, 2 tiles
  }
  EXPECT_EQ(estimate_lm_memory(s)[0].read_copy_bytes, 8000);
  std::filesystem::remove(path);
}

}  // namespace
