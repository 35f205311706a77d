// Issue 14 (kjt56): the KJT input dist on the device (Rank::input_dist_on_device), on the host
// stand-in (TrainerOptions::emulate_device). The batch's values and offsets cross once, the
// bucketizing runs on the device (RankDevice::bucketize: bucketize_kjt on the stand-in, the
// CUDA kernel on a GPU), only the splits come back, the lengths and ids all-to-alls run on device
// buffers (Collectives::all_to_all_v_device), kjt_permute regroups them per slot there
// (kernels/kjt_permute_core.h, the CUDA kernel's host reference) and the lookup and the device
// sparse-gradient accumulation read them where they are. Evidence: the permute core by hand;
// training bit for bit equal to the host input dist (TrainerOptions::device_input_dist = false)
// under every sharding type and the mixed plan, in the base, sparse_dist and semi_sync pipelines,
// with 4 ranks on 4, on 1 and on 2 emulated devices (and on 4, bit for bit the cpu backend); the
// copies of a table_wise step by hand.

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdio>
#include <tuple>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/input/source.h"
#include "embedscope/engine/kernels/kjt_permute_core.h"
#include "engine/parity_check.h"
#include "support/device_dist_runs.h"
#include "exec/device/rank_device.h"

using namespace embedscope::engine;
using namespace embedscope::engine::parity;

