// lm45: the Summary of an lm_embedding session compares each rank's measured peak with the LM
// estimate's allocator replay (planner/lm_memory_estimate.h peak_allocated_bytes), so a session
// whose large buffers get unsplit 2 MiB-rounded blocks no longer shows "+N MiB over the plan" in red.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/store/session.h"
#include "models/sharding_plan_model.h"

namespace {

using namespace embedscope;
using namespace embedscope::ui;

std::filesystem::path lm45_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / (std::to_string(getpid()) + "_lm45_" + name);
}

// V 190,000 x H 16 fp32 tied on 1 rank, 32 tokens, 1 step (tester43 F3's workload): peak allocated
// 50,352,640 B (tests/engine/planner/lm_memory_replay_test.cpp by hand), above the sum
// of requested bytes that lm44's Summary compared it with.
nlohmann::json lm45_workload() {
  return nlohmann::json::parse(R"({"model": "lm_embedding", "name": "lm45", "vocab_size": 190000, "hidden_size": 16,
    "sequence_length": 32, "micro_batch_size": 1, "devices": {"count": 1}, "steps": 1,
    "sharding": {"type": "vocab_parallel"}, "token_ids": {"distribution": "zipf", "alpha": 1.0}})");
}

void expect_no_red_line(const std::string& session_path) {
  const sessions::SessionReader r(session_path);
  ShardingPlanModel m(r, sessions::analyze(r));
  ASSERT_EQ(m.ranks().size(), 1u);
  const auto& row = m.ranks()[0];
  EXPECT_EQ(row.planned_bytes, 50'352'640);
  EXPECT_EQ(row.peak_planned_bytes, 50'352'640);
  EXPECT_EQ(row.peak_bytes, 50'352'640);
  EXPECT_TRUE(m.under_planned().empty());
  EXPECT_TRUE(m.under_planned_text().isEmpty()) << m.under_planned_text().toStdString();
  const QString peak = m.data(m.index(0, ShardingPlanModel::PeakMemory), Qt::DisplayRole).toString();
  EXPECT_FALSE(peak.contains("over the plan")) << peak.toStdString();
  EXPECT_FALSE(m.data(m.index(0, ShardingPlanModel::PeakMemory), Qt::ForegroundRole).isValid());
}

TEST(Lm45Summary, MeasuredLmSessionPeakEqualsItsPlanNoRedLine) {
  const std::string p = lm45_path("measured.db").string();
  engine::LmRunOptions opt;
  opt.session_path = p;
  opt.overwrite = true;
  engine::run_lm(engine::parse_lm_workload(lm45_workload(), "lm45"), opt);
  expect_no_red_line(p);
  std::filesystem::remove(p);
}

// A simulated LM session records the estimate's replay as its memory (peak allocated 50,352,640 B,
// reserved 50 MiB): the Summary compares it with itself.
TEST(Lm45Summary, SimulatedLmSessionRecordsTheReplayedPeak) {
  const std::string p = lm45_path("simulated.db").string();
  engine::LmSimulateOptions opt;
  opt.session_path = p;
  opt.overwrite = true;
  opt.hardware = "h100_sxm";
  engine::simulate_lm(engine::parse_lm_workload(lm45_workload(), "lm45"), opt);
  {
    const sessions::SessionReader r(p);
    const auto counters = r.memory_counters();
    ASSERT_EQ(counters.size(), 1u);
    EXPECT_EQ(counters[0].peak_allocated, 50'352'640);
    EXPECT_EQ(counters[0].peak_reserved, 50 << 20);
  }
  expect_no_red_line(p);
  std::filesystem::remove(p);
}

}  // namespace
