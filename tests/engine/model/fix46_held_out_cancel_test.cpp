// tester46 F14: a SIGTERM during the held-out evaluation was acknowledged ("cancelling after the
// current step") and then ignored until the evaluation ended (52 s); it now stops the evaluation:
// the run, whose steps all completed, stays complete and held_out_skipped says why there is no
// figure. The evaluation also reports its progress (the CLI prints a line every 5 s).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/model/held_out.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/model/held_out_key.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace fix46_es = embedscope::engine;

// two ranks, table_wise, 4 steps of 64 samples (as held_out_test.cpp's, shorter)
fix46_es::WorkloadSpec fix46_held_out_spec() {
  return fix46_es::parse_workload(nlohmann::json::parse(R"({
    "name": "held_out_cancel",
    "tables": [
      {"name": "t0", "num_embeddings": 40, "embedding_dim": 4, "feature_names": ["f0"]},
      {"name": "t1", "num_embeddings": 200, "embedding_dim": 4, "feature_names": ["f1"]}
    ],
    "features": [{"name": "f0", "pooling_factor": 2}, {"name": "f1", "pooling_factor": 3}],
    "batch_size": 64, "steps": 4, "warmup_steps": 0, "seed": 5,
    "devices": {"count": 2, "memory_bytes": 67108864},
    "optimizer": {"type": "sgd", "learning_rate": 0.1},
    "dense": {"num_dense_features": 13, "bottom_mlp": [8], "interaction": "cat", "top_mlp": [8, 1]},
    "sharding": {"default": "table_wise"}
  })"),
                                 "held_out_cancel.json");
}
}  // namespace

TEST(Fix46HeldOutCancel, ACancelDuringTheEvaluationStopsItAndTheRunStaysComplete) {
  const fix46_es::WorkloadSpec spec = fix46_held_out_spec();
  std::atomic<bool> cancel{false};
  std::vector<std::pair<int64_t, int64_t>> seen;
  fix46_es::TrainerOptions opt;
  opt.session_path = (std::filesystem::temp_directory_path() / ("es_fix46_ho_" + std::to_string(getpid()) + ".db")).string();
  opt.session_overwrite = true;
  opt.held_out_batches = 5;
  opt.cancel = &cancel;
  // the user's Ctrl-C after the evaluation's second batch (the progress call that reports it)
  opt.held_out_progress = [&](int64_t done, int64_t all) {
    seen.emplace_back(done, all);
    if (done == 2) cancel = true;
  };
  const fix46_es::RunResult r = fix46_es::run_training(spec, fix46_es::plan_sharding(spec), opt);
  EXPECT_EQ(r.ended, fix46_es::RunEnd::complete) << r.error;
  EXPECT_EQ(r.step_time_ns.size(), 4u);  // every step ran
  EXPECT_FALSE(r.held_out.has_value());
  EXPECT_EQ(r.held_out_skipped, "cancelled (Ctrl-C or SIGTERM) during the evaluation, cancelled after 2 of its 5 batches");
  EXPECT_EQ(seen, (std::vector<std::pair<int64_t, int64_t>>{{1, 5}, {2, 5}}));
  const embedscope::sessions::SessionReader session(opt.session_path);
  EXPECT_EQ(session.status(), "complete");
  EXPECT_NE(session.meta(embedscope::sessions::meta::kHeldOutJson).find("cancelled after 2 of its 5 batches"),
            std::string::npos);
  std::filesystem::remove(opt.session_path);
}

TEST(Fix46HeldOutCancel, ProgressIsReportedAfterEveryBatch) {
  const fix46_es::WorkloadSpec spec = fix46_held_out_spec();
  fix46_es::TrainerOptions opt;
  opt.held_out_batches = 3;
  std::vector<int64_t> done;
  opt.held_out_progress = [&](int64_t d, int64_t all) {
    EXPECT_EQ(all, 3);
    done.push_back(d);
  };
  const fix46_es::RunResult r = fix46_es::run_training(spec, fix46_es::plan_sharding(spec), opt);
  ASSERT_EQ(r.ended, fix46_es::RunEnd::complete) << r.error;
  ASSERT_TRUE(r.held_out.has_value()) << r.held_out_skipped;
  EXPECT_EQ(done, (std::vector<int64_t>{1, 2, 3}));
}
