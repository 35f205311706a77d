// The intra-device communicator (comm/local/local_comm.h) on the host stand-in
// (host_intra_device_ops): hand-computed values, the same sequence numbers, byte counters and
// collective records as the Gloo ProcessGroup for the same collectives, the split cross-check
// error, a timeout naming the rank that did not arrive, flight recorder entries and closing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "comm/local/local_comm.h"
#include "embedscope/engine/comm/gloo_process_group.h"

using namespace embedscope::engine;
using namespace std::chrono_literals;
using detail::Collectives;
using detail::GlooCollectives;
using detail::LocalComm;
using detail::LocalGroup;

namespace {

struct LocalRun {
  std::vector<std::string> errors;
  std::vector<std::vector<embedscope::sessions::CollectiveRecord>> records;  // per rank, in order
};

// Runs fn(comm) on `n` threads, one rank each, over a LocalGroup "world" (local = true) or a
// Gloo ProcessGroup "world"; records every collective record; each rank's exception text.
LocalRun run_group(int n, std::chrono::milliseconds timeout, bool local,
                   const std::function<void(Collectives&, int rank)>& fn, FlightRecorder* flight0 = nullptr,
                   const detail::IntraDeviceOps* device = nullptr) {
  auto own_ops = detail::host_intra_device_ops();
  const detail::IntraDeviceOps* ops = device ? device : own_ops.get();
  std::vector<int> members(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) members[static_cast<size_t>(i)] = i;
  auto group = std::make_shared<LocalGroup>("world", members, timeout);
  auto rv = Rendezvous::in_process();
  LocalRun out;
  out.errors.assign(static_cast<size_t>(n), "");
  out.records.resize(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      std::unique_ptr<Collectives> c;
      if (local)
        c = std::make_unique<LocalComm>(group, r, *ops);
      else
        c = std::make_unique<GlooCollectives>(std::make_unique<ProcessGroup>(rv, "world", members, r, timeout));
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

// The collectives of ProcessGroup.CollectivesGiveHandComputedValues (comm_test.cpp), through
// the Collectives interface, checked against the same hand-computed values.
void three_rank_script(Collectives& c, int r) {
  std::vector<int64_t> send, sc(3), rc(3, r + 1);
  for (int j = 0; j < 3; ++j) {
    sc[static_cast<size_t>(j)] = j + 1;
    for (int k = 0; k <= j; ++k) send.push_back(10 * r + j);
  }
  std::vector<int64_t> recv(static_cast<size_t>(3 * (r + 1)));
  c.all_to_all_v("a2a", send.data(), sc, recv.data(), rc, sizeof(int64_t));
  for (int s = 0; s < 3; ++s)
    for (int k = 0; k <= r; ++k) EXPECT_EQ(recv[static_cast<size_t>(s * (r + 1) + k)], 10 * s + r);
  std::vector<float> rs_send;
  for (int j = 0; j < 3; ++j) rs_send.insert(rs_send.end(), {static_cast<float>(r + j), 100.0f});
  std::vector<int64_t> counts(3, 2);
  float out[2];
  c.reduce_scatter_q("rs", rs_send.data(), counts, out, CommPrecision::fp32, nullptr);
  EXPECT_FLOAT_EQ(out[0], static_cast<float>(0 + 1 + 2 + 3 * r));
  EXPECT_FLOAT_EQ(out[1], 300.0f);
  std::vector<float> mine(static_cast<size_t>(r + 1), static_cast<float>(r)), all(6);
  std::vector<int64_t> ag{1, 2, 3};
  c.all_gather_v("ag", mine.data(), all.data(), ag, sizeof(float));
  EXPECT_EQ(all, (std::vector<float>{0, 1, 1, 2, 2, 2}));
  std::vector<float> v{static_cast<float>(r), 1.0f};
  c.all_reduce_sum("ar", v.data(), 2);
  EXPECT_EQ(v, (std::vector<float>{3.0f, 3.0f}));
  // qcomms bf16: 1 + 2^-9 rounds to 1 (8 bits of mantissa), as on Gloo
  std::vector<float> q_send(3, 1.0f + 1.0f / 512), q_recv(3);
  std::vector<int64_t> ones(3, 1);
  c.all_to_all_q("q", q_send.data(), ones, q_recv.data(), ones, CommPrecision::bf16, nullptr);
  EXPECT_EQ(q_recv, (std::vector<float>{1.0f, 1.0f, 1.0f}));
  // a2a, the reduce-scatter and the bf16 a2a each add a split check: 2 + 2 + 1 + 1 + 2
  EXPECT_EQ(c.counters().collectives, 8);
  EXPECT_EQ(c.next_sequence(), 9u);
}

// Host memory standing in for a device (host_intra_device_ops) that counts the staging copies
// and the orderings after the compute stream (all threads).
class CountingOps final : public detail::IntraDeviceOps {
 public:
  void* comm_alloc(int64_t bytes) const override { return in_->comm_alloc(bytes); }
  void comm_free(void* p) const noexcept override { in_->comm_free(p); }
  void comm_to_device(void* dst, const void* src, int64_t bytes) const override {
    ++to_device;
    in_->comm_to_device(dst, src, bytes);
  }
  void comm_to_host(void* dst, const void* src, int64_t bytes) const override {
    ++to_host;
    in_->comm_to_host(dst, src, bytes);
  }
  void comm_copy(void* dst, const void* src, int64_t bytes) const override {
    ++copies;
    in_->comm_copy(dst, src, bytes);
  }
  void comm_add(float* dst, const float* src, int64_t n) const override { in_->comm_add(dst, src, n); }
  void comm_sync() const override {}
  void comm_wait_compute() const override { ++wait_compute; }
  void comm_zero(void* dst, int64_t bytes) const override {
    ++zeros;
    in_->comm_zero(dst, bytes);
  }
  mutable std::atomic<int> to_device{0}, to_host{0}, copies{0}, wait_compute{0}, zeros{0};

 private:
  std::unique_ptr<detail::IntraDeviceOps> in_ = detail::host_intra_device_ops();
};

// The all-to-all of three_rank_script (rank r sends j + 1 int64 of value 10 r + j to rank j),
// then one in which rank 1 sends nothing (every count to and from it 0; its send buffer empty),
// on host buffers or on "device" buffers of `ops` (all_to_all_v_device), checked by hand.
void a2a_script(Collectives& c, int r, const detail::IntraDeviceOps* device) {
  std::vector<int64_t> send, sc(3), rc(3, r + 1);
  for (int j = 0; j < 3; ++j) {
    sc[static_cast<size_t>(j)] = j + 1;
    for (int k = 0; k <= j; ++k) send.push_back(10 * r + j);
  }
  std::vector<int64_t> recv(static_cast<size_t>(3 * (r + 1)), -1);
  // rank 1 out of the second all-to-all: the others exchange 2 elements each, 100 r + j
  std::vector<int64_t> sc2(3, r == 1 ? 0 : 2), rc2(3, r == 1 ? 0 : 2), send2, recv2(r == 1 ? 0 : 4, -1);
  sc2[1] = rc2[1] = 0;
  if (r != 1)
    for (int j : {0, 2}) send2.insert(send2.end(), 2, 100 * r + j);
  if (device) {  // the same bytes in the device's memory, the results read back from there
    auto put = [&](const std::vector<int64_t>& v) {
      void* p = device->comm_alloc(static_cast<int64_t>(v.size() * 8));
      if (!v.empty()) device->comm_to_device(p, v.data(), static_cast<int64_t>(v.size() * 8));
      return static_cast<int64_t*>(p);
    };
    int64_t *d_send = put(send), *d_recv = put(recv), *d_send2 = put(send2), *d_recv2 = put(recv2);
    c.all_to_all_v_device("a2a", d_send, sc, d_recv, rc, sizeof(int64_t));
    c.all_to_all_v_device("a2a_without_1", d_send2, sc2, d_recv2, rc2, sizeof(int64_t));
    device->comm_to_host(recv.data(), d_recv, static_cast<int64_t>(recv.size() * 8));
    if (!recv2.empty()) device->comm_to_host(recv2.data(), d_recv2, static_cast<int64_t>(recv2.size() * 8));
    for (int64_t* p : {d_send, d_recv, d_send2, d_recv2}) device->comm_free(p);
  } else {
    c.all_to_all_v("a2a", send.data(), sc, recv.data(), rc, sizeof(int64_t));
    c.all_to_all_v("a2a_without_1", send2.data(), sc2, recv2.data(), rc2, sizeof(int64_t));
  }
  for (int s = 0; s < 3; ++s)
    for (int k = 0; k <= r; ++k) EXPECT_EQ(recv[static_cast<size_t>(s * (r + 1) + k)], 10 * s + r) << "rank " << r;
  if (r != 1) {
    EXPECT_EQ(recv2, (std::vector<int64_t>{r, r, 200 + r, 200 + r})) << "rank " << r;
  }
  EXPECT_EQ(c.counters().collectives, 4);  // two split checks
  EXPECT_EQ(c.next_sequence(), 5u);
}

}  // namespace

// Collectives::all_to_all_v_device on the intra-device communicator: the hand-computed values,
// the records (op, name, group, sequence, dtype, bytes, peers, per-peer elements) and byte
// counters of the host variant and of Gloo, and no staging: each member publishes its send buffer
// itself (after ordering its comm stream after the compute stream) and copies its blocks straight
// into its receive buffer. Per rank and all-to-all the host variant stages twice (the split check's
// counts and the send buffer: 2 copies in, 2 out); the device variant only the split check's
// counts (1 in, 1 out) - the test's own uploads and read-backs (4 in, 1 or 2 out) aside.
TEST(LocalComm, DeviceBuffersGiveTheHostVariantsValuesRecordsAndCountersWithoutStaging) {
  CountingOps host_ops, dev_ops, gloo_ops;
  const LocalRun host = run_group(3, 10s, true, [](Collectives& c, int r) { a2a_script(c, r, nullptr); }, nullptr, &host_ops);
  const LocalRun dev = run_group(3, 10s, true, [&](Collectives& c, int r) { a2a_script(c, r, &dev_ops); }, nullptr, &dev_ops);
  const LocalRun gloo = run_group(3, 10s, false, [&](Collectives& c, int r) { a2a_script(c, r, &gloo_ops); });
  for (const LocalRun* run : {&host, &dev, &gloo})
    for (const auto& e : run->errors) EXPECT_EQ(e, "");
  for (int r = 0; r < 3; ++r) {
    const auto& d = dev.records[static_cast<size_t>(r)];
    ASSERT_EQ(d.size(), 4u);
    for (const LocalRun* other : {&host, &gloo}) {
      const auto& h = other->records[static_cast<size_t>(r)];
      ASSERT_EQ(h.size(), d.size());
      for (size_t i = 0; i < d.size(); ++i) {
        SCOPED_TRACE(fmt::format("rank {} record {} ({} '{}')", r, i, h[i].op, h[i].name));
        EXPECT_EQ(d[i].op, h[i].op);
        EXPECT_EQ(d[i].name, h[i].name);
        EXPECT_EQ(d[i].group, h[i].group);
        EXPECT_EQ(d[i].sequence, h[i].sequence);
        EXPECT_EQ(d[i].dtype, h[i].dtype);
        EXPECT_EQ(d[i].bytes_sent, h[i].bytes_sent);
        EXPECT_EQ(d[i].bytes_received, h[i].bytes_received);
        EXPECT_EQ(d[i].peers, h[i].peers);
        EXPECT_EQ(d[i].send_elements, h[i].send_elements);
        EXPECT_EQ(d[i].recv_elements, h[i].recv_elements);
      }
    }
    EXPECT_EQ(d[1].name, "a2a");
    EXPECT_EQ(d[3].name, "a2a_without_1");
  }
  // by hand: rank 0 sends 2 + 3 int64 to the others (40 B) and receives 1 from each (16 B);
  // in the second, 2 to rank 2 (16 B) and 2 from it
  EXPECT_EQ(dev.records[0][1].bytes_sent, 40);
  EXPECT_EQ(dev.records[0][1].bytes_received, 16);
  EXPECT_EQ(dev.records[0][3].bytes_sent, 16);
  EXPECT_EQ(dev.records[1][3].bytes_sent, 0);
  EXPECT_EQ(dev.records[0][3].recv_elements, (std::vector<int64_t>{2, 0, 2}));
  // staging: host 2 all-to-alls x 3 ranks x (split check + send buffer) in, and the same out, but
  // rank 1's empty second send buffer and receive buffer (nothing staged, nothing read back)
  EXPECT_EQ(host_ops.to_device.load(), 3 * 2 * 2 - 1);
  EXPECT_EQ(host_ops.to_host.load(), 3 * 2 * 2 - 1);
  EXPECT_EQ(host_ops.wait_compute.load(), 0);
  // device: the split checks' counts only (6 in, 6 out), plus the test's own uploads (4 buffers
  // a rank, rank 1's second pair empty: 10) and read-backs (2 a rank, rank 1's second empty: 5)
  EXPECT_EQ(dev_ops.to_device.load(), 6 + 10);
  EXPECT_EQ(dev_ops.to_host.load(), 6 + 5);
  EXPECT_EQ(dev_ops.wait_compute.load(), 3 * 2);  // once per member and all-to-all
  // the blocks: 3 per rank in the first, 2 per rank (not rank 1) in the second, plus the split
  // checks' 3 blocks per rank and check, on both variants
  EXPECT_EQ(dev_ops.copies.load(), 3 * 3 + 2 * 2 + 3 * 3 * 2);
  EXPECT_EQ(host_ops.copies.load(), dev_ops.copies.load());
}

TEST(LocalComm, CollectivesGiveHandComputedValues) {
  const LocalRun run = run_group(3, 10s, true, three_rank_script);
  for (const auto& e : run.errors) EXPECT_EQ(e, "");
}

// Same collectives on Gloo and on the intra-device communicator: the same records (op, name,
// group, sequence, dtype, bytes, peers, per-peer elements) on every rank, in the same order.
TEST(LocalComm, RecordsAndCountersAreTheGlooProcessGroups) {
  const LocalRun local = run_group(3, 10s, true, three_rank_script);
  const LocalRun gloo = run_group(3, 10s, false, three_rank_script);
  for (int r = 0; r < 3; ++r) {
    const auto& a = local.records[static_cast<size_t>(r)];
    const auto& b = gloo.records[static_cast<size_t>(r)];
    ASSERT_EQ(a.size(), 8u);
    ASSERT_EQ(a.size(), b.size());
    int64_t sent = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      SCOPED_TRACE(fmt::format("rank {} record {} ({} '{}')", r, i, b[i].op, b[i].name));
      EXPECT_EQ(a[i].rank, r);
      EXPECT_EQ(a[i].op, b[i].op);
      EXPECT_EQ(a[i].name, b[i].name);
      EXPECT_EQ(a[i].group, "world");
      EXPECT_EQ(a[i].sequence, b[i].sequence);
      EXPECT_EQ(a[i].sequence, i + 1);
      EXPECT_EQ(a[i].dtype, b[i].dtype);
      EXPECT_EQ(a[i].bytes_sent, b[i].bytes_sent);
      EXPECT_EQ(a[i].bytes_received, b[i].bytes_received);
      EXPECT_EQ(a[i].peers, b[i].peers);
      EXPECT_EQ(a[i].send_elements, b[i].send_elements);
      EXPECT_EQ(a[i].recv_elements, b[i].recv_elements);
      sent += a[i].bytes_sent;
    }
    EXPECT_EQ(a[0].name, "a2a/split_check");
    EXPECT_EQ(a[1].op, "all_to_all");
    EXPECT_EQ(a[3].op, "reduce_scatter");
    EXPECT_EQ(a[6].name, "q/split_check");
    EXPECT_EQ(a[7].dtype, "bfloat16");
    // rank 0 sends (2 + 3) int64 to the others = 40 bytes and receives 1 from each of them = 16
    if (r == 0) {
      EXPECT_EQ(a[1].bytes_sent, 40);
      EXPECT_EQ(a[1].bytes_received, 16);
    }
    EXPECT_GT(sent, 0);
  }
}

TEST(LocalComm, SplitMismatchNamesThePairOnEveryRank) {
  const LocalRun run = run_group(3, 10s, true, [](Collectives& c, int r) {
    std::vector<int64_t> sc(3, 1), rc(3, 1);
    if (r == 0) sc[1] = 2;  // rank 0 sends 2 to rank 1, which expects 1
    std::vector<int64_t> send(4), recv(3);
    c.all_to_all_v("output_dist", send.data(), sc, recv.data(), rc, sizeof(int64_t));
  });
  for (const auto& e : run.errors)
    EXPECT_EQ(e, "all_to_all 'output_dist' (group world, sequence 2): split sizes disagree: rank 0 sends 2 elements "
                 "to rank 1, which expects 1");
  // the check itself completed (a record), the all-to-all did not start
  for (const auto& recs : run.records) {
    ASSERT_EQ(recs.size(), 1u);
    EXPECT_EQ(recs[0].name, "output_dist/split_check");
  }
}

TEST(LocalComm, TimeoutNamesOpSequenceAndMissingRankAndTheFlightRecorderKeepsIt) {
  std::promise<void> done;
  auto done_future = done.get_future().share();
  std::atomic<int> finished{0};
  FlightRecorder flight(0, 16);
  const auto t0 = std::chrono::steady_clock::now();
  const LocalRun run = run_group(3, 300ms, true, [&](Collectives& c, int r) {
    float v = 1;
    c.all_reduce_sum("warm", &v, 1);  // sequence 1: everyone arrives
    EXPECT_EQ(v, 3.0f);
    if (r == 2) {  // never arrives at sequence 2
      if (++finished == 3) done.set_value();
      done_future.wait();
      return;
    }
    try {
      c.all_reduce_sum("dense_all_reduce", &v, 1);
    } catch (...) {
      if (++finished == 3) done.set_value();
      throw;
    }
  }, &flight);
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(elapsed, 300ms);
  EXPECT_LT(elapsed, 10s);
  for (int r : {0, 1})
    EXPECT_EQ(run.errors[static_cast<size_t>(r)],
              "all_reduce 'dense_all_reduce' (group world, sequence 2) did not finish within 300 ms: rank(s) 2 did not "
              "arrive");
  EXPECT_EQ(run.errors[2], "");
  const auto rows = flight.dump(0, "test");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].state, "completed");
  EXPECT_EQ(rows[1].state, "started");  // arrived, never completed
  EXPECT_EQ(rows[1].sequence, 2u);
  EXPECT_EQ(rows[1].name, "dense_all_reduce");
}

