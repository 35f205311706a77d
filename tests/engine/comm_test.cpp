// Gloo collectives between threads: values, split cross-check, timeouts that name the
// missing ranks (never a hang).
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include "embedscope/engine/comm.h"

using namespace embedscope::engine;
using namespace std::chrono_literals;

namespace {
// Runs fn(group) on `n` threads, one rank each; returns each rank's exception message ("" if none).
std::vector<std::string> on_ranks(int n, std::chrono::milliseconds timeout,
                                  const std::function<void(ProcessGroup&)>& fn) {
  auto rv = Rendezvous::in_process();
  std::vector<int> members(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) members[static_cast<size_t>(i)] = i;
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ProcessGroup pg(rv, "world", members, r, timeout);
      try {
        fn(pg);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}
}  // namespace

TEST(ProcessGroup, CollectivesGiveHandComputedValues) {
  auto errors = on_ranks(3, 10s, [](ProcessGroup& pg) {
    const int r = pg.rank();
    // all-to-all(v): rank r sends (j + 1) copies of 10 r + j to rank j
    std::vector<int64_t> send, sc(3), rc(3, r + 1);
    for (int j = 0; j < 3; ++j) {
      sc[static_cast<size_t>(j)] = j + 1;
      for (int k = 0; k <= j; ++k) send.push_back(10 * r + j);
    }
    std::vector<int64_t> recv(static_cast<size_t>(3 * (r + 1)));
    pg.all_to_all_v("a2a", send.data(), sc, recv.data(), rc, sizeof(int64_t));
    for (int s = 0; s < 3; ++s)
      for (int k = 0; k <= r; ++k) EXPECT_EQ(recv[static_cast<size_t>(s * (r + 1) + k)], 10 * s + r);
    // reduce-scatter: blocks of 2, block j of rank r = {r + j, 100}
    std::vector<float> rs_send;
    for (int j = 0; j < 3; ++j) rs_send.insert(rs_send.end(), {static_cast<float>(r + j), 100.0f});
    std::vector<int64_t> counts(3, 2);
    float out[2];
    pg.reduce_scatter("rs", rs_send.data(), counts, out);
    EXPECT_FLOAT_EQ(out[0], static_cast<float>(0 + 1 + 2 + 3 * r));
    EXPECT_FLOAT_EQ(out[1], 300.0f);
    // all-gather(v): rank r contributes r + 1 values r
    std::vector<float> mine(static_cast<size_t>(r + 1), static_cast<float>(r)), all(6);
    std::vector<int64_t> ag{1, 2, 3};
    pg.all_gather_v("ag", mine.data(), all.data(), ag, sizeof(float));
    EXPECT_EQ(all, (std::vector<float>{0, 1, 1, 2, 2, 2}));
    // all-reduce
    std::vector<float> v{static_cast<float>(r), 1.0f};
    pg.all_reduce_sum("ar", v.data(), 2);
    EXPECT_FLOAT_EQ(v[0], 3.0f);
    EXPECT_FLOAT_EQ(v[1], 3.0f);
    // a2a moved (0..2) elements of 8 bytes to others; own slice not counted
    EXPECT_GT(pg.counters().bytes_sent, 0);
    // a2a and the reduce-scatter's pairwise a2a each add a split check: 2 + 2 + 1 + 1
    EXPECT_EQ(pg.counters().collectives, 6);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(ProcessGroup, SplitMismatchNamesThePairOnEveryRank) {
  auto errors = on_ranks(3, 10s, [](ProcessGroup& pg) {
    std::vector<int64_t> sc(3, 1), rc(3, 1);
    if (pg.rank() == 0) sc[1] = 2;  // rank 0 sends 2 to rank 1, which expects 1
    std::vector<int64_t> send(4), recv(3);
    pg.all_to_all_v("output_dist", send.data(), sc, recv.data(), rc, sizeof(int64_t));
  });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("all_to_all 'output_dist'"), std::string::npos) << e;
    EXPECT_NE(e.find("rank 0 sends 2 elements to rank 1, which expects 1"), std::string::npos) << e;
  }
}

TEST(ProcessGroup, TimeoutNamesOpSequenceAndMissingRank) {
  std::promise<void> done;
  auto done_future = done.get_future().share();
  std::atomic<int> finished{0};
  const auto t0 = std::chrono::steady_clock::now();
  auto errors = on_ranks(3, 700ms, [&](ProcessGroup& pg) {
    float v = 1;
    pg.all_reduce_sum("warm", &v, 1);  // sequence 1: everyone arrives
    if (pg.rank() == 2) {             // rank 2 never arrives at sequence 2, but stays connected
      if (++finished == 3) done.set_value();
      done_future.wait();
      return;
    }
    try {
      pg.all_reduce_sum("dense_all_reduce", &v, 1);
    } catch (...) {
      if (++finished == 3) done.set_value();
      throw;
    }
  });
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(elapsed, 10s);
  for (int r : {0, 1}) {
    const auto& e = errors[static_cast<size_t>(r)];
    EXPECT_NE(e.find("all_reduce 'dense_all_reduce' (group world, sequence 2) did not finish within 700 ms"),
              std::string::npos) << e;
    EXPECT_NE(e.find("rank(s) 2 did not arrive"), std::string::npos) << e;
  }
  EXPECT_EQ(errors[2], "");
}
