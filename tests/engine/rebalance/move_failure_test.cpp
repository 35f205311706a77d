// A rank that fails during a live rebalance's move (issue 17, "Bad input and faults"): the run
// ends with an error naming the collective, the rank that did not arrive and the step of the
// move; the session keeps the rebalance that finished before it with its plan changes, records
// the failed one with how far each rank got, and reports no shard of it (the plan before it is
// the run's final plan).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "embedscope/engine/rebalance/policy.h"
#include "embedscope/sessions/store/session.h"
#include "engine/parity_check.h"
#include "engine/rebalance/live_fixtures.h"
#include "engine/rebalance/policy_fixtures.h"
#include "support/cli_run.h"

using namespace embedscope::engine;
using embedscope::test_support::crowded_live_spec;
using embedscope::test_support::first_shard_ranks;

namespace {

namespace fs = std::filesystem;

fs::path move_failure_dir() {
  const fs::path d = fs::temp_directory_path() / fmt::format("embedscope_move_failure_{}", ::getpid());
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST(LiveMoveFailure, ARankLostInTheSecondMoveKeepsTheFirstAndNoShardOfTheSecond) {
  // every table on rank 0 of 3; a budget of t0's bytes a move (280: 10 rows x (6 + 1) floats),
  // so that the first rebalance (after step 1) moves t0 alone and the second (after step 3) more
  WorkloadSpec s = crowded_live_spec(3, OptimizerType::rowwise_adagrad);
  s.collective_timeout_ms = 800;
  s.rebalance.max_bytes_per_move = rebalance::table_wise_move_bytes(s, 0);
  const fs::path dir = move_failure_dir();
  // the healthy run: where the second move's all-to-all falls in the world group
  TrainerOptions opt;
  opt.session_path = (dir / "healthy.db").string();
  const RunResult ok = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(ok.ended, RunEnd::complete) << ok.error;
  ASSERT_EQ(ok.rebalances.size(), 2u);
  ASSERT_GE(ok.rebalances[0].moves, 1);
  ASSERT_GE(ok.rebalances[1].moves, 1);
  uint64_t second_reshard = 0;
  for (const auto& c : embedscope::sessions::SessionReader(opt.session_path).collectives())
    if (c.rank == 2 && c.name == "reshard" && c.group == "world" && c.step == 3) second_reshard = c.sequence;
  ASSERT_GT(second_reshard, 0u);

  // rank 2 stops there: the others wait in the all-to-all until the timeout
  opt.session_path = (dir / "lost.db").string();
  opt.vanish = {2, second_reshard};
  const RunResult r = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(r.ended, RunEnd::hang) << r.error;
  EXPECT_NE(r.error.find("reshard"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("rank(s) 2 did not arrive"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find(" - during the live rebalance after step 3 (rank "), std::string::npos) << r.error;
  EXPECT_NE(r.error.find(" in the reshard all-to-all)"), std::string::npos) << r.error;
  // the first rebalance as the healthy run made it; the second failed, every rank in the all-to-all
  ASSERT_EQ(r.rebalances.size(), 2u);
  EXPECT_EQ(r.rebalances[0].outcome, "complete");
  EXPECT_EQ(r.rebalances[0].moves, ok.rebalances[0].moves);
  EXPECT_EQ(r.rebalances[0].bytes_moved, ok.rebalances[0].bytes_moved);
  EXPECT_EQ(r.rebalances[1].step, 3);
  EXPECT_EQ(r.rebalances[1].moves, ok.rebalances[1].moves);  // what it set out to move
  EXPECT_EQ(r.rebalances[1].outcome,
            "failed: the run ended during the move (ranks 0, 1, 2: in the reshard all-to-all); no shard of it is "
            "kept: the tables stay where they were before it");
  // only the first move's shards: the final plan is the initial one with those changes
  size_t first_changes = 0;
  for (const auto& c : ok.plan_changes) first_changes += c.step == 2;
  ASSERT_GT(first_changes, 0u);
  ASSERT_EQ(r.plan_changes.size(), first_changes);
  std::vector<int> ranks = first_shard_ranks(r.plan);
  for (const auto& c : r.plan_changes) {
    EXPECT_EQ(c.step, 2);
    ranks[static_cast<size_t>(c.table)] = c.to_rank;
  }
  EXPECT_EQ(first_shard_ranks(r.final_plan), ranks);
  EXPECT_NE(first_shard_ranks(ok.final_plan), ranks);  // the healthy run moved more
  // the session says the same
  {
    embedscope::sessions::SessionReader session(opt.session_path);
    EXPECT_EQ(session.status(), "hang");
    EXPECT_EQ(session.meta("end_message"), r.error);
    const auto rebalances = session.rebalances();
    ASSERT_EQ(rebalances.size(), 2u);
    EXPECT_EQ(rebalances[0].outcome, "complete");
    EXPECT_EQ(rebalances[1].outcome, r.rebalances[1].outcome);
    EXPECT_EQ(session.plan_changes().size(), first_changes);
  }
  // `stats` prints the outcome under the failed rebalance, and the first one's table move
  {
    const auto st = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + opt.session_path, dir);
    EXPECT_NE(st.out.find("        " + r.rebalances[1].outcome + "\n"), std::string::npos) << st.out << st.err;
    EXPECT_NE(st.out.find("t0: rank 0 -> rank "), std::string::npos) << st.out;
  }
  // a file of schema 9 has no outcome column: its rebalances read as complete
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(opt.session_path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "ALTER TABLE rebalances DROP COLUMN outcome; PRAGMA user_version = 9", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
    const auto old = embedscope::sessions::SessionReader(opt.session_path).rebalances();
    ASSERT_EQ(old.size(), 2u);
    EXPECT_EQ(old[1].outcome, "complete");
  }
  fs::remove_all(dir);
}
