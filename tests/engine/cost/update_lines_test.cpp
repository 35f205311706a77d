// The embedding backward's per-line host work (opt45, program/step_program.h
// HostWork::update_row_lines, cost/cost_model.h host_work_ns): the cache lines of a distinct row
// and its optimizer state (ProgramSink::update_row_lines, by hand), the program's count of
// distinct rows x lines over the local shards (by hand on tiny with uniform ids: a shard of R rows
// named by n ids has R (1 - (1 - 1/R)^n) distinct rows expected), and calibrate recovering the
// coefficient from sessions timed by a profile that has it.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include <unistd.h>

#include "embedscope/engine/cost/cache_model.h"
#include "embedscope/engine/cost/calibration.h"
#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/workload/presets.h"
#include "engine/cost/cost_sessions.h"
#include "program/program_sink.h"

namespace es = embedscope::engine;

namespace {

const std::string kUpdateLinesProfile = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers_update_lines.json";

// tiny (B 8; t_small 1 row, t_a 10, t_b 100 read by f_b0 and f_b1, t_c 1,000; mean pooling
// 1, 2, 3 + 3, 2; sgd, fp32 rows of 4 to 12 columns: one line each) with uniform ids everywhere
es::WorkloadSpec tiny_uniform_ids(int world, es::ShardingType type) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.count = world;
  s.sharding.default_type = type;
  s.sharding.per_table.clear();
  for (auto& f : s.features) f.ids = es::IdDistribution{};
  return s;
}

const es::ProgramOp& update_lines_bwd(const es::StepProgram& p) {
  for (const auto& op : p.ops)
    if (op.name == "backward_fused_optimizer") return op;
  throw std::runtime_error("no backward_fused_optimizer");
}

// expected distinct rows of R uniform rows named by n ids
double uniform_distinct(double R, double n) { return R * (1.0 - std::pow(1.0 - 1.0 / R, n)); }

}  // namespace

TEST(UpdateLines, LinesOfARowAndItsStateRoundedUpEach) {
  es::TableSpec t;
  t.data_type = es::TableDataType::fp32;
  t.optimizer_state_type = es::OptimizerStateType::fp32;
  EXPECT_EQ(es::program::ProgramSink::update_row_lines(t, 16, es::OptimizerType::sgd), 1.0);  // 64 B
  EXPECT_EQ(es::program::ProgramSink::update_row_lines(t, 4, es::OptimizerType::sgd), 1.0);   // 16 B: a whole line
  EXPECT_EQ(es::program::ProgramSink::update_row_lines(t, 17, es::OptimizerType::sgd), 2.0);  // 68 B
  // 512 B of row, 4 B of state (one value a row)
  EXPECT_EQ(es::program::ProgramSink::update_row_lines(t, 128, es::OptimizerType::rowwise_adagrad), 9.0);
  // two moments of 16 fp32 values: 128 B of state
  EXPECT_EQ(es::program::ProgramSink::update_row_lines(t, 16, es::OptimizerType::adam), 3.0);
  t.data_type = es::TableDataType::fp16;  // 64 B of row
  t.optimizer_state_type = es::OptimizerStateType::fp16;
  EXPECT_EQ(es::program::ProgramSink::update_row_lines(t, 32, es::OptimizerType::rowwise_adagrad), 2.0);
  t.low_rank_dim = 8;  // the A row: 8 fp32 values, 32 B; 16 B of fp16 adam moments
  EXPECT_EQ(es::program::ProgramSink::update_row_lines(t, 1000, es::OptimizerType::adam), 2.0);
}

