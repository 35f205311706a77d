// `embedscope stats` on a cuda run's session (tester38 #2, #7, #11): the GPU streams' figures are said
// to be the streams', how busy the GPU was and what bounds the step, the host threads' exposed
// communication beside them, and that the ranks shared one GPU. A hand-made session of 2 ranks
// on one GPU, one measured step [0, 1) ms each.
#include <gtest/gtest.h>

#include <map>
#include <regex>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/store/session.h"
#include "import_test_support.h"
#include "support/cli_run.h"

namespace {
namespace ss = embedscope::sessions;

std::string cuda_like_session() {
  const std::string db = embedscope::sessions::testing::scratch_db("gpu_busy.db");
  std::remove(db.c_str());
  ss::SessionWriter w(db);
  w.set_metadata("world_size", "2");
  w.set_metadata("backend", "cuda");
  w.set_metadata("workload_name", "hand");
  w.set_metadata("cupti_records", "100");  // what the GPU trace lost (tester38 #7)
  w.set_metadata("cupti_dropped_records", "3");
  w.set_metadata("cupti_launches_dropped", "1");
  w.set_metadata("cupti_device_rank_fallbacks", "2");
  for (int r = 0; r < 2; ++r) {
    w.add_rank({r, "h", "NVIDIA H200 (cuda:0)", 1 << 30});
    w.add_lane({r, 0, "compute", "thread"});
    w.add_lane({r, 1, "comm", "thread"});
    w.add_lane({r, 2, "gpu_compute", "stream"});
    w.add_lane({r, 3, "gpu_comm", "stream"});
    w.add_step({0, r, 0, 1000000, 0.5, 0, 0});
  }
  // (us) rank 0: GPU busy [0,100) + [200,300) = 20%; rank 1: [0,400) = 40%. Host: rank 0
  // computes [0,600) and waits in a collective [600,1000) (400 exposed); rank 1 waits [500,700) (200).
  using ss::Lane;
  using ss::OpCategory;
  w.add_ops({ss::OpEvent{0, Lane::gpu_compute, OpCategory::lookup, "tbe_forward_kernel", 0, 0, 100000, 0, 0},
             ss::OpEvent{0, Lane::gpu_comm, OpCategory::comm, "memcpy_dtod", 0, 200000, 300000, 64, 0},
             ss::OpEvent{0, Lane::compute, OpCategory::dense, "dense_forward_backward", 0, 0, 600000, 0, 0},
             ss::OpEvent{0, Lane::comm, OpCategory::comm, "output_dist/all_to_all", 0, 600000, 1000000, 0, 0},
             ss::OpEvent{1, Lane::gpu_compute, OpCategory::dense, "sm90_xmma_gemm", 0, 0, 400000, 0, 0},
             ss::OpEvent{1, Lane::compute, OpCategory::dense, "dense_forward_backward", 0, 0, 500000, 0, 0},
             ss::OpEvent{1, Lane::comm, OpCategory::comm, "output_dist/all_to_all", 0, 500000, 700000, 0, 0}});
  w.close("complete");
  return db;
}
}  // namespace

