// The flight recorder across processes (issue 18): two processes (fork), one rank each, meet in
// a gloo FileStore and join two process groups a and b of both ranks; rank 0 then all-reduces on
// a before b, rank 1 on b before a. Each collective ends at its timeout (never a hang), each
// process dumps its ring into its own session and exits, and the analysis of the merged sessions
// names both ranks, both groups and both sequence numbers.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "embedscope/engine/comm/flight_recorder.h"
#include "embedscope/engine/comm/gloo_process_group.h"
#include "embedscope/sessions/analysis/flight_recorder.h"
#include "embedscope/sessions/merge/merge.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "exec/launch/store.h"

using namespace embedscope::engine;
namespace ss = embedscope::sessions;

namespace {
constexpr auto kFrTimeout = std::chrono::milliseconds(1500);

// One rank's process: returns its exit code (0: it timed out in its last collective and dumped).
int fr_rank_process(int rank, const std::filesystem::path& dir) {
  launch::RunStore store("file://" + (dir / "store").string(), "opposite");
  auto rv = Rendezvous::over_store(store.store(), [&](const std::string& k) { return store.has(k); }, "127.0.0.1");
  ss::SessionWriter w((dir / ("rank" + std::to_string(rank) + ".db")).string());
  w.set_metadata(ss::meta::kWorldSize, "2");
  w.add_rank({rank, "localhost", "cpu (process)", 0});
  embedscope::profiler::RunClock run_clock;
  FlightRecorder fr(rank, 64, &run_clock);
  ProcessGroup a(rv, "a", {0, 1}, rank, kFrTimeout), b(rv, "b", {0, 1}, rank, kFrTimeout);
  a.set_flight_recorder(&fr);
  b.set_flight_recorder(&fr);
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  a.all_reduce_sum("warm_a", x, 8);  // a#1
  b.all_reduce_sum("warm_b", x, 8);  // b#1
  a.all_reduce_sum("more_a", x, 8);  // a#2
  try {
    if (rank == 0) {
      a.all_reduce_sum("grad_a", x, 8);  // a#3: rank 1 never comes
      b.all_reduce_sum("grad_b", x, 8);
    } else {
      b.all_reduce_sum("grad_b", x, 8);  // b#2: rank 0 never comes
      a.all_reduce_sum("grad_a", x, 8);
    }
  } catch (const CollectiveError& e) {
    w.add_flight_records(fr.dump(0, "collective timeout"));
    w.close("hang", e.what());
    return 0;
  }
  w.close("complete");
  return 1;  // both collectives completed: not what the test set up
}
}  // namespace

TEST(FlightRecorderProcesses, OppositeGroupOrdersEndAtTheTimeoutAndTheMergedDumpsNameBothRanks) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_fr_proc_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "store");
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<pid_t> kids;
  for (int r = 0; r < 2; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 3;
      try {
        code = fr_rank_process(r, dir);
      } catch (...) {
      }
      _exit(code);
    }
    kids.push_back(pid);
  }
  // every process exits within a few timeouts (polled: a hang fails the test instead of hanging it)
  for (int r = 0; r < 2; ++r) {
    int status = 0;
    pid_t done = 0;
    while ((done = waitpid(kids[static_cast<size_t>(r)], &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (done == 0) {
      for (pid_t k : kids) kill(k, SIGKILL);
      FAIL() << "rank " << r << " did not exit within 30 s";
    }
    ASSERT_TRUE(WIFEXITED(status)) << "rank " << r;
    EXPECT_EQ(WEXITSTATUS(status), 0) << "rank " << r;
  }
  const auto all = dir / "all.db";
  ss::merge_sessions({(dir / "rank0.db").string(), (dir / "rank1.db").string()}, all.string(), ss::MergeOptions{});
  ss::SessionReader merged(all.string());
  EXPECT_EQ(merged.status(), "hang");
  const auto a = ss::analyze_flight_records(merged);
  ASSERT_FALSE(a.findings.empty());
  const auto& f = a.findings.front();
  EXPECT_EQ(f.kind, ss::FlightFinding::Kind::opposite_order) << f.text;
  EXPECT_EQ(f.ranks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(f.groups, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(f.sequences, (std::vector<uint64_t>{3, 2}));
  EXPECT_EQ(f.text, "ranks 0 and 1 entered process groups a and b in opposite orders: rank 0 waits in all_reduce "
                    "'grad_a' (group a, sequence 3) and has not reached group b's sequence 2; rank 1 waits in all_reduce "
                    "'grad_b' (group b, sequence 2) and has not reached group a's sequence 3");
  // both groups' last collective every rank completed
  ASSERT_EQ(a.groups.size(), 2u);
  EXPECT_EQ(a.groups[0].completed_everywhere, 2u);  // a#2 more_a
  EXPECT_EQ(a.groups[0].completed_everywhere_entry->name, "more_a");
  EXPECT_EQ(a.groups[1].completed_everywhere, 1u);  // b#1 warm_b
  std::filesystem::remove_all(dir);
}
