// The planner's memory estimate for the cuda backend: a dot / cat dense part is resident on the
// rank's device (its activations in one block of DenseModel's resident layout, its parameters
// and gradients in the "dense" block); DCN-v2 and the fixed projection still copy each dense
// call's inputs, parameters and outputs into the arena (exec/threaded/rank_setup.cpp
// dense_layers_on_gpu) and the parameters and gradients for the dense SGD step (an H200 run of
// criteo_kaggle on that per-call path measured 4.9 MiB over the cpu estimate, tester38 #10). Here the estimate of a cuda spec
// against the measured peak of the same device path run on the host stand-in
// (TrainerOptions::emulate_device), within issue 15's 2%, and the dense calls' copies against
// hand-computed sizes. Not run on a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/model/dense.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "planner/memory_replay.h"

using namespace embedscope::engine;

namespace {
WorkloadSpec staging_workload(const char* preset, PipelineKind p, ShardingType type) {
  WorkloadSpec s = load_preset(preset);
  for (auto& t : s.tables) t.num_embeddings = std::min<int64_t>(t.num_embeddings, 4000);
  s.devices.count = 2;
  s.sharding.default_type = type;
  s.sharding.per_table.clear();
  s.optimizer.type = OptimizerType::rowwise_adagrad;
  s.steps = 2;
  s.warmup_steps = 1;
  s.pipeline = p;
  return s;
}

// Each rank's estimate of `s` on the cuda backend against the peak of its device path on the
// host stand-in: never more than one 512 B block below, at most 2% above. Returns the worst
// relative error.
double expect_cuda_estimate_within_two_percent(const WorkloadSpec& s, const std::string& what) {
  const ShardingPlan plan = plan_sharding(s);
  WorkloadSpec cuda = s;
  cuda.devices.backend = Backend::cuda;
  const auto est = estimate_memory(cuda, plan);
  TrainerOptions opt;
  opt.trace = false;
  opt.emulate_device = true;
  const RunResult r = run_training(s, plan, opt);
  EXPECT_EQ(r.ended, RunEnd::complete) << what << ": " << r.error;
  EXPECT_EQ(r.ranks.size(), est.size()) << what;
  double worst = -1;
  for (size_t k = 0; k < std::min(est.size(), r.ranks.size()); ++k) {
    const int64_t peak = r.ranks[k].memory_bytes;
    const double err = static_cast<double>(est[k].total()) / static_cast<double>(peak) - 1;
    EXPECT_GE(est[k].total(), peak - 512) << what << " rank " << k << ": estimate " << est[k].total() << " B, peak " << peak;
    EXPECT_LE(err, 0.02) << what << " rank " << k << ": estimate " << est[k].total() << " B, peak " << peak;
    worst = std::max(worst, err);
  }
  return worst;
}
}  // namespace

TEST(CudaStagingEstimate, TheDevicePathsPeakWithinTwoPercent) {
  double worst = -1;
  for (const char* preset : {"tiny", "criteo_kaggle"})  // cat and dot interactions
    for (PipelineKind p : {PipelineKind::base, PipelineKind::sparse_dist, PipelineKind::semi_sync})
      for (ShardingType type : {ShardingType::table_wise, ShardingType::row_wise, ShardingType::data_parallel}) {
        const std::string what = std::string(preset) + " " + to_string(p) + " " + std::string(to_string(type));
        worst = std::max(worst, expect_cuda_estimate_within_two_percent(staging_workload(preset, p, type), what));
      }
  WorkloadSpec headless = staging_workload("tiny", PipelineKind::base, ShardingType::table_wise);
  headless.dense.reset();  // no dense part: only the loss on the device
  worst = std::max(worst, expect_cuda_estimate_within_two_percent(headless, "tiny without a dense part"));
  std::printf("worst cuda estimate vs the emulated device's peak: %+.3f%%\n", 100 * worst);
}

TEST(CudaStagingEstimate, DcnWithinTwoPercent) {  // DCN-v2: no device interaction call; large top MLP
  WorkloadSpec s = staging_workload("mlperf_dlrm_dcnv2_scaled", PipelineKind::base, ShardingType::table_wise);
  s.batch_size = 64;
  s.steps = 1;
  expect_cuda_estimate_within_two_percent(s, "mlperf_dlrm_dcnv2_scaled base table_wise");
}

