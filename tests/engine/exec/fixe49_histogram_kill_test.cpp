// tester49 F16: a run writes its id histogram with each step's records (one transaction), so a
// run killed with SIGKILL keeps, beside the load counters of every step it kept, the ids of
// exactly those steps' batches in the id histogram (before: none at all, and `rebalance` said
// "hot rows: none").
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;

fs::path fixe49h_scratch() {
  const fs::path d = fs::temp_directory_path() / ("es_fixe49_hist_" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}

/// `db` and its -wal / -shm gone: a test repeated in one process (--gtest_repeat) reuses its
/// scratch folder, and `run` refuses a session file that exists.
void fixe49h_remove_session(const std::string& db) {
  for (const char* tail : {"", "-wal", "-shm"}) fs::remove(db + tail);
}

// ids per table: the id histogram's (summed over ranks and buckets) and the load counters'
// (summed over ranks, shards and the kept steps)
struct Fixe49hIds {
  std::map<int32_t, int64_t> histogram, load;
  int64_t steps = 0;  // step rows (rank 0's)
};

Fixe49hIds fixe49h_ids(const std::string& db) {
  const embedscope::sessions::SessionReader s(db);
  Fixe49hIds out;
  for (const auto& b : s.id_histogram()) out.histogram[b.table] += b.ids;
  for (const auto& c : s.load()) out.load[c.table] += c.ids;
  for (const auto& st : s.steps()) out.steps += st.rank == 0 ? 1 : 0;
  return out;
}
}  // namespace

// A complete run: the histogram's ids per table are the load counters' (each id of the global
// batch is looked up once, by its shard's owner).
TEST(Fixe49Histogram, CompleteRunHistogramMatchesLoadCounters) {
  const fs::path dir = fixe49h_scratch();
  const std::string db = (dir / "c.db").string();
  fixe49h_remove_session(db);
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "run --preset tiny --steps 7 -o " + db, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const Fixe49hIds ids = fixe49h_ids(db);
  EXPECT_EQ(ids.steps, 7);
  ASSERT_FALSE(ids.histogram.empty());
  EXPECT_EQ(ids.histogram, ids.load);
}

// SIGKILL after at least 6 committed steps: the histogram holds the kept steps' ids exactly. One
// rank: with two, a rank's step k (its batch's ids of every table) may be committed before the
// other rank's step k (the load counters of the shards it holds), so the totals can differ by a
// step's ids at the kill; the atomicity per rank is what one rank shows exactly.
TEST(Fixe49Histogram, SigkilledRunKeepsTheKeptStepsHistogram) {
  const fs::path dir = fixe49h_scratch();
  const std::string db = (dir / "k.db").string();
  fixe49h_remove_session(db);
  int64_t seen = 0;
  int polls = 0;
  // SIGKILL once the session holds 6 steps, asked every 100 ms; up to 60 s on a loaded machine
  const embedscope::test_support::SignalWhen six(
      [&](int) {
        try {
          seen = fs::exists(db) ? fixe49h_ids(db).steps : 0;
        } catch (const std::exception&) {
          seen = 0;  // the file is being created
        }
        return seen >= 6 || ++polls >= 600;
      },
      100);
  // stdout piped (quiet until the end), stderr's step lines to /dev/null
  const auto run = embedscope::test_support::run_signalled(
      EMBEDSCOPE_CLI, {"run", "--preset", "tiny", "--steps", "1000000", "--devices", "1", "-o", db}, SIGKILL, {six},
      embedscope::test_support::ChildIo(1));
  const int status = run.status;
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_GE(seen, 6);
  const Fixe49hIds ids = fixe49h_ids(db);
  EXPECT_GE(ids.steps, 6);
  EXPECT_LT(ids.steps, 1000000);
  ASSERT_FALSE(ids.histogram.empty()) << "a killed run kept no id histogram";
  EXPECT_EQ(ids.histogram, ids.load);
  // tiny: 24 samples a step over 4 tables; every table has ids in every step
  ASSERT_EQ(ids.load.size(), 4u);
  for (const auto& [t, n] : ids.load) EXPECT_GE(n, ids.steps) << "table " << t;
}