TEST(GpuBusyCli, StatsSaysHowBusyTheSharedGpuWasAndWhatTheHostWaited) {
  const std::string db = cuda_like_session();
  const auto cli = [](const std::string& args) {
    return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, embedscope::sessions::testing::import_scratch());
  };
  auto r = cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("workload     hand on 2 cuda ranks sharing 1 GPU (NVIDIA H200 (cuda:0)), 1 measured step"),
            std::string::npos) << r.out;
  // mean (20 + 40) / 2 = 30% < 50%: host-bound
  EXPECT_NE(r.out.find("GPU busy     30.0% of the measured steps, mean over ranks (a kernel or copy running on the "
                       "rank's streams; least rank 0 20.0%, most rank 1 40.0%): host-bound"),
            std::string::npos) << r.out;
  // host exposed comm: (400 + 200) / 2 = 300 us per rank, one step
  EXPECT_NE(r.out.find("host         the ranks' threads waited in collectives 0.30 ms per rank (0.30 ms per step)"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GPU trace    CUPTI dropped 3 activity records (its buffers were full)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GPU trace    1 kernel launch was forgotten before the kernel came"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GPU trace    2 GPU ops or allocations came from no rank's stream or thread: charged to the last "
                       "rank on their GPU (a guess: ranks share it)"),
            std::string::npos) << r.out;
  r = cli("stats --json " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["ranks"][0]["gpu_busy_pct"].get<double>(), 20.0);
  EXPECT_EQ(j["ranks"][0]["host_exposed_comm_ns"], 400000);
  EXPECT_EQ(j["ranks"][1]["host_exposed_comm_ns"], 200000);
  EXPECT_EQ(j["ranks"][1]["window_ns"], 1000000);
  EXPECT_EQ(j["gpu_trace"]["dropped_records"], 3);
  EXPECT_EQ(j["gpu_trace"]["launches_dropped"], 1);
  EXPECT_EQ(j["gpu_trace"]["device_rank_fallbacks"], 2);
  // the collectives are the host threads' spans, one per rank and step; the GPU copy that carried
  // rank 0's (memcpy_dtod on gpu_comm) is not another collective (tester40 #3, #5)
  std::map<std::string, int64_t> counts;
  for (const auto& c : j["collectives"]) counts[c["name"].get<std::string>()] = c["count"].get<int64_t>();
  EXPECT_EQ(counts, (std::map<std::string, int64_t>{{"output_dist/all_to_all", 2}}));
  const std::string text = cli("stats " + db).out;
  EXPECT_NE(text.find("collectives, per step (summed over ranks; the host threads' spans"), std::string::npos) << text;
  EXPECT_NE(text.find("time by op category (union per category on each rank, GPU streams): summed over 2 ranks x 1 "
                      "measured step, and per rank and step"),
            std::string::npos)
      << text;
  // rank 1's 400 us gemm: 0.40 ms summed, 200 us per rank and step (tester41 #10)
  EXPECT_TRUE(std::regex_search(text, std::regex("\n  dense +0\\.40 ms +200\\.0 us\n"))) << text;
  // which ranks shared which GPU (tester38 #11), as the text says it
  ASSERT_EQ(j["gpus"].size(), 1u);
  EXPECT_EQ(j["gpus"][0]["device"], "NVIDIA H200 (cuda:0)");
  EXPECT_EQ(j["gpus"][0]["ranks"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(j["gpus_text"], "sharing 1 GPU (NVIDIA H200 (cuda:0))");
  std::remove(db.c_str());
}

// tester38 #12: a cold first measured step (warm-up 0) is said, with its factor over the median;
// #17: a run that ended before its first measured step has null figures in --json, not zeros.
TEST(GpuBusyCli, AColdFirstStepIsSaidAndNoStepMeansNullFigures) {
  const std::string db = embedscope::sessions::testing::scratch_db("cold_step.db");
  std::remove(db.c_str());
  {
    ss::SessionWriter w(db);
    w.set_metadata("world_size", "1");
    w.set_metadata("warmup_steps", "0");
    w.add_lane({0, 0, "compute", "thread"});
    int64_t t = 0;
    for (int st = 0; st < 4; ++st) {  // 10 ms, then 1 ms, 1 ms, 1 ms: median 1 ms
      const int64_t d = st == 0 ? 10'000'000 : 1'000'000;
      w.add_step({st, 0, t, t + d, 0.5, 0, 0});
      w.add_ops({ss::OpEvent{0, ss::Lane::compute, ss::OpCategory::dense, "dense", st, t, t + d / 4, 0, 0},
                 ss::OpEvent{0, ss::Lane::compute, ss::OpCategory::dense, "dense", st, t + d / 2, t + 3 * d / 4, 0, 0}});
      // (an untraced quarter between the two ops)
      t += d;
    }
    w.close("complete");
  }
  const auto cli = [](const std::string& args) {
    return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, embedscope::sessions::testing::import_scratch());
  };
  auto r = cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step 0 took 10.00 ms, 10.0x the median (the first measured step: a cold start); warmup_steps is 0"),
            std::string::npos) << r.out;
  // the untraced quarter of each step on the critical path, named as the text names it (tester38 #16)
  r = cli("stats --json " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto cp = nlohmann::json::parse(r.out)["critical_path"];
  ASSERT_FALSE(cp["ops"].empty()) << cp;
  EXPECT_NE(cp.dump().find("(gap: untraced)"), std::string::npos) << cp;
  EXPECT_EQ(cp.dump().find("\"(gap)\""), std::string::npos) << cp;
  std::remove(db.c_str());
  {
    ss::SessionWriter w(db);
    w.set_metadata("world_size", "1");
    w.add_lane({0, 0, "compute", "thread"});
    w.close("crashed");
  }
  r = cli("stats --json " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["steps"], 0);
  EXPECT_TRUE(j["step_time_ns"].is_null()) << j["step_time_ns"];
  EXPECT_TRUE(j["samples_per_s"].is_null());
  EXPECT_TRUE(j["imbalance"].is_null());
  EXPECT_EQ(j["gpus"], nlohmann::json::array());  // ranks on no GPU
  EXPECT_TRUE(j["gpus_text"].is_null());
  std::remove(db.c_str());
}
