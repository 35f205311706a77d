// tester49 F-D (fixa49): plan_search's refusal names the candidate nearest to fitting and how far
// it is ("the nearest candidate (X, N over ...)"). Since fixd48 a candidate can miss in two ways:
// a rank's bytes exceed the device, or its bytes fit but the replay of its allocator at the
// capacity runs out (RankStats::reserved_bytes). candidate_overflow (planner/candidate_overflow.h)
// ranks every candidate by one measure - what it needs beyond the memory there is - and the
// words say which measure each figure is (before: "N over on its fullest rank" for both, and for
// a reserve that bound on another rank than the fullest).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/workload/spec.h"
#include "planner/candidate_overflow.h"

namespace {
namespace fixa49_pd = embedscope::engine::planner_detail;
using embedscope::engine::AllocatorKind;
using embedscope::engine::NodeExcess;
using embedscope::engine::PlanStats;

constexpr int64_t kFixa49MiB = int64_t{1} << 20;
constexpr int64_t kFixa49Device = 40 * kFixa49MiB;  // devices.memory_bytes
constexpr int64_t kFixa49Host = int64_t{64} << 30;  // devices.host_memory_bytes (the default)

// a candidate's statistics: per rank {hbm_bytes, reserved_bytes, ddr_bytes}
PlanStats fixa49_stats(std::initializer_list<std::array<int64_t, 3>> ranks) {
  PlanStats st;
  int r = 0;
  for (const auto& [hbm, reserved, ddr] : ranks) {
    st.ranks.emplace_back();
    st.ranks.back().rank = r++;
    st.ranks.back().hbm_bytes = hbm;
    st.ranks.back().reserved_bytes = reserved;
    st.ranks.back().ddr_bytes = ddr;
  }
  return st;
}

fixa49_pd::CandidateOverflow fixa49_over(const PlanStats& st, NodeExcess node = {}) {
  return fixa49_pd::candidate_overflow(st, kFixa49Device, kFixa49Host, node, AllocatorKind::caching);
}
}  // namespace

TEST(Fixa49Overflow, OneMiBOverInBytesIsNearerThanFiveMiBOverInTheAllocatorsReserve) {
  // A: rank 1 holds 41 MiB (1 MiB over in bytes; its reserve is not replayed: reserved_bytes 0)
  const auto a = fixa49_over(fixa49_stats({{30 * kFixa49MiB, 0, 0}, {41 * kFixa49MiB, 0, 0}}));
  // B: both ranks hold 39 MiB, which fit, but rank 0's allocator reserves 45 MiB (5 MiB over)
  const auto b = fixa49_over(fixa49_stats({{39 * kFixa49MiB, 45 * kFixa49MiB, 0}, {39 * kFixa49MiB, 0, 0}}));
  EXPECT_EQ(a.over, 1 * kFixa49MiB);
  EXPECT_EQ(a.measure, "bytes");
  EXPECT_EQ(a.rank, 1);
  EXPECT_EQ(a.fullest, 41 * kFixa49MiB);
  EXPECT_EQ(a.text, "1.0 MiB over in bytes on its fullest rank (rank 1)");
  EXPECT_EQ(b.over, 5 * kFixa49MiB);
  EXPECT_EQ(b.measure, "allocator reserve");
  EXPECT_EQ(b.rank, 0);
  EXPECT_EQ(b.fullest, 39 * kFixa49MiB);
  EXPECT_EQ(b.text, "5.0 MiB over in the caching allocator's reserve on rank 0 (its bytes fit: 39.0 MiB of 40.0 MiB)");
  EXPECT_LT(a.over, b.over);  // the search keeps the smaller: A
  // and the other way round: 3 MiB over in reserve is nearer than 4 MiB over in bytes
  const auto c = fixa49_over(fixa49_stats({{38 * kFixa49MiB, 43 * kFixa49MiB, 0}}));
  const auto d = fixa49_over(fixa49_stats({{44 * kFixa49MiB, 0, 0}}));
  EXPECT_EQ(c.over, 3 * kFixa49MiB);
  EXPECT_EQ(d.over, 4 * kFixa49MiB);
  EXPECT_LT(c.over, d.over);
}

TEST(Fixa49Overflow, TheFigureNamesTheRankThatBindsNotTheFullest) {
  // rank 0 is the fullest, 1 MiB over in bytes; rank 1 holds 39 MiB, but its allocator reserves
  // 46 MiB: the candidate needs 6 MiB more there, on rank 1, in reserve (before: "6.0 MiB over on
  // its fullest rank", rank 0's 1 MiB)
  const auto o = fixa49_over(fixa49_stats({{41 * kFixa49MiB, 0, 0}, {39 * kFixa49MiB, 46 * kFixa49MiB, 0}}));
  EXPECT_EQ(o.over, 6 * kFixa49MiB);
  EXPECT_EQ(o.measure, "allocator reserve");
  EXPECT_EQ(o.rank, 1);
  EXPECT_EQ(o.fullest, 41 * kFixa49MiB);
  EXPECT_EQ(o.text, "6.0 MiB over in the caching allocator's reserve on rank 1 (its bytes fit: 39.0 MiB of 40.0 MiB)");
  // a rank over in bytes that is not the fullest cannot bind (the fullest is over by more)
  const auto f = fixa49_over(fixa49_stats({{42 * kFixa49MiB, 0, 0}, {41 * kFixa49MiB, 0, 0}}));
  EXPECT_EQ(f.text, "2.0 MiB over in bytes on its fullest rank (rank 0)");
}