// One rank holds every table: the distinct rows of each table among its batch's ids, one line a
// row (sgd, no state). t_b's two features send their ids to one shard: 48 ids, not 24 twice.
TEST(UpdateLines, OneRankCountsEachShardsDistinctRowsOnce) {
  const es::WorkloadSpec s = tiny_uniform_ids(1, es::ShardingType::table_wise);
  const es::StepProgram p = es::build_step_program(s, es::plan_sharding(s), 0, 0);
  const es::ProgramOp& bwd = update_lines_bwd(p);
  EXPECT_EQ(bwd.work, es::HostWork::update_row_lines);
  // t_small 1 row 8 ids, t_a 10 rows 16 ids, t_b 100 rows 48 ids, t_c 1,000 rows 16 ids:
  // 1 + 8.147 + 38.271 + 15.880 = 63.30
  const double want = uniform_distinct(1, 8) + uniform_distinct(10, 16) + uniform_distinct(100, 48) +
                      uniform_distinct(1000, 16);
  EXPECT_NEAR(want, 63.30, 0.01);
  EXPECT_EQ(bwd.work_items, std::llround(want));
}

// Row-wise on 2 ranks: each rank updates its half of every table (t_small's one row: rank 0),
// named by its share of every rank's ids (W x B x pooling x half).
TEST(UpdateLines, RowWiseShardsCountTheirOwnRowsDistinctRows) {
  const es::WorkloadSpec s = tiny_uniform_ids(2, es::ShardingType::row_wise);
  const es::ShardingPlan plan = es::plan_sharding(s);
  double total = 0;
  for (int r = 0; r < 2; ++r) {
    const es::StepProgram p = es::build_step_program(s, plan, r, 0);
    total += static_cast<double>(update_lines_bwd(p).work_items);
  }
  // t_small 1 row 16 ids, t_a 2 x (5 rows, 16 ids), t_b 2 x (50 rows, 48 ids), t_c 2 x (500 rows,
  // 16 ids): 1 + 2 x 4.8593 + 2 x 31.041 + 2 x 15.762 = 104.32; each rank's count rounded
  const double want = uniform_distinct(1, 16) +
                      2 * (uniform_distinct(5, 16) + uniform_distinct(50, 48) + uniform_distinct(500, 16));
  EXPECT_NEAR(want, 104.32, 0.01);
  EXPECT_NEAR(total, want, 1.0);
}

TEST(UpdateLines, ComputeNsAddsLinesTimesTheCoefficient) {
  es::HardwareProfile hw = es::load_hardware_profile(kUpdateLinesProfile);
  es::ProgramOp op;
  op.category = embedscope::sessions::OpCategory::optimizer;
  op.work = es::HostWork::update_row_lines;
  op.work_items = 1000;
  EXPECT_EQ(es::host_work_ns(op, hw), std::llround(1000 * hw.gpu.update_line_ns));
  EXPECT_EQ(es::host_work_ns(op, hw), 30000);
  EXPECT_EQ(es::host_work_ns(op, es::load_hardware_profile("h100_sxm")), 0);
}

// Sessions timed by round_numbers_update_lines (30 ns a line; criteo_kaggle, 2 ranks, table_wise
// and row_wise), marked measured: calibrate gets the per-line coefficient back beside the rates.
TEST(UpdateLines, CalibrateRecoversThePerLineCoefficient) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("es_update_lines_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string a = embedscope::test_support::criteo_as_measured(kUpdateLinesProfile, (dir / "tw.db").string(), 2,
                                                                     es::ShardingType::table_wise, 3, "");
  const std::string b = embedscope::test_support::criteo_as_measured(kUpdateLinesProfile, (dir / "rw.db").string(), 2,
                                                                     es::ShardingType::row_wise, 3, "");
  const es::Calibration cal = es::calibrate({a, b});
  EXPECT_NEAR(cal.profile.gpu.update_line_ns / 30.0, 1.0, 0.02);
  std::map<std::string, double> rate;
  for (const auto& f : cal.fits) rate[f.what] = f.rate;
  EXPECT_NEAR(rate["update_line"] / (1e9 / 30.0), 1.0, 0.02);
  EXPECT_NEAR(rate["tbe_backward"] / 2.5e11, 1.0, 0.02);  // 1e12 B/s x 0.25
  EXPECT_TRUE(cal.profile.sources.count("/gpu/update_line_ns"));
  std::filesystem::remove_all(dir);
}