// The planned bytes for the cpu backend stay what its arena measures (no device copies there),
// and the cuda estimate of criteo_kaggle (dot) differs only in the activations' block: the dense
// part is resident (DenseModel::make_resident), its block laid out as
// dense_resident_activation_floats_per_sample says. By hand, B = 512, 26 features of dim 16,
// bottom 13 -> 512 -> 256 -> 64 -> 16, top 367 -> 512 -> 256 -> 1: per sample the cpu block
// holds 2 (2 x 432 + 367 + 1,617) = 5,696 floats, the resident one 13 + 848 (bottom outputs) +
// 432 (x0) + 367 (r) + 769 (top outputs) + 1 (labels) + 2 x 512 (gradient buffers) + 432 (d x0)
// = 3,886: (3,886 - 5,696) x 512 x 4 = -3,706,880 B. No per-call copies and no SGD staging are
// left (the 5,105,664 B of the per-call path that an H200 run measured, tester38 #10).
TEST(CudaStagingEstimate, OnlyTheCudaBackendPlansTheDeviceCopies) {
  const WorkloadSpec s = staging_workload("criteo_kaggle", PipelineKind::base, ShardingType::table_wise);
  const ShardingPlan plan = plan_sharding(s);
  WorkloadSpec cuda = s;
  cuda.devices.backend = Backend::cuda;
  const auto cpu_est = estimate_memory(s, plan), cuda_est = estimate_memory(cuda, plan);
  TrainerOptions opt;
  opt.trace = false;
  const RunResult r = run_training(s, plan, opt);
  ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
  ASSERT_EQ(cpu_est.size(), 2u);
  EXPECT_EQ(dense_resident_activation_floats_per_sample(s, std::vector<int64_t>(26, 16)), 3'886);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(cpu_est[k].total(), r.ranks[k].memory_bytes) << "rank " << k;
    EXPECT_EQ(cuda_est[k].total() - cpu_est[k].total(), -3'706'880 + 512) << "rank " << k;
    EXPECT_EQ(cuda_est[k].dense - cpu_est[k].dense, -3'706'880) << "rank " << k;  // in the dense part
    // the KJT input dist on the device: each of the rank's slots (26 tables on 2 ranks) keeps
    // W B + 1 offsets where the cpu backend keeps W B lengths, 8 B a slot more: one more
    // 512-byte block
    EXPECT_EQ(cuda_est[k].buffers - cpu_est[k].buffers, 512) << "rank " << k;
  }
}

// The resident layout by hand (dense_resident_activation_floats_per_sample): 3 dense features,
// bottom {4}, 2 features of dim 4, top {2, 1}. dot: 3 + 4 + 12 (x0) + 7 (r) + 2 + 1 + 1 (labels)
// + 2 x 7 (gradient buffers: r is the widest) + 12 (d x0) = 56; cat: no r, no d x0, the
// gradient buffers 12 wide (r = x0): 3 + 4 + 12 + 2 + 1 + 1 + 2 x 12 = 47; DCN and no dense
// part: 0 (not resident).
TEST(CudaStagingEstimate, ResidentActivationLayoutByHand) {
  WorkloadSpec s;
  DenseSpec d;
  d.num_dense_features = 3;
  d.bottom_mlp = {4};
  d.interaction = Interaction::dot;
  d.top_mlp = {2, 1};
  s.dense = d;
  EXPECT_EQ(dense_resident_activation_floats_per_sample(s, {4, 4}), 56);
  s.dense->interaction = Interaction::cat;
  EXPECT_EQ(dense_resident_activation_floats_per_sample(s, {4, 4}), 47);
  s.dense->interaction = Interaction::dcn;
  EXPECT_FALSE(dense_resident_supported(s));
  EXPECT_EQ(dense_resident_activation_floats_per_sample(s, {4, 4}), 0);
  s.dense.reset();
  EXPECT_FALSE(dense_resident_supported(s));
  EXPECT_EQ(dense_resident_activation_floats_per_sample(s, {4, 4}), 0);
}

// A small dense part by hand: 3 dense features, bottom MLP {4}, dot interaction of 2 features
// of dim 4, top MLP {2, 1}, local batch 5. d0 = 4, interaction input 4 + 2 x 4 = 12 wide, output
// 4 + 3 x 2 / 2 = 7 wide.
TEST(CudaStagingEstimate, DenseDeviceCallsByHand) {
  WorkloadSpec s;
  DenseSpec d;
  d.num_dense_features = 3;
  d.bottom_mlp = {4};
  d.interaction = Interaction::dot;
  d.top_mlp = {2, 1};
  s.dense = d;
  const auto calls = detail::dense_device_calls(s, {4, 4}, 5);
  const std::vector<std::vector<int64_t>> expected{
      {15, 12, 4, 20},           // bottom 3 -> 4 forward: x, W, b, y
      {60, 35},                  // dot forward: x0 (5 x 12), r (5 x 7)
      {35, 14, 2, 10},           // top 7 -> 2 forward
      {10, 2, 1, 5},             // top 2 -> 1 forward
      {5, 5, 5},                 // the loss: logits, labels, dlogits
      {10, 2, 5, 5, 2, 1, 10},   // top 2 -> 1 backward: x, W, y, dy, dW, db, dx
      {35, 14, 10, 10, 14, 2, 35},
      {60, 35, 60},              // dot backward: x0, dr, dx0
      {15, 12, 20, 20, 12, 4},   // bottom backward: no dx for the first layer
  };
  EXPECT_EQ(calls, expected);
  s.dense.reset();
  EXPECT_EQ(detail::dense_device_calls(s, {4, 4}, 5), (std::vector<std::vector<int64_t>>{{5, 5, 5}}));
}
