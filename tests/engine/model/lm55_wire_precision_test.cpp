// lm55 (tester55 F2, F4): an lm_embedding workload with data_type bf16 / fp16 sends its
// activations' collectives and their gradients' in that type's 2-byte elements (Megatron's bf16
// tensors), the cross-entropy's and the parameters' gradients' in fp32; the bytes recorded, the
// program's and the simulated step's bytes follow, split checks apart. Parity against the
// unsharded reference (reference/lm_reference.h), which rounds at the same points:
//  - the embedding output: bit-equal at step 0 (the rows are read rounded to data_type, and the
//    all-reduce / reduce-scatter / all-to-all adds zeros to one rank's row: exact);
//  - the loss, outputs and weights after 3 steps: within the fp32 parity tests' 2e-5 once the
//    reference rounds as the wire does (tester55's "reference that applies the same rounding":
//    the rounding is modelled, not bounded, because where partial sums meet - the projection
//    input's gradient - a bound of p terms x 2^-8 would hide a rounding at the wrong point). The
//    residual is fp32 against double (measured <= 5e-8 in every case below); a value whose fp32
//    and double results straddled a rounding boundary would round one 2-byte ulp apart, and none
//    does here. The contrast: the reference without the wire's rounding is more than 100x further
//    from the sharded run (measured bf16 1.7e-4 to 3.8e-4, fp16 1.9e-5 to 4.9e-5 on the weights),
//    so the rounding is real and the reference rounds where the run does.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "embedscope/engine/comm/gloo_process_group.h"
#include "support/gloo_ranks.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/program/lm_program.h"
#include "embedscope/engine/reference/lm_reference.h"

using namespace embedscope::engine;
using namespace std::chrono_literals;

namespace {


// bf16 has 8 significant bits: 1 + 2^-8 is the tie between 1 and 1 + 2^-7 (rounds to even: 1).
TEST(Lm55AllReduceQ, RoundsEveryTermThenTheSum) {
  const float u = std::ldexp(1.0f, -8);
  std::vector<std::vector<float>> got(3);
  std::vector<std::string> dtype(3);
  std::vector<int64_t> sent(3);
  const auto errors = embedscope::test_support::on_gloo_ranks(3, 10s, [&](ProcessGroup& pg) {
    embedscope::profiler::RunClock clock;
    pg.set_observer(&clock, [&](embedscope::sessions::CollectiveRecord&& r) {
      dtype[static_cast<size_t>(pg.rank())] = r.dtype;
      sent[static_cast<size_t>(pg.rank())] = r.bytes_sent;
    });
    // element 0: every rank 1 + 2^-9, each rounded to 1: 3 (fp32 would give 3.0059)
    // element 1: 1, 2^-8, 2^-8: exact terms, fp32 sum 1 + 2^-7, exact in bf16 (a bf16
    //            accumulation in rank order would give 1: 1 + 2^-8 is a tie to even)
    // element 2: 1, 2^-8, 0: the sum 1 + 2^-8 rounded (a tie) to 1
    // element 3: 0.1 on rank 1 only: round_bf16(0.1) = 0.10009765625, exactly (one term)
    const int r = pg.rank();
    std::vector<float> x{1.0f + u / 2, r == 0 ? 1.0f : u, r == 0 ? 1.0f : r == 1 ? u : 0.0f, r == 1 ? 0.1f : 0.0f};
    pg.all_reduce_q("q", x.data(), 4, CommPrecision::bf16, nullptr);
    got[static_cast<size_t>(r)] = x;
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], "");
    EXPECT_EQ(got[static_cast<size_t>(r)], (std::vector<float>{3.0f, 1.0f + 2 * u, 1.0f, 0.10009765625f})) << r;
    EXPECT_EQ(dtype[static_cast<size_t>(r)], "bfloat16");
    // ring chunks of 4 elements on 3 ranks: 2, 1, 1; a rank sends 2 x (4 - its chunk) x 2 B:
    // 8, 12, 12 (32 = 2 (3 - 1) x 4 x 2 in all)
    EXPECT_EQ(sent[static_cast<size_t>(r)], r == 0 ? 8 : 12);
  }
}

