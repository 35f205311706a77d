// Gloo collectives between threads: values, split cross-check, timeouts that name the
// missing ranks (never a hang).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include "embedscope/engine/comm/flight_recorder.h"
#include "embedscope/engine/comm/gloo_process_group.h"
#include "support/gloo_ranks.h"

using namespace embedscope::engine;
using namespace std::chrono_literals;

namespace {
using embedscope::test_support::on_gloo_ranks;
}  // namespace

TEST(ProcessGroup, CollectivesGiveHandComputedValues) {
  auto errors = on_gloo_ranks(3, 10s, [](ProcessGroup& pg) {
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

TEST(ProcessGroup, AllReduceMaxTakesTheElementwiseMaximum) {
  auto errors = on_gloo_ranks(3, 10s, [](ProcessGroup& pg) {
    const auto r = static_cast<float>(pg.rank());
    std::vector<float> v{r, -r, 2.5f};  // maxima over ranks 0, 1, 2: 2, 0, 2.5
    pg.all_reduce_max("max", v.data(), 3);
    EXPECT_EQ(v, (std::vector<float>{2.0f, 0.0f, 2.5f}));
    // ring bytes as the sum's: 2 (n - 1) / n of 12 bytes = 16
    EXPECT_EQ(pg.counters().bytes_sent, 16);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(ProcessGroup, SplitMismatchNamesThePairOnEveryRank) {
  auto errors = on_gloo_ranks(3, 10s, [](ProcessGroup& pg) {
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
  auto errors = on_gloo_ranks(3, 700ms, [&](ProcessGroup& pg) {
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

// A rank that closes its connections (close_connections, as a process rank does when its own
// collective failed, before it waits for its peers' word) makes a peer blocked on a transfer
// from it fail at once, not at the 20 s timeout; its own later collectives throw.
TEST(ProcessGroup, ClosingConnectionsFailsABlockedPeerAtOnce) {
  std::promise<void> done;
  auto done_future = done.get_future().share();
  std::atomic<bool> rank1_waiting{false};
  std::chrono::steady_clock::duration rank1_blocked{};
  std::string after_close;
  bool rank1_timed_out = true;
  auto errors = on_gloo_ranks(2, 20000ms, [&](ProcessGroup& pg) {
    float v = 1;
    pg.all_reduce_sum("warm", &v, 1);  // sequence 1: both arrive, the pair is connected
    if (pg.rank() == 0) {              // never arrives at sequence 2: closes instead
      while (!rank1_waiting) std::this_thread::sleep_for(1ms);
      std::this_thread::sleep_for(100ms);  // rank 1 is inside its all_reduce by now
      pg.close_connections();
      try {
        pg.all_reduce_sum("after_close", &v, 1);
      } catch (const CollectiveError& e) {
        after_close = e.what();
      }
      done_future.wait();  // keeps the group alive, as a rank waiting for its peers' word does
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    rank1_waiting = true;
    try {
      pg.all_reduce_sum("dense_all_reduce", &v, 1);
    } catch (const CollectiveError& e) {
      rank1_timed_out = e.timed_out;
      rank1_blocked = std::chrono::steady_clock::now() - t0;
      done.set_value();
      throw;
    } catch (...) {
      rank1_blocked = std::chrono::steady_clock::now() - t0;
      done.set_value();
      throw;
    }
    done.set_value();
  });
  EXPECT_LT(rank1_blocked, 5s);  // not the 20 s timeout
  // tester36 D8: a peer's failure, not a timeout (the run ends crashed, "a peer failed", not hang)
  EXPECT_FALSE(rank1_timed_out);
  EXPECT_GT(rank1_blocked, 50ms);  // it was blocked on rank 0 until the close
  EXPECT_NE(errors[1].find("all_reduce 'dense_all_reduce' (group world, sequence 2)"), std::string::npos) << errors[1];
  EXPECT_NE(errors[1].find("rank(s) 0 did not arrive"), std::string::npos) << errors[1];
  // the wait ended early: said so, with how long it took, not "did not finish within 20000 ms"
  EXPECT_NE(errors[1].find(" ms, before its 20000 ms timeout: a peer's connection broke; rank(s) 0 did not arrive"),
            std::string::npos) << errors[1];
  EXPECT_EQ(errors[1].find("did not finish within"), std::string::npos) << errors[1];
  EXPECT_EQ(after_close, "all_reduce 'after_close' (group world, sequence 2) not started: this rank closed its "
                         "connections after an earlier failure");
  EXPECT_EQ(errors[0], "");
}

// ci48: a rank whose own collective is blocked inside Gloo on its comm thread (rank 1 never
// arrives) and that closes its connections from another thread (its rank thread, after its own
// failure, as the executors do) gets that collective's error at once: "this rank closed its
// connections", blaming no peer and not a timeout. Before, Pair::close did not wake this rank's
// own waiters and the collective waited out its timeout (60 s here; 30 s per crashed launch of
// Cli43Launch.ACrashedRanksFiguresComeFromItsSession). The flight recorder keeps it as started.
TEST(ProcessGroup, ClosingConnectionsFailsThisRanksOwnBlockedCollective) {
  std::promise<void> rank0_done;
  auto rank0_done_future = rank0_done.get_future().share();
  FlightRecorder recorder(0, 16);
  bool caught = false;
  std::string message;
  std::vector<int> missing{-1};
  bool timed_out = true;
  uint64_t sequence = 0;
  auto errors = on_gloo_ranks(2, 60000ms, [&](ProcessGroup& pg) {
    float v = 1;
    pg.all_reduce_sum("warm", &v, 1);  // sequence 1: both arrive, the pairs are connected
    if (pg.rank() == 1) {               // never arrives at sequence 2; keeps its group open
      rank0_done_future.wait();
      return;
    }
    pg.set_flight_recorder(&recorder);
    std::thread closer([&] {  // rank 0's rank thread: closes once its comm thread is in sequence 2
      auto started = [&] {
        for (const auto& r : recorder.dump(0, "test"))
          if (r.sequence == 2 && r.state == "started") return true;
        return false;
      };
      while (!started()) std::this_thread::sleep_for(1ms);
      std::this_thread::sleep_for(100ms);  // most likely inside Gloo's wait by now (either way it must fail)
      pg.close_connections();
    });
    try {
      pg.all_reduce_sum("dense_all_reduce", &v, 1);
    } catch (const CollectiveError& e) {
      caught = true;
      message = e.what();
      missing = e.missing_ranks;
      timed_out = e.timed_out;
      sequence = e.sequence;
    }
    closer.join();
    rank0_done.set_value();
  });
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
  ASSERT_TRUE(caught);
  EXPECT_EQ(message.rfind("all_reduce 'dense_all_reduce' (group world, sequence 2) failed: this rank closed its "
                          "connections after an earlier failure while the collective was in flight", 0), 0u)
      << message;
  EXPECT_EQ(message.find("Timed out"), std::string::npos) << message;
  EXPECT_EQ(message.find("did not arrive"), std::string::npos) << message;
  EXPECT_EQ(missing, std::vector<int>{});  // no peer is blamed
  EXPECT_FALSE(timed_out);
  EXPECT_EQ(sequence, 2u);
  const auto dump = recorder.dump(1, "test");
  ASSERT_EQ(dump.size(), 1u);  // sequence 2 only (recorded from there on)
  EXPECT_EQ(dump[0].sequence, 2u);
  EXPECT_EQ(dump[0].state, "started");  // a collective that threw stays started
}

// ---- slow-network emulation ---------------------------------------------------------------------

TEST(NetworkEmulation, TransferTimeArithmetic) {
  EXPECT_EQ(emulated_transfer_ns({64 << 20, 0}, 8 << 20), 125'000'000);  // 8 MiB at 64 MiB/s
  EXPECT_EQ(emulated_transfer_ns({1'000'000'000, 5000}, 1000), 6000);    // 5 us + 1 us
  EXPECT_EQ(emulated_transfer_ns({3, 0}, 1), 333'333'334);               // rounded up
  EXPECT_EQ(emulated_transfer_ns({0, 7}, int64_t{1} << 40), 7);          // latency only
  EXPECT_EQ(emulated_transfer_ns({}, int64_t{1} << 40), 0);              // unlimited
}

TEST(NetworkEmulation, LinkClassesFollowLocalWorldSize) {
  // 4 ranks, 2 per node: rank 0's peer 1 is intra-node, 2 and 3 inter-node.
  auto errors = on_gloo_ranks(4, 10s, [](ProcessGroup& pg) {
    NetworkSpec net;
    net.intra_node = {int64_t{1} << 30, 0};        // 1 GiB/s
    net.inter_node = {100 << 20, 1'000'000};       // 100 MiB/s, 1 ms
    pg.set_network(net, 2);
    if (pg.rank() == 0) {
      const int64_t MiB = 1 << 20;
      // 1 MiB to each peer: intra 1 MiB / 1 GiB/s = 976563 ns; inter 1 ms + 2 MiB / 100 MiB/s = 21 ms
      EXPECT_EQ(pg.emulated_min_ns(std::vector<int64_t>{0, MiB, MiB, MiB}, std::vector<int64_t>{0, 0, 0, 0}), 21'000'000);
      // only intra-node bytes: the inter-node class still pays its latency (its peers take part)
      EXPECT_EQ(pg.emulated_min_ns(std::vector<int64_t>{0, 4 * MiB, 0, 0}, std::vector<int64_t>{0, 0, 0, 0}), 3'906'250);
      // full duplex: the larger of sent and received counts
      EXPECT_EQ(pg.emulated_min_ns(std::vector<int64_t>{0, 0, 0, 0}, std::vector<int64_t>{0, 0, 0, 10 * MiB}),
                101'000'000);
      pg.set_network(NetworkSpec{}, 2);
      EXPECT_EQ(pg.emulated_min_ns(std::vector<int64_t>{0, MiB, MiB, MiB}, std::vector<int64_t>{0, 0, 0, 0}), 0);
    }
    // every rank stays until the others are done: a rank leaving while a peer still connects
    // to it would close that connection under it
    float one = 1;
    pg.all_reduce_sum("done", &one, 1);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

// The link model is a pure function of the bytes and the links: hand-computed durations.
TEST(NetworkEmulation, CollectiveDurationOfTheLinkModel) {
  const int64_t MiB = 1 << 20;
  NetworkSpec net;
  net.intra_node = {int64_t{1} << 30, 0};   // 1 GiB/s
  net.inter_node = {100 << 20, 1'000'000};  // 100 MiB/s, 1 ms
  const std::vector<int> members{0, 1, 2, 3};
  const std::vector<int64_t> none{0, 0, 0, 0};
  // 2 ranks per node; rank 0 sends 1 MiB to each peer: intra 1 MiB / 1 GiB/s = 976563 ns,
  // inter 1 ms + 2 MiB / 100 MiB/s = 21 ms
  EXPECT_EQ(emulated_collective_ns(net, 2, members, 0, std::vector<int64_t>{0, MiB, MiB, MiB}, none), 21'000'000);
  // rank 3 (node 1) receives 3 MiB from rank 0 (inter) and 1 MiB from rank 2 (intra): 1 ms + 30 ms
  EXPECT_EQ(emulated_collective_ns(net, 2, members, 3, none, std::vector<int64_t>{3 * MiB, 0, MiB, 0}), 31'000'000);
  // one node (local_world_size 4): every peer intra-node, 3 MiB at 1 GiB/s = 2929688 ns (rounded up)
  EXPECT_EQ(emulated_collective_ns(net, 4, members, 0, std::vector<int64_t>{0, MiB, MiB, MiB}, none), 2'929'688);
  // a subgroup of global ranks {1, 3} with 2 ranks per node: the peer is on the other node
  EXPECT_EQ(emulated_collective_ns(net, 2, std::vector<int>{1, 3}, 0, std::vector<int64_t>{0, MiB}, none), 11'000'000);
  // the own entry is ignored; unlimited links add nothing
  EXPECT_EQ(emulated_collective_ns(net, 2, members, 1, std::vector<int64_t>{0, 64 * MiB, 0, 0}, none), 1'000'000);
  EXPECT_EQ(emulated_collective_ns(NetworkSpec{}, 2, members, 0, std::vector<int64_t>{0, MiB, MiB, MiB}, none), 0);
}

// The limit is enforced on a real transfer: 16 MiB each way at 64 MiB/s is modelled as 250 ms
// (the link model's figure for the collective, asserted exactly), and the collective is held at
// least that long: its record (from the start of the transfer, after the split-size check in
// which a late peer would be waited for) and the caller's own wall time around the call are
// both >= the modelled time. No upper bound on the clock (DESIGN.md: tests never assert on wall
// time); the modelled duration is what the emulation promises.
TEST(NetworkEmulation, TransferHeldForTheModelledDuration) {
  constexpr int64_t kBytes = 16 << 20, kBandwidth = 64 << 20;
  std::vector<int64_t> elapsed(2), records_bytes(2), records_ns(2), modelled(2);
  auto errors = on_gloo_ranks(2, 20s, [&](ProcessGroup& pg) {
    NetworkSpec net;
    net.intra_node = {kBandwidth, 0};
    pg.set_network(net, 2);
    embedscope::profiler::RunClock clock;
    pg.set_observer(&clock, [&](embedscope::sessions::CollectiveRecord&& r) {
      if (r.name != std::string("big")) return;
      records_bytes[static_cast<size_t>(pg.rank())] = r.bytes_sent;
      records_ns[static_cast<size_t>(pg.rank())] = r.end_ns - r.start_ns;
    });
    float one = 1;
    pg.all_reduce_sum("barrier", &one, 1);  // both ranks start the transfer together
    const int peer = 1 - pg.rank();
    std::vector<int64_t> sc(2, 0), rc(2, 0);
    sc[static_cast<size_t>(peer)] = rc[static_cast<size_t>(peer)] = kBytes;
    std::vector<char> send(kBytes, static_cast<char>(pg.rank() + 1)), recv(kBytes);
    const auto t0 = std::chrono::steady_clock::now();
    pg.all_to_all_v("big", send.data(), sc, recv.data(), rc, 1);
    elapsed[static_cast<size_t>(pg.rank())] =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    modelled[static_cast<size_t>(pg.rank())] = pg.last_emulated_ns();
    EXPECT_EQ(recv.front(), static_cast<char>(peer + 1));  // the bytes really moved
    EXPECT_EQ(recv.back(), static_cast<char>(peer + 1));
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  const int64_t min_ns = emulated_transfer_ns({kBandwidth, 0}, kBytes);
  EXPECT_EQ(min_ns, 250'000'000);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(records_bytes[static_cast<size_t>(r)], kBytes);
    EXPECT_EQ(modelled[static_cast<size_t>(r)], 250'000'000) << "rank " << r;  // 16 MiB / 64 MiB/s
    EXPECT_GE(elapsed[static_cast<size_t>(r)], min_ns) << "rank " << r;
    EXPECT_GE(records_ns[static_cast<size_t>(r)], min_ns) << "rank " << r;
  }
}

// A link too slow for the timeout fails the collective at the timeout (every rank arrived), not
// after the emulated time: 4000 bytes each way at 1000 B/s is 4 s, the timeout 300 ms (sequence 1
// is the split-size exchange, which is not paced).
TEST(NetworkEmulation, TransferSlowerThanTheTimeoutFailsAtTheTimeout) {
  const auto t0 = std::chrono::steady_clock::now();
  auto errors = on_gloo_ranks(2, 300ms, [](ProcessGroup& pg) {
    NetworkSpec net;
    net.intra_node = {1000, 0};
    pg.set_network(net, 2);
    const int peer = 1 - pg.rank();
    std::vector<int64_t> sc(2, 0), rc(2, 0);
    sc[static_cast<size_t>(peer)] = rc[static_cast<size_t>(peer)] = 4000;
    std::vector<char> send(4000), recv(4000);
    try {
      pg.all_to_all_v("slow", send.data(), sc, recv.data(), rc, 1);
    } catch (const CollectiveError& e) {
      EXPECT_TRUE(e.timed_out);
      EXPECT_TRUE(e.missing_ranks.empty());
      throw;
    }
  });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s);  // not the emulated 4 s
  for (const auto& e : errors)
    EXPECT_NE(e.find("all_to_all 'slow' (group world, sequence 2) did not finish within 300 ms (every rank arrived; "
                     "the emulated network needs 4000.0 ms"),
              std::string::npos)
        << e;
}

// Quantized comms: values rounded to fp16 / bf16 travel as 2-byte elements.
TEST(QuantizedComms, HalfTheBytesAndRoundedValues) {
  for (CommPrecision p : {CommPrecision::fp32, CommPrecision::fp16, CommPrecision::bf16}) {
    std::vector<std::string> dtypes(2);
    std::vector<int64_t> bytes(2);
    auto errors = on_gloo_ranks(2, 10s, [&](ProcessGroup& pg) {
      embedscope::profiler::RunClock clock;
      pg.set_observer(&clock, [&](embedscope::sessions::CollectiveRecord&& r) {
        if (r.name == std::string("q")) {
          dtypes[static_cast<size_t>(pg.rank())] = r.dtype;
          bytes[static_cast<size_t>(pg.rank())] = r.bytes_sent;
        }
      });
      // 1 + 2^-10 is exact in fp16 (10 mantissa bits) and rounds to 1 in bf16 (7 bits)
      const float x = 1.0f + 1.0f / 1024, y = 3.0f;
      std::vector<float> send{x, y, x, y}, recv(4);
      std::vector<int64_t> c(2, 2);
      QuantError err;
      pg.all_to_all_q("q", send.data(), c, recv.data(), c, p, &err);
      const float want = p == CommPrecision::bf16 ? 1.0f : x;
      EXPECT_EQ(recv, (std::vector<float>{want, y, want, y}));
      EXPECT_DOUBLE_EQ(err.max_abs_error, p == CommPrecision::bf16 ? 1.0 / 1024 : 0.0);
      EXPECT_DOUBLE_EQ(err.max_abs_value, p == CommPrecision::fp32 ? 0.0 : 3.0);
      // reduce-scatter: two ranks' x summed after dequantization
      float out[2];
      pg.reduce_scatter_q("rs", send.data(), c, out, p, nullptr);
      EXPECT_EQ(out[0], 2 * want);
      std::vector<float> all(4);
      pg.all_gather_q("ag", send.data(), all.data(), c, p, nullptr);
      EXPECT_EQ(all, (std::vector<float>{want, y, want, y}));
    });
    for (const auto& e : errors) EXPECT_EQ(e, "");
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(dtypes[static_cast<size_t>(r)], precision_dtype(p));
      EXPECT_EQ(bytes[static_cast<size_t>(r)], p == CommPrecision::fp32 ? 8 : 4);  // 2 values to the peer
    }
  }
  EXPECT_EQ(round_to_precision(1.0f + 1.0f / 256, CommPrecision::bf16), 1.0f);  // tie -> even
  EXPECT_EQ(round_to_precision(1.0f + 3.0f / 256, CommPrecision::bf16), 1.0f + 4.0f / 256);
  EXPECT_EQ(round_to_precision(65520.0f, CommPrecision::fp16), std::numeric_limits<float>::infinity());
}
