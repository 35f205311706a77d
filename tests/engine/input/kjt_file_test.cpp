// Recorded KJT batches (engine/input/kjt): the Python writer's demo file read back against the
// formulas that made it, training from it against the reference, and bad files (wrong magic,
// counts that lie, a file that ends early, a missing feature) refused with the file named.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "../parity_check.h"
#include "criteo_support.h"
#include "embedscope/engine/input/kjt_file.h"

using namespace embedscope::engine;
using namespace embedscope::engine::criteo_test;

namespace {
const std::string kWriter = std::string(EMBEDSCOPE_SOURCE_DIR) + "/resources/kjt/write_kjt.py";

// The demo file's batch n (write_kjt.py demo()): S 8, keys f0 (b % 3 ids), f1 (1 id), ids
// (n*100 + f*10 + b + i) % 50, labels (n + b) % 2, dense [0.5 n + b, -b].
int64_t demo_len(int f, int b) { return f == 0 ? b % 3 : 1; }
int64_t demo_id(int n, int f, int b, int i) { return (n * 100 + f * 10 + b + i) % 50; }

std::string write_demo(const Scratch& dir) {
  const std::string path = dir / "demo.kjt";
  EXPECT_EQ(std::system(("/usr/bin/python3 " + kWriter + " demo " + path).c_str()), 0);
  return path;
}

// features f1, f0 (not the file's order), 4 samples x 2 ranks = the file's 8, 2 dense features
WorkloadSpec demo_spec(const std::string& path) {
  WorkloadSpec s;
  s.name = "kjt";
  s.tables = {{"t1", 50, 4, Pooling::sum, {"f1"}}, {"t0", 50, 4, Pooling::mean, {"f0"}}};
  s.features = {FeatureSpec{"f1", {}, {}}, FeatureSpec{"f0", {}, {}}};
  s.batch_size = 4;
  s.steps = 4;
  s.devices.count = 2;
  s.devices.memory_bytes = 64 << 20;
  s.optimizer.learning_rate = s.optimizer.dense_learning_rate = 0.5;
  s.dense = DenseSpec{};
  s.dense->num_dense_features = 2;
  s.dense->bottom_mlp = {4};
  s.dense->interaction = Interaction::cat;
  s.dense->top_mlp = {4, 1};
  s.input.kind = InputKind::kjt;
  s.input.paths = {path};
  s.collective_timeout_ms = 20000;
  return s;
}

// What rank r's batch n must hold, from the formulas.
Batch demo_batch(int n, int r) {
  Batch b;
  b.kjt.batch_size = 4;
  b.kjt.num_features = 2;
  for (int wf : {1, 0})  // workload feature 0 is f1, feature 1 is f0
    for (int s = 0; s < 4; ++s) {
      const int sample = r * 4 + s;
      b.kjt.lengths.push_back(demo_len(wf, sample));
      for (int i = 0; i < demo_len(wf, sample); ++i) b.kjt.values.push_back(demo_id(n, wf, sample, i));
    }
  for (int s = 0; s < 4; ++s) {
    const int sample = r * 4 + s;
    b.labels.push_back(static_cast<float>((n + sample) % 2));
    b.dense.push_back(0.5f * static_cast<float>(n) + static_cast<float>(sample));
    b.dense.push_back(-static_cast<float>(sample));
  }
  return b;
}

// A hand-made file: keys, S, batches of (lengths, ids); `claimed_ids` overrides V, `batches`
// overrides N; labels only.
void write_file(const std::string& path, const std::vector<std::string>& keys, uint64_t S,
                const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>& batches, const char* magic = "ESKJT\0\0\0",
                int64_t claimed_ids = -1, int64_t claimed_batches = -1) {
  std::ofstream f(path, std::ios::binary);
  auto put = [&](const auto& v) { f.write(reinterpret_cast<const char*>(&v), sizeof v); };
  f.write(magic, 8);
  put(uint32_t{1});
  put(uint32_t{2});  // labels
  put(static_cast<uint32_t>(keys.size()));
  put(uint32_t{0});
  put(static_cast<uint64_t>(claimed_batches >= 0 ? claimed_batches : static_cast<int64_t>(batches.size())));
  put(S);
  for (const auto& k : keys) {
    put(static_cast<uint32_t>(k.size()));
    f.write(k.data(), static_cast<std::streamsize>(k.size()));
  }
  for (const auto& [lengths, ids] : batches) {
    put(static_cast<uint64_t>(claimed_ids >= 0 ? claimed_ids : static_cast<int64_t>(ids.size())));
    f.write(reinterpret_cast<const char*>(lengths.data()), static_cast<std::streamsize>(lengths.size() * 8));
    f.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 8));
    for (uint64_t s = 0; s < S; ++s) put(0.0f);
  }
}