// tester55's lm.json: V 1000, H 16, S 32, B 2, 2 body layers, 4 ranks (T = 64 tokens a step).
LmWorkloadSpec tester_spec(LmDataType t, bool sp) {
  LmWorkloadSpec s;
  s.vocab_size = 1000;
  s.hidden_size = 16;
  s.sequence_length = 32;
  s.micro_batch_size = 2;
  s.body_layers = 2;
  s.world_size = 4;
  s.steps = 1;
  s.data_type = t;
  s.tie_word_embeddings = t == LmDataType::fp32;
  s.sequence_parallel = sp;
  return s;
}

// vocab_parallel, per rank a step: embedding/all_reduce and output_projection/grad_all_reduce of
// T x H = 1,024 elements, ring 2 x 3/4 x 1,024 x elem (fp32 6,144 B, bf16 3,072 B), and the
// cross-entropy's three all-reduces of 64 fp32 values, 3 x 1.5 x 256 = 1,152 B. Every rank the
// same: 4 x (2 x 6,144 + 1,152) / 64 = 840 B/token (tester55's figure) in fp32, 4 x (2 x 3,072
// + 1,152) / 64 = 456 in bf16 and fp16.
TEST(Lm55WireBytes, VocabParallelSendsActivationsInTheTablesType) {
  for (LmDataType t : {LmDataType::fp32, LmDataType::bf16, LmDataType::fp16}) {
    SCOPED_TRACE(to_string(t));
    const LmWorkloadSpec s = tester_spec(t, false);
    const LmRunResult run = run_lm(s);
    const bool half = t != LmDataType::fp32;
    const std::string dt = t == LmDataType::bf16 ? "bfloat16" : t == LmDataType::fp16 ? "float16" : "float32";
    int seen = 0;
    for (const auto& c : run.collectives) {
      if (c.rank != 0) continue;
      ++seen;
      if (c.name == "embedding/all_reduce" || c.name == "output_projection/grad_all_reduce") {
        EXPECT_EQ(c.dtype, dt) << c.name;
        EXPECT_EQ(c.bytes_sent, half ? 3072 : 6144) << c.name;
      } else {
        EXPECT_EQ(c.dtype, "float32") << c.name;  // cross_entropy/max, predicted_logit, sum_exp
        EXPECT_EQ(c.bytes_sent, 384) << c.name;
      }
    }
    EXPECT_EQ(seen, 5);
    int64_t all = 0;
    for (const auto& rk : run.ranks) all += rk.bytes_sent;
    EXPECT_EQ(all * 1.0 / 64, half ? 456.0 : 840.0);
    // the program and the simulated step say the same
    const LmSimulatedStep sim = simulate_lm_step(s, load_hardware_profile("h100_sxm"), 4);
    EXPECT_EQ(sim.bytes_sent_all_ranks * 1.0 / 64, half ? 456.0 : 840.0);
    EXPECT_EQ(sim.split_check_bytes_all_ranks, 0);
  }
}

