// How far to trust a simulated figure (cost/profile_trust.h, tester63d F1-F3, F5, F6, F9, F10):
// calibrate keeps its fit's quality in the profile and warns about a fit from too little data, a
// value at its search bound, a bursty session and a held-out run of a fitted configuration; run
// prints the calibrated profile's error band and a profile's assumed figures with the range the
// step takes when they move.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/calibration.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/cost/profile_trust.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec_error.h"
#include "engine/cost/cost_sessions.h"
#include "support/cli_run.h"

namespace es = embedscope::engine;
namespace ts = embedscope::test_support;
using nlohmann::json;

namespace {

const std::string kTrustRoundNumbers = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";
std::filesystem::path trust_dir() { return ts::cost_scratch_dir("profile_trust"); }

json trust_round_numbers() {
  std::ifstream f(kTrustRoundNumbers);
  return json::parse(f);
}

bool trust_has(const json& warnings, const std::string& text) {
  for (const auto& w : warnings)
    if (w.get<std::string>() == text) return true;
  return false;
}

}  // namespace

TEST(ProfileTrust, TheCornersMoveOnlyTheAssumedFigures) {
  json j = trust_round_numbers();
  j["sources"] = {{"/gpu/tbe_forward_efficiency", "assumption (not a published measurement): half of HBM"},
                  {"/gpu/kernel_launch_ns", "Assumption: a launch"},
                  {"/intra_node/latency_ns", "assumption: 1 us"},
                  {"/gpu/dense_efficiency", "measured on the test GPU"}};
  const es::HardwareProfile hw = es::parse_hardware_profile(j.dump(), "t.json");
  EXPECT_EQ(es::assumed_figures(hw),
            (std::vector<std::string>{"/gpu/kernel_launch_ns", "/gpu/tbe_forward_efficiency", "/intra_node/latency_ns"}));
  const es::HardwareProfile slow = es::assumption_corner(hw, true), fast = es::assumption_corner(hw, false);
  EXPECT_DOUBLE_EQ(slow.gpu.tbe_forward_efficiency, 0.25);  // 0.5 / 2
  EXPECT_DOUBLE_EQ(fast.gpu.tbe_forward_efficiency, 1.0);   // 0.5 x 2, at most 1
  EXPECT_EQ(slow.gpu.kernel_launch_ns, 2000);
  EXPECT_EQ(fast.gpu.kernel_launch_ns, 500);
  EXPECT_EQ(slow.intra_node.latency_ns, 2000);
  EXPECT_EQ(fast.intra_node.latency_ns, 500);
  // not assumed: kept
  EXPECT_DOUBLE_EQ(slow.gpu.dense_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(fast.gpu.dense_efficiency, 0.5);
  EXPECT_EQ(slow.inter_node.latency_ns, 5000);
  EXPECT_DOUBLE_EQ(slow.gpu.tbe_backward_efficiency, 0.25);
  // h100_sxm's own sources: its ten assumed figures (efficiencies, launch, latencies)
  const es::HardwareProfile h100 = es::load_hardware_profile("h100_sxm");
  EXPECT_EQ(es::assumed_figures(h100),
            (std::vector<std::string>{"/gpu/dense_bf16_efficiency", "/gpu/dense_efficiency", "/gpu/dense_tf32_efficiency",
                                      "/gpu/kernel_launch_ns", "/gpu/memory_kernel_efficiency",
                                      "/gpu/tbe_backward_efficiency", "/gpu/tbe_forward_efficiency",
                                      "/host_link/latency_ns", "/inter_node/latency_ns", "/intra_node/latency_ns"}));
  EXPECT_EQ(es::assumptions_text(h100).substr(0, 61), "h100_sxm: 10 of its figures are assumptions, not measurements");
  EXPECT_EQ(es::assumptions_text(es::load_hardware_profile(kTrustRoundNumbers)), "");  // no sources: nothing said
}

TEST(ProfileTrust, FitQualityParsesRoundTripsAndIsRefusedMalformed) {
  json j = trust_round_numbers();
  j["fit_quality"] = {{"step_error", {{"in_sample", {{"runs", 4}, {"min", -0.235}, {"max", 1.488}}},
                                      {"held_out", {{"runs", 9}, {"min", -0.589}, {"max", 0.738}}}}},
                      {"warnings", {"a", "b"}},
                      {"at_bound", {{{"field", "/cpu/sync_lag_ns"}, {"value", 3e6}, {"bound", 3e6}}}}};
  j["name"] = "this_machine";
  const es::HardwareProfile hw = es::parse_hardware_profile(j.dump(), "p.json");
  EXPECT_EQ(es::error_band_text(hw),
            "profile this_machine (calibrated): its simulated step missed its 4 calibration runs by -23.5% .. +148.8% and "
            "9 held-out runs by -58.9% .. +73.8%; 2 warnings at calibrate; at its search bound (not determined by the "
            "data): /cpu/sync_lag_ns");
  // simulated = measured x (1 + e): 100 ms simulated stands for 100 / 2.488 = 40.19 .. 100 / 0.411 = 243.31 ms
  const auto band = es::measured_step_band(hw, 100'000'000);
  ASSERT_TRUE(band.has_value());
  EXPECT_EQ(band->first, 40'192'926);
  EXPECT_EQ(band->second, 243'309'002);
  // written back as read (calibration.h to_json)
  EXPECT_EQ(es::to_json(hw)["fit_quality"], j["fit_quality"]);
  j["fit_quality"]["step_error"]["in_sample"]["min"] = "low";
  try {
    (void)es::parse_hardware_profile(j.dump(), "p.json");
    FAIL() << "a malformed fit_quality was accepted";
  } catch (const es::SpecError& e) {
    EXPECT_EQ(std::string(e.what()), "p.json: /fit_quality/step_error/in_sample/min: must be a number");
  }
}

TEST(ProfileTrust, AnUndeterminedRateIsSaidApart) {
  es::Calibration cal;
  cal.fits.push_back({"lookup", 1, 1e9, true, "", 2, 0.9});
  cal.fits.push_back({"dense", 3, 1e9, true, "", 2, 0.9});
  cal.fits.push_back({"memory_kernels", 4, 1e9, true, "", 2, 0.9});
  cal.fits.push_back({"intra_node", 10, 1e9, true, "", 2, 0.105});
  cal.session_steps.push_back({"a.db", 10, 2, 100, 120, 2, "26 table_wise"});
  cal.session_steps.push_back({"b.db", 10, 2, 100, 120, 4, "26 row_wise"});
  const es::FitAssessment a = es::assess_fit(cal);
  EXPECT_EQ(a.undetermined, (std::vector<std::string>{"lookup: 1 sample for 2 parameters"}));
  ASSERT_EQ(a.warnings.size(), 2u) << json(a.warnings).dump();
  EXPECT_EQ(a.warnings[0], "dense: 3 samples for 2 parameters (fewer than 2 a parameter): the least squares (nearly) "
                           "passes through every sample, so neither its R^2 nor the in-sample check says how well it "
                           "predicts");
  EXPECT_EQ(a.warnings[1], "the within-node collective fit explains little of the call times (R^2 0.105 < 0.5): latency "
                           "+ bytes / bandwidth does not describe them");
}

TEST(ProfileTrust, AOneStepCalibrationIsFlaggedAndItsProfileSaysSoToRun) {
  // tester63d F5: one session of 2 ranks, one measured step and no warm-up
  const std::string one =
      ts::criteo_as_measured(kTrustRoundNumbers, (trust_dir() / "tw2_1step.db").string(), 2, es::ShardingType::table_wise, 1,
                             "DELETE FROM steps WHERE step < 0;");
  const std::string prof = (trust_dir() / "one.json").string();
  auto r = ts::run_cli(EMBEDSCOPE_CLI, "calibrate " + one + " --json --no-dense-bench -o " + prof, trust_dir());
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  const json& w = j["warnings"];
  EXPECT_TRUE(trust_has(w, one + ": 1 measured step (fewer than 5): each op's median is of 1 duration; record --steps 10 or "
                           "more")) << w.dump(1);
  EXPECT_TRUE(trust_has(w, one + ": no warm-up step: its steps include the cold start (first touches of the tables, "
                           "allocations, thread start); record with --warmup-steps 1 or more")) << w.dump(1);
  EXPECT_TRUE(trust_has(w, "the sessions span one rank count (2): contention is not told from speed, and other rank counts "
                     "are extrapolated")) << w.dump(1);
  EXPECT_TRUE(trust_has(w, "the sessions ran one plan (26 table_wise): other sharding types' ops and collectives are "
                     "extrapolated")) << w.dump(1);
  // the lookup: one op a rank, 2 (rank, op) medians for its rate and the launch
  const json* lookup = nullptr;
  for (const auto& f : j["fits"])
    if (f["what"] == "lookup") lookup = &f;
  ASSERT_NE(lookup, nullptr);
  EXPECT_EQ((*lookup)["samples"], 2);
  EXPECT_EQ((*lookup)["parameters"], 2);
  EXPECT_TRUE(trust_has(w, "lookup: 2 samples for 2 parameters (fewer than 2 a parameter): the least squares (nearly) passes "
                     "through every sample, so neither its R^2 nor the in-sample check says how well it predicts"))
      << w.dump(1);
  // the profile keeps it all
  std::ifstream f(prof);
  const json p = json::parse(f);
  ASSERT_TRUE(p.contains("fit_quality")) << p.dump(1);
  const json& q = p["fit_quality"];
  EXPECT_EQ(q["sessions"], 1);
  EXPECT_EQ(q["steps"][0]["measured"], 1);
  EXPECT_EQ(q["steps"][0]["warmup"], 0);
  EXPECT_EQ(q["warnings"], w);
  EXPECT_EQ(q["step_error"]["in_sample"]["runs"], 1);
  const double e = j["checks"][0]["error"].get<double>();
  EXPECT_DOUBLE_EQ(q["step_error"]["in_sample"]["min"].get<double>(), e);
  EXPECT_DOUBLE_EQ(q["step_error"]["in_sample"]["max"].get<double>(), e);
  // run --simulate with it: the band beside the step time, in text and JSON
  r = ts::run_cli(EMBEDSCOPE_CLI,
                  "run --preset criteo_kaggle --devices 2 --sharding table_wise --batch-size 4096 --steps 3 --simulate " +
                      prof + " --json -o " + (trust_dir() / "sim.db").string() + " --force-overwrite",
                  trust_dir());
  ASSERT_EQ(r.code, 0) << r.err;
  const json run = json::parse(r.out);
  const json& t = run["profile_trust"];
  EXPECT_EQ(t["error_band"]["in_sample"]["runs"], 1);
  EXPECT_EQ(t["error_band"]["warnings"], w.size());
  EXPECT_EQ(t["assumed_figures"], json::array());
  const double p50 = run["step_time_ns"]["p50"].get<double>();
  ASSERT_TRUE(t["measured_step_band_ns"].is_array()) << t.dump();
  EXPECT_EQ(t["measured_step_band_ns"][0].get<int64_t>(), std::llround(p50 / (1 + e)));
  r = ts::run_cli(EMBEDSCOPE_CLI,
                  "run --preset criteo_kaggle --devices 2 --sharding table_wise --batch-size 4096 --steps 3 --simulate " +
                      prof + " -o " + (trust_dir() / "sim.db").string() + " --force-overwrite",
                  trust_dir());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(fmt::format("profile      profile this_machine (calibrated): its simulated step missed its 1 "
                                   "calibration run by {:+.1f}% .. {:+.1f}%; {} warnings at calibrate; so a measured "
                                   "step of ",
                                   100 * e, 100 * e, w.size())),
            std::string::npos)
      << r.out;
}

