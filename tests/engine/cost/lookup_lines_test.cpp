// The lookup's per-line host work (look46, program/step_program.h HostWork::lookup_row_lines, the
// lookup op's second term ProgramOp::work2; cost/cost_model.h host_work_ns): the cache lines of a
// stored row (ProgramSink::lookup_row_lines, by hand), the program's count of distinct rows x
// lines over the local shards (by hand on tiny with uniform ids: a shard of R rows named by n ids
// has R (1 - (1 - 1/R)^n) distinct rows expected), host_work_ns charging both of the lookup's
// terms, the fit telling the line column from the bytes and the bags only where it spreads, and
// calibrate recovering the coefficient from sessions timed by a profile that has it.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "cost/calibration_detail.h"
#include "embedscope/engine/cost/calibration.h"
#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/workload/presets.h"
#include "engine/cost/cost_sessions.h"
#include "program/program_sink.h"

namespace es = embedscope::engine;

namespace {

const std::string kLookupLinesProfile = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers_lookup_lines.json";

// tiny (B 8; t_small 1 row, t_a 10, t_b 100 read by f_b0 and f_b1, t_c 1,000; mean pooling
// 1, 2, 3 + 3, 2) with uniform ids everywhere, t_c 20 columns (80 B: two lines; the others 4 to
// 8 columns, one line) and row-wise Adagrad (4 B of state a row: the update's lines differ)
es::WorkloadSpec tiny_lookup_lines(int world, es::ShardingType type) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.count = world;
  s.sharding.default_type = type;
  s.sharding.per_table.clear();
  for (auto& f : s.features) f.ids = es::IdDistribution{};
  for (auto& t : s.tables)
    if (t.name == "t_c") t.embedding_dim = 20;
  s.optimizer.type = es::OptimizerType::rowwise_adagrad;
  return s;
}

const es::ProgramOp& lookup_lines_op(const es::StepProgram& p, const std::string& name) {
  for (const auto& op : p.ops)
    if (op.name == name) return op;
  throw std::runtime_error("no " + name);
}

// expected distinct rows of R uniform rows named by n ids
double lookup_lines_distinct(double R, double n) { return R * (1.0 - std::pow(1.0 - 1.0 / R, n)); }

}  // namespace

TEST(LookupLines, LinesOfAStoredRowRoundedUp) {
  es::TableSpec t;
  t.data_type = es::TableDataType::fp32;
  EXPECT_EQ(es::program::ProgramSink::lookup_row_lines(t, 4), 1.0);    // 16 B: a whole line
  EXPECT_EQ(es::program::ProgramSink::lookup_row_lines(t, 16), 1.0);   // 64 B
  EXPECT_EQ(es::program::ProgramSink::lookup_row_lines(t, 17), 2.0);   // 68 B
  EXPECT_EQ(es::program::ProgramSink::lookup_row_lines(t, 128), 8.0);  // 512 B
  t.data_type = es::TableDataType::fp16;
  EXPECT_EQ(es::program::ProgramSink::lookup_row_lines(t, 64), 2.0);  // 128 B
  t.data_type = es::TableDataType::fp32;
  t.low_rank_dim = 20;  // the A row: 20 fp32 values, 80 B, whatever the columns
  EXPECT_EQ(es::program::ProgramSink::lookup_row_lines(t, 1000), 2.0);
}

