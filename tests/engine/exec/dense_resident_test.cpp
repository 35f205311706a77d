// Issue 14, "the dense part resident on the GPU": DenseModel::make_resident (model/dense_device.h,
// model/dense_resident.cpp) and the cuda rank's use of it, on the host stand-in
// (TrainerOptions::emulate_device). The resident path against the host path bit for bit (a
// DenseDevice of the host functions here, then whole runs against the cpu backend), the host<->
// device copies of a measured step counted by hand, and an OOM in the resident activations.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/model/dense.h"
#include "embedscope/engine/model/dense_device.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/store/session.h"
#include "exec/device/rank_device.h"
#include "support/oom_snapshot.h"

namespace es = embedscope::engine;
namespace esd = embedscope::engine::detail;

namespace {

// A DenseDevice whose "device memory" is host memory and whose kernels are dense.h's host
// functions (what the stand-in runs), counting its host<->device copies.
class ResidentHostDevice final : public es::DenseDevice {
 public:
  void copy(void* dst, const void* src, int64_t bytes, es::DenseCopy kind) const override {
    tally(kind);
    if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
  }
  void copy_2d(void* dst, int64_t dp, const void* src, int64_t sp, int64_t width, int64_t rows,
               es::DenseCopy kind) const override {
    tally(kind);
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<char*>(dst) + r * dp, static_cast<const char*>(src) + r * sp, static_cast<size_t>(width));
  }
  void linear_forward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* b, bool relu,
                      float* y) const override {
    es::linear_forward(B, in, out, x, w, b, relu, y);
  }
  void linear_backward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* y, bool relu,
                       float* dy, float* dw, float* db, float* dx) const override {
    es::linear_backward(B, in, out, x, w, y, relu, dy, dw, db, dx);
  }
  double bce_loss(int64_t B, const float* logits, const float* labels, float* dlogits) const override {
    ++d2h;
    return es::bce_with_logits(B, logits, labels, dlogits);
  }
  void sgd_step(int64_t n, float lr, const float* grad, float* params) const override {
    es::sgd_step(n, lr, grad, params);
  }
  void dot_forward(int64_t B, int64_t F, int64_t d0, const float* x0, float* r) const override {
    es::dot_interaction_forward(B, F, d0, x0, r);
  }
  void dot_backward(int64_t B, int64_t F, int64_t d0, const float* x0, const float* dr, float* dx0) const override {
    es::dot_interaction_backward(B, F, d0, x0, dr, dx0);
  }
  mutable int h2d = 0, d2h = 0;

 private:
  void tally(es::DenseCopy k) const {
    if (k == es::DenseCopy::host_to_device) ++h2d;
    if (k == es::DenseCopy::device_to_host) ++d2h;
  }
};

// 3 dense features, bottom {5, 4}, 3 features of dim 4, top {6, 1}, batch 7; bucket cap 64 B.
es::WorkloadSpec resident_model_spec(es::Interaction inter) {
  es::WorkloadSpec s;
  s.seed = 11;
  es::DenseSpec d;
  d.num_dense_features = 3;
  d.bottom_mlp = {5, 4};
  d.interaction = inter;
  d.top_mlp = {6, 1};
  s.dense = d;
  return s;
}

