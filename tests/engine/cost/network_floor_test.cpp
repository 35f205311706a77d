// The emulated network's floor under a collective (cost/network_floor.h, plan41): nccl-tests'
// all-to-all formula over an emulated link by hand, a call across emulated nodes, an all-reduce
// as Gloo's ring, and the member form the planner's pre-ranking uses.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "embedscope/engine/comm/gloo_process_group.h"
#include "support/gloo_ranks.h"
#include "embedscope/engine/cost/network_floor.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/store/session.h"

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

// Member `me` of an all-to-all among members 0..n-1 where member j sends bytes[j][k] to member k
// (1-byte elements, as Gloo's all_to_all_v of chars), its receives the transposed column.
es::CollectiveCall floor_uneven(const std::vector<std::vector<int64_t>>& bytes, int me, const std::string& name = "a2a") {
  es::CollectiveCall c;
  c.kind = es::CollectiveKind::all_to_all;
  c.name = name;
  c.group = "world";
  const size_t n = bytes.size();
  for (size_t r = 0; r < n; ++r) c.peers.push_back(static_cast<int>(r));
  c.group_rank = me;
  c.elem_bytes = 1;
  for (size_t k = 0; k < n; ++k) {
    c.send_elements.push_back(bytes[static_cast<size_t>(me)][k]);
    c.recv_elements.push_back(bytes[k][static_cast<size_t>(me)]);
  }
  return c;
}

std::vector<const es::CollectiveCall*> floor_pointers(const std::vector<es::CollectiveCall>& calls) {
  std::vector<const es::CollectiveCall*> out;
  for (const auto& c : calls) out.push_back(&c);
  return out;
}

// The brief's case: member 0 sends 3,000 B to 1 and 1,000 B to 2; 1 sends nothing; 2 sends 500 B to each.
const std::vector<std::vector<int64_t>> kFloorUneven{{0, 3000, 1000}, {0, 0, 0}, {500, 500, 0}};

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