TEST(ProfileTrust, ASyncLagAtItsSearchBoundIsNotCalledFitted) {
  // tester63d F2: sessions whose members wait 20 ms for the last: more than the 3 ms the search allows
  json prof = trust_round_numbers();
  prof["cluster"] = {{"gpus_per_node", 8}, {"max_nodes", 1}};
  prof["cpu"] = {{"cores", 8}, {"threads_per_rank", 1.0}, {"background_threads", 0.0}, {"other_groups", 0.0},
                 {"sync_lag_ns", 2e7}};
  const std::string pf = (trust_dir() / "lag.json").string();
  std::ofstream(pf) << prof.dump();
  const std::string load =
      "INSERT OR REPLACE INTO metadata (key, value) VALUES ('cpu_cores', '8'), ('cpu_self_cores', '1.000'), "
      "('cpu_other_cores', '0.000');";
  const std::string rw2 = ts::criteo_as_measured(pf, (trust_dir() / "lag_rw2.db").string(), 2, es::ShardingType::row_wise, 6, load);
  const std::string tw4 = ts::criteo_as_measured(pf, (trust_dir() / "lag_tw4.db").string(), 4, es::ShardingType::table_wise, 6, load);
  const std::string out = (trust_dir() / "lag_fit.json").string();
  auto r = ts::run_cli(EMBEDSCOPE_CLI, "calibrate " + rw2 + " " + tw4 + " --json --no-dense-bench -o " + out, trust_dir());
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_NEAR(j["sync_lag_ns"].get<double>(), 3e6, 2e3);
  EXPECT_TRUE(trust_has(j["warnings"], "/cpu/sync_lag_ns hit the top of its search, 3e+06: the sessions need more than the "
                                 "model allows, so the value is not determined by the data (a noisy machine?)"))
      << j["warnings"].dump(1);
  const json& p = j["profile"];
  EXPECT_EQ(p["sources"]["/cpu/sync_lag_ns"].get<std::string>().substr(0, 60),
            "AT ITS SEARCH BOUND, not determined by the data (the session");
  ASSERT_EQ(p["fit_quality"]["at_bound"].size(), 1u);
  EXPECT_EQ(p["fit_quality"]["at_bound"][0]["field"], "/cpu/sync_lag_ns");
  EXPECT_EQ(p["fit_quality"]["at_bound"][0]["bound"], 3e6);
}