// One rank holds every table: the lookup reads each table's distinct rows among its batch's ids,
// t_c's two lines a row; its bags stay its first term. The update pays a line more a row for
// the Adagrad state (t_c: 84 B, two lines).
TEST(LookupLines, OneRankCountsEachShardsDistinctRowsTimesTheirLines) {
  const es::WorkloadSpec s = tiny_lookup_lines(1, es::ShardingType::table_wise);
  const es::StepProgram p = es::build_step_program(s, es::plan_sharding(s), 0, 0);
  const es::ProgramOp& lookup = lookup_lines_op(p, "lookup");
  EXPECT_EQ(lookup.work, es::HostWork::lookup_bags);
  EXPECT_EQ(lookup.work2, es::HostWork::lookup_row_lines);
  // t_small 1 row 8 ids, t_a 10 rows 16 ids, t_b 100 rows 48 ids (two features, one shard),
  // t_c 1,000 rows 16 ids x 2 lines: 1 + 8.147 + 38.271 + 2 x 15.880 = 79.18
  const double u_small = lookup_lines_distinct(1, 8), u_a = lookup_lines_distinct(10, 16);
  const double u_b = lookup_lines_distinct(100, 48), u_c = lookup_lines_distinct(1000, 16);
  const double want = u_small + u_a + u_b + 2 * u_c;
  EXPECT_NEAR(want, 79.18, 0.01);
  EXPECT_EQ(lookup.work2_items, std::llround(want));
  // the update: row + state lines, 2 a row, t_c 3 (80 B of row, 4 B of state):
  // 2 x (1 + 8.147 + 38.271) + 3 x 15.880 = 142.48
  const es::ProgramOp& bwd = lookup_lines_op(p, "backward_fused_optimizer");
  EXPECT_NEAR(2 * (u_small + u_a + u_b) + 3 * u_c, 142.48, 0.01);
  EXPECT_EQ(bwd.work_items, std::llround(2 * (u_small + u_a + u_b) + 3 * u_c));
  for (const auto& op : p.ops)
    if (op.name != "lookup") {
      EXPECT_EQ(op.work2, es::HostWork::none) << op.name;
    }
}

// Row-wise on 2 ranks: each rank reads its half of every table (t_small's one row: rank 0),
// named by its share of every rank's ids.
TEST(LookupLines, RowWiseShardsCountTheirOwnRowsDistinctRows) {
  const es::WorkloadSpec s = tiny_lookup_lines(2, es::ShardingType::row_wise);
  const es::ShardingPlan plan = es::plan_sharding(s);
  double total = 0;
  for (int r = 0; r < 2; ++r)
    total += static_cast<double>(lookup_lines_op(es::build_step_program(s, plan, r, 0), "lookup").work2_items);
  // t_small 1 row 16 ids, t_a 2 x (5 rows, 16 ids), t_b 2 x (50 rows, 48 ids), t_c 2 x (500 rows,
  // 16 ids) x 2 lines: 1 + 2 x 4.8593 + 2 x 31.041 + 4 x 15.762 = 135.85; each rank's count rounded
  const double want = lookup_lines_distinct(1, 16) +
                      2 * (lookup_lines_distinct(5, 16) + lookup_lines_distinct(50, 48) + 2 * lookup_lines_distinct(500, 16));
  EXPECT_NEAR(want, 135.85, 0.01);
  EXPECT_NEAR(total, want, 1.0);
}

// host_work_ns: 8,192 bags at 0.5 ns and 1,000 lines at 40 ns; a GPU profile (0 for both) 0.
TEST(LookupLines, HostWorkChargesTheBagsAndTheLines) {
  const es::HardwareProfile hw = es::load_hardware_profile(kLookupLinesProfile);
  es::ProgramOp op;
  op.category = embedscope::sessions::OpCategory::lookup;
  op.work = es::HostWork::lookup_bags;
  op.work_items = 8192;
  op.work2 = es::HostWork::lookup_row_lines;
  op.work2_items = 1000;
  EXPECT_EQ(es::host_work_ns(op, hw), 4096 + 40000);
  op.work2_items = -5;  // negative counts charge nothing
  EXPECT_EQ(es::host_work_ns(op, hw), 4096);
  op.work2_items = 1000;
  EXPECT_EQ(es::host_work_ns(op, es::load_hardware_profile("h100_sxm")), 0);
  // compute_ns on the GPU profile: the lines change nothing
  const es::HardwareProfile h100 = es::load_hardware_profile("h100_sxm");
  op.bytes = 1 << 20;
  const int64_t with = es::compute_ns(op, h100);
  op.work2 = es::HostWork::none;
  EXPECT_EQ(es::compute_ns(op, h100), with);
}