// One forward/backward + SGD step of the host path and of the resident path on the same inputs:
// loss, d pooled, every gradient and the parameters after the step bit-equal; the resident
// path's copies: dense_x, labels, 3 pooled in, 3 d pooled + the loss out, then one download
// per bucket and one upload for the SGD step.
void expect_resident_equals_host(es::Interaction inter) {
  const es::WorkloadSpec s = resident_model_spec(inter);
  const std::vector<int64_t> dims{4, 4, 4};
  const int64_t B = 7;
  es::DenseModel host(s, dims), res(s, dims);
  ASSERT_EQ(host.params(), res.params());
  std::vector<float> dense_x(B * 3), labels(B);
  std::vector<std::vector<float>> pooled(3, std::vector<float>(B * 4));
  for (size_t i = 0; i < dense_x.size(); ++i) dense_x[i] = 0.1f * static_cast<float>(i % 11) - 0.4f;
  for (int64_t i = 0; i < B; ++i) labels[static_cast<size_t>(i)] = static_cast<float>(i % 2);
  for (size_t f = 0; f < 3; ++f)
    for (size_t i = 0; i < pooled[f].size(); ++i) pooled[f][i] = 0.05f * static_cast<float>((i * (f + 3)) % 13) - 0.3f;
  std::vector<const float*> pp{pooled[0].data(), pooled[1].data(), pooled[2].data()};
  std::vector<std::vector<float>> dh(3, std::vector<float>(B * 4)), dr(3, std::vector<float>(B * 4, -1.0f));
  std::vector<float*> dph{dh[0].data(), dh[1].data(), dh[2].data()}, dpr{dr[0].data(), dr[1].data(), dr[2].data()};

  ResidentHostDevice dev;
  std::vector<float> device_params(static_cast<size_t>(2 * res.num_params()), 0.0f);
  std::vector<float> act(static_cast<size_t>(res.resident_activation_floats(B)), 0.0f);
  res.make_resident(&dev, device_params.data());
  EXPECT_EQ(dev.h2d, 1);  // the parameters, once
  EXPECT_TRUE(res.resident());
  const double lh = host.forward_backward(B, dense_x.data(), pp, labels.data(), dph);
  std::vector<int64_t> ready;
  const double lr = res.forward_backward_resident(B, act.data(), dense_x.data(), pp, labels.data(), dpr,
                                                  [&](int64_t from) { ready.push_back(from); });
  EXPECT_EQ(lr, lh);
  EXPECT_EQ(dr, dh);
  EXPECT_EQ(dev.h2d, 1 + 2 + 3);
  EXPECT_EQ(dev.d2h, 3 + 1);
  ASSERT_EQ(ready.size(), 4u);  // 2 top + 2 bottom layers, each with its weight's offset
  const auto tensors = res.param_tensors();
  EXPECT_EQ(ready, (std::vector<int64_t>{tensors[6].first, tensors[4].first, tensors[2].first, tensors[0].first}));
  // the gradients stay on the device until downloaded, bucket by bucket
  const auto buckets = es::dense_buckets(tensors, 64);
  ASSERT_GT(buckets.size(), 1u);
  for (const auto& [lo, hi] : buckets) res.download_grads(lo, hi);
  EXPECT_EQ(res.grads(), host.grads());
  EXPECT_EQ(dev.d2h, 4 + static_cast<int>(buckets.size()));
  // SGD: the averaged gradients up once, the parameters current on the host only after a sync
  std::vector<float> avg = host.grads();
  for (auto& g : avg) g *= 0.5f;
  const std::vector<float> before = res.params();
  host.sgd_step(0.25f, avg.data());
  res.sgd_step(0.25f, avg.data());
  EXPECT_EQ(dev.h2d, 7);
  EXPECT_EQ(res.params(), before);  // stale until synced
  res.sync_params_to_host();
  EXPECT_EQ(res.params(), host.params());
  EXPECT_NE(res.params(), before);
  res.sync_params_to_host();  // nothing changed since: no copy
  EXPECT_EQ(dev.d2h, 4 + static_cast<int>(buckets.size()) + 1);
}

es::WorkloadSpec resident_tiny() {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.count = 2;
  s.sharding.per_table.clear();
  s.steps = 3;
  s.warmup_steps = 1;
  return s;
}

// criteo_kaggle (dot) cut to 2 ranks, 2,000 rows a table, 64 samples a rank.
es::WorkloadSpec resident_criteo() {
  es::WorkloadSpec s = es::load_preset("criteo_kaggle");
  for (auto& t : s.tables) t.num_embeddings = std::min<int64_t>(t.num_embeddings, 2000);
  s.devices.count = 2;
  s.batch_size = 64;
  s.sharding.per_table.clear();
  s.steps = 3;
  s.warmup_steps = 1;
  return s;
}

// Each feature's embedding_dim (its table's), in feature order.
std::vector<int64_t> resident_feature_dims(const es::WorkloadSpec& s) {
  std::vector<int64_t> dims;
  for (const auto& f : s.features)
    for (const auto& t : s.tables)
      for (const auto& n : t.feature_names)
        if (n == f.name) dims.push_back(t.embedding_dim);
  return dims;
}

// The copies of the measured steps of a run on the stand-in (both ranks, all measured steps).
esd::DenseCopyTotals measured_dense_copies(const es::WorkloadSpec& s, bool device_dist = true) {
  const esd::DenseCopyTotals before = esd::dense_copy_totals();
  es::TrainerOptions opt;
  opt.trace = false;
  opt.emulate_device = true;
  opt.device_dist = device_dist;
  const es::RunResult r = es::run_training(s, es::plan_sharding(s), opt);
  EXPECT_EQ(r.ended, es::RunEnd::complete) << r.error;
  const esd::DenseCopyTotals after = esd::dense_copy_totals();
  return {after.host_to_device - before.host_to_device, after.device_to_host - before.device_to_host,
          after.host_to_device_bytes - before.host_to_device_bytes,
          after.device_to_host_bytes - before.device_to_host_bytes};
}

}  // namespace

TEST(ResidentDense, DotEqualsTheHostPathBitForBit) { expect_resident_equals_host(es::Interaction::dot); }
TEST(ResidentDense, CatEqualsTheHostPathBitForBit) { expect_resident_equals_host(es::Interaction::cat); }

