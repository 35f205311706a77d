// F7, F10, F11, F12 of a robustness review. A rank's setup (initialising a large table's rows) counts against no collective timeout and
// is not part of the first step: its peers wait for it before step 0, without the workload's
// collective_timeout_ms. Before, a table that took longer to initialise than the timeout ended
// the run as a "hang" in step 0, and a shorter one showed up as the first step's communication.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/input/input.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"
#include "support/simulated_kill.h"

namespace {
namespace es = embedscope::engine;

// tiny with table t_c grown to `rows` rows (12 floats each, table-wise: on one rank), a collective
// timeout of `timeout_ms`, no warm-up (step 0 is measured), `steps` steps.
es::WorkloadSpec rob61_big_table_spec(int64_t rows, int64_t timeout_ms, int64_t steps) {
  es::WorkloadSpec spec = es::load_preset("tiny");
  spec.tables[3].num_embeddings = rows;
  spec.devices.memory_bytes = int64_t{1} << 30;
  spec.collective_timeout_ms = timeout_ms;
  spec.warmup_steps = 0;
  spec.steps = steps;
  return spec;
}
}  // namespace

TEST(Rob61SetupWait, ALongTableInitialisationIsNoHangAndNotTheFirstStepsTime) {
  constexpr int64_t kRows = 8'000'000, kDim = 12;  // 384 MB of fp32 rows
  // the reference: how long initialising those rows takes here, as the rank does (init_shard)
  std::vector<float> rows(static_cast<size_t>(kRows * kDim));
  const auto t0 = std::chrono::steady_clock::now();
  es::init_shard(1, 3, kRows, 0, kRows, 0, kDim, rows.data());
  const double init_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  rows = {};
  // a timeout a quarter of that (at least the smallest allowed, 100 ms): the initialisation
  // outlasts it on any machine, and the steps' own collectives, under load too, do not
  const int64_t timeout_ms = std::max<int64_t>(es::kMinCollectiveTimeoutMs, static_cast<int64_t>(init_ms / 4));
  if (init_ms <= 2.0 * static_cast<double>(timeout_ms))
    GTEST_SKIP() << "init_shard of " << kRows << " rows took only " << init_ms << " ms here: no timeout it outlasts";

  const es::WorkloadSpec spec = rob61_big_table_spec(kRows, timeout_ms, 3);
  es::TrainerOptions opt;
  opt.held_out_batches = 0;
  const es::RunResult r = es::run_training(spec, es::plan_sharding(spec), opt);
  ASSERT_EQ(r.ended, es::RunEnd::complete) << r.error;  // before: hang, "rank(s) 0 did not arrive"
  ASSERT_EQ(r.step_time_ns.size(), 3u);
  // step 0 (the slowest rank's) holds none of the other rank's setup: well under it
  const double step0_ms = static_cast<double>(r.step_time_ns[0]) / 1e6;
  EXPECT_LT(step0_ms, 0.5 * init_ms) << "step 0 took " << step0_ms << " ms; initialising the table " << init_ms << " ms";
}

// A simulated run killed with SIGKILL keeps what it simulated up to its last commit: the
// simulator waits for the writer's commit every 500 ms (SessionWriter::sync; the check is
// support/simulated_kill.h's). Before, the
// writer fell thousands of steps behind: a kill at 1.5 s left no session, one at 4 s kept 1,924
// of 9,616 steps.
TEST(Rob61SimulatedKill, ASigkilledSimulationKeepsMostOfItsSteps) {
  namespace fs = std::filesystem;
  const fs::path dir = embedscope::test_support::fresh_scratch("es_rob61_simkill_" + std::to_string(getpid()));
  const std::string db = (dir / "k.db").string();
  embedscope::test_support::expect_sigkilled_simulation_keeps_its_steps(
      EMBEDSCOPE_CLI, {"run", "--preset", "tiny", "--simulate", "h100_sxm", "--steps", "100000000", "-o", db}, db,
      std::regex(R"(step (\d+)/100000000)"));
}

// F12: `stats` processes started together on a SIGKILLed run's session all read it `crashed`,
// and the -wal is folded back (by one of them, or by the next lone reader). Before, a reader checkpointing held LOCK_EX on the file,
// which the others' writer-lock probe took for a live writer (`running`, 2 of 24 readings), and
// the checkpoints got in each other's way (the -wal stayed).
TEST(Rob61ConcurrentReaders, ReadersStartedTogetherAllSayCrashed) {
  namespace fs = std::filesystem;
  const fs::path dir = embedscope::test_support::fresh_scratch("es_rob61_readers_" + std::to_string(getpid()));
  const std::string db = (dir / "k.db").string();
  const auto k = embedscope::test_support::kill_when(EMBEDSCOPE_CLI, {"run", "--preset", "tiny", "--steps", "100000", "-o", db}, [&] {
    if (!fs::exists(db)) return false;
    const embedscope::sessions::SessionReader s(db);
    return s.steps().size() >= 20;
  });
  ASSERT_TRUE(k.ready) << "the run did not keep 10 steps within 60 s";
  ASSERT_TRUE(fs::exists(db + "-wal"));
  {  // F10: a copy without its -wal is refused and left as it was: no empty -wal or -shm made beside it
    const fs::path c4 = dir / "c4";
    fs::create_directories(c4);
    fs::copy_file(db, c4 / "k.db");
    const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + (c4 / "k.db").string(), c4);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("needs its -wal file beside it"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(c4 / "k.db-wal"));
    EXPECT_FALSE(fs::exists(c4 / "k.db-shm"));
  }
  constexpr int kRounds = 4, kReaders = 6;
  int crashed = 0, other = 0, folded = 0;
  for (int round = 0; round < kRounds; ++round) {
    const fs::path rd = dir / ("r" + std::to_string(round));
    fs::create_directories(rd);
    fs::copy_file(db, rd / "k.db");
    fs::copy_file(db + "-wal", rd / "k.db-wal");
    // every reader started at once by one shell, each writing its --json to a file of its own
    std::string cmd;
    for (int i = 0; i < kReaders; ++i)
      cmd += fmt::format("'{}' stats '{}' --json > '{}' 2>/dev/null & ", EMBEDSCOPE_CLI, (rd / "k.db").string(),
                         (rd / fmt::format("o{}.json", i)).string());
    cmd += "wait";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    for (int i = 0; i < kReaders; ++i) {
      std::ifstream in(rd / fmt::format("o{}.json", i));
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (text.find("\"ended\":\"crashed\"") != std::string::npos) ++crashed;
      else ++other;
    }
    // the -wal folded back by one of them, or (where their reads kept each other's checkpoint
    // waiting past its 0.5 s) by the next reader alone: nothing recorded is lost either way
    std::error_code ec;
    if (const auto wal = fs::file_size(rd / "k.db-wal", ec); !ec && wal > 0) {
      const auto lone = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + (rd / "k.db").string(), rd);
      EXPECT_NE(lone.err.find("its -wal file was checkpointed into"), std::string::npos) << lone.err;
    }
    const auto wal = fs::file_size(rd / "k.db-wal", ec);
    folded += ec || wal == 0;  // gone (journal_mode DELETE) or emptied by the checkpoint
  }
  EXPECT_EQ(crashed, kRounds * kReaders) << other << " reading(s) did not say crashed";
  EXPECT_EQ(folded, kRounds);
}