TEST(Fixa49Overflow, ANodeAndTheHostPartSayTheirMeasures) {
  // a node's ranks 3 MiB over the host's memory together beat a rank 1 MiB over in bytes
  const auto n = fixa49_over(fixa49_stats({{41 * kFixa49MiB, 0, 0}, {30 * kFixa49MiB, 0, 0}}),
                             NodeExcess{3 * kFixa49MiB, "on node 0 (ranks 0-1 need 73.0 MiB together > 70.0 MiB, the host's memory)"});
  EXPECT_EQ(n.over, 3 * kFixa49MiB);
  EXPECT_EQ(n.measure, "node bytes");
  EXPECT_EQ(n.rank, -1);
  EXPECT_EQ(n.text, "3.0 MiB over in bytes on node 0 (ranks 0-1 need 73.0 MiB together > 70.0 MiB, the host's memory)");
  // rank 1's host bytes 2 MiB over devices.host_memory_bytes are added to rank 0's 1 MiB in bytes
  const auto h = fixa49_over(fixa49_stats({{41 * kFixa49MiB, 0, 0}, {30 * kFixa49MiB, 0, kFixa49Host + 2 * kFixa49MiB}}));
  EXPECT_EQ(h.device, 1 * kFixa49MiB);
  EXPECT_EQ(h.host, 2 * kFixa49MiB);
  EXPECT_EQ(h.over, 3 * kFixa49MiB);
  EXPECT_EQ(h.text, "3.0 MiB over: 1.0 MiB in bytes on its fullest rank (rank 0), plus 2.0 MiB of host bytes over "
                    "devices.host_memory_bytes on rank 1");
  // the host part alone
  const auto ho = fixa49_over(fixa49_stats({{30 * kFixa49MiB, 0, kFixa49Host + 512}}));
  EXPECT_EQ(ho.over, 512);
  EXPECT_EQ(ho.measure, "");
  EXPECT_EQ(ho.text, "512 B over: 512 B of host bytes over devices.host_memory_bytes on rank 0");
}

// End to end, tester48's fit2.json (fixd48_allocator_fit_test): 4 tables of 200,000 x 32, t0 and
// t1 fp16, on 2 cpu ranks of 40 MiB, caching allocator. The greedy candidate puts one fp32 and one
// fp16 table on each rank: 25,600,000 + 12,800,000 B = 36.6 MiB of weights, which fit, but each
// table is over 10 MiB and gets its own segment rounded up to 2 MiB: 26 MiB + 14 MiB, and the
// small pool 2 MiB, 42 MiB reserved: 2 MiB over in the allocator's reserve. The row_wise and
// column_wise candidates split every table (6.4 MB fp16 pieces share a 20 MiB segment, 12.8 MB
// fp32 pieces take 14 MiB each: 20 + 14 + 14 + 2 = 50 MiB, 10 MiB over), data_parallel is over in
// bytes by far: greedy is the nearest, and the message says its figure is the allocator's reserve.
TEST(Fixa49Overflow, Fit2sNearestCandidateIsTwoMiBOverInTheCachingAllocatorsReserve) {
  nlohmann::json j = {{"name", "fit2"}, {"batch_size", 32}, {"steps", 3}, {"seed", 2},
                      {"devices", {{"count", 2}, {"backend", "cpu"}, {"memory_bytes", 40 * kFixa49MiB}}},
                      {"optimizer", {{"type", "sgd"}, {"learning_rate", 0.05}}}};
  for (int t = 0; t < 4; ++t) {
    nlohmann::json tj = {{"name", "t" + std::to_string(t)}, {"num_embeddings", 200000}, {"embedding_dim", 32},
                         {"feature_names", {"f" + std::to_string(t)}}};
    if (t < 2) tj["data_type"] = "fp16";
    j["tables"].push_back(tj);
  }
  const auto spec = embedscope::engine::parse_workload(j, "fit2");
  try {
    (void)embedscope::engine::plan_search(spec, embedscope::engine::planning_profile(spec));
    ADD_FAILURE() << "fit2 fitted";
  } catch (const embedscope::engine::NoPlanFits& e) {
    EXPECT_EQ(e.proposer, "greedy") << e.what();
    EXPECT_EQ(e.overflow_bytes, 2 * kFixa49MiB) << e.what();
    EXPECT_EQ(e.overflow_measure, "allocator reserve") << e.what();
    EXPECT_TRUE(std::string(e.what()).starts_with(
        "/devices/memory_bytes: no plan fits the devices; the nearest candidate (greedy, 2.0 MiB over in the caching "
        "allocator's reserve on rank 0 (its bytes fit: 36.7 MiB of 40.0 MiB)): "))
        << e.what();
  }
}