template <class F>
std::string kjt_error_of(F&& f) {
  try {
    f();
  } catch (const InputFileError& e) {
    return e.what();
  }
  return "(no InputFileError)";
}
}  // namespace

TEST(KjtFile, PythonWritersDemoReadsBackAsItsFormulas) {
  Scratch dir("kjt_demo");
  const std::string path = write_demo(dir);
  KjtFileReader reader(path);
  EXPECT_EQ(reader.header().keys, (std::vector<std::string>{"f0", "f1"}));
  EXPECT_EQ(reader.header().batch_size, 8u);
  EXPECT_EQ(reader.header().num_batches, 4u);
  EXPECT_EQ(reader.header().num_dense, 2u);
  EXPECT_EQ(reader.header().flags, KjtFileHeader::kLabels | KjtFileHeader::kDense);
  KjtFileBatch b;
  for (int n = 0; n < 4; ++n) {
    ASSERT_TRUE(reader.next(b)) << n;
    std::vector<int64_t> lengths, ids;
    for (int f = 0; f < 2; ++f)
      for (int s = 0; s < 8; ++s) {
        lengths.push_back(demo_len(f, s));
        for (int i = 0; i < demo_len(f, s); ++i) ids.push_back(demo_id(n, f, s, i));
      }
    EXPECT_EQ(b.lengths, lengths);
    EXPECT_EQ(b.ids, ids);
    EXPECT_EQ(b.labels.size(), 8u);
    EXPECT_EQ(b.dense[2 * 3], 0.5f * static_cast<float>(n) + 3.0f);
  }
  EXPECT_FALSE(reader.next(b));
  // the source: features by name, rank slices
  const WorkloadSpec spec = demo_spec(path);
  KjtBatchSource src(spec);
  for (int n = 0; n < 4; ++n)
    for (int r : {1, 0}) {
      const Batch got = src.make(n, r), want = demo_batch(n, r);
      EXPECT_EQ(got.kjt.lengths, want.kjt.lengths) << n << " " << r;
      EXPECT_EQ(got.kjt.values, want.kjt.values) << n << " " << r;
      EXPECT_EQ(got.labels, want.labels);
      EXPECT_EQ(got.dense, want.dense);
      EXPECT_EQ(got.origin, fmt::format("{}: batch {}", path, n));
    }
}