// The brief's hand-computed case (cost/network_floor.h, file comment): 3 members on one node at
// 1 GB/s (1 B/ns) without latency. Ports: member 0 sends 4,000 B (4,000 ns), member 1 receives
// 3,000 + 500 B (3,500 ns), member 2 sends and receives 1,000 B (1,000 ns). Member 0's port is
// shared max-min fairly by its flows of 3,000 and 1,000 B: the 1,000 B flow ends when 2 x 1,000 B
// were pushed (2,000 ns), the 3,000 B one at 4,000 B (4,000 ns); member 2's two 500 B flows both
// end at 1,000 ns. Floors: 0: max(4,000, 1,000) = 4,000; 1: max(3,500, 4,000, 1,000) = 4,000;
// 2: max(1,000, 2,000) = 2,000 (the largest port, the rule before, gave 4,000 to every member).
TEST(NetworkFloor, UnevenAllToAllFollowsTheEmulationsPerMemberRule) {
  es::NetworkSpec net;
  net.intra_node = {1'000'000'000, 0};
  std::vector<es::CollectiveCall> calls;
  for (int m = 0; m < 3; ++m) calls.push_back(floor_uneven(kFloorUneven, m));
  EXPECT_EQ(es::emulated_floor_ns(calls[0], 4, net), 4'000);  // the ports
  EXPECT_EQ(es::emulated_floor_ns(calls[1], 4, net), 3'500);
  EXPECT_EQ(es::emulated_floor_ns(calls[2], 4, net), 1'000);
  const auto floors = es::emulated_member_floors_ns(floor_pointers(calls), 4, net);
  EXPECT_EQ(floors, (std::vector<int64_t>{4'000, 4'000, 2'000}));
  // the Gloo emulation's release of the same members arriving at 0, 2,000 and 7,000 ns: the last
  // arrival (7,000) plus each floor, member by member
  std::vector<es::EmulatedMember> members(3);
  const int64_t arrival[3] = {0, 2'000, 7'000};
  const std::vector<int> peers{0, 1, 2};
  for (int m = 0; m < 3; ++m) {
    std::vector<int64_t> sent(kFloorUneven[static_cast<size_t>(m)]);
    members[static_cast<size_t>(m)] = {arrival[m], es::emulated_floor_ns(calls[static_cast<size_t>(m)], 4, net),
                                       es::emulated_delivery_ns(net, 4, peers, m, sent)};
  }
  EXPECT_EQ(members[0].deliver_ns, (std::vector<int64_t>{0, 4'000, 2'000}));
  EXPECT_EQ(members[2].deliver_ns, (std::vector<int64_t>{1'000, 1'000, 0}));
  for (int m = 0; m < 3; ++m)
    EXPECT_EQ(es::emulated_release_ns(false, m, members), 7'000 + floors[static_cast<size_t>(m)]) << m;
  EXPECT_EQ(es::emulated_release_ns(false, 2, members), 9'000);

  // two emulated nodes of 2 (members 0, 1 | 2): member 0's 1,000 B to member 2 leave by its
  // inter port alone (1 MB/s + 1 ms: 1,000,000 + 1,000,000 ns), its 3,000 B to member 1 by its
  // intra port (3,000 ns); member 2's 500 B to each go by its inter port, shared (1 ms + 1 ms)
  net.inter_node = {1'000'000, 1'000'000};
  const auto two_nodes = es::emulated_member_floors_ns(floor_pointers(calls), 2, net);
  // ports: 0: max(intra 3,000 sent, inter max(1,000 sent, 500 received) -> 2,000,000) = 2,000,000;
  // 1: intra received 3,000 -> 3,000; inter received 500 -> 1,500,000; 2: inter 1,000 B both ways -> 2,000,000
  EXPECT_EQ(es::emulated_floor_ns(calls[1], 2, net), 1'500'000);
  // 1: max(1,500,000, member 0's delivery 3,000, member 2's 2,000,000) = 2,000,000
  EXPECT_EQ(two_nodes, (std::vector<int64_t>{2'000'000, 2'000'000, 2'000'000}));
}

// The fast fair-share deliveries inside emulated_member_floors_ns agree with the emulation's own
// emulated_delivery_ns and emulated_release_ns on uneven splits across two link classes (ties,
// zeros, one member sending nothing), and a ring, a split check and bad input.
TEST(NetworkFloor, MemberFloorsAreTheEmulationsReleaseFromTheLastArrival) {
  es::NetworkSpec net;
  net.intra_node = {3'000'000, 20'000};
  net.inter_node = {700'000, 90'000};
  const std::vector<std::vector<int64_t>> bytes{{0, 7, 7, 0, 900}, {40, 0, 1, 1, 1}, {0, 0, 0, 0, 0},
                                                {5000, 3, 2000, 0, 2000}, {11, 12, 13, 14, 0}};
  std::vector<es::CollectiveCall> calls;
  for (int m = 0; m < 5; ++m) calls.push_back(floor_uneven(bytes, m));
  for (int lws : {1, 2, 5}) {
    std::vector<es::EmulatedMember> members(5);
    const std::vector<int> peers{0, 1, 2, 3, 4};
    for (int m = 0; m < 5; ++m)
      members[static_cast<size_t>(m)] = {0, es::emulated_floor_ns(calls[static_cast<size_t>(m)], lws, net),
                                         es::emulated_delivery_ns(net, lws, peers, m, bytes[static_cast<size_t>(m)])};
    const auto floors = es::emulated_member_floors_ns(floor_pointers(calls), lws, net);
    for (int m = 0; m < 5; ++m) EXPECT_EQ(floors[static_cast<size_t>(m)], es::emulated_release_ns(false, m, members)) << lws << " " << m;
  }
  // a ring: every member until the slowest port is done (1,000 floats on 3 members in ring chunks
  // of 334, 333, 333: member 0 sends 2 x 666 x 4 = 5,328 B, members 1 and 2 2 x 667 x 4 = 5,336 B
  // to the next member, collective_math.h; the slowest at 3 MB/s + 20 us: 20,000 + 1,778,667 ns)
  std::vector<es::CollectiveCall> ring(3);
  for (int m = 0; m < 3; ++m) {
    ring[static_cast<size_t>(m)].kind = es::CollectiveKind::all_reduce;
    ring[static_cast<size_t>(m)].peers = {0, 1, 2};
    ring[static_cast<size_t>(m)].group_rank = m;
    ring[static_cast<size_t>(m)].count = 1000;
    ring[static_cast<size_t>(m)].elem_bytes = 4;
  }
  ASSERT_EQ(ring[0].bytes_sent(), 5328);
  ASSERT_EQ(ring[1].bytes_sent(), 5336);
  EXPECT_EQ(es::emulated_member_floors_ns(floor_pointers(ring), 3, net), (std::vector<int64_t>(3, 1'798'667)));
  // the split-size check is not paced by the emulation (ProcessGroup::all_to_all_impl)
  std::vector<es::CollectiveCall> check;
  for (int m = 0; m < 3; ++m) check.push_back(floor_uneven(kFloorUneven, m, "output_dist/split_check"));
  EXPECT_EQ(es::emulated_floor_ns(check[0], 3, net), 0);
  EXPECT_EQ(es::emulated_member_floors_ns(floor_pointers(check), 3, net), (std::vector<int64_t>(3, 0)));
  EXPECT_EQ(es::emulated_member_floors_ns(floor_pointers(calls), 2, es::NetworkSpec{}), (std::vector<int64_t>(5, 0)));
  // a member's call missing or out of place
  std::vector<const es::CollectiveCall*> missing{&calls[0], nullptr, &calls[2], &calls[3], &calls[4]};
  EXPECT_THROW(es::emulated_member_floors_ns(missing, 2, net), std::invalid_argument);
  std::vector<const es::CollectiveCall*> swapped{&calls[1], &calls[0], &calls[2], &calls[3], &calls[4]};
  try {
    es::emulated_member_floors_ns(swapped, 2, net);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "emulated_member_floors_ns: member 0's call 'a2a' is group rank 1 of 5 members, "
                                     "not member 0 of the 5 given");
  }
}

namespace {
namespace fs = std::filesystem;

}  // namespace

// The real emulation against the prediction, for the same collective: the brief's uneven
// all-to-all scaled x 10 (30,000 / 10,000 B from member 0, 5,000 B from member 2 to each) over a
// 2 MB/s emulated link, members arriving 0, 15 and 40 ms late. The prediction
// (emulated_member_floors_ns: 20, 20, 10 ms from the last arrival) must equal the hold the Gloo
// emulation computed for each member (last_emulated_ns: tolerance 0, both are integer models
// of the same bytes), and each member's recorded span must end no earlier than the last
// member's start plus its floor (the emulation sleeps until then). How much later it ends (Gloo's
// real transfer and the threads' wake-up, typically well under 5 ms here) is printed, not
// asserted: an upper bound on wall time would be a timed test (bench/ material). A few 100 ms.
TEST(NetworkFloor, RealEmulatedCollectiveHoldsEachMemberForThePredictedFloor) {
  std::vector<std::vector<int64_t>> bytes = kFloorUneven;
  for (auto& row : bytes)
    for (auto& b : row) b *= 10;
  es::NetworkSpec net;
  net.intra_node = {2'000'000, 0};
  std::vector<es::CollectiveCall> calls;
  for (int m = 0; m < 3; ++m) calls.push_back(floor_uneven(bytes, m));
  const auto predicted = es::emulated_member_floors_ns(floor_pointers(calls), 3, net);
  ASSERT_EQ(predicted, (std::vector<int64_t>{20'000'000, 20'000'000, 10'000'000}));

  embedscope::profiler::RunClock clock;
  std::vector<int64_t> start(3), end(3), held(3);
  const auto errors = embedscope::test_support::on_gloo_ranks(3, std::chrono::seconds(20), [&](es::ProcessGroup& pg) {
    pg.set_network(net, 3);
    const auto me = static_cast<size_t>(pg.rank());
    pg.set_observer(&clock, [&, me](embedscope::sessions::CollectiveRecord&& r) {
      if (r.name == std::string("a2a")) start[me] = r.start_ns, end[me] = r.end_ns;
    });
    const int delay_ms[3] = {0, 15, 40};
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms[me]));
    std::vector<int64_t> sc = bytes[me], rc(3);
    for (size_t k = 0; k < 3; ++k) rc[k] = bytes[k][me];
    std::vector<char> send(30'000 + 10'000, 'x'), recv(30'000 + 5'000);
    pg.all_to_all_v("a2a", send.data(), sc, recv.data(), rc, 1);
    held[me] = pg.last_emulated_ns();
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  const int64_t last_start = *std::max_element(start.begin(), start.end());
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(held[r], predicted[r]) << "member " << r;
    EXPECT_GE(end[r] - last_start, predicted[r]) << "member " << r;
    std::printf("member %zu: predicted %.3f ms from the last arrival, measured %.3f ms\n", r, predicted[r] / 1e6,
                static_cast<double>(end[r] - last_start) / 1e6);
  }
}

// The simulated executor (TrainerOptions::simulated_network_floor) times each member of each
// call by the same rule: the tiny workload on 4 simulated ranks in 2 nodes (table-wise: uneven
// input dists), an emulated 100 kB/s network whose floors (>= 1 ms for 100 B) dwarf the round_numbers
// profile's call times (microseconds). From each call's last arrival, every member's end is at
// least its floor from the call's recorded per-peer elements, exactly that floor where the
// floor is 1 ms or more, and within one call the members' ends differ (not the largest port
// for every member, the rule before).
TEST(NetworkFloor, SimulatedExecutorFloorsEachMemberByTheEmulationsRule) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.backend = es::Backend::simulated;
  s.devices.hardware = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";
  s.devices.count = 4;  // 2 nodes of the profile's 2 GPUs: both link classes
  s.steps = 2;
  s.warmup_steps = 0;
  s = es::with_resolved_backend(s, "test");
  const fs::path dir = fs::temp_directory_path() / "embedscope_network_floor_sim";
  fs::remove_all(dir);
  fs::create_directories(dir);
  es::TrainerOptions o;
  o.simulated_network_floor.intra_node = {100'000, 0};
  o.simulated_network_floor.inter_node = {100'000, 0};
  o.session_path = (dir / "s.db").string();
  const es::RunResult r = es::run_training(s, es::plan_sharding(s), o);
  ASSERT_EQ(r.ended, es::RunEnd::complete) << r.error;
  const int gpn = r.plan.local_world_size;
  std::map<std::tuple<std::string, uint64_t>, std::vector<embedscope::sessions::CollectiveRecord>> calls;
  for (auto& c : embedscope::sessions::SessionReader(o.session_path).collectives()) {
    // a split check on a GPU profile is no call (cost_model.h split_check_timed, sim50): each member
    // records it at its own arrival with no duration, no meeting, and the emulation does not pace it
    if (c.name.ends_with("/split_check")) {
      EXPECT_EQ(c.end_ns, c.start_ns) << c.name << " rank " << c.rank;
      continue;
    }
    calls[{c.group, c.sequence}].push_back(c);
  }
  int checked = 0, uneven = 0;
  for (auto& [key, recs] : calls) {
    if (recs.front().op == "all_reduce") continue;  // its members: all until the slowest port (tested above)
    ASSERT_EQ(recs.size(), recs.front().peers.size());
    std::vector<es::CollectiveCall> cc(recs.size());
    int64_t last = 0;
    for (const auto& rec : recs) {
      const auto it = std::find(rec.peers.begin(), rec.peers.end(), rec.rank);
      ASSERT_NE(it, rec.peers.end());
      es::CollectiveCall& c = cc[static_cast<size_t>(it - rec.peers.begin())];
      c.name = rec.name;
      c.peers.assign(rec.peers.begin(), rec.peers.end());
      c.group_rank = static_cast<int>(it - rec.peers.begin());
      c.send_elements = rec.send_elements;
      c.recv_elements = rec.recv_elements;
      c.elem_bytes = rec.dtype == "int64" ? 8 : rec.dtype == "float32" ? 4 : 2;
      last = std::max(last, rec.start_ns);
    }
    const auto floors = es::emulated_member_floors_ns(floor_pointers(cc), gpn, o.simulated_network_floor);
    std::vector<int64_t> ends;
    for (const auto& rec : recs) {
      const auto m = static_cast<size_t>(std::find(rec.peers.begin(), rec.peers.end(), rec.rank) - rec.peers.begin());
      EXPECT_GE(rec.end_ns - last, floors[m]) << rec.name << " rank " << rec.rank;
      if (floors[m] >= 1'000'000) {
        EXPECT_EQ(rec.end_ns - last, floors[m]) << rec.name << " rank " << rec.rank;
        ++checked;
      }
      ends.push_back(rec.end_ns);
    }
    if (*std::max_element(ends.begin(), ends.end()) != *std::min_element(ends.begin(), ends.end())) ++uneven;
  }
  EXPECT_GT(checked, 10);
  EXPECT_GT(uneven, 0);
  fs::remove_all(dir);
}