TEST(ProfileTrust, AHeldOutRunOfAFittedConfigIsBlamedOnNoiseAndABurstyRunIsFlagged) {
  // tester63d F10: the held-out run is the fitted config, its steps 4x as long (-75%); F9: one of
  // its 5 steps 10x its own length
  const std::string fit =
      ts::criteo_as_measured(kTrustRoundNumbers, (trust_dir() / "n_tw2.db").string(), 2, es::ShardingType::table_wise, 5, "");
  const std::string held = ts::criteo_as_measured(
      kTrustRoundNumbers, (trust_dir() / "n_tw2_slow.db").string(), 2, es::ShardingType::table_wise, 5,
      "UPDATE steps SET end_ns = start_ns + 4 * (end_ns - start_ns); UPDATE steps SET end_ns = start_ns + 10 * (end_ns - "
      "start_ns) WHERE step = 0;");
  auto r = ts::run_cli(EMBEDSCOPE_CLI, "calibrate " + fit + " --check " + held + " --json --no-dense-bench", trust_dir());
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["checks"].size(), 2u);
  const json& c = j["checks"][1];
  const double error = c["error"].get<double>();
  EXPECT_NEAR(error, -0.75, 0.02);
  const int64_t m_fit = j["checks"][0]["measured_step_ns"].get<int64_t>(), m_held = c["measured_step_ns"].get<int64_t>();
  EXPECT_TRUE(trust_has(j["warnings"],
                  fmt::format("{}: the profile misses this held-out run by {:+.1f}% (more than 50%), but the run has the "
                              "configuration of fitted session {} (criteo_kaggle, 2 ranks, 26 table_wise, base, batch "
                              "4096): nothing is extrapolated - the runs of that configuration measured {:.2f} ms .. "
                              "{:.2f} ms (median step), so the miss is this machine's run-to-run noise; record the runs on "
                              "a quieter machine",
                              held, 100 * error, fit, m_fit / 1e6, m_held / 1e6)))
      << j["warnings"].dump(1);
  // its slowest step: 10 x 4 = 40 times the fitted run's step, 10 times its own median
  const int64_t slowest = c["slowest_step_ns"].get<int64_t>();
  EXPECT_NEAR(static_cast<double>(slowest) / static_cast<double>(m_held), 10.0, 0.05);
  EXPECT_TRUE(trust_has(j["warnings"],
                  fmt::format("{}: its slowest step took {:.1f}x its median ({:.2f} ms against {:.2f} ms): its load "
                              "(cpu_other_cores) is the run's mean over bursts, so the \"at load\" figure, which applies "
                              "it to the median step, is not that run's",
                              held, static_cast<double>(slowest) / static_cast<double>(m_held), slowest / 1e6,
                              m_held / 1e6)))
      << j["warnings"].dump(1);
}

