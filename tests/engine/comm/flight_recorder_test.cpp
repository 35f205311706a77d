// The collective flight recorder (comm/flight_recorder.h): its ring, and what Gloo process
// groups record in it, down to a hang between two groups entered in opposite orders.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "embedscope/engine/comm/flight_recorder.h"
#include "embedscope/engine/comm/gloo_process_group.h"
#include "embedscope/sessions/analysis/flight_recorder.h"

using namespace embedscope::engine;
using embedscope::sessions::FlightRecord;
using namespace std::chrono_literals;

TEST(FlightRecorder, KeepsTheLastEntriesWithTheirStatesAndCountsWhatItDropped) {
  FlightRecorder fr(3, 3);
  const int members[] = {0, 3};
  std::vector<FlightRecorder::Id> ids;
  for (uint64_t s = 1; s <= 5; ++s) {
    fr.set_step(static_cast<int64_t>(s) - 2);
    ids.push_back(fr.scheduled("world", members, s, "all_reduce", "dense", "float32", 4 * static_cast<int64_t>(s),
                               4 * static_cast<int64_t>(s), 800));
  }
  EXPECT_EQ(ids, (std::vector<FlightRecorder::Id>{0, 1, 2, 3, 4}));
  fr.started(ids[3]);
  fr.completed(ids[3]);
  fr.started(ids[4]);
  fr.completed(ids[0]);  // left the ring: nothing happens
  EXPECT_EQ(fr.recorded(), 5);
  EXPECT_EQ(fr.dropped(), 2);
  const auto d = fr.dump(1, "SIGUSR1");
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].record_id, 2);
  EXPECT_EQ(d[0].state, "scheduled");
  EXPECT_EQ(d[0].time_started_ns, -1);
  EXPECT_EQ(d[1].state, "completed");
  EXPECT_GE(d[1].time_completed_ns, d[1].time_started_ns);
  EXPECT_GE(d[1].time_started_ns, d[1].time_created_ns);
  EXPECT_EQ(d[2].state, "started");
  EXPECT_EQ(d[2].time_completed_ns, -1);
  for (const auto& e : d) {
    EXPECT_EQ(e.rank, 3);
    EXPECT_EQ(e.dump, 1);
    EXPECT_EQ(e.reason, "SIGUSR1");
    EXPECT_EQ(e.ring_dropped, 2);
    EXPECT_EQ(e.members, "0,3");
    EXPECT_EQ(e.input_elements, 4 * static_cast<int64_t>(e.sequence));
    EXPECT_EQ(e.step, static_cast<int64_t>(e.sequence) - 2);
  }
  FlightRecorder off(0, 0);
  EXPECT_EQ(off.scheduled("world", members, 1, "all_reduce", "x", "float32", 1, 1, 1), -1);
  EXPECT_TRUE(off.dump(0, "x").empty());
}

TEST(FlightRecorder, AGlooGroupRecordsEachCollectiveWithItsSplitCheckSizesAndState) {
  auto rv = Rendezvous::in_process();
  FlightRecorder fr0(0, 16), fr1(1, 16);
  FlightRecorder* fr[] = {&fr0, &fr1};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      ProcessGroup pg(rv, "world", {0, 1}, r, 10s);
      pg.set_flight_recorder(fr[r]);
      std::vector<float> x(6, 1.0f), y(6);
      pg.all_reduce_sum("dense", x.data(), 6);
      // rank r sends 1 + r floats to each rank, receives 1 + j from rank j
      std::vector<int64_t> send{1 + r, 1 + r}, recv{1, 2};
      pg.all_to_all_v("fwd", x.data(), send, y.data(), recv, sizeof(float));
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    const auto d = fr[r]->dump(0, "test");
    ASSERT_EQ(d.size(), 3u);
    EXPECT_EQ(d[0].op, "all_reduce");
    EXPECT_EQ(d[0].sequence, 1u);
    EXPECT_EQ(d[0].input_elements, 6);
    EXPECT_EQ(d[0].output_elements, 6);
    EXPECT_EQ(d[1].name, "fwd/split_check");  // a collective of its own, as in the collectives table
    EXPECT_EQ(d[1].sequence, 2u);
    EXPECT_EQ(d[1].dtype, "int64");
    EXPECT_EQ(d[2].op, "all_to_all");
    EXPECT_EQ(d[2].sequence, 3u);
    EXPECT_EQ(d[2].input_elements, 2 * (1 + r));
    EXPECT_EQ(d[2].output_elements, 3);
    for (const auto& e : d) {
      EXPECT_EQ(e.state, "completed");
      EXPECT_EQ(e.group, "world");
      EXPECT_EQ(e.members, "0,1");
      EXPECT_EQ(e.timeout_ms, 10000);
    }
  }
}

// Two threads, two groups over both: rank 0 all-reduces on a then b, rank 1 on b then a. Each
// times out (never a hang), and the analysis of their dumps names both ranks, groups and
// sequence numbers.
TEST(FlightRecorder, GroupsEnteredInOppositeOrdersTimeOutAndTheAnalysisNamesBoth) {
  auto rv = Rendezvous::in_process();
  FlightRecorder fr0(0, 16), fr1(1, 16);
  FlightRecorder* fr[] = {&fr0, &fr1};
  std::vector<std::string> errors(2);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      ProcessGroup a(rv, "a", {0, 1}, r, 600ms), b(rv, "b", {0, 1}, r, 600ms);
      a.set_flight_recorder(fr[r]);
      b.set_flight_recorder(fr[r]);
      float x[4] = {1, 2, 3, 4};
      a.all_reduce_sum("warm_a", x, 4);
      a.all_reduce_sum("more_a", x, 4);
      b.all_reduce_sum("warm_b", x, 4);
      try {
        if (r == 0) {
          a.all_reduce_sum("grad_a", x, 4);  // a#3
          b.all_reduce_sum("grad_b", x, 4);
        } else {
          b.all_reduce_sum("grad_b", x, 4);  // b#2
          a.all_reduce_sum("grad_a", x, 4);
        }
      } catch (const CollectiveError& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  EXPECT_NE(errors[0].find("group a, sequence 3"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("group b, sequence 2"), std::string::npos) << errors[1];
  std::vector<FlightRecord> all;
  for (int r = 0; r < 2; ++r)
    for (auto& e : fr[r]->dump(0, "collective timeout")) all.push_back(std::move(e));
  const auto a = embedscope::sessions::analyze_flight_records(all, 2);
  ASSERT_FALSE(a.findings.empty());
  const auto& f = a.findings.front();
  EXPECT_EQ(f.kind, embedscope::sessions::FlightFinding::Kind::opposite_order) << f.text;
  EXPECT_EQ(f.ranks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(f.groups, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(f.sequences, (std::vector<uint64_t>{3, 2}));
  EXPECT_EQ(f.text, "ranks 0 and 1 entered process groups a and b in opposite orders: rank 0 waits in all_reduce "
                    "'grad_a' (group a, sequence 3) and has not reached group b's sequence 2; rank 1 waits in all_reduce "
                    "'grad_b' (group b, sequence 2) and has not reached group a's sequence 3");
}
