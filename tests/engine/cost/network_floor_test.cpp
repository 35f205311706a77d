// The emulated network's floor under a collective (cost/network_floor.h, plan41): nccl-tests'
// all-to-all formula over an emulated link by hand, a call across emulated nodes, an all-reduce
// as Gloo's ring, and the member form the planner's pre-ranking uses.
#include <gtest/gtest.h>

#include <vector>

#include "embedscope/engine/cost/network_floor.h"

namespace es = embedscope::engine;

namespace {

// An all-to-all of `per_peer` elements of 4 bytes to and from each of the members 0..n-1, as
// member `me` of it.
es::CollectiveCall floor_all_to_all(int n, int me, int64_t per_peer) {
  es::CollectiveCall c;
  c.kind = es::CollectiveKind::all_to_all;
  c.group = "world";
  for (int r = 0; r < n; ++r) c.peers.push_back(r);
  c.group_rank = me;
  c.send_elements.assign(static_cast<size_t>(n), per_peer);
  c.recv_elements.assign(static_cast<size_t>(n), per_peer);
  c.elem_bytes = 4;
  return c;
}

}  // namespace

// nccl-tests' all-to-all (doc/PERFORMANCE.md): each of n ranks moves (n-1)/n of its S bytes. n = 4,
// S = 1 MiB (65,536 floats to each member), 10 GbE emulated (1.25e9 B/s) with 50 us latency:
// 786,432 B -> 50,000 + ceil(629,145.6) = 679,146 ns, the same for every member.
TEST(NetworkFloor, AllToAllOverAnEmulatedLinkIsTheNcclTestsFormula) {
  es::NetworkSpec net;
  net.intra_node = {1'250'000'000, 50'000};
  net.inter_node = net.intra_node;
  for (int me = 0; me < 4; ++me) EXPECT_EQ(es::emulated_floor_ns(floor_all_to_all(4, me, 65536), 4, net), 679'146) << me;
  // the member form the planner uses: the same bytes, all to peers on the member's node
  EXPECT_EQ(es::emulated_member_floor_ns(786'432.0, 0.0, true, false, net), 679'146);
  // no emulation: no floor
  EXPECT_EQ(es::emulated_floor_ns(floor_all_to_all(4, 0, 65536), 4, es::NetworkSpec{}), 0);
  EXPECT_EQ(es::emulated_member_floor_ns(786'432.0, 0.0, true, false, es::NetworkSpec{}), 0);
}

// Two emulated nodes of 2: member 0 moves 262,144 B to its node's other member over 10 GbE
// (50 us) and 524,288 B to the other node over 1 GbE (1.25e8 B/s, 100 us): 259,716 ns and
// 100,000 + 4,194,304 = 4,294,304 ns in parallel, the slower decides.
TEST(NetworkFloor, CallsAcrossEmulatedNodesPayTheSlowerLink) {
  es::NetworkSpec net;
  net.intra_node = {1'250'000'000, 50'000};
  net.inter_node = {125'000'000, 100'000};
  EXPECT_EQ(es::emulated_floor_ns(floor_all_to_all(4, 0, 65536), 2, net), 4'294'304);
  EXPECT_EQ(es::emulated_member_floor_ns(262'144.0, 524'288.0, true, true, net), 4'294'304);
  EXPECT_EQ(es::emulated_member_floor_ns(262'144.0, 0.0, true, false, net), 259'716);
  // a class with peers but no bytes still pays its latency
  EXPECT_EQ(es::emulated_member_floor_ns(0.0, 0.0, true, true, net), 100'000);
}

// An all-reduce of 1,000 floats on 4 members, Gloo's ring: reduce-scatter then all-gather, 2 x
// 3/4 x 4,000 B = 6,000 B to the next member (collective_math.h all_reduce_bytes) over 1 MB/s
// with 1 ms latency: 1,000,000 + 6,000,000 = 7,000,000 ns.
TEST(NetworkFloor, AllReduceAsARing) {
  es::NetworkSpec net;
  net.intra_node = {1'000'000, 1'000'000};
  net.inter_node = net.intra_node;
  es::CollectiveCall c;
  c.kind = es::CollectiveKind::all_reduce;
  c.peers = {0, 1, 2, 3};
  c.group_rank = 2;
  c.count = 1000;
  c.elem_bytes = 4;
  ASSERT_EQ(c.bytes_sent(), 6000);
  EXPECT_EQ(es::emulated_floor_ns(c, 4, net), 7'000'000);
}
