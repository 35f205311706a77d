// The StepProgram's ids of a row shard of a permuted Zipf table, and so the simulator's lookup
// times (share43, issue 15): a row range gets the mass its feature's seeded permutation puts in
// it (input/realized_share.h realized_id_share), the share the planner's lookups column and the
// memory replay already used, not the even rows / num_embeddings of shard_id_share. The
// expected numbers are computed here from the Zipf formula and the permutation, not read from
// realized_id_share.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/input/input.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"

using namespace embedscope::engine;

namespace {

// `ranks` ranks, batch `batch`; one table of `rows` x 8 fp32 serving one feature of Zipf(alpha 1)
// ids, permuted, one id a bag.
WorkloadSpec rsi_spec(int ranks, int64_t rows, int64_t batch) {
  WorkloadSpec s = load_preset("tiny");
  s.devices.count = ranks;
  s.batch_size = batch;
  s.tables.clear();
  s.features.clear();
  TableSpec t;
  t.name = "t0";
  t.num_embeddings = rows;
  t.embedding_dim = 8;
  t.feature_names = {"f0"};
  s.tables.push_back(t);
  FeatureSpec f;
  f.name = "f0";
  f.pooling_factor.mean = 1;
  f.pooling_factor.max = 1;
  f.ids.kind = IdDistributionKind::zipf;
  f.ids.alpha = 1.0;
  f.ids.permute = true;
  s.features.push_back(f);
  return s;
}

// Zipf(alpha 1) over n ranks: rank k carries (1 / (k + 1)) / H(n); by_row[perm(k)] of that.
std::vector<double> rsi_mass_by_row(const WorkloadSpec& s, int64_t n) {
  double H = 0;
  for (int64_t k = 1; k <= n; ++k) H += 1.0 / static_cast<double>(k);
  const RowPermutation perm = feature_row_permutation(s, 0, n);
  std::vector<double> by_row(static_cast<size_t>(n), -1);
  for (int64_t k = 0; k < n; ++k) by_row[static_cast<size_t>(perm(k))] = 1.0 / static_cast<double>(k + 1) / H;
  return by_row;
}

const ProgramOp& rsi_op(const StepProgram& p, const std::string& name) {
  const auto it = std::find_if(p.ops.begin(), p.ops.end(), [&](const ProgramOp& op) { return op.name == name; });
  if (it == p.ops.end()) throw std::runtime_error("no op " + name);
  return *it;
}

// 3 rows split 1/1/1 over 3 ranks, B = 110: Zipf ranks 0, 1, 2 carry 6/11, 3/11, 2/11 of the
// ids (H(3) = 11/6), on rows perm(0), perm(1), perm(2). A rank sends 110 x 6/11 = 60 ids to the
// rank holding perm(0), 30 and 20 to the others; that rank looks up 3 x 60 = 180 ids a step,
// the others 90 and 60 (the even share: 110 ids sent to each, 110 looked up on each).
const ShardingPlan kRsiRowWise3{3, 3, {{0, ShardingType::row_wise, -1, {{0, 0, 1, 0, 8}, {1, 1, 1, 0, 8}, {2, 2, 1, 0, 8}}}}};

}  // namespace

TEST(RealizedSlotIds, StepProgramLookupsAndIdSplitsByHand) {
  const WorkloadSpec spec = rsi_spec(3, 3, 110);
  const std::vector<double> by_row = rsi_mass_by_row(spec, 3);
  const RowPermutation perm = feature_row_permutation(spec, 0, 3);
  ASSERT_NE(perm(0), perm(1));  // three Zipf ranks on three rows (and so on three ranks)
  std::vector<int64_t> send(3);  // ids a rank sends to rank d (one row each): 110 x mass
  for (int d = 0; d < 3; ++d) send[static_cast<size_t>(d)] = std::llround(110.0 * by_row[static_cast<size_t>(d)]);
  EXPECT_EQ(send[static_cast<size_t>(perm(0))], 60);
  EXPECT_EQ(send[static_cast<size_t>(perm(1))], 30);
  EXPECT_EQ(send[static_cast<size_t>(perm(2))], 20);
  for (int r = 0; r < 3; ++r) {
    const StepProgram p = build_step_program(spec, kRsiRowWise3, r, 0);
    EXPECT_EQ(rsi_op(p, "lookup").rows, 3 * send[static_cast<size_t>(r)]) << "rank " << r;
    const ProgramOp& ids = rsi_op(p, "input_dist/ids");
    ASSERT_EQ(ids.collectives.size(), 2u);  // the split check's all-gather, then the ids
    EXPECT_EQ(ids.collectives[1].send_elements, send) << "rank " << r;
    EXPECT_EQ(ids.collectives[1].recv_elements, std::vector<int64_t>(3, send[static_cast<size_t>(r)])) << "rank " << r;
  }
}