// sequence_parallel (Tl = 16 tokens a rank), per rank a step: embedding/reduce_scatter,
// sequence_parallel/all_gather, output_projection/grad_reduce_scatter and
// embedding/grad_all_gather each send 3 x 16 x 16 elements (fp32 3,072 B, bf16 1,536 B); the
// cross-entropy 1,152 B; body/grad_all_reduce 2 x (256 + 16) fp32 = 1.5 x 544 x 4 = 3,264 B;
// the two reduce-scatters' split checks 3 x 8 x 8 = 192 B each. Bytes/token without the checks:
// fp32 4 x (4 x 3,072 + 1,152 + 3,264) / 64 = 1,044 (tester55's hand figure), bf16
// 4 x (4 x 1,536 + 1,152 + 3,264) / 64 = 660; the checks 4 x 384 / 64 = 24 B/token apart.
TEST(Lm55WireBytes, SequenceParallelBytesLeaveTheSplitChecksOut) {
  for (LmDataType t : {LmDataType::fp32, LmDataType::bf16}) {
    SCOPED_TRACE(to_string(t));
    const LmWorkloadSpec s = tester_spec(t, true);
    const LmSimulatedStep sim = simulate_lm_step(s, load_hardware_profile("h100_sxm"), 4);
    EXPECT_EQ(sim.bytes_sent_all_ranks * 1.0 / 64, t == LmDataType::fp32 ? 1044.0 : 660.0);
    EXPECT_EQ(sim.split_check_bytes_all_ranks * 1.0 / 64, 24.0);
    // measured: the ranks' bytes = the program's, checks included
    const LmRunResult run = run_lm(s);
    int64_t all = 0, checks = 0;
    for (const auto& rk : run.ranks) all += rk.bytes_sent;
    for (const auto& c : run.collectives)
      if (c.name.size() > 12 && c.name.substr(c.name.size() - 12) == "/split_check") checks += c.bytes_sent;
    EXPECT_EQ(checks, 4 * 384);
    EXPECT_EQ(all - checks, sim.bytes_sent_all_ranks);
  }
}

// llama3_8b_embedding (bf16, T 8,192 tokens, H 4,096, 8 ranks, sequence parallel, 1 body layer):
// the four activation collectives 4 x 7/8 x 8 ranks x 8,192 x 4,096 x 2 B / 8,192 = 229,376
// B/token; body/grad_all_reduce fp32 2 x 7/8 x 8 x (4,096^2 + 4,096) x 4 / 8,192 = 229,432; the
// cross-entropy 3 x 2 x 7/8 x 8 x 8,192 x 4 / 8,192 = 168: 458,976 (fp32 everywhere: 688,352).
TEST(Lm55WireBytes, Llama3PresetSendsBf16Activations) {
  const LmWorkloadSpec s = load_lm_preset("llama3_8b_embedding");
  ASSERT_EQ(s.data_type, LmDataType::bf16);
  ASSERT_EQ(s.tokens_per_step(), 8192);
  const LmSimulatedStep sim = simulate_lm_step(s, load_hardware_profile("h100_sxm"), 8);
  EXPECT_EQ(sim.bytes_sent_all_ranks * 1.0 / 8192, 458976.0);
  EXPECT_EQ(sim.split_check_bytes_all_ranks * 1.0 / 8192, 2 * 8 * 7 * 16 * 8 / 8192.0);  // 1.75
}

enum class Mode { vocab_parallel, sequence_parallel, data_parallel, row_wise };

LmWorkloadSpec small_spec(Mode m, int world, bool tied, LmDataType t) {
  LmWorkloadSpec s;
  s.vocab_size = 37;  // uneven shards
  s.hidden_size = 8;
  s.sequence_length = 12;
  s.micro_batch_size = 2;
  s.body_layers = 2;
  s.padding_id = 1;
  s.tie_word_embeddings = tied;
  s.world_size = world;
  s.learning_rate = 2.0;
  s.steps = 3;
  s.seed = 7;
  s.data_type = t;
  s.sharding = m == Mode::data_parallel ? LmSharding::data_parallel
               : m == Mode::row_wise    ? LmSharding::row_wise
                                        : LmSharding::vocab_parallel;
  s.sequence_parallel = m == Mode::sequence_parallel;
  return s;
}

struct Gap {
  double loss = 0, out = 0, weights = 0;  // the worst relative loss, absolute output and weight differences
  bool out_bit_equal_at_step0 = true;
};

