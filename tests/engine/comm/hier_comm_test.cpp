// The hierarchical communicator (comm/hier/hier_comm.h) on the host stand-in: the intra-device
// parts on LocalComm (host_intra_device_ops), the cross-device part on a Gloo ProcessGroup of
// the leaders (or, in one test, on a LocalComm standing in for another transport): hand-computed
// values with uneven and zero counts on several layouts (contiguous, interleaved, uneven devices),
// bit-equality with the flat communicators, the flat Gloo group's records and counters, the
// split check's error, a timeout in a part, closing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "comm/hier/hier_comm.h"
#include "comm/local/local_comm.h"
#include "embedscope/engine/comm/gloo_process_group.h"

using namespace embedscope::engine;
using namespace std::chrono_literals;
using detail::Collectives;
using detail::GlooCollectives;
using detail::HierComm;
using detail::HierShape;
using detail::LocalComm;
using detail::LocalGroup;

namespace {

enum class HierKind { hier, hier_local_cross, flat_gloo, flat_local };

struct HierRun {
  std::vector<std::string> errors;
  std::vector<std::vector<embedscope::sessions::CollectiveRecord>> records;  // per rank, in order
};

// Runs fn(comm, rank) on one thread per rank of group "world" (ranks 0..n-1, rank r on device
// device_of[r]): hierarchical (cross part on Gloo, or on a LocalComm), or flat Gloo / flat
// LocalComm (every rank on one device) for comparison; every record and each rank's error text.
HierRun run_hier(const std::vector<int>& device_of, HierKind kind, std::chrono::milliseconds timeout,
                 const std::function<void(Collectives&, int)>& fn, FlightRecorder* flight0 = nullptr) {
  const int n = static_cast<int>(device_of.size());
  auto ops = detail::host_intra_device_ops();
  std::vector<int> members(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) members[static_cast<size_t>(i)] = i;
  const HierShape shape = detail::hier_shape(device_of);
  std::vector<int> leaders;
  for (int d = 0; d < shape.devices(); ++d) leaders.push_back(shape.leader(d));
  std::map<int, std::shared_ptr<LocalGroup>> device_groups;
  for (int d = 0; d < shape.devices(); ++d)
    device_groups[d] = std::make_shared<LocalGroup>(fmt::format("world/dev{}", shape.device_id[static_cast<size_t>(d)]),
                                                    shape.on[static_cast<size_t>(d)], timeout);
  auto leader_group = std::make_shared<LocalGroup>("world/leaders", leaders, timeout);
  auto flat_group = std::make_shared<LocalGroup>("world", members, timeout);
  auto arrivals = std::make_shared<detail::HierArrivals>(n);
  auto rv = Rendezvous::in_process();
  HierRun out;
  out.errors.assign(static_cast<size_t>(n), "");
  out.records.resize(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      std::unique_ptr<Collectives> c;
      if (kind == HierKind::flat_gloo) {
        c = std::make_unique<GlooCollectives>(std::make_unique<ProcessGroup>(rv, "world", members, r, timeout));
      } else if (kind == HierKind::flat_local) {
        c = std::make_unique<LocalComm>(flat_group, r, *ops);
      } else {
        const int d = shape.device_of[static_cast<size_t>(r)];
        std::unique_ptr<Collectives> local, cross;
        if (shape.on[static_cast<size_t>(d)].size() > 1)
          local = std::make_unique<LocalComm>(device_groups[d], shape.local_rank(r), *ops);
        if (shape.is_leader(r) && shape.devices() > 1) {
          if (kind == HierKind::hier)
            cross = std::make_unique<GlooCollectives>(
                std::make_unique<ProcessGroup>(rv, "world/leaders", leaders, d, timeout));
          else
            cross = std::make_unique<LocalComm>(leader_group, d, *ops);
        }
        c = std::make_unique<HierComm>("world", members, r, shape, std::move(local), std::move(cross), timeout, arrivals,
                                       ops.get());
      }
      c->set_observer(nullptr, [&out, r](embedscope::sessions::CollectiveRecord&& rec) {
        out.records[static_cast<size_t>(r)].push_back(std::move(rec));
      });
      if (r == 0 && flight0) c->set_flight_recorder(flight0);
      try {
        fn(*c, r);
      } catch (const std::exception& e) {
        out.errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

// Every collective with uneven and zero counts, checked against hand-computed values for a
// group of n ranks: 7 collectives of the group (3 with a split check: 10 sequence numbers).
void hier_script(Collectives& c, int r, int n) {
  // all-to-all: r sends (r + j) % 3 elements to j (zero for some pairs), element k = 1000 r + 10 j + k
  std::vector<int64_t> send, sc(static_cast<size_t>(n)), rc(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) {
    sc[static_cast<size_t>(j)] = (r + j) % 3;
    rc[static_cast<size_t>(j)] = (j + r) % 3;
    for (int k = 0; k < (r + j) % 3; ++k) send.push_back(1000 * r + 10 * j + k);
  }
  std::vector<int64_t> recv(static_cast<size_t>(std::accumulate(rc.begin(), rc.end(), int64_t{0})), -1), want;
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < (i + r) % 3; ++k) want.push_back(1000 * i + 10 * r + k);
  c.all_to_all_v("a2a", send.data(), sc, recv.data(), rc, sizeof(int64_t));
  EXPECT_EQ(recv, want) << "all_to_all_v on rank " << r;
  // all-gather: member m contributes m % 3 elements (rank 0 and 3: none), 100 m + k
  std::vector<int64_t> ag(static_cast<size_t>(n));
  std::vector<float> mine, all_want;
  for (int m = 0; m < n; ++m) {
    ag[static_cast<size_t>(m)] = m % 3;
    for (int k = 0; k < m % 3; ++k) {
      all_want.push_back(static_cast<float>(100 * m + k));
      if (m == r) mine.push_back(static_cast<float>(100 * m + k));
    }
  }
  std::vector<float> all(all_want.size(), -1.0f);
  c.all_gather_v("ag", mine.data(), all.data(), ag, sizeof(float));
  EXPECT_EQ(all, all_want) << "all_gather_v on rank " << r;
  // reduce-scatter: block j has 0 elements for j == 1, else j + 1; element k of block j = r + 100 j + k
  std::vector<int64_t> rs_counts(static_cast<size_t>(n));
  std::vector<float> rs_send;
  for (int j = 0; j < n; ++j) {
    rs_counts[static_cast<size_t>(j)] = j == 1 ? 0 : j + 1;
    for (int k = 0; k < rs_counts[static_cast<size_t>(j)]; ++k) rs_send.push_back(static_cast<float>(r + 100 * j + k));
  }
  std::vector<float> rs_out(static_cast<size_t>(rs_counts[static_cast<size_t>(r)]), -1.0f), rs_want;
  for (int k = 0; k < rs_counts[static_cast<size_t>(r)]; ++k)
    rs_want.push_back(static_cast<float>(n * (n - 1) / 2 + n * (100 * r + k)));
  c.reduce_scatter_q("rs", rs_send.data(), rs_counts, rs_out.data(), CommPrecision::fp32, nullptr);
  EXPECT_EQ(rs_out, rs_want) << "reduce_scatter on rank " << r;
  // all-reduce of 5 elements (chunks uneven over 4 ranks, a zero chunk over 6): (x + 1) r summed
  std::vector<float> v(5), v_want(5);
  for (int x = 0; x < 5; ++x) {
    v[static_cast<size_t>(x)] = static_cast<float>((x + 1) * r);
    v_want[static_cast<size_t>(x)] = static_cast<float>((x + 1) * n * (n - 1) / 2);
  }
  c.all_reduce_sum("ar", v.data(), 5);
  EXPECT_EQ(v, v_want) << "all_reduce_sum on rank " << r;
  c.all_reduce_sum("ar0", v.data(), 0);  // nothing to reduce: a collective all the same
  // bf16 all-to-all of one element each: 1 + 2^-9 rounds to 1 (8 bits of mantissa)
  std::vector<float> q_send(static_cast<size_t>(n), 1.0f + 1.0f / 512), q_recv(static_cast<size_t>(n));
  std::vector<int64_t> ones(static_cast<size_t>(n), 1);
  c.all_to_all_q("q", q_send.data(), ones, q_recv.data(), ones, CommPrecision::bf16, nullptr);
  EXPECT_EQ(q_recv, std::vector<float>(static_cast<size_t>(n), 1.0f));
  // fp16 all-gather of one element each: 2048 + 1 is 2048 in fp16 (11 bits)
  const float g = 2049.0f + static_cast<float>(r) * 2;  // odd: rounds to even
  std::vector<float> g_out(static_cast<size_t>(n));
  c.all_gather_q("gq", &g, g_out.data(), ones, CommPrecision::fp16, nullptr);
  for (int m = 0; m < n; ++m) {
    const float exact = 2049.0f + static_cast<float>(m) * 2;
    EXPECT_EQ(std::abs(g_out[static_cast<size_t>(m)] - exact), 1.0f) << "fp16 all_gather, member " << m;
  }
  EXPECT_EQ(c.counters().collectives, 10);
  EXPECT_EQ(c.next_sequence(), 11u);
}

void expect_no_errors(const HierRun& run) {
  for (size_t r = 0; r < run.errors.size(); ++r) EXPECT_EQ(run.errors[r], "") << "rank " << r;
}

// hier_script's all-to-all (uneven and zero counts: r sends (r + j) % 3 elements to j, element
// k = 1000 r + 10 j + k), twice, on buffers of the stand-in's device memory (host_intra_device_ops:
// comm_alloc) through all_to_all_v_device, or on host vectors through all_to_all_v.
void a2a_device_script(Collectives& c, int r, int n, bool device) {
  auto ops = detail::host_intra_device_ops();
  for (int round = 0; round < 2; ++round) {
    std::vector<int64_t> send, sc(static_cast<size_t>(n)), rc(static_cast<size_t>(n)), want;
    for (int j = 0; j < n; ++j) {
      sc[static_cast<size_t>(j)] = (r + j + round) % 3;
      rc[static_cast<size_t>(j)] = (j + r + round) % 3;
      for (int k = 0; k < (r + j + round) % 3; ++k) send.push_back(1000 * r + 10 * j + k);
    }
    for (int i = 0; i < n; ++i)
      for (int k = 0; k < (i + r + round) % 3; ++k) want.push_back(1000 * i + 10 * r + k);
    std::vector<int64_t> recv(want.size(), -1);
    if (device) {
      const auto sb = static_cast<int64_t>(send.size() * 8), rb = static_cast<int64_t>(recv.size() * 8);
      void* d_send = ops->comm_alloc(sb);
      void* d_recv = ops->comm_alloc(rb);
      ops->comm_to_device(d_send, send.data(), sb);
      c.all_to_all_v_device("a2a", d_send, sc, d_recv, rc, sizeof(int64_t));
      ops->comm_to_host(recv.data(), d_recv, rb);
      ops->comm_free(d_send);
      ops->comm_free(d_recv);
    } else {
      c.all_to_all_v("a2a", send.data(), sc, recv.data(), rc, sizeof(int64_t));
    }
    EXPECT_EQ(recv, want) << "round " << round << " on rank " << r;
  }
  EXPECT_EQ(c.counters().collectives, 4);
}

}  // namespace

// Collectives::all_to_all_v_device through the hierarchical communicator (its parts'
// all_to_all_v_device, the leader's buffers and reordering in device memory): the hand-computed
// blocks on every layout (contiguous, interleaved, uneven devices, the cross part on Gloo or on
// another transport), and the host variant's records and counters, which are the flat Gloo
// group's.
TEST(HierComm, DeviceBuffersGiveTheHostVariantsValuesRecordsAndCounters) {
  const std::vector<std::vector<int>> layouts{{0, 0, 1, 1}, {0, 1, 0, 1}, {0, 0, 0, 1, 1}, {5, 5, 2}};
  for (const auto& layout : layouts) {
    SCOPED_TRACE(fmt::format("devices {}", fmt::join(layout, ",")));
    const int n = static_cast<int>(layout.size());
    const HierRun dev = run_hier(layout, HierKind::hier, 10s, [n](Collectives& c, int r) { a2a_device_script(c, r, n, true); });
    const HierRun dev_local = run_hier(layout, HierKind::hier_local_cross, 10s,
                                       [n](Collectives& c, int r) { a2a_device_script(c, r, n, true); });
    const HierRun host = run_hier(layout, HierKind::hier, 10s, [n](Collectives& c, int r) { a2a_device_script(c, r, n, false); });
    const HierRun flat = run_hier(layout, HierKind::flat_gloo, 10s,
                                  [n](Collectives& c, int r) { a2a_device_script(c, r, n, false); });
    for (const HierRun* run : {&dev, &dev_local, &host, &flat}) expect_no_errors(*run);
    for (int r = 0; r < n; ++r) {
      const auto& d = dev.records[static_cast<size_t>(r)];
      ASSERT_EQ(d.size(), 4u);
      for (const HierRun* other : {&dev_local, &host, &flat}) {
        const auto& h = other->records[static_cast<size_t>(r)];
        ASSERT_EQ(h.size(), d.size());
        for (size_t i = 0; i < d.size(); ++i) {
          SCOPED_TRACE(fmt::format("rank {} record {} ({} '{}')", r, i, h[i].op, h[i].name));
          EXPECT_EQ(d[i].op, h[i].op);
          EXPECT_EQ(d[i].name, h[i].name);
          EXPECT_EQ(d[i].group, "world");
          EXPECT_EQ(d[i].sequence, h[i].sequence);
          EXPECT_EQ(d[i].bytes_sent, h[i].bytes_sent);
          EXPECT_EQ(d[i].bytes_received, h[i].bytes_received);
          EXPECT_EQ(d[i].send_elements, h[i].send_elements);
          EXPECT_EQ(d[i].recv_elements, h[i].recv_elements);
        }
      }
      EXPECT_EQ(d[0].name, "a2a/split_check");
      EXPECT_EQ(d[1].op, "all_to_all");
      // by hand, round 0: r sends (r + j) % 3 int64 to each j != r
      int64_t sent = 0;
      for (int j = 0; j < n; ++j)
        if (j != r) sent += (r + j) % 3 * 8;
      EXPECT_EQ(d[1].bytes_sent, sent);
    }
  }
}

// Without the rank's device the hierarchical communicator refuses device buffers, naming the group.
TEST(HierComm, DeviceBuffersWithoutTheRanksDeviceAreRefused) {
  const HierShape shape = detail::hier_shape(std::vector<int>{0});
  HierComm c("world", {0}, 0, shape, nullptr, nullptr, 1s);
  std::vector<int64_t> counts{0};
  try {
    c.all_to_all_v_device("output_dist/all_to_all", nullptr, counts, nullptr, counts, 4);
    ADD_FAILURE() << "no error";
  } catch (const std::logic_error& e) {
    EXPECT_EQ(std::string(e.what()), "all_to_all 'output_dist/all_to_all' on device buffers: the hierarchical group world "
                                     "was made without the rank's device");
  }
}

TEST(HierShape, DevicesInOrderOfFirstMemberAndLeaders) {
  const std::vector<int> dev{1, 0, 1, 0, 2};
  const HierShape s = detail::hier_shape(dev);
  ASSERT_EQ(s.devices(), 3);
  EXPECT_EQ(s.device_id, (std::vector<int>{1, 0, 2}));
  EXPECT_EQ(s.on[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(s.on[1], (std::vector<int>{1, 3}));
  EXPECT_EQ(s.on[2], (std::vector<int>{4}));
  EXPECT_EQ(s.device_of, (std::vector<int>{0, 1, 0, 1, 2}));
  EXPECT_TRUE(s.is_leader(1));
  EXPECT_FALSE(s.is_leader(3));
  EXPECT_EQ(s.local_rank(3), 1);
  EXPECT_TRUE(s.needs_hierarchy());
  const std::vector<int> distinct{0, 1, 2}, one{3, 3};
  EXPECT_FALSE(detail::hier_shape(distinct).needs_hierarchy());
  EXPECT_FALSE(detail::hier_shape(one).needs_hierarchy());
  EXPECT_THROW(detail::hier_shape(std::vector<int>{}), std::invalid_argument);
}

// 4 ranks on 2 devices, 6 on 3, interleaved members (a cross group's order), 3 + 2 members, and
// the cross part on another transport: the hand-computed values of hier_script on every rank.
TEST(HierComm, CollectivesGiveHandComputedValuesOnEveryLayout) {
  const std::vector<std::vector<int>> layouts{{0, 0, 1, 1}, {0, 0, 1, 1, 2, 2}, {0, 1, 0, 1}, {0, 0, 0, 1, 1}, {5, 5, 2}};
  for (const auto& layout : layouts) {
    SCOPED_TRACE(fmt::format("devices {}", fmt::join(layout, ",")));
    const int n = static_cast<int>(layout.size());
    expect_no_errors(run_hier(layout, HierKind::hier, 10s, [n](Collectives& c, int r) { hier_script(c, r, n); }));
  }
  const std::vector<int> two_by_two{0, 0, 1, 1};
  expect_no_errors(run_hier(two_by_two, HierKind::hier_local_cross, 10s, [](Collectives& c, int r) { hier_script(c, r, 4); }));
}

// The group's records are the flat Gloo group's (op, name, group, sequence, dtype, bytes, peers,
// per-peer elements), in the same order on every rank: the parts record nothing of their own.
TEST(HierComm, RecordsAndCountersAreTheFlatGloosGroups) {
  const std::vector<int> layout{0, 0, 1, 1, 2, 2};
  auto script = [](Collectives& c, int r) { hier_script(c, r, 6); };
  const HierRun hier = run_hier(layout, HierKind::hier, 10s, script);
  const HierRun flat = run_hier(layout, HierKind::flat_gloo, 10s, script);
  expect_no_errors(hier);
  expect_no_errors(flat);
  for (int r = 0; r < 6; ++r) {
    const auto& a = hier.records[static_cast<size_t>(r)];
    const auto& b = flat.records[static_cast<size_t>(r)];
    ASSERT_EQ(a.size(), 10u);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      SCOPED_TRACE(fmt::format("rank {} record {} ({} '{}')", r, i, b[i].op, b[i].name));
      EXPECT_EQ(a[i].rank, r);
      EXPECT_EQ(a[i].op, b[i].op);
      EXPECT_EQ(a[i].name, b[i].name);
      EXPECT_EQ(a[i].group, "world");
      EXPECT_EQ(a[i].sequence, i + 1);
      EXPECT_EQ(a[i].sequence, b[i].sequence);
      EXPECT_EQ(a[i].dtype, b[i].dtype);
      EXPECT_EQ(a[i].bytes_sent, b[i].bytes_sent);
      EXPECT_EQ(a[i].bytes_received, b[i].bytes_received);
      EXPECT_EQ(a[i].peers, b[i].peers);
      EXPECT_EQ(a[i].send_elements, b[i].send_elements);
      EXPECT_EQ(a[i].recv_elements, b[i].recv_elements);
    }
    EXPECT_EQ(a[0].name, "a2a/split_check");
    EXPECT_EQ(a[1].op, "all_to_all");
    EXPECT_EQ(a[4].op, "reduce_scatter");
    EXPECT_EQ(a[5].op, "all_reduce");
  }
}

// Random floats (sums that round): the reduce-scatter is bit-equal to the flat Gloo group's (the
// same order: from zero, in group order), the all-reduce to the flat LocalComm's (member order).
TEST(HierComm, ReductionsAreBitEqualToTheFlatCommunicators) {
  const int n = 6, count = 37;  // 37 = 6 x 6 + 1: uneven chunks
  std::vector<std::vector<float>> data(n);
  std::mt19937 gen(14);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& d : data)
    for (int i = 0; i < count; ++i) d.push_back(u(gen) * std::pow(10.0f, static_cast<float>(i % 5)));
  const std::vector<int64_t> counts{7, 0, 9, 5, 11, 5};  // 37
  std::vector<std::vector<float>> ar(n), rs(n);
  auto script = [&](std::vector<std::vector<float>>& ar_out, std::vector<std::vector<float>>& rs_out) {
    return [&](Collectives& c, int r) {
      std::vector<float> v = data[static_cast<size_t>(r)];
      c.all_reduce_sum("ar", v.data(), count);
      ar_out[static_cast<size_t>(r)] = v;
      std::vector<float> out(static_cast<size_t>(counts[static_cast<size_t>(r)]));
      c.reduce_scatter_q("rs", data[static_cast<size_t>(r)].data(), counts, out.data(), CommPrecision::fp32, nullptr);
      rs_out[static_cast<size_t>(r)] = out;
    };
  };
  const std::vector<int> layout{0, 0, 1, 1, 2, 2};
  std::vector<std::vector<float>> ar_gloo(n), rs_gloo(n), ar_local(n), rs_local(n);
  expect_no_errors(run_hier(layout, HierKind::hier, 10s, script(ar, rs)));
  expect_no_errors(run_hier(layout, HierKind::flat_gloo, 10s, script(ar_gloo, rs_gloo)));
  expect_no_errors(run_hier(layout, HierKind::flat_local, 10s, script(ar_local, rs_local)));
  bool rounded = false;  // the data do round: some sum differs from another order's
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(ar[static_cast<size_t>(r)].size(), static_cast<size_t>(count));
    EXPECT_EQ(std::memcmp(ar[static_cast<size_t>(r)].data(), ar_local[static_cast<size_t>(r)].data(), count * sizeof(float)), 0)
        << "all-reduce vs LocalComm, rank " << r;
    EXPECT_EQ(rs[static_cast<size_t>(r)], rs_gloo[static_cast<size_t>(r)]) << "reduce-scatter vs Gloo, rank " << r;
    EXPECT_EQ(rs[static_cast<size_t>(r)], rs_local[static_cast<size_t>(r)]) << "reduce-scatter vs LocalComm, rank " << r;
    for (int x = 0; x < count; ++x) {
      float reverse = 0;
      for (int m = n - 1; m >= 0; --m) reverse += data[static_cast<size_t>(m)][static_cast<size_t>(x)];
      if (reverse != ar[static_cast<size_t>(r)][static_cast<size_t>(x)]) rounded = true;
    }
  }
  EXPECT_TRUE(rounded) << "no sum depends on the order: the test cannot tell orders apart";
}

TEST(HierComm, SplitMismatchNamesThePairOnEveryRank) {
  const std::vector<int> layout{0, 0, 1, 1};
  const HierRun run = run_hier(layout, HierKind::hier, 10s, [](Collectives& c, int r) {
    std::vector<int64_t> sc(4, 1), rc(4, 1);
    if (r == 3) sc[0] = 2;  // rank 3 sends 2 to rank 0, which expects 1
    std::vector<int64_t> send(5), recv(4);
    c.all_to_all_v("output_dist", send.data(), sc, recv.data(), rc, sizeof(int64_t));
  });
  for (const auto& e : run.errors)
    EXPECT_EQ(e, "all_to_all 'output_dist' (group world, sequence 2): split sizes disagree: rank 3 sends 2 elements "
                 "to rank 0, which expects 1");
  for (const auto& recs : run.records) {
    ASSERT_EQ(recs.size(), 1u);
    EXPECT_EQ(recs[0].name, "output_dist/split_check");
  }
}

// Rank 3 (not a leader) never arrives at sequence 2: its device's leader (rank 2) times out in
// the intra-device part naming rank 3, under the group's name and sequence; rank 0's flight
// recorder keeps sequence 2 started.
TEST(HierComm, TimeoutInAPartNamesTheGroupSequenceAndMissingRank) {
  std::promise<void> done;
  auto done_future = done.get_future().share();
  std::atomic<int> finished{0};
  FlightRecorder flight(0, 16);
  const std::vector<int> layout{0, 0, 1, 1};
  const HierRun run = run_hier(layout, HierKind::hier, 300ms, [&](Collectives& c, int r) {
    float v = 1;
    c.all_reduce_sum("warm", &v, 1);
    EXPECT_EQ(v, 4.0f);
    if (r == 3) {
      if (++finished == 4) done.set_value();
      done_future.wait();
      return;
    }
    try {
      c.all_reduce_sum("dense_all_reduce", &v, 1);
    } catch (const CollectiveError& e) {
      EXPECT_EQ(e.group, "world");
      EXPECT_EQ(e.sequence, 2u);
      if (++finished == 4) done.set_value();
      throw;
    }
  }, &flight);
  EXPECT_EQ(run.errors[2],
            "all_reduce 'dense_all_reduce' (group world, sequence 2) did not finish within 300 ms: rank(s) 3 did not "
            "arrive (in its intra-device part: all_gather 'dense_all_reduce/split_check' (group world/dev1, sequence 7) "
            "did not finish within 300 ms: rank(s) 3 did not arrive)");
  // ranks 0 and 1 wait on rank 2 (cross-device) and rank 0 (intra-device), but name the rank
  // that never entered the group's collective (HierArrivals), as a flat group would: after their
  // own timeout, or - when rank 2's failure closes its connections just before it (under load:
  // "failed after 299.2 ms, before its 300 ms timeout: a peer's connection broke") - as the cause
  // of the broken connection
  for (int r : {0, 1}) {
    const std::string& e = run.errors[static_cast<size_t>(r)];
    const bool timed_out = e.rfind("all_reduce 'dense_all_reduce' (group world, sequence 2) did not finish within 300 "
                                   "ms: rank(s) 3 did not arrive (in its ", 0) == 0;
    const bool broken = e.rfind("all_reduce 'dense_all_reduce' (group world, sequence 2) failed in its ", 0) == 0 &&
                        e.ends_with("; rank(s) 3 never entered it");
    EXPECT_TRUE(timed_out || broken) << e;
  }
  EXPECT_EQ(run.errors[3], "");
  const auto rows = flight.dump(0, "test");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].state, "completed");
  EXPECT_EQ(rows[1].state, "started");
  EXPECT_EQ(rows[1].sequence, 2u);
  EXPECT_EQ(rows[1].group, "world");
}

