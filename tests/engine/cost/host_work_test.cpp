// Per-item host work of cpu ranks' kernels (lookup44, cost/cost_model.h host_work_ns): the
// program's counts of bags pooled, ids made and items bucketized (by hand on tiny), compute_ns
// with the profile's per-item coefficients (by hand), the optional profile fields' errors, and
// calibrate recovering known coefficients from sessions timed by a profile that has them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "embedscope/engine/cost/calibration.h"
#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec_error.h"
#include "engine/cost/cost_sessions.h"

namespace es = embedscope::engine;

namespace {

const std::string kHostWorkProfile = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers_host_work.json";

es::WorkloadSpec tiny_host_work(int world, es::ShardingType type) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.count = world;
  s.sharding.default_type = type;
  s.sharding.per_table.clear();
  return s;
}

const es::ProgramOp& host_work_op(const es::StepProgram& p, const std::string& name) {
  for (const auto& op : p.ops)
    if (op.name == name) return op;
  throw std::runtime_error("no op " + name);
}

std::string host_work_profile_error(const nlohmann::json& j) {
  try {
    es::parse_hardware_profile(j.dump(), "p.json");
  } catch (const es::SpecError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// tiny: B 8; features f_small, f_a, f_b0, f_b1, f_c of mean pooling 1, 2, 3, 3, 2 (11 ids a sample).
TEST(HostWork, RowWiseLookupPoolsEveryRanksBagsEmptyOnesIncluded) {
  const es::WorkloadSpec rw = tiny_host_work(2, es::ShardingType::row_wise);
  for (int r = 0; r < 2; ++r) {
    const es::StepProgram p = es::build_step_program(rw, es::plan_sharding(rw), r, 0);
    // each rank holds one row shard of every table: 5 (shard, feature) slots, each pooling the
    // B bags of both ranks (W x B = 16), most of them empty of this shard's rows: 5 x 16 = 80
    const es::ProgramOp& lookup = host_work_op(p, "lookup");
    EXPECT_EQ(lookup.work, es::HostWork::lookup_bags);
    EXPECT_EQ(lookup.work_items, 80) << "rank " << r;
    // input: the rank's 8 x 11 = 88 ids
    EXPECT_EQ(host_work_op(p, "input").work, es::HostWork::input_ids);
    EXPECT_EQ(host_work_op(p, "input").work_items, 88);
    // bucketize: 10 slots (2 per feature), each B bags + its feature's ids:
    // 2 x 8 x ((1+1) + (1+2) + (1+3) + (1+3) + (1+2)) = 2 x 8 x 16 = 256
    EXPECT_EQ(host_work_op(p, "bucketize").work, es::HostWork::bucketize_items);
    EXPECT_EQ(host_work_op(p, "bucketize").work_items, 256);
    EXPECT_EQ(host_work_op(p, "kjt_permute").work, es::HostWork::none);
    EXPECT_EQ(host_work_op(p, "kjt_permute").work_items, 0);
  }
  // table_wise: t_c (f_c) on rank 0, the other three tables (4 features) on rank 1; one slot a
  // feature, so bucketize scans 8 x 16 = 128 items on both ranks
  const es::WorkloadSpec tw = tiny_host_work(2, es::ShardingType::table_wise);
  const es::StepProgram p0 = es::build_step_program(tw, es::plan_sharding(tw), 0, 0);
  const es::StepProgram p1 = es::build_step_program(tw, es::plan_sharding(tw), 1, 0);
  EXPECT_EQ(host_work_op(p0, "lookup").work_items, 1 * 16);
  EXPECT_EQ(host_work_op(p1, "lookup").work_items, 4 * 16);
  EXPECT_EQ(host_work_op(p0, "bucketize").work_items, 128);
  EXPECT_EQ(host_work_op(p1, "bucketize").work_items, 128);
  // data_parallel: no slot; each replicated table's B bags per feature, 5 x 8 = 40, nothing to bucketize
  const es::WorkloadSpec dp = tiny_host_work(2, es::ShardingType::data_parallel);
  const es::StepProgram pd = es::build_step_program(dp, es::plan_sharding(dp), 0, 0);
  EXPECT_EQ(host_work_op(pd, "lookup").work_items, 40);
  EXPECT_EQ(host_work_op(pd, "bucketize").work_items, 0);
}

TEST(HostWork, ComputeNsAddsItemsTimesTheProfilesCoefficient) {
  const es::HardwareProfile hw = es::load_hardware_profile(kHostWorkProfile);
  EXPECT_DOUBLE_EQ(hw.gpu.lookup_bag_ns, 0.5);
  EXPECT_DOUBLE_EQ(hw.gpu.input_id_ns, 20.0);
  EXPECT_DOUBLE_EQ(hw.gpu.bucketize_item_ns, 2.0);
  es::ProgramOp lookup;
  lookup.category = embedscope::sessions::OpCategory::lookup;
  lookup.bytes = 1'000'000;  // 1e6 B / (1e12 B/s x 0.5) = 2 us
  lookup.work = es::HostWork::lookup_bags;
  lookup.work_items = 8192;  // x 0.5 ns = 4,096 ns
  EXPECT_EQ(es::host_work_ns(lookup, hw), 4096);
  EXPECT_EQ(es::compute_ns(lookup, hw), 1000 + 2000 + 4096);
  es::ProgramOp input;
  input.category = embedscope::sessions::OpCategory::input;
  input.bytes = 1'000'000;  // a memory kernel at efficiency 1: 1 us
  input.work = es::HostWork::input_ids;
  input.work_items = 88;  // x 20 ns = 1,760 ns
  EXPECT_EQ(es::compute_ns(input, hw), 1000 + 1000 + 1760);
  input.work = es::HostWork::bucketize_items;
  input.work_items = 256;  // x 2 ns = 512 ns
  EXPECT_EQ(es::compute_ns(input, hw), 1000 + 1000 + 512);
  input.work = es::HostWork::none;
  EXPECT_EQ(es::compute_ns(input, hw), 1000 + 1000);
  // the built-in GPU profiles give no per-item work: the same op costs its roofline alone
  const es::HardwareProfile h100 = es::load_hardware_profile("h100_sxm");
  EXPECT_EQ(h100.gpu.lookup_bag_ns, 0.0);
  EXPECT_EQ(h100.gpu.input_id_ns, 0.0);
  EXPECT_EQ(h100.gpu.bucketize_item_ns, 0.0);
  EXPECT_EQ(es::host_work_ns(lookup, h100), 0);
}

TEST(HostWork, ProfileFieldsAreOptionalAndCheckedByJsonPointer) {
  std::ifstream f(kHostWorkProfile);
  const nlohmann::json valid = nlohmann::json::parse(f);
  EXPECT_EQ(host_work_profile_error(valid), "");
  nlohmann::json j = valid;
  j["gpu"]["lookup_bag_ns"] = -1;
  EXPECT_EQ(host_work_profile_error(j), "p.json: /gpu/lookup_bag_ns: must be in [0, 1e+09], got -1");
  j = valid;
  j["gpu"]["input_id_ns"] = "fast";
  EXPECT_EQ(host_work_profile_error(j), "p.json: /gpu/input_id_ns: must be a number, got string");
  j = valid;
  j["gpu"]["bucketize_item_ns"] = nullptr;
  EXPECT_EQ(host_work_profile_error(j), "p.json: /gpu/bucketize_item_ns: must be a number, got null");
  j = valid;
  j["gpu"].erase("lookup_bag_ns");  // optional: 0
  EXPECT_EQ(es::parse_hardware_profile(j.dump(), "p.json").gpu.lookup_bag_ns, 0.0);
  // round trip: written only when > 0, read back equal
  const es::HardwareProfile p = es::parse_hardware_profile(valid.dump(), "p.json");
  const nlohmann::json back = es::to_json(p);
  EXPECT_EQ(back["gpu"]["lookup_bag_ns"], 0.5);
  EXPECT_EQ(back["gpu"]["input_id_ns"], 20.0);
  EXPECT_EQ(back["gpu"]["bucketize_item_ns"], 2.0);
  EXPECT_FALSE(es::to_json(es::load_hardware_profile("h100_sxm"))["gpu"].contains("lookup_bag_ns"));
}

// Sessions timed by round_numbers_host_work (criteo_kaggle, B 4096, 2 ranks, table_wise and
// row_wise), marked measured: calibrate gets its per-item coefficients back beside the rates.
TEST(HostWork, CalibrateRecoversThePerItemCoefficients) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("es_host_work_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string a = embedscope::test_support::criteo_as_measured(kHostWorkProfile, (dir / "tw.db").string(), 2,
                                                                     es::ShardingType::table_wise, 3, "");
  const std::string b = embedscope::test_support::criteo_as_measured(kHostWorkProfile, (dir / "rw.db").string(), 2,
                                                                     es::ShardingType::row_wise, 3, "");
  const es::Calibration cal = es::calibrate({a, b});
  EXPECT_NEAR(cal.profile.gpu.lookup_bag_ns / 0.5, 1.0, 0.02);
  EXPECT_NEAR(cal.profile.gpu.input_id_ns / 20.0, 1.0, 0.02);
  EXPECT_NEAR(cal.profile.gpu.bucketize_item_ns / 2.0, 1.0, 0.02);
  std::map<std::string, double> rate;
  for (const auto& f : cal.fits) rate[f.what] = f.rate;
  EXPECT_NEAR(rate["lookup"] / 5e11, 1.0, 0.02);
  EXPECT_NEAR(rate["memory_kernels"] / 1e12, 1.0, 0.02);
  EXPECT_NEAR(rate["input_id"] / (1e9 / 20.0), 1.0, 0.02);
  EXPECT_NEAR(static_cast<double>(cal.kernel_launch_ns), 1000.0, 20.0);
  EXPECT_TRUE(cal.profile.sources.count("/gpu/lookup_bag_ns"));
  // table_wise alone, one id a bag: a lookup's bytes are 136 B a bag (16 x 4 read + 8 + 16 x 4
  // written), so bags and bytes cannot be told apart: the bag term is left out and says why (the
  // rate takes the bags' time), the other terms are still recovered
  const es::Calibration tw_only = es::calibrate({a});
  EXPECT_EQ(tw_only.profile.gpu.lookup_bag_ns, 0.0);
  std::string note;
  for (const auto& f : tw_only.fits)
    if (f.what == "lookup_bag") note = f.note;
  EXPECT_NE(note.find("cannot be told apart"), std::string::npos) << note;
  EXPECT_NEAR(tw_only.profile.gpu.input_id_ns / 20.0, 1.0, 0.02);
  std::filesystem::remove_all(dir);
}