TEST(LocalComm, ClosingConnectionsFailsAWaitingPeerAtOnce) {
  std::promise<void> done;
  auto done_future = done.get_future().share();
  std::atomic<bool> rank1_waiting{false};
  std::chrono::steady_clock::duration rank1_blocked{};
  std::string after_close;
  const LocalRun run = run_group(2, 20000ms, true, [&](Collectives& c, int r) {
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
  EXPECT_EQ(run.errors[1], "all_reduce 'dense_all_reduce' (group world, sequence 2) failed: rank 0 closed its connections "
                           "after an error");
  EXPECT_EQ(after_close, "all_reduce 'after_close' (group world, sequence 2) not started: this rank closed its "
                         "connections after an earlier failure");
}

namespace {

// The row-split dists' collectives on three ranks: a reduce-scatter with uneven counts {2, 3, 1}
// (element 0 of every block: 1e8, 1, -1e8 from ranks 0, 1, 2, which only the member order from
// zero sums to 0 - ((0 + 1e8) + 1) - 1e8 - in fp32; element i > 0: 100 j + 10 r + i from rank j,
// summed 300 + 30 r + 3 i), then an all-gather with counts {1, 0, 2} (rank r's elements 10 r + k
// + 0.5). On "device" buffers of `device` (reduce_scatter_device, all_gather_v_device) or on
// host vectors (reduce_scatter_q fp32, all_gather_v).
void rs_ag_script(Collectives& c, int r, const detail::IntraDeviceOps* device) {
  const std::vector<int64_t> rs_counts{2, 3, 1}, ag_counts{1, 0, 2};
  std::vector<float> send;
  for (int to = 0; to < 3; ++to)
    for (int64_t i = 0; i < rs_counts[static_cast<size_t>(to)]; ++i)
      send.push_back(i == 0 ? std::vector<float>{1e8f, 1.0f, -1e8f}[static_cast<size_t>(r)]
                            : static_cast<float>(100 * r + 10 * to + i));
  std::vector<float> rs(static_cast<size_t>(rs_counts[static_cast<size_t>(r)]), -1.0f);
  std::vector<float> ag_send, ag(3, -1.0f);
  for (int64_t k = 0; k < ag_counts[static_cast<size_t>(r)]; ++k) ag_send.push_back(static_cast<float>(10 * r + k) + 0.5f);
  if (device) {
    auto put = [&](const std::vector<float>& v) {
      void* p = device->comm_alloc(static_cast<int64_t>(v.size() * 4));
      if (!v.empty()) device->comm_to_device(p, v.data(), static_cast<int64_t>(v.size() * 4));
      return static_cast<float*>(p);
    };
    float *d_send = put(send), *d_rs = static_cast<float*>(device->comm_alloc(static_cast<int64_t>(rs.size() * 4)));
    float *d_ag_send = put(ag_send), *d_ag = static_cast<float*>(device->comm_alloc(12));
    c.reduce_scatter_device("output_dist/reduce_scatter", d_send, rs_counts, d_rs);
    c.all_gather_v_device("grad_dist/all_gather", d_ag_send, d_ag, ag_counts, sizeof(float));
    device->comm_to_host(rs.data(), d_rs, static_cast<int64_t>(rs.size() * 4));
    device->comm_to_host(ag.data(), d_ag, 12);
    for (float* p : {d_send, d_rs, d_ag_send, d_ag}) device->comm_free(p);
  } else {
    c.reduce_scatter_q("output_dist/reduce_scatter", send.data(), rs_counts, rs.data(), CommPrecision::fp32, nullptr);
    c.all_gather_v("grad_dist/all_gather", ag_send.data(), ag.data(), ag_counts, sizeof(float));
  }
  std::vector<float> want_rs{0.0f};
  for (int64_t i = 1; i < rs_counts[static_cast<size_t>(r)]; ++i) want_rs.push_back(static_cast<float>(300 + 30 * r + 3 * i));
  EXPECT_EQ(rs, want_rs) << "rank " << r;
  EXPECT_EQ(ag, (std::vector<float>{0.5f, 20.5f, 21.5f})) << "rank " << r;
  EXPECT_EQ(c.counters().collectives, 3);  // the reduce-scatter's split check
  EXPECT_EQ(c.next_sequence(), 4u);
}

}  // namespace

// Collectives::reduce_scatter_device and all_gather_v_device on the intra-device communicator:
// the hand-computed values (the reduce-scatter's sum in member order from zero, bit for bit),
// the records and byte counters of the host variants and of Gloo, and no staging: the
// reduce-scatter zeroes the receive buffer on the device (comm_zero) and adds the peers' blocks
// into it, the all-gather copies the blocks straight into it. Per rank the host variants stage
// the split check's counts, the send buffer and the zeros in (3) and the counts and the sum out
// (2), then the all-gather's send buffer in (rank 1 sends nothing) and the result out; the device
// variants only the split check's counts (1 in, 1 out) - the test's own uploads aside.
TEST(RwDeviceDist56LocalComm, ReduceScatterAndAllGatherOnDeviceBuffersGiveTheHostVariantsValuesRecordsAndCounters) {
  CountingOps host_ops, dev_ops, gloo_ops;
  const LocalRun host = run_group(3, 10s, true, [](Collectives& c, int r) { rs_ag_script(c, r, nullptr); }, nullptr, &host_ops);
  const LocalRun dev = run_group(3, 10s, true, [&](Collectives& c, int r) { rs_ag_script(c, r, &dev_ops); }, nullptr, &dev_ops);
  const LocalRun gloo = run_group(3, 10s, false, [&](Collectives& c, int r) { rs_ag_script(c, r, &gloo_ops); });
  for (const LocalRun* run : {&host, &dev, &gloo})
    for (const auto& e : run->errors) EXPECT_EQ(e, "");
  for (int r = 0; r < 3; ++r) {
    const auto& d = dev.records[static_cast<size_t>(r)];
    ASSERT_EQ(d.size(), 3u);
    for (const LocalRun* other : {&host, &gloo}) {
      const auto& h = other->records[static_cast<size_t>(r)];
      ASSERT_EQ(h.size(), d.size());
      for (size_t i = 0; i < d.size(); ++i) {
        SCOPED_TRACE(fmt::format("rank {} record {} ({} '{}')", r, i, h[i].op, h[i].name));
        EXPECT_EQ(d[i].op, h[i].op);
        EXPECT_EQ(d[i].name, h[i].name);
        EXPECT_EQ(d[i].group, h[i].group);
        EXPECT_EQ(d[i].sequence, h[i].sequence);
        EXPECT_EQ(d[i].dtype, h[i].dtype);
        EXPECT_EQ(d[i].bytes_sent, h[i].bytes_sent);
        EXPECT_EQ(d[i].bytes_received, h[i].bytes_received);
        EXPECT_EQ(d[i].peers, h[i].peers);
        EXPECT_EQ(d[i].send_elements, h[i].send_elements);
        EXPECT_EQ(d[i].recv_elements, h[i].recv_elements);
      }
    }
    EXPECT_EQ(d[0].name, "output_dist/reduce_scatter/split_check");
    EXPECT_EQ(d[1].op, "reduce_scatter");
    EXPECT_EQ(d[2].op, "all_gather");
  }
  // by hand: rank 0 sends 3 + 1 floats to the others (16 B) and receives its 2 from each (16 B)
  EXPECT_EQ(dev.records[0][1].bytes_sent, 16);
  EXPECT_EQ(dev.records[0][1].bytes_received, 16);
  EXPECT_EQ(dev.records[1][1].bytes_received, 24);
  EXPECT_EQ(dev.records[0][2].recv_elements, (std::vector<int64_t>{1, 0, 2}));
  // staging, host variants: (3 in + 2 out) a rank for the reduce-scatter, the all-gather's send
  // buffer in on ranks 0 and 2 and its result out on every rank
  EXPECT_EQ(host_ops.to_device.load(), 3 * 3 + 2);
  EXPECT_EQ(host_ops.to_host.load(), 3 * 2 + 3);
  EXPECT_EQ(host_ops.zeros.load(), 0);
  EXPECT_EQ(host_ops.wait_compute.load(), 0);
  // device variants: the split checks' counts (3 in, 3 out), plus the test's own uploads (the
  // send buffers: 3 + 2) and read-backs (2 a rank)
  EXPECT_EQ(dev_ops.to_device.load(), 3 + 5);
  EXPECT_EQ(dev_ops.to_host.load(), 3 + 6);
  EXPECT_EQ(dev_ops.zeros.load(), 3);             // one receive buffer zeroed a rank
  EXPECT_EQ(dev_ops.wait_compute.load(), 3 * 2);  // once per member and collective
  // copies: the split check's 3 blocks a rank, the all-gather's 2 non-empty blocks a rank (and
  // the host variant's reduce-scatter none: it adds from the staged buffers too)
  EXPECT_EQ(dev_ops.copies.load(), 3 * 3 + 3 * 2);
  EXPECT_EQ(host_ops.copies.load(), dev_ops.copies.load());
}
