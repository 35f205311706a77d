// Calibration (cost/calibration.h): fitted from a session whose every duration is the cost
// model's own (a simulated run on the round-numbers profile, relabelled as measured), it must
// give back that profile's coefficients; the written profile round-trips through the parser;
// a session it cannot pair is refused naming the file; `embedscope calibrate` prints the checks.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/calibration.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec_error.h"
#include "support/cli_run.h"
#include "engine/cost/cost_sessions.h"

namespace es = embedscope::engine;
namespace fs = std::filesystem;

namespace {
const std::string kRoundNumbers = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";

fs::path calibration_dir() {
  static const fs::path d = [] {
    const fs::path p = fs::temp_directory_path() / ("es_calibration_" + std::to_string(getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
  }();
  return d;
}

// criteo_kaggle on 2 simulated ranks of one round-numbers node, written to `name`, then marked
// measured (metadata simulated = 0), as if a machine had run exactly at the profile's rates.
std::string simulated_as_measured(const std::string& name, es::ShardingType type) {
  return embedscope::test_support::criteo_as_measured(kRoundNumbers, (calibration_dir() / name).string(), 2, type, 3, "");
}
}  // namespace

TEST(Calibration, RecoversTheCoefficientsOfTheModelThatTimedTheSession) {
  const std::string a = simulated_as_measured("tw.db", es::ShardingType::table_wise);
  const std::string b = simulated_as_measured("rw.db", es::ShardingType::row_wise);
  const es::Calibration cal = es::calibrate({a, b});
  // round_numbers: launch 1 us; HBM 1e12 B/s x efficiency: lookup 0.5, TBE backward 0.25,
  // memory kernels 1.0; dense 1e13 x 0.5; within a node 1e11 B/s busbw, 1 us latency
  EXPECT_NEAR(static_cast<double>(cal.kernel_launch_ns), 1000.0, 5.0);
  std::map<std::string, double> rate;
  for (const auto& f : cal.fits) rate[f.what] = f.rate;
  EXPECT_NEAR(rate["lookup"] / 5e11, 1.0, 0.01);
  EXPECT_NEAR(rate["tbe_backward"] / 2.5e11, 1.0, 0.01);
  EXPECT_NEAR(rate["memory_kernels"] / 1e12, 1.0, 0.01);
  EXPECT_NEAR(rate["dense"] / 5e12, 1.0, 0.01);
  EXPECT_GT(cal.compute_r2, 0.999);
  EXPECT_NEAR(cal.profile.intra_node.bus_bandwidth_bytes_per_s / 1e11, 1.0, 0.05);
  EXPECT_NEAR(static_cast<double>(cal.profile.intra_node.latency_ns), 1000.0, 100.0);
  EXPECT_EQ(cal.skipped_rank_steps, 0);
  // this machine's memory, not the sessions' workload setting (tester33 D8)
  EXPECT_EQ(cal.profile.gpu.memory_bytes, static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE));
  // the profile as the parser reads it, equal field by field
  const es::HardwareProfile back = es::parse_hardware_profile(es::to_json(cal.profile).dump(), "round trip");
  EXPECT_EQ(es::to_json(back), es::to_json(cal.profile));
  EXPECT_NEAR(back.gpu.hbm_bandwidth_bytes_per_s * back.gpu.tbe_forward_efficiency, rate["lookup"], 1.0);
  // simulated again with the fitted profile, each session's step time comes back
  const std::string file = (calibration_dir() / "fitted.json").string();
  std::ofstream(file) << es::to_json(cal.profile).dump(2);
  for (const std::string& s : {a, b}) {
    const es::CalibrationCheck c = es::check_calibration(s, file);
    EXPECT_GT(c.measured_ns, 0);
    EXPECT_LT(std::abs(c.error()), 0.02) << s << ": measured " << c.measured_ns << " simulated " << c.simulated_ns;
  }
}

TEST(Calibration, RefusesSessionsItCannotPairNamingTheFile) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.backend = es::Backend::simulated;
  s.devices.hardware = kRoundNumbers;
  s.steps = 1;
  s = es::with_resolved_backend(s, "test");
  const std::string sim = (calibration_dir() / "simulated.db").string();
  es::TrainerOptions o;
  o.session_path = sim;
  o.session_overwrite = true;
  ASSERT_EQ(es::run_training(s, es::plan_sharding(s), o).ended, es::RunEnd::complete);
  try {
    es::calibrate({sim});
    FAIL() << "expected SpecError";
  } catch (const es::SpecError& e) {
    EXPECT_NE(std::string(e.what()).find(sim + ": a simulated session"), std::string::npos) << e.what();
  }
  EXPECT_THROW(es::calibrate({}), es::SpecError);
  auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "calibrate " + sim, calibration_dir());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("a simulated session"), std::string::npos) << r.err;
}