namespace {

using KjtRun = test_support::CountedRun;

WorkloadSpec kjt_spec(ShardingType type, OptimizerType opt, int world = 4, Pooling pooling = Pooling::mean) {
  return test_support::resident_cat_spec(type, opt, world, pooling);
}

KjtRun run_kjt(const WorkloadSpec& s, const ShardingPlan& plan, bool emulate, int devices, bool device_input_dist) {
  TrainerOptions o = test_support::emulated_options(emulate, devices);
  o.device_input_dist = device_input_dist;
  return test_support::run_counting_copies(s, plan, o);
}

// the same training, and the same ids looked up (and unique ids) on every rank
void kjt56_expect_same(const RunResult& got, const RunResult& want, const std::string& what) {
  test_support::expect_same_training(got, want, what);
  ASSERT_EQ(got.ranks.size(), want.ranks.size()) << what;
  for (size_t r = 0; r < got.ranks.size(); ++r) {
    EXPECT_EQ(got.ranks[r].ids_looked_up, want.ranks[r].ids_looked_up) << what << ", rank " << r;
    EXPECT_EQ(got.ranks[r].unique_ids, want.ranks[r].unique_ids) << what << ", rank " << r;
  }
}

// The sharding types, and the mixed plan (row_wise, data_parallel, table_row_wise, column_wise).
enum class Kjt56Kind { table_wise, row_wise, column_wise, table_row_wise, data_parallel, mixed };
using KjtParam = std::tuple<Kjt56Kind, PipelineKind>;
class DeviceKjt56 : public ::testing::TestWithParam<KjtParam> {};

ShardingType kjt56_type_of(Kjt56Kind k) {
  switch (k) {
    case Kjt56Kind::row_wise: return ShardingType::row_wise;
    case Kjt56Kind::column_wise: return ShardingType::column_wise;
    case Kjt56Kind::table_row_wise: return ShardingType::table_row_wise;
    case Kjt56Kind::data_parallel: return ShardingType::data_parallel;
    default: return ShardingType::table_wise;
  }
}

const char* kjt56_name_of(Kjt56Kind k) {
  switch (k) {
    case Kjt56Kind::table_wise: return "table_wise";
    case Kjt56Kind::row_wise: return "row_wise";
    case Kjt56Kind::column_wise: return "column_wise";
    case Kjt56Kind::table_row_wise: return "table_row_wise";
    case Kjt56Kind::data_parallel: return "data_parallel";
    case Kjt56Kind::mixed: return "mixed";
  }
  return "?";
}

// Bit for bit the host input dist's training (tables, loss, dense parameters, the ids looked up
// and the distinct rows the load counters saw) with the 4 ranks on 4 emulated devices (Gloo;
// there also the cpu backend's), on 1 (the intra-device communicator) and 2 on each of 2 (the
// hierarchical one). The device path is really taken where some slot exists: fewer copies to the
// device (each slot's ids and offsets no longer cross for its lookup); data_parallel has no slot,
// sends nothing and keeps the host path (the same copies).
TEST_P(DeviceKjt56, EqualsTheHostInputDistBitForBitOnEveryPlacement) {
  const auto [kind, pipeline] = GetParam();
  WorkloadSpec s = kind == Kjt56Kind::mixed ? mixed_spec(OptimizerType::rowwise_adagrad)
                                       : kjt_spec(kjt56_type_of(kind), OptimizerType::rowwise_adagrad);
  if (kind == Kjt56Kind::mixed) s.dense = kjt_spec(ShardingType::table_wise, OptimizerType::sgd).dense;
  s.pipeline = pipeline;
  const ShardingPlan plan = plan_sharding(s);
  const KjtRun cpu = run_kjt(s, plan, false, 0, true);
  ASSERT_EQ(cpu.result.ended, RunEnd::complete) << cpu.result.error;
  for (int devices : {0, 1, 2}) {
    const std::string what = fmt::format("{} on {} emulated device(s)", kjt56_name_of(kind), devices == 0 ? 4 : devices);
    const KjtRun dev = run_kjt(s, plan, true, devices, true);
    const KjtRun host = run_kjt(s, plan, true, devices, false);
    kjt56_expect_same(dev.result, host.result, what + ": device input dist against the host's");
    if (devices == 0) kjt56_expect_same(dev.result, cpu.result, what + ": against the cpu backend");
    if (kind == Kjt56Kind::data_parallel) {
      EXPECT_EQ(dev.copies.host_to_device, host.copies.host_to_device) << what;
      EXPECT_EQ(dev.copies.device_to_host, host.copies.device_to_host) << what;
    } else {
      EXPECT_LT(dev.copies.host_to_device, host.copies.host_to_device) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, DeviceKjt56,
    ::testing::Combine(::testing::Values(Kjt56Kind::table_wise, Kjt56Kind::row_wise, Kjt56Kind::column_wise, Kjt56Kind::table_row_wise,
                                         Kjt56Kind::data_parallel, Kjt56Kind::mixed),
                       ::testing::Values(PipelineKind::base, PipelineKind::sparse_dist, PipelineKind::semi_sync)),
    [](const ::testing::TestParamInfo<KjtParam>& p) {
      return fmt::format("{}_{}", kjt56_name_of(std::get<0>(p.param)), to_string(std::get<1>(p.param)));
    });

}  // namespace

// kjt_permute_core::permute by hand: W = 2 sources, P = 2 slots, B = 2 bags. Received, in
// (source, slot, bag) order: s0 k0 [10] [11 12], s0 k1 [] [20], s1 k0 [13 14] [], s1 k1 [21] [22].
// Slot 0 reads s0's bags then s1's: 10 | 11 12 | 13 14 | (empty), offsets 0 1 3 5 5; slot 1:
// (empty) | 20 | 21 | 22, offsets 0 0 1 2 3.
TEST(DeviceKjt56PermuteCore, RegroupsTheReceivedIdsPerSlotByHand) {
  const std::vector<int64_t> lengths{1, 2, 0, 1, 2, 0, 1, 1};
  const std::vector<int64_t> ids{10, 11, 12, 20, 13, 14, 21, 22};
  std::vector<int64_t> out(8, -1), off(10, -1);
  kjt_permute_core::permute(2, 2, 2, lengths.data(), ids.data(), 8, out.data(), off.data());
  EXPECT_EQ(out, (std::vector<int64_t>{10, 11, 12, 13, 14, 20, 21, 22}));
  EXPECT_EQ(off, (std::vector<int64_t>{0, 1, 3, 5, 5, 0, 0, 1, 2, 3}));
  // the index helpers the CUDA kernel uses: permuted bag 5 is slot 1, source 0, bag 1 -> received 3
  EXPECT_EQ(kjt_permute_core::received_index_of(2, 2, 2, 5), 3);
  EXPECT_EQ(kjt_permute_core::received_index(2, 2, 0, 1, 1), 5);
  // no source (W = 0): every slot's one offset is 0
  std::vector<int64_t> none(2, -1);
  kjt_permute_core::permute(0, 2, 3, nullptr, nullptr, 0, nullptr, none.data());
  EXPECT_EQ(none, (std::vector<int64_t>{0, 0}));
  // lengths that do not add up to num_ids, a negative length, a negative shape
  EXPECT_THROW(kjt_permute_core::permute(2, 2, 2, lengths.data(), ids.data(), 7, out.data(), off.data()),
               std::invalid_argument);
  const std::vector<int64_t> negative{1, 2, 0, 1, 2, 0, 3, -1};
  EXPECT_THROW(kjt_permute_core::permute(2, 2, 2, negative.data(), ids.data(), 8, out.data(), off.data()),
               std::invalid_argument);
  EXPECT_THROW(kjt_permute_core::permute(-1, 2, 2, lengths.data(), ids.data(), 8, out.data(), off.data()),
               std::invalid_argument);
}

// The stand-in's bucketize and kjt_permute are the host references (bucketize_kjt, permute), and
// refuse what the GPU's refuse: ids past the capacity, a slot feature outside the KJT.
TEST(DeviceKjt56PermuteCore, TheStandInRunsTheHostReferences) {
  auto dev = detail::host_rank_device(0);
  dev->bind_thread();
  // 2 features x 2 bags: f0 [1 7] [4], f1 [] [2 9]; slots: f1 whole, f0 rows [3, 8) (row_wise)
  const std::vector<int64_t> values{1, 7, 4, 2, 9}, offsets{0, 2, 3, 3, 5};
  const std::vector<BucketSlot> slots{{1, false, 0, 0}, {0, true, 3, 5}};
  std::vector<int64_t> lengths(4, -1), ids(5, -1), splits(2, -1);
  EXPECT_EQ(dev->bucketize(values.data(), offsets.data(), 2, 2, slots, lengths.data(), ids.data(), 5, splits.data()), 4);
  EXPECT_EQ(lengths, (std::vector<int64_t>{0, 2, 1, 1}));
  EXPECT_EQ(std::vector<int64_t>(ids.begin(), ids.begin() + 4), (std::vector<int64_t>{2, 9, 4, 1}));  // 7-3, 4-3
  EXPECT_EQ(splits, (std::vector<int64_t>{2, 2}));
  EXPECT_THROW(dev->bucketize(values.data(), offsets.data(), 2, 2, slots, lengths.data(), ids.data(), 3, splits.data()),
               std::length_error);
  const std::vector<BucketSlot> bad{{2, false, 0, 0}};
  EXPECT_THROW(dev->bucketize(values.data(), offsets.data(), 2, 2, bad, lengths.data(), ids.data(), 5, splits.data()),
               std::invalid_argument);
  // one source, 2 slots of 2 bags: (k0: [5] [6 7]) (k1: [] [8]) stays in order
  const std::vector<int64_t> len{1, 2, 0, 1}, in{5, 6, 7, 8};
  std::vector<int64_t> out(4, -1), off(6, -1);
  dev->kjt_permute(1, 2, 2, len.data(), in.data(), 4, out.data(), off.data());
  EXPECT_EQ(out, in);
  EXPECT_EQ(off, (std::vector<int64_t>{0, 1, 3, 0, 0, 1}));
}

// The host<->device copies of the table_wise steps, by hand (detail::step_copy_totals: every copy
// of the ranks' devices in measured steps). kjt_spec with sum pooling (no per-bag scales cross)
// and sgd on 2 ranks sharing one emulated device (the intra-device communicator, whose staging
// of host buffers the stand-in counts), base pipeline, 3 measured steps; B = 5, W = 2, F = 5
// features in 5 slots of W B = 10 bags, 4 shards (t2 read by f2a and f2b). With V the ids of
// the step (both ranks' batches, counted from the batch source), V2 those of f2a and f2b and P2
// the slots on t2's rank, per step:
//   the host input dist makes, to the device: the lengths' and ids' staged send buffers (2 + 2
//     copies: 2 x 5 x 5 x 8 = 400 B, 8 V), each slot's ids and offsets for its lookup (5 + 5:
//     8 V, 5 x 11 x 8 = 440 B) and each shard's ids and offsets in the embedding update's packed
//     copy (4: 8 V + (3 x 11 + 21) x 8 = 8 V + 432 B); to the host: the staged receive buffers
//     (2 + 2: 400 B, 8 V);
//   the device input dist makes, to the device: each rank's batch (2: 8 V + 2 x 26 x 8 = 8 V +
//     416 B) - t2's two slots' ids and offsets are concatenated on the device for its update
//     (RankDevice::concat_bags), its gradients are there already and sum pooling has no scales,
//     so nothing of t2's update crosses; to the host: each rank's splits (2: 2 x 5 x 8 = 80 B) and
//     bucketized count (2: 16 B) - no slot's ids or lengths come back.
// So 16 copies and 856 + 16 V bytes fewer to the device, as many copies and 304 + 8 V bytes
// fewer to the host (every slot has ids in every step: checked). Once per rank and plan, in the
// first step (the run has no warm-up), bucketize's slot list goes to the device (every rank's 5
// slots, 5 x 24 = 120 B) and stays there: 2 copies and 240 B more over the run, not per step -
// before, a GPU copied it in every bucketize call and nothing counted it. Before t2's ids and offsets were
// concatenated on the device, its update packed them on the host (1 copy in, 8 V2 + 21 x 8 B)
// from its slots' ids and the lengths of t2's rank brought back (3 copies out: P2 x 10 x 8 and
// 8 V2 B): 15 copies and 688 + 16 V - 8 V2 bytes fewer in, 3 copies more and
// 304 + 8 V - 80 P2 - 8 V2 bytes fewer out.
TEST(DeviceKjt56Copies, TableWiseStepsCopiesByHand) {
  WorkloadSpec s = kjt_spec(ShardingType::table_wise, OptimizerType::sgd, 2, Pooling::sum);
  const ShardingPlan plan = plan_sharding(s);
  for (const auto& tp : plan.tables) ASSERT_EQ(tp.shards.size(), 1u);  // whole tables
  const int r2 = plan.tables[2].shards[0].rank;
  int64_t P2 = 0;
  for (const auto& tp : plan.tables)
    if (tp.shards[0].rank == r2) P2 += static_cast<int64_t>(s.tables[static_cast<size_t>(tp.table)].feature_names.size());
  const int64_t B = s.batch_size, F = 5;
  ASSERT_EQ(B, 5);
  ASSERT_EQ(static_cast<int64_t>(s.features.size()), F);
  // V and V2 over the measured steps, from the batches the ranks train on
  auto source = make_batch_source(s);
  int64_t V = 0, V2 = 0;
  for (int64_t it = s.warmup_steps; it < s.warmup_steps + s.steps; ++it) {
    std::vector<int64_t> per_feature(static_cast<size_t>(F), 0);
    for (int r = 0; r < 2; ++r) {
      const Batch b = source->make(it, r);
      const auto off = b.kjt.offsets();
      for (int64_t f = 0; f < F; ++f) per_feature[static_cast<size_t>(f)] += off[static_cast<size_t>((f + 1) * B)] -
                                                                            off[static_cast<size_t>(f * B)];
      V += static_cast<int64_t>(b.kjt.values.size());
    }
    for (int64_t f = 0; f < F; ++f) ASSERT_GT(per_feature[static_cast<size_t>(f)], 0) << "feature " << f << ", step " << it;
    V2 += per_feature[2] + per_feature[3];
  }
  const KjtRun host = run_kjt(s, plan, true, 1, false);
  const KjtRun dev = run_kjt(s, plan, true, 1, true);
  kjt56_expect_same(dev.result, host.result, "device input dist against the host's");
  const int64_t steps = s.steps;
  ASSERT_EQ(steps, 3);
  std::printf("copies of %lld measured table_wise steps, 2 ranks on one emulated device (V = %lld ids, V2 = %lld, "
              "P2 = %lld): host input dist %s; on the device %s\n",
              static_cast<long long>(steps), static_cast<long long>(V), static_cast<long long>(V2),
              static_cast<long long>(P2), test_support::copies_text(host.copies).c_str(), test_support::copies_text(dev.copies).c_str());
  ASSERT_EQ(s.warmup_steps, 0);
  ASSERT_EQ(sizeof(BucketSlot), 24u);
  EXPECT_EQ(host.copies.host_to_device - dev.copies.host_to_device, steps * 16 - 2);
  EXPECT_EQ(host.copies.host_to_device_bytes - dev.copies.host_to_device_bytes, steps * 856 + 16 * V - 240);
  EXPECT_EQ(host.copies.device_to_host - dev.copies.device_to_host, 0);
  EXPECT_EQ(host.copies.device_to_host_bytes - dev.copies.device_to_host_bytes, steps * 304 + 8 * V);
}
