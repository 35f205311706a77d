// tester52 F6: `stats --json` of an lm_embedding session gave its sequences/s as samples_per_s
// and no tokens figure, while its text says tokens/s and `run --json` / `compare --json` carry
// tokens_per_s / throughput_unit "tokens/s". stats --json now carries throughput_per_s with
// throughput_unit (the session's own unit) and, for an lm_embedding session, tokens_per_step and
// tokens_per_s.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/lm_run.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path st52_scratch() {
  static const fs::path dir = embedscope::test_support::fresh_scratch("es_stats52_" + std::to_string(getpid()));
  return dir;
}

json st52_stats_json(const fs::path& db) {
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats --json " + db.string(), st52_scratch());
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(r.out);
}
}  // namespace

// vocab_parallel, V 64, H 8, sequence length 8, micro batch 2, 2 ranks, 3 steps: the ranks share
// the batch (vocab_parallel splits the table), so a step trains 2 x 8 = 16 tokens; samples_per_s
// counts the 2 sequences, so tokens/s is 8 times it, and 16 tokens over the mean step time.
TEST(Stats52ThroughputJson, LmSessionCarriesTokensPerSecondInItsUnit) {
  embedscope::engine::LmWorkloadSpec s;
  s.vocab_size = 64;
  s.hidden_size = 8;
  s.sequence_length = 8;
  s.micro_batch_size = 2;
  s.world_size = 2;
  s.steps = 3;
  embedscope::engine::LmRunOptions o;
  o.session_path = (st52_scratch() / "lm.db").string();
  o.overwrite = true;
  embedscope::engine::run_lm(s, o);
  const json j = st52_stats_json(st52_scratch() / "lm.db");
  EXPECT_EQ(j.at("throughput_unit"), "tokens/s");
  EXPECT_EQ(j.at("tokens_per_step"), 16);
  EXPECT_EQ(j.at("samples_per_step"), 2);
  const double mean_ns = j.at("step_time_ns").at("mean").get<double>();
  ASSERT_GT(mean_ns, 0);
  EXPECT_NEAR(j.at("tokens_per_s").get<double>(), 16 * 1e9 / mean_ns, 1e-6 * 16 * 1e9 / mean_ns);
  EXPECT_EQ(j.at("throughput_per_s"), j.at("tokens_per_s"));
  EXPECT_NEAR(j.at("tokens_per_s").get<double>(), 8 * j.at("samples_per_s").get<double>(),
              1e-6 * j.at("tokens_per_s").get<double>());
}

// A DLRM run's unit is samples: throughput_per_s is samples_per_s, and no tokens keys.
TEST(Stats52ThroughputJson, DlrmSessionCarriesSamplesPerSecond) {
  const auto r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "run --preset tiny --steps 2 --force-overwrite -o " + (st52_scratch() / "tiny.db").string(), st52_scratch());
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = st52_stats_json(st52_scratch() / "tiny.db");
  EXPECT_EQ(j.at("throughput_unit"), "samples/s");
  EXPECT_GT(j.at("throughput_per_s").get<double>(), 0);
  EXPECT_EQ(j.at("throughput_per_s"), j.at("samples_per_s"));
  EXPECT_FALSE(j.contains("tokens_per_s"));
  EXPECT_FALSE(j.contains("tokens_per_step"));
}
