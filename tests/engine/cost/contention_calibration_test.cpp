// CPU contention (hardware_profile.h CpuContention, cost_model.h contention_factor): the factor
// against hand-computed values, the "cpu" block's parsing, the simulator multiplying every
// compute op and collective by it, and calibrate recovering a known background load and the
// profile's rates from sessions of 2 and 4 ranks timed by the cost model with contention
// (relabelled as measured), as the Calibration tests do without it.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/calibration.h"
#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec_error.h"
#include "engine/cost/cost_sessions.h"

namespace es = embedscope::engine;
namespace fs = std::filesystem;

namespace {

fs::path contention_dir() { return embedscope::test_support::cost_scratch_dir("contention"); }

// round_numbers (tests/data/hardware) on one node of 8 cpu ranks sharing 2 cores with 1
// background thread: a rank count n runs max(1, (n + 1) / 2) times slower.
nlohmann::json contended_profile_json() {
  std::ifstream f(std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json");
  nlohmann::json j = nlohmann::json::parse(f);
  j["name"] = "contended_round_numbers";
  j["cluster"] = {{"gpus_per_node", 8}, {"max_nodes", 1}};
  j["cpu"] = {{"cores", 2}, {"threads_per_rank", 1.0}, {"background_threads", 1.0}, {"oversubscription_penalty", 0.0},
              {"other_groups", 0.0}, {"handoff_ns", 0}};
  return j;
}

std::string write_profile(const nlohmann::json& j, const std::string& name) {
  const std::string path = (contention_dir() / name).string();
  std::ofstream(path) << j.dump(2);
  return path;
}

std::string contention_parse_error(const nlohmann::json& j) {
  try {
    es::parse_hardware_profile(j.dump(), "p.json");
  } catch (const es::SpecError& e) {
    return e.what();
  }
  return "";
}

es::WorkloadSpec contended_spec(const std::string& profile, int ranks, es::ShardingType type) {
  es::WorkloadSpec s = es::load_preset("criteo_kaggle");
  s.devices.backend = es::Backend::simulated;
  s.devices.hardware = profile;
  s.devices.count = ranks;
  s.devices.memory_bytes = int64_t{8} << 30;
  s.batch_size = 4096;
  s.steps = 3;
  s.warmup_steps = 1;
  s.sharding.default_type = type;
  return es::with_resolved_backend(s, "test");
}

// A session simulated on `profile`, then marked measured on a machine of 2 cores.
std::string contended_as_measured(const std::string& profile, const std::string& name, int ranks, es::ShardingType type) {
  return embedscope::test_support::criteo_as_measured(profile, (contention_dir() / name).string(), ranks, type, 3,
                                                      "INSERT OR REPLACE INTO metadata (key, value) VALUES ('cpu_cores', '2')");
}

}  // namespace

TEST(CpuContention, FactorIsRunnableThreadsOverCores) {
  es::HardwareProfile hw;
  EXPECT_EQ(es::contention_factor(hw, 8), 1.0);  // cores 0: a GPU profile, no sharing
  hw.cpu = {2, 1.0, 1.0};
  EXPECT_DOUBLE_EQ(es::contention_factor(hw, 1), 1.0);  // (1 + 1) / 2
  EXPECT_DOUBLE_EQ(es::contention_factor(hw, 2), 1.5);  // (2 + 1) / 2
  EXPECT_DOUBLE_EQ(es::contention_factor(hw, 4), 2.5);
  EXPECT_DOUBLE_EQ(es::contention_factor(hw, 8), 4.5);
  hw.cpu = {4, 0.5, 0.0};
  EXPECT_DOUBLE_EQ(es::contention_factor(hw, 4), 1.0);  // 2 busy threads on 4 cores: never faster than alone
  EXPECT_DOUBLE_EQ(es::contention_factor(hw, 16), 2.0);
  // time slicing's own cost, ramped in between 1 and 2 runnable threads per core
  hw.cpu = {2, 1.0, 0.0, 0.5};
  EXPECT_DOUBLE_EQ(es::contention_factor(hw, 2), 1.0);           // x = 1: no penalty
  EXPECT_DOUBLE_EQ(es::contention_factor(hw, 3), 1.5 * 1.25);    // x = 1.5: half of it
  EXPECT_DOUBLE_EQ(es::contention_factor(hw, 4), 2.0 * 1.5);     // x = 2: all of it
  EXPECT_DOUBLE_EQ(es::contention_factor(hw, 8), 4.0 * 1.5);
  // other task groups: the process gets 2 / (1 + 3) cores, its ranks run 4 times as crowded
  hw.cpu = {2, 1.0, 0.0, 0.0, 3.0};
  EXPECT_DOUBLE_EQ(es::contention_factor(hw, 1), 2.0);   // 1 x 4 / 2
  EXPECT_DOUBLE_EQ(es::contention_factor(hw, 2), 4.0);   // 2 x 4 / 2
  EXPECT_DOUBLE_EQ(es::contention_factor(hw, 8), 16.0);  // 8 x 4 / 2
  hw.cpu = {2, 1.0, 1.0, 0.5, 0.5};
  EXPECT_DOUBLE_EQ(es::contention_factor(hw, 2), 2.0 * 1.5);  // x = (2 x 1.5 + 1) / 2 = 2: the whole penalty
}

TEST(CpuContention, ProfileCpuBlockParsesAndBadFieldsNameThePointer) {
  nlohmann::json j = contended_profile_json();
  const es::HardwareProfile p = es::parse_hardware_profile(j.dump(), "p.json");
  EXPECT_EQ(p.cpu.cores, 2);
  EXPECT_EQ(p.cpu.threads_per_rank, 1.0);
  EXPECT_EQ(p.cpu.background_threads, 1.0);
  EXPECT_EQ(es::to_json(p)["cpu"], j["cpu"]);  // written back by calibrate's to_json
  j["cpu"]["cores"] = 0;
  EXPECT_EQ(contention_parse_error(j), "p.json: /cpu/cores: must be in [1, 1048576], got 0");
  j["cpu"]["cores"] = 2;
  j["cpu"]["background_threads"] = -1;
  EXPECT_EQ(contention_parse_error(j), "p.json: /cpu/background_threads: must be in [0, 1e+06], got -1");
  j["cpu"].erase("background_threads");
  EXPECT_EQ(contention_parse_error(j), "p.json: /cpu/background_threads: missing");
  j["cpu"]["background_threads"] = 0;
  j["cpu"]["oversubscription_penalty"] = -1;
  EXPECT_EQ(contention_parse_error(j), "p.json: /cpu/oversubscription_penalty: must be in [0, 1000], got -1");
  j["cpu"].erase("oversubscription_penalty");  // optional: 0
  EXPECT_EQ(es::parse_hardware_profile(j.dump(), "p.json").cpu.oversubscription_penalty, 0.0);
  j["cpu"]["other_groups"] = -1;
  EXPECT_EQ(contention_parse_error(j), "p.json: /cpu/other_groups: must be in [0, 1e+06], got -1");
  j["cpu"]["other_groups"] = 2.5;
  EXPECT_EQ(es::parse_hardware_profile(j.dump(), "p.json").cpu.other_groups, 2.5);
  j["cpu"].erase("other_groups");  // optional: 0
  EXPECT_EQ(es::parse_hardware_profile(j.dump(), "p.json").cpu.other_groups, 0.0);
  j["cpu"]["threads"] = 1;
  EXPECT_NE(contention_parse_error(j).find("p.json: /cpu/threads: unknown key"), std::string::npos);
}

TEST(CpuContention, SimulatedStepIsTheFactorTimesTheUncontendedOne) {
  nlohmann::json alone = contended_profile_json();
  alone.erase("cpu");
  const std::string contended = write_profile(contended_profile_json(), "contended.json");
  const std::string free = write_profile(alone, "alone.json");
  // with every rank computing at once each duration would be scaled by the same factor, and the
  // step (a max-plus system of them) by it: 4 ranks (4 + 1) / 2 = 2.5, 2 ranks 1.5. The cores are
  // shared among the compute ops running at each moment (cost/shared_cores.h ComputeSharing,
  // conc46), so an op that runs while another rank waits in a collective is stretched less: a
  // step is scaled by at most the factor. row_wise's ranks run the same ops nearly in step: within
  // 1% under it (2.4886 at 4 ranks, 1.4960 at 2; exactly the factor before conc46). A call of
  // unequal members (table_wise) takes less too: its small members stop sharing the cores once
  // done (calib39).
  for (const auto type : {es::ShardingType::row_wise, es::ShardingType::table_wise})
    for (const auto& [ranks, factor] : {std::pair{4, 2.5}, std::pair{2, 1.5}}) {
      const es::WorkloadSpec a = contended_spec(free, ranks, type);
      const es::WorkloadSpec b = contended_spec(contended, ranks, type);
      const es::RunResult ra = es::run_training(a, es::plan_sharding(a), {});
      const es::RunResult rb = es::run_training(b, es::plan_sharding(b), {});
      ASSERT_EQ(ra.step_time_ns.size(), 3u);
      ASSERT_EQ(rb.step_time_ns.size(), 3u);
      for (size_t i = 0; i < 3; ++i) {
        const double ratio = static_cast<double>(rb.step_time_ns[i]) / static_cast<double>(ra.step_time_ns[i]);
        EXPECT_LE(ratio, factor + 1e-3) << ranks << " ranks, step " << i;
        if (type == es::ShardingType::row_wise) {
          EXPECT_GT(ratio, 0.99 * factor) << ranks << " ranks row_wise, step " << i;
        }
      }
    }
}

TEST(CpuContention, CalibrateRecoversTheBackgroundAndTheRatesFromTwoRankCounts) {
  const std::string profile = write_profile(contended_profile_json(), "truth.json");
  const std::vector<std::string> sessions = {
      contended_as_measured(profile, "tw2.db", 2, es::ShardingType::table_wise),
      contended_as_measured(profile, "rw2.db", 2, es::ShardingType::row_wise),
      contended_as_measured(profile, "tw4.db", 4, es::ShardingType::table_wise),
      contended_as_measured(profile, "rw4.db", 4, es::ShardingType::row_wise),
  };
  const es::Calibration cal = es::calibrate(sessions);
  EXPECT_EQ(cal.cores, 2);
  EXPECT_EQ(cal.profile.cpu.cores, 2);
  EXPECT_EQ(cal.profile.cpu.threads_per_rank, 1.0);
  EXPECT_NEAR(cal.background_threads, 1.0, 0.02);  // the truth's 1 thread, within 2%
  EXPECT_NEAR(cal.step_scale, 1.0, 0.02);          // the per-op fit already explains the steps
  // round_numbers' rates: the memory kernels 1e12 B/s, lookups 5e11, TBE backward 2.5e11,
  // dense 5e12 flop/s; launch 1 us; the link 1e11 B/s, 1 us
  std::map<std::string, double> rate;
  for (const auto& f : cal.fits) rate[f.what] = f.rate;
  EXPECT_NEAR(rate["memory_kernels"] / 1e12, 1.0, 0.02);
  EXPECT_NEAR(rate["lookup"] / 5e11, 1.0, 0.02);
  EXPECT_NEAR(rate["tbe_backward"] / 2.5e11, 1.0, 0.02);
  EXPECT_NEAR(rate["dense"] / 5e12, 1.0, 0.02);
  EXPECT_NEAR(static_cast<double>(cal.kernel_launch_ns), 1000.0, 20.0);
  EXPECT_NEAR(cal.profile.intra_node.bus_bandwidth_bytes_per_s / 1e11, 1.0, 0.05);
  // held out: 8 ranks, column_wise, run on the same machine: simulated with the fitted profile,
  // its (4.5 times contended) step comes back
  const std::string held = contended_as_measured(profile, "cw8.db", 8, es::ShardingType::column_wise);
  const std::string fitted = write_profile(es::to_json(cal.profile), "fitted_contended.json");
  const es::CalibrationCheck c = es::check_calibration(held, fitted);
  EXPECT_EQ(c.ranks, 8);
  EXPECT_LT(std::abs(c.error()), 0.02) << "measured " << c.measured_ns << " simulated " << c.simulated_ns;
  EXPECT_GT(c.measured_comm_ns, 0);
  EXPECT_LT(std::abs(c.comm_error()), 0.05) << c.measured_comm_ns << " vs " << c.simulated_comm_ns;
}

TEST(CpuContention, CalibrateTakesEachSessionsMeasuredGroupsAndFitsThePenalty) {
  // the runs shared the machine with 0.5 other task groups, recorded as cpu_other_cores /
  // cpu_self_cores = 0.5 / 1, and an oversubscription penalty of 0.4: 2 ranks x = 2 x 1.5 / 2 =
  // 1.5, factor 1.5 x 1.2; 4 ranks x = 3, 3 x 1.4
  nlohmann::json truth = contended_profile_json();
  truth["cpu"]["background_threads"] = 0.0;
  truth["cpu"]["other_groups"] = 0.5;
  truth["cpu"]["oversubscription_penalty"] = 0.4;
  const std::string profile = write_profile(truth, "truth_measured.json");
  std::vector<std::string> sessions;
  for (const auto& [name, ranks] : {std::tuple{"m_tw2.db", 2}, std::tuple{"m_tw4.db", 4}}) {
    sessions.push_back(contended_as_measured(profile, name, ranks, es::ShardingType::table_wise));
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(sessions.back().c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, "INSERT OR REPLACE INTO metadata (key, value) VALUES ('cpu_self_cores', '1.000'), "
                               "('cpu_other_cores', '0.500')", nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  const es::Calibration cal = es::calibrate(sessions);
  EXPECT_TRUE(cal.background_measured);
  EXPECT_NEAR(cal.other_groups, 0.5, 1e-9);
  EXPECT_EQ(cal.background_threads, 0.0);
  EXPECT_NEAR(cal.profile.cpu.other_groups, 0.5, 1e-9);
  EXPECT_NEAR(cal.oversubscription_penalty, 0.4, 0.008);  // within 2%
  EXPECT_NEAR(cal.profile.cpu.oversubscription_penalty, cal.oversubscription_penalty, 1e-12);
  EXPECT_NEAR(cal.step_scale, 1.0, 0.02);
  std::map<std::string, double> rate;
  for (const auto& f : cal.fits) rate[f.what] = f.rate;
  EXPECT_NEAR(rate["dense"] / 5e12, 1.0, 0.02);
  EXPECT_NEAR(rate["lookup"] / 5e11, 1.0, 0.02);
  // a run at another load, 1.5 other groups: simulated at the profile's 0.5 it is off, at its own exact
  const std::string busy = contended_as_measured(write_profile([&] {
    nlohmann::json j = truth;
    j["cpu"]["other_groups"] = 1.5;
    return j;
  }(), "busier.json"), "m_busy_tw4.db", 4, es::ShardingType::table_wise);
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(busy.c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, "INSERT OR REPLACE INTO metadata (key, value) VALUES ('cpu_self_cores', '1.000'), "
                               "('cpu_other_cores', '1.500')", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  const es::CalibrationCheck c = es::check_calibration(busy, write_profile(es::to_json(cal.profile), "fitted_m.json"));
  EXPECT_NEAR(c.other_groups, 1.5, 1e-9);
  EXPECT_NEAR(c.background, 6.0, 1e-9);  // its equivalent in threads: 4 x 1.5
  // contention 4 x 1.5 / 2 = 3 (x 1.4) simulated against 4 x 2.5 / 2 = 5 (x 1.4) measured
  EXPECT_NEAR(c.error(), 3.0 / 5.0 - 1.0, 0.02);
  EXPECT_LT(std::abs(c.error_at_run_load()), 0.02);
}