TEST(ProfileTrust, RunGivesTheStepRangeOfALaunchBoundStepByHand) {
  // every op costs its launch (HBM at 1e15 B/s: a MB costs 1 ns; 1e18 flop/s), and the launch is
  // the only assumed figure: one rank of tiny takes n x 1000 ns, n its compute ops (collectives
  // of one rank cost nothing, latencies 0), and x0.5 .. x2 of the launch gives n x 500 .. n x 2000
  json prof = trust_round_numbers();
  prof["name"] = "launch_bound";
  prof["gpu"]["hbm_bandwidth_bytes_per_s"] = 1e15;
  prof["gpu"]["dense_flops_per_s"] = 1e18;
  prof["gpu"]["memory_kernel_efficiency"] = 1.0;
  prof["gpu"]["tbe_forward_efficiency"] = 1.0;
  prof["gpu"]["tbe_backward_efficiency"] = 1.0;
  prof["gpu"]["dense_efficiency"] = 1.0;
  prof["intra_node"]["latency_ns"] = 0;
  prof["inter_node"]["latency_ns"] = 0;
  prof["sources"] = {{"/gpu/kernel_launch_ns", "assumption: 1 us a kernel"}};
  const std::string pf = (trust_dir() / "launch_bound.json").string();
  std::ofstream(pf) << prof.dump();
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.count = 1;
  s.devices.backend = es::Backend::simulated;
  s.devices.hardware = pf;
  s = es::with_resolved_backend(s, "test");
  int n = 0;
  for (const auto& op : es::build_step_program(s, es::plan_sharding(s), 0, 1).ops) n += op.lane == embedscope::sessions::Lane::compute;
  ASSERT_GT(n, 5);
  auto r = ts::run_cli(EMBEDSCOPE_CLI,
                       "run --preset tiny --devices 1 --steps 2 --simulate " + pf + " --json -o " +
                           (trust_dir() / "lb.db").string() + " --force-overwrite",
                       trust_dir());
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_NEAR(j["step_time_ns"]["p50"].get<double>(), n * 1000.0, 0.01 * n * 1000.0);
  const json& t = j["profile_trust"];
  EXPECT_EQ(t["assumed_figures"], json::array({"/gpu/kernel_launch_ns"}));
  ASSERT_TRUE(t["assumption_step_range_ns"].is_array()) << t.dump();
  EXPECT_NEAR(t["assumption_step_range_ns"][0].get<double>(), n * 500.0, 0.01 * n * 500.0);
  EXPECT_NEAR(t["assumption_step_range_ns"][1].get<double>(), n * 2000.0, 0.01 * n * 2000.0);
  EXPECT_EQ(t["error_band"], nullptr);
  // the text line beside the step time
  r = ts::run_cli(EMBEDSCOPE_CLI,
                  "run --preset tiny --devices 1 --steps 2 --simulate " + pf + " -o " + (trust_dir() / "lb.db").string() +
                      " --force-overwrite",
                  trust_dir());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("assumed      launch_bound: 1 of its figures are assumptions, not measurements "
                       "(/gpu/kernel_launch_ns); its simulated times have not been checked against a run on that "
                       "hardware; step p50 with each assumed figure x0.5 .. x2 (efficiencies at most 1): "),
            std::string::npos)
      << r.out;
  // scaling: the same range for its 1-GPU point, and the note the workbench's caption shows
  r = ts::run_cli(EMBEDSCOPE_CLI, "scaling --preset tiny --simulate " + pf + " --gpus 1 --shardings table_wise --steps 2 --json",
                  trust_dir());
  ASSERT_EQ(r.code, 0) << r.err;
  const json sc = json::parse(r.out);
  EXPECT_EQ(sc["points"][0]["step_time_range_ns"], t["assumption_step_range_ns"]) << sc.dump(1);
  EXPECT_EQ(sc["profile_note"], es::assumptions_text(es::load_hardware_profile(pf)));
  EXPECT_EQ(sc["profile_trust"]["assumed_figures"], json::array({"/gpu/kernel_launch_ns"}));
}