// The fit (calibration_detail.h fit_compute): lookups timed 1,000 + bytes / 1e11 B/s + 0.5 ns a
// bag + 40 ns a line, memory kernels at 1e12 B/s. Lines that spread beside the bytes and the bags
// are recovered; lines that are the ids of 64 B rows (bytes = 72 ids + 64 bags: then any line
// time is some bytes' and bags' time, here none) are not identifiable beside the bags and are
// left out, the bags and the rate fitted as without them.
TEST(LookupLines, FitTellsTheLinesFromTheBytesAndBagsOnlyWhereTheySpread) {
  namespace calib = es::calib;
  const auto samples = [](bool lines_are_ids) {
    std::vector<calib::Sample> v;
    for (int i = 0; i < 12; ++i) {
      const double ids = 1000.0 * (1 + i % 4), bags = 4096.0 * (1 + i % 3);
      const double lines = lines_are_ids ? ids : std::floor(ids * (0.2 + 0.05 * (i % 5)));
      const double bytes = 72 * ids + 64 * bags;
      calib::Sample s{};
      s.cls = calib::kLookup;
      s.x = bytes;
      s.t = 1000 + bytes / 100.0 + 0.5 * bags + (lines_are_ids ? 0.0 : 40 * lines);
      s.work = static_cast<int>(es::HostWork::lookup_bags);
      s.items = bags;
      s.work2 = static_cast<int>(es::HostWork::lookup_row_lines);
      s.items2 = lines;
      v.push_back(s);
    }
    for (int i = 1; i <= 6; ++i) {  // memory kernels at 1e12 B/s
      const double bytes = 1e6 * i;
      calib::Sample s{};
      s.cls = calib::kMemory;
      s.x = bytes;
      s.t = 1000 + bytes / 1000.0;
      v.push_back(s);
    }
    return v;
  };
  const calib::ComputeFit spread = calib::fit_compute(samples(false), {1.0});
  EXPECT_NEAR(spread.item_ns[4], 40.0, 1e-6);
  EXPECT_NEAR(spread.item_ns[0], 0.5, 1e-6);
  EXPECT_NEAR(spread.rate[calib::kLookup], 1e11, 1e3);
  EXPECT_EQ(spread.item_count[4], 12);
  EXPECT_TRUE(spread.item_note[4].empty());
  const calib::ComputeFit collinear = calib::fit_compute(samples(true), {1.0});
  EXPECT_EQ(collinear.item_ns[4], 0.0);
  EXPECT_FALSE(collinear.item_note[4].empty());
  EXPECT_TRUE(collinear.item_note[0].empty());  // the bags are checked against the bytes alone, as before
  EXPECT_NEAR(collinear.item_ns[0], 0.5, 1e-6);
  EXPECT_NEAR(collinear.rate[calib::kLookup], 1e11, 1e3);
}

// Sessions timed by round_numbers_lookup_lines (40 ns a lookup line, 30 an update line;
// criteo_kaggle, 2 ranks, table_wise and row_wise), marked measured: calibrate gets both
// per-line coefficients back beside the rates.
TEST(LookupLines, CalibrateRecoversThePerLineCoefficient) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("es_lookup_lines_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string a = embedscope::test_support::criteo_as_measured(kLookupLinesProfile, (dir / "tw.db").string(), 2,
                                                                     es::ShardingType::table_wise, 3, "");
  const std::string b = embedscope::test_support::criteo_as_measured(kLookupLinesProfile, (dir / "rw.db").string(), 2,
                                                                     es::ShardingType::row_wise, 3, "");
  const es::Calibration cal = es::calibrate({a, b});
  EXPECT_NEAR(cal.profile.gpu.lookup_line_ns / 40.0, 1.0, 0.02);
  EXPECT_NEAR(cal.profile.gpu.update_line_ns / 30.0, 1.0, 0.02);
  std::map<std::string, double> rate;
  for (const auto& f : cal.fits) rate[f.what] = f.rate;
  EXPECT_NEAR(rate["lookup_line"] / (1e9 / 40.0), 1.0, 0.02);
  EXPECT_NEAR(rate["lookup"] / 5e11, 1.0, 0.02);  // 1e12 B/s x 0.5
  EXPECT_TRUE(cal.profile.sources.count("/gpu/lookup_line_ns"));
  std::filesystem::remove_all(dir);
}
