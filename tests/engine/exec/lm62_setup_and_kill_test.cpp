// An lm_embedding run's ranks wait for each other's setup before step 0, and a killed simulated
// lm_embedding run keeps its steps, as the DLRM runs do (rob61_setup_wait_test.cpp):
// - every rank initialises its shard of the vocabulary before its first step; its peers wait for
//   it on a group of their own ("setup", 30 minutes), not under the workload's collective
//   timeout: a setup longer than that timeout is no hang, and the first step holds none of it;
// - `run W --simulate P` of an lm_embedding workload commits what it simulated every 500 ms
//   (SessionWriter::sync) and prints "step N/M ... (simulated)" lines: a SIGKILL keeps its
//   steps up to about its last half second.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/model/lm_embedding.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/engine/workload/spec.h"  // kMinCollectiveTimeoutMs
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"
#include "support/simulated_kill.h"

namespace {
namespace es = embedscope::engine;
namespace fs = std::filesystem;

// V x 16 tied fp32, SGD, 2 vocab_parallel ranks, sequences of `seq` tokens, 1 a micro batch
es::LmWorkloadSpec lm62_spec(int64_t vocab, int64_t steps, int64_t seq = 8) {
  es::LmWorkloadSpec s;
  s.name = "lm62";
  s.vocab_size = vocab;
  s.hidden_size = 16;
  s.sequence_length = seq;
  s.micro_batch_size = 1;
  s.body_layers = 1;
  s.world_size = 2;
  s.sharding = es::LmSharding::vocab_parallel;
  s.steps = steps;
  return s;
}
}  // namespace

// The two ranks' setups are alike (1,000,000 x 16 rows each), so without the wait the run hangs
// only where one thread's setup ends later than the other's by more than the timeout, which a
// loaded machine makes likely but not certain: this test asserts the run's end, not the old
// failure. An lm_embedding step touches every row (logits, SGD), so its time is of the order of
// the setup's; 2 tokens a step keep it small.
TEST(Lm62SetupWait, AShardInitialisationLongerThanTheCollectiveTimeoutIsNoHang) {
  // 2,000,000 x 16 rows: 1,000,000 x 16 floats a rank to initialise. The reference: how long one
  // rank's setup (its LmRank: the shard's initial values, its gradient) takes here, alone
  es::LmWorkloadSpec one = lm62_spec(1'000'000, 1, 2);
  one.world_size = 1;
  double init_ms = 0;
  {
    es::ProcessGroup pg(es::Rendezvous::in_process(), "lm62_reference", {0}, 0, std::chrono::milliseconds(60000));
    const auto t0 = std::chrono::steady_clock::now();
    const es::LmRank rank(one, pg, nullptr);
    init_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  // a timeout half of that (at least the smallest allowed): the setup outlasts it on any machine
  const int64_t timeout_ms = std::max<int64_t>(es::kMinCollectiveTimeoutMs, static_cast<int64_t>(init_ms / 2));
  if (init_ms <= 2.0 * static_cast<double>(timeout_ms))
    GTEST_SKIP() << "a rank's setup took only " << init_ms << " ms here: no timeout it outlasts";
  es::LmRunOptions opt;
  opt.collective_timeout_ms = timeout_ms;
  const es::LmRunResult r = es::run_lm(lm62_spec(2'000'000, 3, 2), opt);
  ASSERT_EQ(r.ended, es::RunEnd::complete) << r.error;
  ASSERT_EQ(r.step_ns.size(), 3u);
  // nothing of the wait is recorded: no collective of the "setup" group
  for (const auto& c : r.collectives) EXPECT_NE(c.group, "setup") << c.name;
}

// A simulated LM run killed with SIGKILL as its second progress line comes (non-tty: 4 s in)
// keeps every step the first line printed; its session reads crashed (support/simulated_kill.h).
TEST(Lm62SimulatedKill, ASigkilledSimulationKeepsMostOfItsSteps) {
  const fs::path dir = embedscope::test_support::fresh_scratch("es_lm62_simkill_" + std::to_string(getpid()));
  const fs::path w = dir / "lm62.json";
  std::ofstream(w) << es::to_json(lm62_spec(1000, 100'000'000)).dump();
  const std::string db = (dir / "k.db").string();
  embedscope::test_support::expect_sigkilled_simulation_keeps_its_steps(
      EMBEDSCOPE_CLI, {"run", w.string(), "--simulate", "h100_sxm", "-o", db}, db,
      std::regex(R"(step (\d+)/100000000 .* tokens/s \(simulated\))"));
}