// A rank that closes its connections fails its device's peer at once (not after the timeout);
// its own later collectives are not started.
TEST(HierComm, ClosingConnectionsFailsAWaitingPeerAtOnce) {
  std::promise<void> done;
  auto done_future = done.get_future().share();
  std::atomic<bool> rank1_waiting{false};
  std::chrono::steady_clock::duration rank1_blocked{};
  std::string after_close;
  const std::vector<int> layout{0, 0, 1, 1};
  const HierRun run = run_hier(layout, HierKind::hier, 20000ms, [&](Collectives& c, int r) {
    float v = 1;
    c.all_reduce_sum("warm", &v, 1);
    if (r == 0) {
      while (!rank1_waiting) std::this_thread::sleep_for(1ms);
      std::this_thread::sleep_for(100ms);
      c.close_connections();
      try {
        c.all_reduce_sum("after_close", &v, 1);
      } catch (const CollectiveError& e) {
        after_close = e.what();
      }
      done_future.wait();
      return;
    }
    if (r != 1) {
      done_future.wait();
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    rank1_waiting = true;
    try {
      c.all_reduce_sum("dense_all_reduce", &v, 1);
    } catch (...) {
      rank1_blocked = std::chrono::steady_clock::now() - t0;
      done.set_value();
      throw;
    }
    done.set_value();
  });
  EXPECT_LT(rank1_blocked, 5s);
  EXPECT_GT(rank1_blocked, 50ms);
  EXPECT_EQ(run.errors[1].rfind("all_reduce 'dense_all_reduce' (group world, sequence 2) failed in its intra-device "
                                "part: ", 0),
            0u)
      << run.errors[1];
  EXPECT_NE(run.errors[1].find("rank 0 closed its connections after an error"), std::string::npos) << run.errors[1];
  EXPECT_EQ(after_close, "all_reduce 'after_close' (group world, sequence 2) not started: this rank closed its "
                         "connections after an earlier failure");
}

namespace {

// The row-split dists' collectives on n ranks, twice: a reduce-scatter with counts 1 + m % 2 for
// member m (element 0 of the blocks from members 0, 1, 2: 1e8, 1, -1e8, which only the group
// order from zero sums to 0 in fp32; from member j >= 3: 0.25 j; element i > 0 from member j:
// 100 j + 10 r + i), then an all-gather with counts m % 3 (member m's elements 10 m + k + 0.5).
// On buffers of the stand-in's device memory (reduce_scatter_device, all_gather_v_device) or
// host vectors (reduce_scatter_q fp32, all_gather_v).
void rs_ag_device_script(Collectives& c, int r, int n, bool device) {
  auto ops = detail::host_intra_device_ops();
  std::vector<int64_t> rs_counts, ag_counts;
  for (int m = 0; m < n; ++m) {
    rs_counts.push_back(1 + m % 2);
    ag_counts.push_back(m % 3);
  }
  auto first = [](int j) { return j == 0 ? 1e8f : j == 1 ? 1.0f : j == 2 ? -1e8f : 0.25f * static_cast<float>(j); };
  for (int round = 0; round < 2; ++round) {
    std::vector<float> send, ag_send, want_ag;
    for (int to = 0; to < n; ++to)
      for (int64_t i = 0; i < rs_counts[static_cast<size_t>(to)]; ++i)
        send.push_back(i == 0 ? first(r) : static_cast<float>(100 * r + 10 * to + i));
    for (int64_t k = 0; k < ag_counts[static_cast<size_t>(r)]; ++k) ag_send.push_back(static_cast<float>(10 * r + k) + 0.5f);
    for (int m = 0; m < n; ++m)
      for (int64_t k = 0; k < ag_counts[static_cast<size_t>(m)]; ++k) want_ag.push_back(static_cast<float>(10 * m + k) + 0.5f);
    std::vector<float> rs(static_cast<size_t>(rs_counts[static_cast<size_t>(r)]), -1.0f), ag(want_ag.size(), -1.0f);
    if (device) {
      auto put = [&](const std::vector<float>& v) {
        void* p = ops->comm_alloc(static_cast<int64_t>(v.size() * 4));
        ops->comm_to_device(p, v.data(), static_cast<int64_t>(v.size() * 4));
        return static_cast<float*>(p);
      };
      float *d_send = put(send), *d_rs = put(rs), *d_ag_send = put(ag_send), *d_ag = put(ag);
      c.reduce_scatter_device("output_dist/reduce_scatter", d_send, rs_counts, d_rs);
      c.all_gather_v_device("grad_dist/all_gather", d_ag_send, d_ag, ag_counts, sizeof(float));
      ops->comm_to_host(rs.data(), d_rs, static_cast<int64_t>(rs.size() * 4));
      ops->comm_to_host(ag.data(), d_ag, static_cast<int64_t>(ag.size() * 4));
      for (float* p : {d_send, d_rs, d_ag_send, d_ag}) ops->comm_free(p);
    } else {
      c.reduce_scatter_q("output_dist/reduce_scatter", send.data(), rs_counts, rs.data(), CommPrecision::fp32, nullptr);
      c.all_gather_v("grad_dist/all_gather", ag_send.data(), ag.data(), ag_counts, sizeof(float));
    }
    // by hand: element 0 is 0 + 0.25 (3 + ... + n - 1); element i: 100 n (n - 1) / 2 + n (10 r + i)
    float tail = 0.0f;
    for (int j = 3; j < n; ++j) tail += 0.25f * static_cast<float>(j);
    std::vector<float> want_rs{tail};
    for (int64_t i = 1; i < rs_counts[static_cast<size_t>(r)]; ++i)
      want_rs.push_back(static_cast<float>(100 * n * (n - 1) / 2 + n * (10 * r + i)));
    EXPECT_EQ(rs, want_rs) << "round " << round << " on rank " << r;
    EXPECT_EQ(ag, want_ag) << "round " << round << " on rank " << r;
  }
  EXPECT_EQ(c.counters().collectives, 6);  // two reduce-scatters with their split checks, two all-gathers
}

}  // namespace

// Collectives::reduce_scatter_device and all_gather_v_device through the hierarchical
// communicator (the parts' device variants, the leader's buffers, reordering and the sum in
// device memory): the hand-computed values - the reduce-scatter's sum in group order from zero,
// bit for bit - on every layout (contiguous, interleaved, uneven devices, the cross part on Gloo
// or on another transport), and the host variants' records and counters, which are the flat Gloo
// group's and the flat intra-device communicator's.
TEST(RwDeviceDist56HierComm, ReduceScatterAndAllGatherOnDeviceBuffersGiveTheHostVariantsValuesRecordsAndCounters) {
  const std::vector<std::vector<int>> layouts{{0, 0, 1, 1}, {0, 1, 0, 1}, {0, 0, 0, 1, 1}, {5, 5, 2}};
  for (const auto& layout : layouts) {
    SCOPED_TRACE(fmt::format("devices {}", fmt::join(layout, ",")));
    const int n = static_cast<int>(layout.size());
    auto script = [n](bool device) { return [n, device](Collectives& c, int r) { rs_ag_device_script(c, r, n, device); }; };
    const HierRun dev = run_hier(layout, HierKind::hier, 10s, script(true));
    const HierRun dev_local = run_hier(layout, HierKind::hier_local_cross, 10s, script(true));
    const HierRun host = run_hier(layout, HierKind::hier, 10s, script(false));
    const HierRun flat = run_hier(layout, HierKind::flat_gloo, 10s, script(false));
    const HierRun flat_local = run_hier(layout, HierKind::flat_local, 10s, script(true));
    for (const HierRun* run : {&dev, &dev_local, &host, &flat, &flat_local}) expect_no_errors(*run);
    for (int r = 0; r < n; ++r) {
      const auto& d = dev.records[static_cast<size_t>(r)];
      ASSERT_EQ(d.size(), 6u);
      for (const HierRun* other : {&dev_local, &host, &flat, &flat_local}) {
        const auto& h = other->records[static_cast<size_t>(r)];
        ASSERT_EQ(h.size(), d.size());
        for (size_t i = 0; i < d.size(); ++i) {
          SCOPED_TRACE(fmt::format("rank {} record {} ({} '{}')", r, i, h[i].op, h[i].name));
          EXPECT_EQ(d[i].op, h[i].op);
          EXPECT_EQ(d[i].name, h[i].name);
          EXPECT_EQ(d[i].group, "world");
          EXPECT_EQ(d[i].sequence, h[i].sequence);
          EXPECT_EQ(d[i].bytes_sent, h[i].bytes_sent);
          EXPECT_EQ(d[i].bytes_received, h[i].bytes_received);
          EXPECT_EQ(d[i].send_elements, h[i].send_elements);
          EXPECT_EQ(d[i].recv_elements, h[i].recv_elements);
        }
      }
      EXPECT_EQ(d[0].name, "output_dist/reduce_scatter/split_check");
      EXPECT_EQ(d[1].op, "reduce_scatter");
      EXPECT_EQ(d[2].op, "all_gather");
      EXPECT_EQ(d[5].sequence, 6u);
      // by hand: r sends its block (1 + m % 2 floats) to every other member m
      int64_t sent = 0;
      for (int m = 0; m < n; ++m)
        if (m != r) sent += (1 + m % 2) * 4;
      EXPECT_EQ(d[1].bytes_sent, sent);
    }
  }
}

// Without the rank's device the hierarchical communicator refuses the row-split dists' device
// buffers too, naming the collective and the group.
TEST(RwDeviceDist56HierComm, DeviceBuffersWithoutTheRanksDeviceAreRefused) {
  const HierShape shape = detail::hier_shape(std::vector<int>{0});
  HierComm c("world", {0}, 0, shape, nullptr, nullptr, 1s);
  std::vector<int64_t> counts{0};
  try {
    c.reduce_scatter_device("output_dist/reduce_scatter", nullptr, counts, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const std::logic_error& e) {
    EXPECT_EQ(std::string(e.what()), "reduce_scatter 'output_dist/reduce_scatter' on device buffers: the hierarchical "
                                     "group world was made without the rank's device");
  }
  try {
    c.all_gather_v_device("grad_dist/all_gather", nullptr, nullptr, counts, 4);
    ADD_FAILURE() << "no error";
  } catch (const std::logic_error& e) {
    EXPECT_EQ(std::string(e.what()), "all_gather 'grad_dist/all_gather' on device buffers: the hierarchical group world "
                                     "was made without the rank's device");
  }
}