TEST(ResidentDense, DcnAndTheFixedProjectionAreNotResident) {
  es::WorkloadSpec s = resident_model_spec(es::Interaction::dcn);
  s.dense->dcn_num_layers = 1;
  s.dense->dcn_low_rank_dim = 2;
  es::DenseModel m(s, {4, 4, 4});
  ResidentHostDevice dev;
  std::vector<float> p(static_cast<size_t>(2 * m.num_params()));
  EXPECT_THROW(m.make_resident(&dev, p.data()), std::logic_error);
  EXPECT_FALSE(m.resident());
  EXPECT_THROW(m.forward_backward_resident(1, nullptr, nullptr, {}, nullptr, {}), std::logic_error);
}

// Per rank and measured step, by hand. tiny (cat): F = 5 features (dims 4, 8, 6, 6, 12: 36
// floats a sample), B = 8, 4 dense features, 777 parameters in one 25 MiB bucket. Every table is
// table_wise, so (issue 14, devdist55) the output dist unpacks the pooled embeddings on the
// device and the gradient dist packs their gradients there: in, dense features 128 B, labels
// 32 B, the averaged gradients 3,108 B = 3 copies, 3,268 B; out: the loss 8 B, one bucket 3,108 B
// = 2 copies, 3,116 B. With a 4-byte bucket cap the 6 tensors are 6 buckets: 7 copies out, the
// same bytes. 2 ranks x 3 measured steps. With the dists staged through the host
// (TrainerOptions::device_dist false, as before) also 5 pooled (2-D) 1,152 B in and 5 d pooled
// 1,152 B out: 8 copies, 4,420 B in; 7, 4,268 B out (12 with the 6 buckets). (The per-call path
// the resident part replaced made 4 + 4 + 3 + 7 + 7 + 6 = 31 copies in and 1 + 1 + 2 + 3 + 3 + 2
// + 1 = 13 out, plus the SGD step's 2 in and 1 out, a rank and step.)
TEST(ResidentDense, TinyCopiesPerMeasuredStepByHand) {
  es::WorkloadSpec s = resident_tiny();
  const esd::DenseCopyTotals c = measured_dense_copies(s);
  EXPECT_EQ(c.host_to_device, 2 * 3 * 3);
  EXPECT_EQ(c.device_to_host, 2 * 3 * 2);
  EXPECT_EQ(c.host_to_device_bytes, 2 * 3 * 3'268);
  EXPECT_EQ(c.device_to_host_bytes, 2 * 3 * 3'116);
  const esd::DenseCopyTotals h = measured_dense_copies(s, false);
  EXPECT_EQ(h.host_to_device, 2 * 3 * 8);
  EXPECT_EQ(h.device_to_host, 2 * 3 * 7);
  EXPECT_EQ(h.host_to_device_bytes, 2 * 3 * 4'420);
  EXPECT_EQ(h.device_to_host_bytes, 2 * 3 * 4'268);
  s.dense->bucket_cap_bytes = 4;
  const esd::DenseCopyTotals b = measured_dense_copies(s);
  EXPECT_EQ(b.host_to_device, 2 * 3 * 3);
  EXPECT_EQ(b.device_to_host, 2 * 3 * 7);
  EXPECT_EQ(b.device_to_host_bytes, 2 * 3 * 3'116);
  const esd::DenseCopyTotals bh = measured_dense_copies(s, false);
  EXPECT_EQ(bh.host_to_device, 2 * 3 * 8);
  EXPECT_EQ(bh.device_to_host, 2 * 3 * 12);
  EXPECT_EQ(bh.device_to_host_bytes, 2 * 3 * 4'268);
}

// criteo_kaggle (dot): F = 26 features of dim 16, B = 64, 13 dense features, 475,985 parameters
// in one bucket, every table table_wise. In: 3,328 + 256 + 1,903,940 = 1,907,524 B in 3 copies;
// out: 8 + 1,903,940 = 1,903,948 B in 2 copies. With the dists staged through the host (before
// devdist55): also 26 x 4,096 B each way, 2,014,020 B in 29 copies in, 2,010,444 B in 28 out.
TEST(ResidentDense, CriteoCopiesPerMeasuredStepByHand) {
  const esd::DenseCopyTotals c = measured_dense_copies(resident_criteo());
  EXPECT_EQ(c.host_to_device, 2 * 3 * 3);
  EXPECT_EQ(c.device_to_host, 2 * 3 * 2);
  EXPECT_EQ(c.host_to_device_bytes, 2 * 3 * int64_t{1'907'524});
  EXPECT_EQ(c.device_to_host_bytes, 2 * 3 * int64_t{1'903'948});
  const esd::DenseCopyTotals h = measured_dense_copies(resident_criteo(), false);
  EXPECT_EQ(h.host_to_device, 2 * 3 * 29);
  EXPECT_EQ(h.device_to_host, 2 * 3 * 28);
  EXPECT_EQ(h.host_to_device_bytes, 2 * 3 * int64_t{2'014'020});
  EXPECT_EQ(h.device_to_host_bytes, 2 * 3 * int64_t{2'010'444});
}

// The cpu backend and the resident stand-in, bit for bit: losses, tables, dense parameters,
// for cat (tiny, 6 buckets) and dot (criteo_kaggle, sparse_dist pipeline).
TEST(ResidentDense, CatAndDotTrainExactlyAsTheCpuBackend) {
  es::WorkloadSpec cat = resident_tiny();
  cat.dense->bucket_cap_bytes = 4;
  es::WorkloadSpec dot = resident_criteo();
  dot.pipeline = es::PipelineKind::sparse_dist;
  for (const es::WorkloadSpec& s : {cat, dot}) {
    const std::string what = s.dense->interaction == es::Interaction::dot ? "dot" : "cat";
    es::TrainerOptions opt;
    opt.trace = false;
    opt.keep_tables = true;
    const es::RunResult cpu = es::run_training(s, es::plan_sharding(s), opt);
    opt.emulate_device = true;
    const es::RunResult dev = es::run_training(s, es::plan_sharding(s), opt);
    ASSERT_EQ(cpu.ended, es::RunEnd::complete) << what << ": " << cpu.error;
    ASSERT_EQ(dev.ended, es::RunEnd::complete) << what << ": " << dev.error;
    EXPECT_EQ(dev.loss, cpu.loss) << what;
    EXPECT_EQ(dev.tables, cpu.tables) << what;
    ASSERT_EQ(dev.dense_params.size(), cpu.dense_params.size()) << what;
    EXPECT_EQ(dev.dense_params, cpu.dense_params) << what;
    // trained: the result is the device's parameters, brought back, not the initial ones
    EXPECT_NE(dev.dense_params, es::DenseModel(s, resident_feature_dims(s)).params()) << what;
  }
}

// An OOM in the resident activations' block ends the run oom with the layout in the session,
// the dense part's resident parameter block among the allocated ones. tiny with a top MLP
// {4,096, 1} at 1,024 samples a rank: the resident block is 4 + 8 + 44 + 4,096 + 1 + 1 +
// 2 x 4,096 = 12,346 floats a sample (50.6 MB), beyond the 44 MiB device, while the cpu
// backend's activations (2 (2 x 44 + 44 + 8 + 4,097) = 8,474 floats a sample, 34.7 MB), which
// the planner checks the stand-in's spec (backend cpu) against, fit: the run starts and fails
// at the block.
TEST(ResidentDense, OomInTheActivationsEndsOomWithTheSnapshot) {
  es::WorkloadSpec s = resident_tiny();
  s.dense->top_mlp = {4096, 1};
  s.batch_size = 1024;
  s.devices.memory_bytes = int64_t{44} << 20;
  ASSERT_EQ(resident_feature_dims(s), (std::vector<int64_t>{4, 8, 6, 6, 12}));
  EXPECT_EQ(es::dense_resident_activation_floats_per_sample(s, resident_feature_dims(s)), 12'346);
  EXPECT_EQ(es::dense_sizes(s, resident_feature_dims(s)).activation_floats_per_sample, 8'474);
  const int64_t act = s.batch_size * 12'346 * 4;
  ASSERT_GT(act, s.devices.memory_bytes);  // the block alone does not fit
  es::TrainerOptions opt;
  opt.trace = false;
  opt.emulate_device = true;
  opt.session_path =
      (std::filesystem::temp_directory_path() / ("es_resident_oom_" + std::to_string(getpid()) + ".db")).string();
  const es::RunResult r = es::run_training(s, es::plan_sharding(s), opt);
  EXPECT_EQ(r.ended, es::RunEnd::oom) << r.error;
  EXPECT_NE(r.error.find("for activations"), std::string::npos) << r.error;
  {
    embedscope::sessions::SessionReader session(opt.session_path);
    EXPECT_EQ(session.status(), "oom");
    const auto snapshot_tags = embedscope::test_support::oom_snapshot_tags(session);
    ASSERT_TRUE(snapshot_tags) << "no snapshot taken for the OOM";
    const std::set<std::string>& tags = *snapshot_tags;
    EXPECT_TRUE(tags.count("dense"));
    EXPECT_TRUE(tags.count("weights"));
  }
  std::filesystem::remove(opt.session_path);
}