TEST(CalibrateCli, WritesTheProfileAndPrintsTheChecks) {
  const std::string a = simulated_as_measured("cli_tw.db", es::ShardingType::table_wise);
  const std::string held = simulated_as_measured("cli_cw.db", es::ShardingType::column_wise);
  const std::string out = (calibration_dir() / "this_machine.json").string();
  auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "calibrate " + a + " --check " + held + " -o " + out + " --json",
                                             calibration_dir());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["checks"].size(), 2u);
  EXPECT_TRUE(j["checks"][0]["in_sample"].get<bool>());
  EXPECT_FALSE(j["checks"][1]["in_sample"].get<bool>());
  // column_wise was not in the fit, but its ops are of the same kinds: the same model times it
  EXPECT_LT(std::abs(j["checks"][1]["error"].get<double>()), 0.05) << j["checks"][1].dump();
  EXPECT_EQ(es::load_hardware_profile(out).name, "this_machine");
  EXPECT_EQ(j["profile"]["name"], "this_machine");
  // a fit that describes its runs is not warned about its checks; from one 3-step session of one
  // rank count and one plan it is warned about what it cannot tell (cost/calibration.h assess_fit)
  for (const auto& w : j["warnings"])
    EXPECT_EQ(w.get<std::string>().find("the profile misses"), std::string::npos) << w;
  EXPECT_EQ(j["warnings"][0], a + ": 3 measured steps (fewer than 5): each op's median is of 3 durations; record --steps "
                                  "10 or more");
  EXPECT_EQ(j["profile"]["fit_quality"]["warnings"], j["warnings"]);
  // tester33 D8: a session fitted twice, or "held out" though fitted, is refused naming it
  for (const std::string& args : {a + " " + a, a + " --check " + a}) {
    r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "calibrate " + args, calibration_dir());
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_NE(r.err.find(a + ": given twice"), std::string::npos) << r.err;
  }
}

// tester39: calibrate on small sessions said "no bandwidth (all latency)" and nothing else. The
// error names the sessions and what to add: sessions whose collectives' time grows with bytes.
TEST(Calibration, AllLatencyCollectivesSayWhatToAdd) {
  std::ifstream f(kRoundNumbers);
  nlohmann::json j = nlohmann::json::parse(f);
  j["name"] = "latency_only";
  j["intra_node"]["bus_bandwidth_bytes_per_s"] = 1e15;  // every call its latency (bytes: < 1 ns)
  j["intra_node"]["latency_ns"] = 200000;
  j["inter_node"] = j["intra_node"];
  const std::string profile = (calibration_dir() / "latency_only.json").string();
  std::ofstream(profile) << j.dump();
  const std::string path = embedscope::test_support::criteo_as_measured(
      profile, (calibration_dir() / "latency_only.db").string(), 2, es::ShardingType::table_wise, 3, "");
  try {
    es::calibrate({path});
    FAIL() << "expected SpecError";
  } catch (const es::SpecError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no bandwidth (all latency): in " + path + " their time does not grow with their bytes"),
              std::string::npos) << what;
    EXPECT_NE(what.find("add a session with larger collectives"), std::string::npos) << what;
  }
}