TEST(KjtParity, TrainingFromARecordedFileMatchesTheReference) {
  Scratch dir("kjt_parity");
  WorkloadSpec spec = demo_spec(write_demo(dir));
  spec.sharding.default_type = ShardingType::row_wise;
  parity::Captured cap;
  TrainerOptions opt;
  opt.keep_tables = true;
  opt.trace = false;
  const RunResult run = run_training(spec, plan_sharding(spec), opt);
  ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
  const ReferenceResult ref = run_reference(spec, spec.steps, &run.plan, [](int64_t it, int r) -> std::optional<Batch> {
    return demo_batch(static_cast<int>(it), r);
  });
  for (size_t t = 0; t < ref.tables.size(); ++t) parity::expect_close(run.tables[t], ref.tables[t], spec.tables[t].name);
  parity::expect_close(run.dense_params, ref.dense_params, "dense");
  ASSERT_EQ(run.loss.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(run.loss[i], ref.loss[i], 1e-5) << i;
}

TEST(KjtFile, BadFilesAreRefusedNamingTheFile) {
  Scratch dir("kjt_bad");
  const std::vector<int64_t> lengths = {1, 0, 2, 1}, ids = {3, 4, 5, 6};  // keys a, b; S 2
  const std::string magic = dir / "magic.kjt", lie = dir / "lie.kjt", cut = dir / "cut.kjt", extra = dir / "extra.kjt";
  write_file(magic, {"a", "b"}, 2, {{lengths, ids}}, "PK\3\4\0\0\0\0");
  EXPECT_EQ(kjt_error_of([&] { KjtFileReader r(magic); }),
            magic + ": not an Embedscope KJT file (magic is not \"ESKJT\\0\\0\\0\"; resources/kjt/write_kjt.py writes them)");
  write_file(lie, {"a", "b"}, 2, {{lengths, ids}}, "ESKJT\0\0\0", 5);
  EXPECT_EQ(kjt_error_of([&] {
              KjtFileReader r(lie);
              KjtFileBatch b;
              r.next(b);
            }),
            lie + ": batch 0: the lengths sum to 4 ids but the batch says it holds 5");
  write_file(cut, {"a", "b"}, 2, {{lengths, ids}}, "ESKJT\0\0\0", -1, 2);  // says 2 batches, holds 1
  EXPECT_EQ(kjt_error_of([&] {
              KjtFileReader r(cut);
              KjtFileBatch b;
              while (r.next(b)) {
              }
            }),
            cut + ": the file ends inside batch 1 of 2 (reading its id count)");
  write_file(extra, {"a", "b"}, 2, {{lengths, ids}, {lengths, ids}}, "ESKJT\0\0\0", -1, 1);  // says 1, holds 2
  EXPECT_EQ(kjt_error_of([&] {
              KjtFileReader r(extra);
              KjtFileBatch b;
              while (r.next(b)) {
              }
            }),
            extra + ": bytes after the last of its 1 batches (the header's count is wrong?)");
  std::vector<int64_t> neg = {1, -1, 2, 1};
  write_file(dir / "neg.kjt", {"a", "b"}, 2, {{neg, ids}});
  EXPECT_NE(kjt_error_of([&] {
              KjtFileReader r(dir / "neg.kjt");
              KjtFileBatch b;
              r.next(b);
            }).find("batch 0: feature 'a' sample 1: negative length -1"),
            std::string::npos);
}

TEST(KjtFile, AMismatchedWorkloadIsRefusedBeforeRunning) {
  Scratch dir("kjt_mismatch");
  const std::string path = write_demo(dir);
  WorkloadSpec spec = demo_spec(path);
  spec.tables[0].feature_names = {"f_user"};
  spec.features[0].name = "f_user";
  EXPECT_EQ(kjt_error_of([&] { run_training(spec, plan_sharding(spec)); }),
            path + ": the file's features [\"f0\", \"f1\"] lack the workload's [\"f_user\"] (the workload has [\"f_user\", \"f0\"])");
  spec = demo_spec(path);
  spec.batch_size = 3;
  EXPECT_EQ(kjt_error_of([&] { KjtBatchSource s(spec); }),
            path + ": batches of 8 samples, but the workload's global batch is 6 (batch_size 3 x 2 devices)");
  spec = demo_spec(path);
  spec.steps = 6;
  EXPECT_EQ(kjt_error_of([&] { KjtBatchSource s(spec); }),
            path + ": holds 4 batches, the run needs 6 (warmup_steps 0 + steps 6); set \"input\": {\"on_short\": \"wrap\"} to "
                   "read them again from the start");
  spec.input.on_short = ShortInputPolicy::wrap;
  KjtBatchSource wrap(spec);
  for (int n = 0; n < 6; ++n) {
    const Batch b = wrap.make(n, 0);
    EXPECT_EQ(b.kjt.values, demo_batch(n % 4, 0).kjt.values) << n;
    wrap.make(n, 1);
  }
  spec = demo_spec(path);
  spec.dense->num_dense_features = 3;
  EXPECT_EQ(kjt_error_of([&] { KjtBatchSource s(spec); }), path + ": 2 dense features per sample, but dense.num_dense_features is 3");
}