// Hot-row replication of the hottest row (row perm(0)) on a 6-row table split 3/3 over 2 ranks,
// B = 2,940 (H(6) = 49/20, so each Zipf rank's mass 20 / (49 (k + 1)) times 2 x 2,940 = 5,880
// is a whole number: 2,400, 1,200, 800, 600, 480, 400). The hot row's ids stay on the rank of
// their bag: each rank looks up its own B x 20/49 = 1,200 hot ids, and a shard's other ids are
// its realized share less the hot row's mass: rank h (holding perm(0)) 5,880 x (S_h - 20/49),
// the other 5,880 x S_o. With the even share less the hot row, rank h would have got 5,880 x
// (1/2 - 20/49) = 540 whatever the permutation.
TEST(RealizedSlotIds, HotRowsSubtractTheirOwnRealizedShare) {
  WorkloadSpec spec = rsi_spec(2, 6, 2940);
  const RowPermutation perm = feature_row_permutation(spec, 0, 6);
  spec.sharding.per_table["t0"] = {ShardingType::row_wise, {}, -1, {perm(0)}};
  const std::vector<double> by_row = rsi_mass_by_row(spec, 6);
  const ShardingPlan rw{2, 2, {{0, ShardingType::row_wise, -1, {{0, 0, 3, 0, 8}, {1, 3, 3, 0, 8}}}}};
  const int h = perm(0) < 3 ? 0 : 1;
  for (int r = 0; r < 2; ++r) {
    double S = 0;  // the rank's realized share, by hand
    for (int64_t row = 3 * r; row < 3 * r + 3; ++row) S += by_row[static_cast<size_t>(row)];
    const double cold = 5880.0 * (S - (r == h ? 20.0 / 49 : 0.0));
    const StepProgram p = build_step_program(spec, rw, r, 0);
    EXPECT_EQ(rsi_op(p, "lookup").rows, std::llround(cold + 1200.0)) << "rank " << r;
    // a rank sends B x (S_d - hot) of its ids to rank d
    const ProgramOp& ids = rsi_op(p, "input_dist/ids");
    ASSERT_EQ(ids.collectives.size(), 2u);  // the split check's all-gather, then the ids
    for (int d = 0; d < 2; ++d) {
      double Sd = 0;
      for (int64_t row = 3 * d; row < 3 * d + 3; ++row) Sd += by_row[static_cast<size_t>(row)];
      EXPECT_EQ(ids.collectives[1].send_elements[static_cast<size_t>(d)],
                std::llround(2940.0 * (Sd - (d == h ? 20.0 / 49 : 0.0))))
          << "rank " << r << " to " << d;
    }
  }
}

// The simulator times those programs: on the round_numbers GPU (HBM 1e12 B/s at TBE forward
// efficiency 0.5, launch 1 us; nodes of 2) each rank's lookup lasts the cost model's time of its
// op, and the ranks order as their realized ids, the rank holding perm(0) the slowest. 4 rows
// split 1/1/1/1 over 4 ranks, B = 25,000: Zipf ranks 0..3 carry 12/25, 6/25, 4/25, 3/25 (H(4) =
// 25/12) of 100,000 ids a step: 48,000, 24,000, 16,000 and 12,000 ids, each 32 B of row + 8 B
// of id, and 100,000 bags of 8 x 4 B written (program_sink lookup_bytes): 5,120,000,
// 4,160,000, 3,840,000 and 3,680,000 B, over 0.5e12 B/s plus the launch: 11,240, 9,320, 8,680
// and 8,360 ns a step (the even share gave all four 25,000 ids, 4,200,000 B, 9,400 ns).
TEST(RealizedSlotIds, SimulatedLookupTimesFollowTheRealizedIds) {
  WorkloadSpec spec = rsi_spec(4, 4, 25000);
  spec.devices.backend = Backend::simulated;
  spec.devices.hardware = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";
  spec.steps = 2;
  spec.warmup_steps = 0;
  spec = with_resolved_backend(spec, "test");
  const HardwareProfile hw = load_hardware_profile(spec.devices.hardware);
  const RowPermutation perm = feature_row_permutation(spec, 0, 4);
  const ShardingPlan rw{4, 2, {{0, ShardingType::row_wise, -1, {{0, 0, 1, 0, 8}, {1, 1, 1, 0, 8}, {2, 2, 1, 0, 8}, {3, 3, 1, 0, 8}}}}};
  TrainerOptions o;
  o.keep_events = true;
  const RunResult run = run_training(spec, rw, o);
  ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
  std::vector<int64_t> lookup_ns(4, 0);
  for (const auto& e : run.events)
    if (std::string(e.name) == "lookup" && e.step >= 0) lookup_ns[static_cast<size_t>(e.rank)] += e.end_ns - e.start_ns;
  const int64_t want_ids[4] = {48000, 24000, 16000, 12000};
  const int64_t want_ns[4] = {11240, 9320, 8680, 8360};
  for (int k = 0; k < 4; ++k) {
    const int r = static_cast<int>(perm(k));
    const StepProgram p = build_step_program(spec, rw, r, 0);
    const ProgramOp& lookup = rsi_op(p, "lookup");
    EXPECT_EQ(lookup.rows, want_ids[k]) << "Zipf rank " << k << " on rank " << r;
    EXPECT_EQ(run.ranks[static_cast<size_t>(r)].ids_looked_up, 2 * want_ids[k]) << "rank " << r;
    EXPECT_EQ(compute_ns(lookup, hw), want_ns[k]) << "rank " << r;
    EXPECT_EQ(lookup_ns[static_cast<size_t>(r)], 2 * want_ns[k]) << "rank " << r;
  }
  for (int k = 0; k + 1 < 4; ++k)
    EXPECT_GT(lookup_ns[static_cast<size_t>(perm(k))], lookup_ns[static_cast<size_t>(perm(k + 1))]) << "Zipf rank " << k;
}
