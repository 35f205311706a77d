// Slow-network emulation from the collective's effective start (tester48 F5): a rank is held
// until the last member's arrival plus the emulated link time, and a receiver until each
// sender's port has delivered its share. Pure figures asserted exactly; on threads, recorded
// spans asserted relative to each other (lower bounds that the emulation's holds guarantee,
// never an upper bound on the clock).
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "embedscope/engine/comm/collective_math.h"
#include "embedscope/engine/comm/gloo_process_group.h"
#include "support/gloo_ranks.h"

using namespace embedscope::engine;
using namespace std::chrono_literals;

// Max-min fair share of a sender's port: flows of 100, 300 and 600 B at 1000 B/s end when the
// port has pushed 3 x 100 = 300 B, 100 + 2 x 300 = 700 B and 1000 B.
TEST(NetworkHold, DeliveryIsTheSendersFairShareOfItsPort) {
  NetworkSpec net;
  net.intra_node = {1000, 0};
  const std::vector<int> members{0, 1, 2, 3};
  const std::vector<int64_t> sent{100, 0, 300, 600};  // member 1 sends
  EXPECT_EQ(emulated_delivery_ns(net, 4, members, 1, sent), (std::vector<int64_t>{300'000'000, 0, 700'000'000, 1'000'000'000}));
  // two link classes (local_world_size 2: {0,1} and {2,3}): member 1's intra port carries only
  // the 100 B to member 0; its inter port (100 B/s + 5 ms) 300 and 600 B
  net.inter_node = {100, 5'000'000};
  EXPECT_EQ(emulated_delivery_ns(net, 2, members, 1, sent),
            (std::vector<int64_t>{100'000'000, 0, 5'000'000 + 6'000'000'000, 5'000'000 + 9'000'000'000}));
  EXPECT_EQ(emulated_delivery_ns(NetworkSpec{}, 2, members, 1, sent), (std::vector<int64_t>{0, 0, 0, 0}));
}

// tester48 F5 (a): a ring of 3 arriving at 0, 5 and 13 ms, each port 22.8 ms: every member is
// released 22.8 ms after the last arrival (35.8 ms), not 22.8 ms after its own.
// (b): 1 Gb Ethernet (125 MB/s, 50 us), member 2 sends 720,896 B to each of 3 peers (2,162,688 B:
// 17.301504 ms on its port); member 0's own port (819,200 B received: 6.5536 ms + 50 us) no longer
// decides: it waits for member 2's delivery, 50 us + 17.301504 ms after the last arrival.
TEST(NetworkHold, ReleaseCountsFromTheLastArrival) {
  std::vector<EmulatedMember> ring{{0, 22'800'000, {}}, {5'000'000, 22'800'000, {}}, {13'000'000, 22'800'000, {}}};
  for (int r = 0; r < 3; ++r) EXPECT_EQ(emulated_release_ns(true, r, ring), 35'800'000) << r;
  ring[1].port_ns = 30'000'000;  // the slowest port bounds every member of a ring
  for (int r = 0; r < 3; ++r) EXPECT_EQ(emulated_release_ns(true, r, ring), 43'000'000) << r;
  // arriving together with equal ports: the per-rank figure of before
  std::vector<EmulatedMember> together{{7, 1000, {}}, {7, 1000, {}}};
  EXPECT_EQ(emulated_release_ns(true, 0, together), 1007);
  EXPECT_EQ(emulated_release_ns(false, 1, together), 1007);

  NetworkSpec net;
  net.intra_node = {125'000'000, 50'000};
  const std::vector<int> members{0, 1, 2, 3};
  const int64_t share = 720'896;
  const std::vector<int64_t> sent2{share, share, 0, share};
  const auto d2 = emulated_delivery_ns(net, 4, members, 2, sent2);
  EXPECT_EQ(d2[0], 50'000 + 17'301'504);
  const int64_t port0 = emulated_collective_ns(net, 4, members, 0, std::vector<int64_t>{0, 0, 0, 0},
                                               std::vector<int64_t>{0, 49'152, share, 49'152});
  EXPECT_EQ(port0, 50'000 + 6'553'600);
  std::vector<EmulatedMember> a2a(4);
  for (int r = 0; r < 4; ++r) a2a[static_cast<size_t>(r)] = {1'000'000 * r, 50'000, std::vector<int64_t>(4, 0)};
  a2a[0].port_ns = port0;
  a2a[2].port_ns = 50'000 + 17'301'504;
  a2a[2].deliver_ns = d2;
  EXPECT_EQ(emulated_release_ns(false, 0, a2a), 3'000'000 + 50'000 + 17'301'504);
  a2a[2].deliver_ns = std::vector<int64_t>(4, 0);  // without the sender's delivery: its own port
  EXPECT_EQ(emulated_release_ns(false, 0, a2a), 3'000'000 + 50'000 + 6'553'600);
}

// On threads: rank 2 joins a ring all-reduce 80 ms late; the link needs 40 ms for the ring's bytes
// (3 ranks, 15,000 floats: 2 x 2/3 x 60,000 B = 80,000 B at 2 MB/s), so every rank ends >= 40 ms
// after rank 2's start (before F5 ranks 0 and 1 ended ~0 ms after it: their 40 ms hid under the
// wait). Then an all-to-all in which rank 2 sends 30,000 B to ranks 0 and 1 and they send nothing:
// each receiver's figure is rank 2's port time for 60,000 B (30 ms at 2 MB/s), not its own 15 ms.
TEST(NetworkHold, EarlyRanksWaitForTheLastArrivalsLinkTime) {
  constexpr int64_t kCount = 15'000;
  const int64_t ring = all_reduce_bytes(kCount, 3, 0, sizeof(float)).sent;  // 5,000 a chunk: every rank the same
  ASSERT_EQ(ring, 80'000);
  embedscope::profiler::RunClock clock;
  std::vector<int64_t> start(3), end(3), a2a_start(3), a2a_end(3), ring_ns(3), a2a_ns(3);
  auto errors = embedscope::test_support::on_gloo_ranks(3, 20s, [&](ProcessGroup& pg) {
    NetworkSpec net;
    net.intra_node = {2'000'000, 0};
    pg.set_network(net, 3);
    const auto me = static_cast<size_t>(pg.rank());
    pg.set_observer(&clock, [&](embedscope::sessions::CollectiveRecord&& r) {
      if (r.name == std::string("ring")) start[me] = r.start_ns, end[me] = r.end_ns;
      if (r.name == std::string("a2a")) a2a_start[me] = r.start_ns, a2a_end[me] = r.end_ns;
    });
    if (pg.rank() == 2) std::this_thread::sleep_for(80ms);
    std::vector<float> data(kCount, 1.0f);
    pg.all_reduce_sum("ring", data.data(), kCount);
    EXPECT_EQ(data.front(), 3.0f);
    ring_ns[me] = pg.last_emulated_ns();
    std::vector<int64_t> sc(3, 0), rc(3, 0);
    if (pg.rank() == 2) sc[0] = sc[1] = 30'000;
    else rc[2] = 30'000;
    std::vector<char> send(60'000, 'x'), recv(30'000);
    pg.all_to_all_v("a2a", send.data(), sc, recv.data(), rc, 1);
    a2a_ns[me] = pg.last_emulated_ns();
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(ring_ns[r], 40'000'000) << r;
    EXPECT_EQ(a2a_ns[r], 30'000'000) << r;  // rank 2: its own port; 0 and 1: rank 2's delivery
    EXPECT_GE(end[r], start[2] + 40'000'000) << "rank " << r << " left the ring before rank 2's data could go round";
    for (size_t s = 0; s < 3; ++s) EXPECT_GE(a2a_end[r], a2a_start[s] + 30'000'000) << r << " " << s;
  }
}
