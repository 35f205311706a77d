// The LM memory estimate of a row_wise workload (planner/lm_memory_estimate.h), which every
// point of an LM scaling study (exec/lm_scaling_study.h) and every `plan` of an lm_embedding
// workload runs: row_wise's replay counts the ids each rank receives from the step's tokens.
//   BM_LmEstimateRowWise/p      estimate_lm_memory: the tokens of each step drawn once for all
//                               p ranks (lm_rw_ids_received), O(steps x p T) draws
//   BM_LmReplayEachRankRowWise/p lm_memory_replay of every rank on its own, each drawing the
//                               step's whole global batch again: O(steps x p^2 T) draws, what
//                               estimate_lm_memory did before (a 1,024-GPU row_wise point of
//                               llama3_8b_embedding took minutes)
// Counter: token_draws, the tokens drawn per iteration. The workload: the scaled Llama preset's
// shape (V 128,256, H 128, S 256, B 1, bf16, untied, 3 steps), row_wise on p ranks.
#include <benchmark/benchmark.h>

#include "embedscope/engine/planner/lm_memory_estimate.h"

namespace {

namespace es = embedscope::engine;

es::LmWorkloadSpec row_wise_on(int p) {
  es::LmWorkloadSpec s;
  s.name = "llama_scaled_row_wise";
  s.vocab_size = 128256;
  s.hidden_size = 128;
  s.sequence_length = 256;
  s.micro_batch_size = 1;
  s.data_type = es::LmDataType::bf16;
  s.tie_word_embeddings = false;
  s.sharding = es::LmSharding::row_wise;
  s.world_size = p;
  s.steps = 3;
  return s;
}

void BM_LmEstimateRowWise(benchmark::State& state) {
  const es::LmWorkloadSpec s = row_wise_on(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(es::estimate_lm_memory(s));
  state.counters["token_draws"] = static_cast<double>(s.steps * s.world_size * s.sequence_length);
}
BENCHMARK(BM_LmEstimateRowWise)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_LmReplayEachRankRowWise(benchmark::State& state) {
  const es::LmWorkloadSpec s = row_wise_on(static_cast<int>(state.range(0)));
  for (auto _ : state)
    for (int r = 0; r < s.world_size; ++r) benchmark::DoNotOptimize(es::lm_memory_replay(s, r));
  state.counters["token_draws"] = static_cast<double>(s.steps * s.world_size) * s.world_size * s.sequence_length;
}
BENCHMARK(BM_LmReplayEachRankRowWise)->Arg(64)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