Gap gap(const LmWorkloadSpec& spec, const LmRunResult& run, bool round_on_the_wire) {
  LmReference ref(spec, round_on_the_wire);
  const int64_t H = spec.hidden_size, S = spec.sequence_length;
  Gap g;
  for (int64_t st = 0; st < spec.steps; ++st) {
    const double loss = ref.step(st);
    g.loss = std::max(g.loss, std::fabs(run.losses[static_cast<size_t>(st)] - loss) / loss);
    for (const LmRankResult& rr : run.ranks) {
      const std::vector<float>& e = rr.embedding_out[static_cast<size_t>(st)];
      for (size_t i = 0; i < rr.token_of.size(); ++i) {
        const auto [q, s] = rr.token_of[i];
        for (int64_t c = 0; c < H; ++c) {
          const float mine = e[i * static_cast<size_t>(H) + static_cast<size_t>(c)];
          const double want = ref.embedding_out()[static_cast<size_t>((q * S + s) * H + c)];
          g.out = std::max(g.out, std::fabs(mine - want));
          if (st == 0 && static_cast<double>(mine) != want) g.out_bit_equal_at_step0 = false;
        }
      }
    }
  }
  for (const LmRankResult& rr : run.ranks) {
    for (int64_t row = rr.rows.begin; row < rr.rows.end; ++row)
      for (int64_t c = 0; c < H; ++c) {
        const auto i = static_cast<size_t>((row - rr.rows.begin) * H + c), j = static_cast<size_t>(row * H + c);
        g.weights = std::max(g.weights, std::fabs(rr.table[i] - ref.table()[j]));
        if (!spec.tie_word_embeddings)
          g.weights = std::max(g.weights, std::fabs(rr.output_projection[i] - ref.output_projection()[j]));
      }
    for (size_t l = 0; l < rr.body_weights.size(); ++l)
      for (size_t i = 0; i < rr.body_weights[l].size(); ++i)
        g.weights = std::max(g.weights, std::fabs(rr.body_weights[l][i] - ref.body_weights()[l][i]));
  }
  return g;
}

// Every mode x bf16 / fp16 x world 3 untied / 4 tied (see the file comment for the tolerance).
TEST(Lm55Parity, TwoByteCollectivesMatchAReferenceThatRoundsAtTheSamePoints) {
  for (LmDataType t : {LmDataType::bf16, LmDataType::fp16})
    for (Mode m : {Mode::vocab_parallel, Mode::sequence_parallel, Mode::data_parallel, Mode::row_wise})
      for (auto [world, tied] : {std::pair{3, false}, std::pair{4, true}}) {
        const std::string what = std::string(to_string(t)) + " mode " + std::to_string(static_cast<int>(m)) +
                                 " world " + std::to_string(world);
        SCOPED_TRACE(what);
        const LmWorkloadSpec s = small_spec(m, world, tied, t);
        LmRunOptions opt;
        opt.keep_outputs = true;
        const LmRunResult run = run_lm(s, opt);
        const Gap with = gap(s, run, true), without = gap(s, run, false);
        const double tol = 2e-5;
        EXPECT_TRUE(with.out_bit_equal_at_step0);
        EXPECT_LE(with.loss, tol);
        EXPECT_LE(with.out, tol);
        EXPECT_LE(with.weights, tol);
        if (m != Mode::data_parallel) {  // data_parallel sends no activation: nothing rounded
          EXPECT_GT(without.weights, 100 * with.weights);
        }
        std::printf("[lm55] %s: with rounding loss %.2e out %.2e weights %.2e; without loss %.2e weights %.2e\n",
                    what.c_str(), with.loss, with.out, with.weights, without.loss, without.weights);
      }
}

// tester59b F8: V 1,001 on 3 ranks (fp32, tied, 64 tokens): embedding/all_reduce and
// output_projection/grad_all_reduce of 64 x 16 = 1,024 floats in ring chunks 342 / 341 / 341:
// rank 0 sends 2 x 682 x 4 = 5,456 B, ranks 1 and 2 2 x 683 x 4 = 5,464 B; the cross-entropy's
// three of 64 floats (chunks 22 / 21 / 21) 336 / 344 / 344 B. Per token (2 x 16,384 + 3 x 1,024)
// / 64 = 560 B (every rank floor(4/3 x 4,096) = 5,461 B before: 559.92).
TEST(Lm59AllReduceBytes, UnevenChunksAreWholeElements) {
  LmWorkloadSpec s = tester_spec(LmDataType::fp32, false);
  s.vocab_size = 1001;
  s.world_size = 3;
  const LmRunResult run = run_lm(s);
  for (const auto& c : run.collectives) {
    const bool act = c.name == "embedding/all_reduce" || c.name == "output_projection/grad_all_reduce";
    EXPECT_EQ(c.bytes_sent, act ? (c.rank == 0 ? 5456 : 5464) : (c.rank == 0 ? 336 : 344)) << c.name << " " << c.rank;
  }
  int64_t all = 0;
  for (const auto& rk : run.ranks) all += rk.bytes_sent;
  EXPECT_EQ(all, 2 * 16384 + 3 * 1024);
  EXPECT_EQ(all * 1.0 / 64, 560.0);
  const LmSimulatedStep sim = simulate_lm_step(s, load_hardware_profile("h100_sxm"), 3);
  EXPECT_EQ(sim.bytes_sent_all_ranks, all);
}

// The read copy holds 2-byte codes (round to nearest even): 1.0 = 0x3F80 bf16 / 0x3C00 fp16;
// 0.1f = 0x3DCCCCCD: bf16 keeps the top half 0x3DCC and rounds up (0xCCCD > 0x8000) to 0x3DCD,
// 0.10009765625; fp16 0x2E66 = 2^-4 x (1 + 614/1024) = 0.0999755859375.
TEST(Lm59ReadCopy, CodesAreTheRoundedValuesBits) {
  EXPECT_EQ(lm_read_code(1.0f, LmDataType::bf16), 0x3F80);
  EXPECT_EQ(lm_read_code(1.0f, LmDataType::fp16), 0x3C00);
  EXPECT_EQ(lm_read_code(0.1f, LmDataType::bf16), 0x3DCD);
  EXPECT_EQ(lm_read_code(0.1f, LmDataType::fp16), 0x2E66);
  EXPECT_EQ(lm_code_value(0x3DCD, LmDataType::bf16), 0.10009765625f);
  EXPECT_EQ(lm_code_value(0x2E66, LmDataType::fp16), 0.0999755859375f);
  EXPECT_EQ(lm_code_value(lm_read_code(-0.3f, LmDataType::bf16), LmDataType::bf16), lm_read_weight(-0.3f, LmDataType::bf16));
  EXPECT_THROW(lm_read_code(1.0f, LmDataType::fp32), std::invalid_argument);
}

// A shard of more rows than one tile of the read copy (256 rows converted at a time): V 1,000
// on 1 rank (tiles of 256, 256, 256, 232 rows) and 3 ranks (333 / 334 / 333 rows), bf16 and
// fp16, tied and untied: the same fp32 tolerance against the rounding reference as above.
TEST(Lm59ReadCopy, ShardsOfSeveralTilesMatchTheReference) {
  for (LmDataType t : {LmDataType::bf16, LmDataType::fp16})
    for (auto [world, tied] : {std::pair{1, true}, std::pair{3, false}}) {
      SCOPED_TRACE(std::string(to_string(t)) + " world " + std::to_string(world));
      LmWorkloadSpec s = small_spec(Mode::vocab_parallel, world, tied, t);
      s.vocab_size = 1000;
      LmRunOptions opt;
      opt.keep_outputs = true;
      const Gap with = gap(s, run_lm(s, opt), true);
      EXPECT_LE(with.loss, 2e-5);
      EXPECT_LE(with.weights, 2e-5);
    }
}

}  // namespace
